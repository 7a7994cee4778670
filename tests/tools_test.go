package tests

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"lemo/api"
	"lemo/client"
)

// toolCall is one tool call of a Task's history with how it ended.
type toolCall struct {
	tool   string
	args   string
	result *api.ToolResult
	failed *api.ToolFailed
}

// toolCalls reads a Task's history and returns its tool calls in the order
// they were recorded, and the text of its last assistant message.
func toolCalls(t *testing.T, c *client.Conn, id string) ([]*toolCall, string) {
	t.Helper()
	evs, err := c.ReadHistory(context.Background(), id, 1)
	if err != nil {
		t.Fatal(err)
	}
	byID := map[string]*toolCall{}
	var calls []*toolCall
	var answer string
	for _, ev := range evs {
		switch {
		case ev.GetToolCallRecorded() != nil:
			r := ev.GetToolCallRecorded()
			tc := &toolCall{tool: r.GetTool(), args: string(r.GetArguments())}
			byID[r.GetCallId()] = tc
			calls = append(calls, tc)
		case ev.GetToolResult() != nil:
			if tc := byID[ev.GetToolResult().GetCallId()]; tc != nil {
				tc.result = ev.GetToolResult()
			}
		case ev.GetToolFailed() != nil:
			if tc := byID[ev.GetToolFailed().GetCallId()]; tc != nil {
				tc.failed = ev.GetToolFailed()
			}
		case ev.GetAssistantMessage() != nil:
			answer = ev.GetAssistantMessage().GetText()
		}
	}
	return calls, answer
}

// callNames is the tools the calls called, in order.
func callNames(calls []*toolCall) []string {
	var names []string
	for _, cl := range calls {
		names = append(names, cl.tool)
	}
	return names
}

