package prompt

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"lemo/api"
	"lemo/providers"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// render writes a request and its summary as stable text.
func render(req *providers.Request, sum *api.InputSummary) string {
	var b strings.Builder
	fmt.Fprintf(&b, "=== system\n%s\n", req.System)
	for _, t := range req.Tools {
		fmt.Fprintf(&b, "=== tool %s\n%s\n%s\n", t.Name, t.Description, t.Parameters)
	}
	for i, m := range req.Messages {
		fmt.Fprintf(&b, "=== message %d: %s", i, m.Role)
		if m.Role == providers.RoleTool {
			fmt.Fprintf(&b, " (call %s, %s)", m.ToolCallID, m.ToolName)
		}
		fmt.Fprintf(&b, "\n%s\n", m.Content)
		if m.Reasoning != "" {
			fmt.Fprintf(&b, "--- reasoning\n%s\n", m.Reasoning)
		}
		for _, c := range m.ToolCalls {
			fmt.Fprintf(&b, "--- call %s %s\n%s\n", c.ID, c.Name, c.Arguments)
		}
	}
	fmt.Fprintf(&b, "=== summary\nwindow %d (known %v), ceiling %d, after first response %v, estimated %d\n",
		sum.GetWindowTokens(), sum.GetWindowKnown(), sum.GetCeilingTokens(), sum.GetAfterFirstResponse(), sum.GetEstimatedTokens())
	for _, s := range sum.GetSections() {
		fmt.Fprintf(&b, "section %s %d\n", s.GetSection(), s.GetTokens())
	}
	for _, e := range sum.GetExcerpts() {
		fmt.Fprintf(&b, "excerpt seq %d call %s %s: %d -> %d tokens\n", e.GetSeq(), e.GetCallId(), e.GetPart(), e.GetOriginalTokens(), e.GetKeptTokens())
	}
	for _, r := range sum.GetRecalled() {
		fmt.Fprintf(&b, "recalled %s seq %d %s: %d tokens, score %.2f\n", r.GetTaskId(), r.GetSeq(), r.GetKind(), r.GetTokens(), r.GetScore())
	}
	return b.String()
}

// goldenHistory is a fixed Task: a request, an answer with two calls (one
// with large arguments, one whose large output is live and only partly
// retained), a failed call, a message sent while the tools ran, and a
// second answer.
func goldenHistory() (*task, map[string]json.RawMessage) {
	h := newTask("Summarise the server log and save the summary to notes.md.")
	var log strings.Builder
	for i := 0; i < 150; i++ {
		fmt.Fprintf(&log, "2026-11-30T12:%02d:%02dZ worker-%d handled request %d in %d ms\n", i/60%60, i%60, i%7, 1000+i, 20+i%90)
	}
	logJSON, _ := json.Marshal(map[string]string{"path": "server.log", "content": log.String()})
	notes, _ := json.Marshal(map[string]string{"path": "notes.md", "content": strings.Repeat("- workers 0-6 handled 150 requests in 20-110 ms\n", 30)})
	h.add(&api.CycleStarted{Cycle: 1},
		&api.AssistantMessage{Cycle: 1, Text: "I will read the log, then write the notes.", Reasoning: "Read first.", ToolCallIds: []string{"call-1-1", "call-1-2", "call-1-3"}},
		&api.ToolCallRecorded{CallId: "call-1-1", Cycle: 1, Tool: "files.read", Arguments: []byte(`{"path":"server.log"}`)},
		&api.ToolCallRecorded{CallId: "call-1-2", Cycle: 1, Tool: "files.write", Arguments: notes},
		&api.ToolCallRecorded{CallId: "call-1-3", Cycle: 1, Tool: "shell.run", Arguments: []byte(`{"command":"wc -l server.log"}`)},
		&api.CycleFinished{Cycle: 1, Outcome: api.CycleOutcome_CYCLE_OUTCOME_COMPLETED},
		&api.UserMessage{Text: "Mention the slowest worker too."},
		&api.ToolExecutionStarted{CallId: "call-1-1"},
		&api.ToolResult{CallId: "call-1-1", Retained: true, RetainedOutput: logJSON[:2000], OutputBytes: uint64(len(logJSON))},
		&api.ToolExecutionStarted{CallId: "call-1-2"},
		&api.ToolResult{CallId: "call-1-2", Retained: true, RetainedOutput: []byte(`{"written":2880}`), OutputBytes: 16},
		&api.ToolFailed{CallId: "call-1-3", Kind: api.ToolFailureKind_TOOL_FAILURE_KIND_NOT_APPROVED, Message: "not executed: denied by policy: shell is not allowed"},
		&api.CycleStarted{Cycle: 2},
		&api.AssistantMessage{Cycle: 2, Text: "Done: notes.md holds the summary; worker-6 was the slowest."},
		&api.CycleFinished{Cycle: 2, Outcome: api.CycleOutcome_CYCLE_OUTCOME_COMPLETED},
	)
	return h, map[string]json.RawMessage{"call-1-1": logJSON}
}

func goldenRecall() []Evidence {
	at := time.Date(2026, 11, 29, 9, 30, 0, 0, time.UTC)
	return []Evidence{
		{TaskID: "01JAAAAAAAAAAAAAAAAAAAAAAA", Kind: "fact", Time: at, Source: "fact 01JBBBBBBBBBBBBBBBBBBBBBBB recorded by memory.record in call call-2-1",
			Text: "Summaries of server logs go to notes.md, newest first.", Score: 7.25},
		{TaskID: "01JCCCCCCCCCCCCCCCCCCCCCCC", Seq: 14, Kind: "tool_result", Time: at.Add(time.Hour), Source: "call call-3-1 (delegate.run)",
			Text: `{"summary":"worker-6 is slow because it shares a disk"}`, Score: 4.5, Untrusted: true},
	}
}

func TestGoldenInput(t *testing.T) {
	specs := []providers.ToolSpec{
		{Name: "files_read", Description: "Reads a file.", Parameters: json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"}}}`)},
		{Name: "files_write", Description: "Writes a file.", Parameters: json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"},"content":{"type":"string"}}}`)},
	}
	cases := []struct {
		name   string
		window int
	}{
		{"roomy", 65536},   // everything whole, with recall
		{"pressure", 3000}, // the largest result excerpted, no recall
		{"tight", 1300},    // the result and the large arguments excerpted to the same size
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h, live := goldenHistory()
			req, sum, err := Build(Input{History: h.evs, Live: live, Tools: specs, Window: c.window, Recall: goldenRecall()})
			if err != nil {
				t.Fatal(err)
			}
			got := render(req, sum)
			path := filepath.Join("testdata", "input_"+c.name+".golden")
			if *update {
				if err := os.MkdirAll("testdata", 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run with -update to create it)", err)
			}
			if got != string(want) {
				t.Fatalf("assembled input differs from %s (run with -update and read the diff):\n%s", path, firstDiff(got, string(want)))
			}
		})
	}
}

func firstDiff(got, want string) string {
	g, w := strings.Split(got, "\n"), strings.Split(want, "\n")
	for i := 0; i < len(g) || i < len(w); i++ {
		var a, b string
		if i < len(g) {
			a = g[i]
		}
		if i < len(w) {
			b = w[i]
		}
		if a != b {
			return fmt.Sprintf("line %d:\n got: %q\nwant: %q", i+1, a, b)
		}
	}
	return "(equal)"
}
