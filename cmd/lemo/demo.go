package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"lemo/providers"
	"lemo/providers/fake"
	"lemo/tools"
)

// The scripted demo models, offered only with providers.fake.enabled (no
// network). Tests and demos use them:
//
//	fake/echo    answers "echo: " and the request
//	fake/loop    calls demo.tick forever (until the cycle limit): a Task that keeps appending
//	fake/stream  streams "deltas=N rate=R" text deltas, each the time it was sent (benchmarks)
//	fake/system  calls the system tool with the request as its input JSON, then reports the result
//	fake/shell   runs the request as a shell command, then reports the result
//	fake/call    calls the tool named by the request's first word with the rest
//	             as its input JSON ("shell.run {\"command\":\"ls\"}"), then
//	             reports the result: bad inputs reach a tool exactly as written
//	fake/repeat  calls the tool named by the request's first word with the
//	             rest as its input JSON again after every result, until the
//	             cycle limit or a pause: a Task that keeps a tool busy
//	             ("memory.record {\"content\":\"...\"}"; disk-full tests)
//	fake/files   works through the files tools (see filesPlan), then reports
//	             what every call returned
//	fake/summarise reads the file the request's last word names ("summarise
//	             README.md") with files.read in the Task's workspace, then
//	             answers with its line count and first line
//	fake/small   answers as fake/echo with a 4,096-token window: what a small
//	             local model meets (every tool's schema does not fit; --tools none does)
//	fake/discover finds a tool with tools.search (the request up to its first
//	             "{" is the query), loads the first match with tools.load, calls
//	             it with the rest of the request as its input JSON, then reports
//	             the result: tool discovery as a model goes through it
//
// fake/system, fake/shell, fake/files and fake/summarise load a tool with
// tools_load first when the Task does not offer it yet (a Task starts with
// tools.initial), as a model does (loadFirst); fake/call and fake/repeat
// call exactly what they are told, loaded or not.
func demoProvider() providers.Provider {
	// A window large enough that every built-in tool's schema fits the
	// first Cycle's budget (35% of it).
	scripted := fake.NewScripted("fake",
		fake.NewScriptedModel("echo", demoWindow, echoPlan),
		fake.NewScriptedModel("loop", demoWindow, loopPlan),
		fake.NewScriptedModel("system", demoWindow, loadFirst(toolThenAnswer("system", func(req string) any { return json.RawMessage(req) }))),
		fake.NewScriptedModel("shell", demoWindow, loadFirst(toolThenAnswer("shell_run", func(req string) any { return map[string]string{"command": req} }))),
		fake.NewScriptedModel("call", demoWindow, callPlan),
		fake.NewScriptedModel("repeat", demoWindow, repeatPlan),
		fake.NewScriptedModel("files", demoWindow, loadFirst(filesPlan)),
		fake.NewScriptedModel("small", smallWindow, echoPlan),
		fake.NewScriptedModel("summarise", demoWindow, loadFirst(summarisePlan)),
		fake.NewScriptedModel("discover", demoWindow, discoverPlan),
	)
	return &demo{Scripted: scripted, stream: &streamModel{}}
}

// demoWindow is the demo models' context window in tokens; smallWindow
// fake/small's.
const (
	demoWindow  = 131072
	smallWindow = 4096
)

// demo adds the streaming model to the scripted ones.
type demo struct {
	*fake.Scripted
	stream *streamModel
}

func (d *demo) Models(ctx context.Context) ([]providers.ModelInfo, error) {
	ms, err := d.Scripted.Models(ctx)
	return append(ms, d.stream.Info()), err
}

func (d *demo) Model(ctx context.Context, name string) (providers.Model, error) {
	if name == "stream" {
		return d.stream, nil
	}
	return d.Scripted.Model(ctx, name)
}

// conversation is the request's messages without recalled evidence (a user
// message the daemon adds after the conversation).
func conversation(req *providers.Request) []providers.Message {
	out := make([]providers.Message, 0, len(req.Messages))
	for _, m := range req.Messages {
		if m.Role == providers.RoleUser && strings.HasPrefix(m.Content, "[Recalled evidence") {
			continue
		}
		out = append(out, m)
	}
	return out
}

func lastUser(req *providers.Request) string {
	msgs := conversation(req)
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Role == providers.RoleUser {
			return msgs[i].Content
		}
	}
	return ""
}

// loadModelName is the function name models see for tools.load.
const loadModelName = "tools_load"