// The files tools inside a real Task of lemo serve (the fake/files demo
// model): write, read, edit, list, find and grep do their work in the
// Task's workspace; a stale edit and escapes (a ".." path, an absolute path
// outside, the data folder's token) are tool failures the model is shown,
// and nothing outside the workspace changes.
func TestToolsFilesInATask(t *testing.T) {
	data := filepath.Join(t.TempDir(), "data")
	outside := t.TempDir()
	outsideFile := filepath.Join(outside, "outside.txt")
	d := serveRemote(t, data)
	c := d.connect(t, "")
	ctx := context.Background()
	token, err := os.ReadFile(filepath.Join(data, "token"))
	if err != nil {
		t.Fatal(err)
	}
	before := snapshot(t, outside)

	m, err := c.CreateTask(ctx, client.CreateTask{Request: outsideFile, Model: "fake/files"})
	if err != nil {
		t.Fatal(err)
	}
	id := m.GetTaskId()
	waitTask(t, c, id, "finished", statusIs(api.TaskStatus_TASK_STATUS_FINISHED))
	ws := filepath.Join(data, "workspaces", id)
	if m, err := c.Task(ctx, id); err != nil || m.GetWorkspace() != ws {
		t.Fatalf("workspace = %q (%v), want %q", m.GetWorkspace(), err, ws)
	}

	// On disk: the file written, then edited once (the stale edit changed
	// nothing).
	got, err := os.ReadFile(filepath.Join(ws, "notes", "hello.txt"))
	if err != nil || string(got) != "hello\nlemo\n" {
		t.Fatalf("notes/hello.txt = %q (%v), want %q", got, err, "hello\nlemo\n")
	}

	calls, answer := toolCalls(t, c, id)
	type want struct {
		tool string
		ok   bool
		// in is text the result must hold (ok) or the failure's message.
		in []string
	}
	wants := []want{
		{"files.write", true, []string{`"created":true`, `"path":"notes/hello.txt"`}},
		{"files.read", true, []string{`hello\n`, `\tworld\n"`, `"total_lines":2`, `"revision":"sha256:`}},
		{"files.edit", true, []string{`"replacements":1`}},
		{"files.edit", false, []string{`files.edit "notes/hello.txt"`, "the file changed since revision", "read it again"}},
		{"files.list", true, []string{`"name":"hello.txt"`}},
		{"files.find", true, []string{`"path":"notes/hello.txt"`}},
		{"files.grep", true, []string{`"text":"lemo"`, `"line":2`}},
		{"files.write", false, []string{`files.write "../escaped.txt": refused (rule no-parent)`}},
		{"files.write", false, []string{fmt.Sprintf(`files.write %q: refused (rule inside-only)`, outsideFile)}},
		{"files.read", false, []string{`files.read "../../token": refused (rule no-parent)`}},
	}
	if len(calls) != len(wants) {
		t.Fatalf("%d tool calls, want %d; answer:\n%s", len(calls), len(wants), answer)
	}
	for i, w := range wants {
		tc := calls[i]
		if tc.tool != w.tool {
			t.Errorf("call %d: tool %s, want %s", i, tc.tool, w.tool)
			continue
		}
		if w.ok {
			if tc.failed != nil || tc.result == nil {
				t.Errorf("call %d %s %s: failed %v, want a result", i, tc.tool, tc.args, tc.failed)
				continue
			}
			for _, s := range w.in {
				if !strings.Contains(string(tc.result.GetRetainedOutput()), s) {
					t.Errorf("call %d %s: result lacks %s:\n%s", i, tc.tool, s, tc.result.GetRetainedOutput())
				}
			}
			continue
		}
		if tc.failed == nil {
			t.Errorf("call %d %s %s: result %s, want a failure", i, tc.tool, tc.args, tc.result.GetRetainedOutput())
			continue
		}
		if k := tc.failed.GetKind(); k != api.ToolFailureKind_TOOL_FAILURE_KIND_ERROR {
			t.Errorf("call %d %s: failure kind %v, want ERROR", i, tc.tool, k)
		}
		for _, s := range w.in {
			if !strings.Contains(tc.failed.GetMessage(), s) {
				t.Errorf("call %d %s: failure %q lacks %q", i, tc.tool, tc.failed.GetMessage(), s)
			}
			// The model was shown the failure: its answer repeats what
			// each call returned.
			if line := fmt.Sprintf("step %d %s: [tool failed (error): ", i, tc.tool); !strings.Contains(answer, line) || !strings.Contains(answer, strings.ReplaceAll(s, "\n", " ")) {
				t.Errorf("call %d %s: the model's answer does not show the failure %q:\n%s", i, tc.tool, s, answer)
			}
		}
	}

	// Nothing outside the workspace changed.
	if after := snapshot(t, outside); after != before {
		t.Errorf("the folder outside the workspace changed:\nbefore:\n%s\nafter:\n%s", before, after)
	}
	if _, err := os.Stat(filepath.Join(data, "workspaces", "escaped.txt")); !os.IsNotExist(err) {
		t.Errorf("../escaped.txt was written beside the workspace: %v", err)
	}
	entries, err := os.ReadDir(filepath.Join(data, "workspaces"))
	if err != nil || len(entries) != 1 || entries[0].Name() != id {
		t.Errorf("workspaces folder holds %v (%v), want only %s", entries, err, id)
	}
	if strings.Contains(answer, strings.TrimSpace(string(token))) {
		t.Errorf("the model was shown the daemon's token")
	}
	if now, err := os.ReadFile(filepath.Join(data, "token")); err != nil || string(now) != string(token) {
		t.Errorf("the token changed: %v", err)
	}
}