// loadFirst makes a tool-calling demo model behave as a model does in a
// Task that starts with a small tool set: when the plan calls a tool the
// request does not offer and tools_load is offered, it first loads the
// tools the plan wants, once, and then goes on. The plan sees the
// conversation without the loads, so its steps count only its own calls.
// A tool that is still not offered after its load (unknown, or refused)
// is called anyway, so the Task shows the error a model would meet.
func loadFirst(plan fake.Plan) fake.Plan {
	return func(n int, req *providers.Request) fake.Turn {
		offered := make(map[string]bool, len(req.Tools))
		for _, t := range req.Tools {
			offered[t.Name] = true
		}
		inner, asked := withoutLoads(req)
		turn := plan(n, inner)
		if !offered[loadModelName] {
			return turn
		}
		var missing []string
		for _, c := range turn.ToolCalls {
			if !offered[c.Name] && !asked[c.Name] {
				missing = append(missing, c.Name)
			}
		}
		if len(missing) == 0 {
			return turn
		}
		return fake.Turn{ToolCalls: []providers.ToolCall{fake.ToolCall(fmt.Sprintf("load%d", len(asked)+1), loadModelName, map[string][]string{"names": missing})}}
	}
}

// withoutLoads returns req without the tools_load calls and their results,
// and the names those calls asked for.
func withoutLoads(req *providers.Request) (*providers.Request, map[string]bool) {
	asked := make(map[string]bool)
	out := *req
	out.Messages = make([]providers.Message, 0, len(req.Messages))
	for _, m := range req.Messages {
		if m.Role == providers.RoleTool && m.ToolName == loadModelName {
			continue
		}
		if len(m.ToolCalls) > 0 {
			calls := make([]providers.ToolCall, 0, len(m.ToolCalls))
			for _, c := range m.ToolCalls {
				if c.Name != loadModelName {
					calls = append(calls, c)
					continue
				}
				var in struct {
					Names []string `json:"names"`
				}
				_ = json.Unmarshal(c.Arguments, &in)
				for _, name := range in.Names {
					asked[name] = true
				}
			}
			if len(calls) == 0 && m.Content == "" {
				continue
			}
			m.ToolCalls = calls
		}
		out.Messages = append(out.Messages, m)
	}
	return &out, asked
}

// echoPlan answers "echo: " and the last user message.
func echoPlan(_ int, req *providers.Request) fake.Turn {
	return fake.Turn{Text: "echo: " + lastUser(req)}
}

func toolMessages(req *providers.Request) int {
	n := 0
	for _, m := range req.Messages {
		if m.Role == providers.RoleTool {
			n++
		}
	}
	return n
}

// loopPlan calls demo.tick again after every result.
func loopPlan(_ int, req *providers.Request) fake.Turn {
	n := toolMessages(req) + 1
	return fake.Turn{Text: fmt.Sprintf("tick %d", n), ToolCalls: []providers.ToolCall{fake.ToolCall(fmt.Sprintf("t%d", n), "demo_tick", map[string]int{"n": n})}}
}

// toolThenAnswer calls tool with args(request) once, then answers with the
// tool's result.
func toolThenAnswer(tool string, args func(request string) any) fake.Plan {
	return func(_ int, req *providers.Request) fake.Turn {
		msgs := conversation(req)
		if last := msgs[len(msgs)-1]; last.Role == providers.RoleTool {
			return fake.Turn{Text: "result: " + last.Content}
		}
		return fake.Turn{ToolCalls: []providers.ToolCall{fake.ToolCall("c1", tool, args(lastUser(req)))}}
	}
}

// callPlan calls the tool named by the request's first word with the rest
// of the request as its input, verbatim (invalid JSON included), then
// answers with the tool's result.
func callPlan(_ int, req *providers.Request) fake.Turn {
	msgs := conversation(req)
	if last := msgs[len(msgs)-1]; last.Role == providers.RoleTool {
		return fake.Turn{Text: "result: " + last.Content}
	}
	name, input, _ := strings.Cut(strings.TrimSpace(lastUser(req)), " ")
	return fake.Turn{ToolCalls: []providers.ToolCall{{ID: "c1", Name: strings.ReplaceAll(name, ".", "_"), Arguments: json.RawMessage(input)}}}
}