// shell.run inside real Tasks of lemo serve: a command the config allows
// runs and its exit code and output are recorded; a denied one is refused
// and never runs; bad inputs are tool failures that name the problem.
func TestToolsShellInATask(t *testing.T) {
	data := filepath.Join(t.TempDir(), "data")
	marker := filepath.Join(t.TempDir(), "ran")
	cfg := writeConfig(t, "tools:\n  shell:\n    allow: [\"echo\", \"exit\", \"touch\"]\n    deny: [\"touch "+marker+"\"]\n")
	d := serveRemote(t, data, "--config", cfg)
	c := d.connect(t, "")
	ctx := context.Background()
	run := func(t *testing.T, model, request string) (*toolCall, string) {
		t.Helper()
		m, err := c.CreateTask(ctx, client.CreateTask{Request: request, Model: model})
		if err != nil {
			t.Fatal(err)
		}
		waitTask(t, c, m.GetTaskId(), "finished", statusIs(api.TaskStatus_TASK_STATUS_FINISHED))
		calls, answer := toolCalls(t, c, m.GetTaskId())
		if len(calls) != 1 || calls[0].tool != "shell.run" {
			t.Fatalf("%s %q: calls %v, want one shell.run", model, request, calls)
		}
		return calls[0], answer
	}

	t.Run("allowed", func(t *testing.T) {
		tc, answer := run(t, "fake/shell", "echo out; echo err >&2; exit 3")
		if tc.failed != nil || tc.result == nil {
			t.Fatalf("failed %v, want a result", tc.failed)
		}
		var res struct {
			ExitCode int    `json:"exit_code"`
			Stdout   string `json:"stdout"`
			Stderr   string `json:"stderr"`
		}
		if err := json.Unmarshal(tc.result.GetRetainedOutput(), &res); err != nil {
			t.Fatalf("result %s: %v", tc.result.GetRetainedOutput(), err)
		}
		if res.ExitCode != 3 || res.Stdout != "out\n" || res.Stderr != "err\n" {
			t.Fatalf("recorded %+v, want exit 3, stdout \"out\\n\", stderr \"err\\n\"", res)
		}
		if !strings.Contains(answer, `"exit_code":3`) {
			t.Fatalf("the model was not shown the result:\n%s", answer)
		}
	})

	t.Run("denied", func(t *testing.T) {
		tc, answer := run(t, "fake/shell", "touch "+marker)
		if tc.failed == nil {
			t.Fatalf("result %s, want a refusal", tc.result.GetRetainedOutput())
		}
		if k := tc.failed.GetKind(); k != api.ToolFailureKind_TOOL_FAILURE_KIND_NOT_APPROVED {
			t.Errorf("failure kind %v, want NOT_APPROVED (%s)", k, tc.failed.GetMessage())
		}
		if !strings.Contains(tc.failed.GetMessage(), "deny") {
			t.Errorf("failure %q does not name the deny rule", tc.failed.GetMessage())
		}
		if !strings.Contains(answer, "[tool failed (not_approved): ") {
			t.Errorf("the model was not shown the refusal:\n%s", answer)
		}
		if _, err := os.Stat(marker); !os.IsNotExist(err) {
			t.Fatalf("the denied command ran: %v", err)
		}
	})

	for _, bad := range []struct{ name, input, want string }{
		{"missing command", `{}`, "command"},
		{"empty command", `{"command":""}`, "command"},
		{"negative timeout", `{"command":"touch ` + marker + `x","timeout_seconds":-1}`, "timeout_seconds"},
		{"not an object", `"echo hi"`, "object"},
		{"not JSON", `{"command":`, "JSON"},
	} {
		t.Run(bad.name, func(t *testing.T) {
			tc, answer := run(t, "fake/call", "shell.run "+bad.input)
			if tc.failed == nil {
				t.Fatalf("result %s, want a failure", tc.result.GetRetainedOutput())
			}
			t.Logf("%s: %s", bad.input, tc.failed.GetMessage())
			if k := tc.failed.GetKind(); k != api.ToolFailureKind_TOOL_FAILURE_KIND_INVALID_INPUT {
				t.Errorf("failure kind %v, want INVALID_INPUT (%s)", k, tc.failed.GetMessage())
			}
			if !strings.Contains(tc.failed.GetMessage(), bad.want) {
				t.Errorf("failure %q does not name %q", tc.failed.GetMessage(), bad.want)
			}
			if !strings.Contains(answer, "[tool failed (invalid_input): ") {
				t.Errorf("the model was not shown the failure:\n%s", answer)
			}
			if _, err := os.Stat(marker + "x"); !os.IsNotExist(err) {
				t.Fatalf("the call with a bad input ran: %v", err)
			}
		})
	}
}