// summarisePlan reads the file named by the request's last word, then
// answers "<file>: N lines; it begins: <first line>", or with what the
// read returned when it failed.
func summarisePlan(_ int, req *providers.Request) fake.Turn {
	words := strings.Fields(lastUser(req))
	file := "README.md"
	if len(words) > 0 {
		file = words[len(words)-1]
	}
	msgs := conversation(req)
	last := msgs[len(msgs)-1]
	if last.Role != providers.RoleTool {
		return fake.Turn{ToolCalls: []providers.ToolCall{fake.ToolCall("s1", "files_read", map[string]any{"path": file, "line_numbers": false})}}
	}
	var r struct {
		Content    string `json:"content"`
		TotalLines int    `json:"total_lines"`
	}
	if err := json.Unmarshal([]byte(last.Content), &r); err != nil || r.TotalLines == 0 {
		return fake.Turn{Text: "could not read " + file + ": " + last.Content}
	}
	first, _, _ := strings.Cut(r.Content, "\n")
	return fake.Turn{Text: fmt.Sprintf("%s: %d lines; it begins: %s", file, r.TotalLines, first)}
}

// discoverPlan searches, loads and calls a tool (see fake/discover).
func discoverPlan(_ int, req *providers.Request) fake.Turn {
	query, input, found := strings.Cut(lastUser(req), "{")
	query, input = strings.TrimSpace(query), "{"+input
	if !found {
		input = "{}"
	}
	results := make(map[string]string) // by tool: its last result
	for _, m := range conversation(req) {
		if m.Role == providers.RoleTool {
			results[m.ToolName] = m.Content
		}
	}
	searched, ok := results["tools_search"]
	if !ok {
		return fake.Turn{ToolCalls: []providers.ToolCall{fake.ToolCall("d1", "tools_search", map[string]string{"query": query})}}
	}
	var sr struct {
		Matches []struct {
			Name string `json:"name"`
		} `json:"matches"`
	}
	if err := json.Unmarshal([]byte(searched), &sr); err != nil || len(sr.Matches) == 0 {
		return fake.Turn{Text: "no tool found for " + strconv.Quote(query) + ": " + searched}
	}
	name := sr.Matches[0].Name
	if _, ok := results["tools_load"]; !ok {
		return fake.Turn{ToolCalls: []providers.ToolCall{fake.ToolCall("d2", "tools_load", map[string][]string{"names": {name}})}}
	}
	if out, ok := results[tools.ModelName(name)]; ok {
		return fake.Turn{Text: "result of " + name + ": " + out}
	}
	return fake.Turn{ToolCalls: []providers.ToolCall{{ID: "d3", Name: tools.ModelName(name), Arguments: json.RawMessage(input)}}}
}

// repeatPlan calls the tool named by the request's first word with the
// rest of the request as its input, after every result again.
func repeatPlan(_ int, req *providers.Request) fake.Turn {
	n := toolMessages(req) + 1
	name, input, _ := strings.Cut(strings.TrimSpace(lastUser(req)), " ")
	return fake.Turn{Text: fmt.Sprintf("call %d", n), ToolCalls: []providers.ToolCall{{ID: fmt.Sprintf("r%d", n), Name: strings.ReplaceAll(name, ".", "_"), Arguments: json.RawMessage(input)}}}
}

// The files session of fake/files, one call per Cycle. The request names
// an absolute path outside the workspace for the escape attempt.
const (
	filesDemoPath    = "notes/hello.txt"
	filesDemoContent = "hello\nworld\n"
)

// filesStep is one call of the fake/files session. Its input may depend on
// the results of the earlier steps (a revision read before).
type filesStep struct {
	tool  string
	input func(request string, results []string) any
}

var filesSteps = []filesStep{
	// 0: create a file in a new folder.
	{"files.write", func(string, []string) any {
		return map[string]string{"path": filesDemoPath, "content": filesDemoContent}
	}},
	// 1: read it back (its revision is the base of the edits).
	{"files.read", func(string, []string) any { return map[string]string{"path": filesDemoPath} }},
	// 2: edit it against the revision read.
	{"files.edit", func(_ string, res []string) any {
		return map[string]string{"path": filesDemoPath, "old_text": "world", "new_text": "lemo", "revision": revisionIn(res[1])}
	}},
	// 3: edit again against the same, now stale, revision: refused.
	{"files.edit", func(_ string, res []string) any {
		return map[string]string{"path": filesDemoPath, "old_text": "hello", "new_text": "stale", "revision": revisionIn(res[1])}
	}},
	// 4–6: list, find and grep.
	{"files.list", func(string, []string) any { return map[string]string{"path": "notes"} }},
	{"files.find", func(string, []string) any { return map[string]string{"pattern": "*.txt"} }},
	{"files.grep", func(string, []string) any { return map[string]string{"pattern": "lemo"} }},
	// 7–9: escape attempts: refused.
	{"files.write", func(string, []string) any { return map[string]string{"path": "../escaped.txt", "content": "escaped"} }},
	{"files.write", func(req string, _ []string) any {
		outside := strings.TrimSpace(req)
		if !strings.HasPrefix(outside, "/") {
			outside = "/lemo-files-demo-outside.txt"
		}
		return map[string]string{"path": outside, "content": "escaped"}
	}},
	{"files.read", func(string, []string) any { return map[string]string{"path": "../../token"} }},
}

// filesPlan makes the calls of filesSteps in order, then answers with one
// line per call: "step N tool: " and what the call returned (failures
// included, exactly as the model was shown them).
func filesPlan(_ int, req *providers.Request) fake.Turn {
	var results []string
	for _, m := range conversation(req) {
		if m.Role == providers.RoleTool {
			results = append(results, m.Content)
		}
	}
	if n := len(results); n < len(filesSteps) {
		s := filesSteps[n]
		return fake.Turn{ToolCalls: []providers.ToolCall{fake.ToolCall(fmt.Sprintf("f%d", n), strings.ReplaceAll(s.tool, ".", "_"), s.input(lastUser(req), results))}}
	}
	var b strings.Builder
	b.WriteString("files session done")
	for i, r := range results {
		fmt.Fprintf(&b, "\nstep %d %s: %s", i, filesSteps[i].tool, strings.ReplaceAll(r, "\n", " "))
	}
	return fake.Turn{Text: b.String()}
}

// revisionIn returns the "revision" of a files tool's JSON result ("" when
// it has none).
func revisionIn(result string) string {
	var r struct {
		Revision string `json:"revision"`
	}
	_ = json.Unmarshal([]byte(result), &r)
	return r.Revision
}

// streamModel streams timestamped text deltas at a steady rate.
type streamModel struct{}

func (m *streamModel) Info() providers.ModelInfo {
	return providers.ModelInfo{ID: "fake/stream", Provider: "fake", Name: "stream", Window: 1 << 20}
}

// Stream reads "deltas=N rate=R" (defaults 100 and 1000 per second) from
// the request and sends N deltas "<unix nanoseconds> ", R per second.
func (m *streamModel) Stream(ctx context.Context, req *providers.Request, emit func(providers.Delta)) (*providers.Response, error) {
	n, rate := 100, 1000
	for _, f := range strings.Fields(lastUser(req)) {
		k, v, _ := strings.Cut(f, "=")
		if x, err := strconv.Atoi(v); err == nil && x > 0 {
			switch k {
			case "deltas":
				n = min(x, 100000)
			case "rate":
				rate = x
			}
		}
	}
	interval := time.Second / time.Duration(rate)
	start := time.Now()
	sent := 0
	for i := 0; i < n; i++ {
		if d := time.Until(start.Add(time.Duration(i) * interval)); d > 0 {
			t := time.NewTimer(d)
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
				return nil, providers.Cancelled("fake", ctx.Err())
			}
		}
		emit(providers.Delta{Kind: providers.DeltaText, Text: strconv.FormatInt(time.Now().UnixNano(), 10) + " "})
		sent++
	}
	return &providers.Response{Text: fmt.Sprintf("streamed %d deltas", sent), FinishReason: "stop"}, nil
}

// tickTool is the harmless tool fake/loop calls: it returns its input.
type tickTool struct{}

func (tickTool) Name() string { return "demo.tick" }
func (tickTool) Description() string {
	return "Demo tool (offered only with the fake provider): returns its input."
}
func (tickTool) InputSchema() json.RawMessage {
	return json.RawMessage(`{"type":"object","properties":{"n":{"type":"integer"}},"required":["n"]}`)
}
func (tickTool) StateSchema() json.RawMessage { return nil }
func (tickTool) ResultSchema() json.RawMessage {
	return json.RawMessage(`{"type":"object","properties":{"n":{"type":"integer"}},"required":["n"]}`)
}
func (tickTool) Execute(ctx context.Context, call tools.Call, emit tools.Emit) (json.RawMessage, error) {
	return call.Input, nil
}
func (tickTool) Retain(output, input json.RawMessage) json.RawMessage { return output }
func (tickTool) View() string                                         { return "" }
