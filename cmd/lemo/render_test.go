package main

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"lemo/api"
	"lemo/client"
)

// A decision that always allows a kind of call for the Task says so, with
// what it covers; a plain one does not.
func TestRenderApprovalResolved(t *testing.T) {
	for _, tc := range []struct {
		name string
		ar   *api.ApprovalResolved
		want string
	}{
		{"plain", &api.ApprovalResolved{ApprovalId: "T.c1", Outcome: api.ApprovalOutcome_APPROVAL_OUTCOME_APPROVED, By: "alice"},
			"  approval T.c1: approved by alice\n"},
		{"always, a tool", &api.ApprovalResolved{ApprovalId: "T.c1", Outcome: api.ApprovalOutcome_APPROVAL_OUTCOME_APPROVED, By: "alice",
			AllowRule: &api.ToolApproval{Tool: "files.write", Rule: api.ApprovalRule_APPROVAL_RULE_ALLOW}},
			"  approval T.c1: approved by alice (always allowed for this task: files.write)\n"},
		{"always, one command", &api.ApprovalResolved{ApprovalId: "T.c1", Outcome: api.ApprovalOutcome_APPROVAL_OUTCOME_APPROVED, By: "alice",
			AllowRule: &api.ToolApproval{Tool: "shell.run", Rule: api.ApprovalRule_APPROVAL_RULE_ALLOW, Scope: "command: go test ./..."}},
			"  approval T.c1: approved by alice (always allowed for this task: shell.run command: go test ./...)\n"},
	} {
		var b strings.Builder
		newRenderer(&b, client.NewViews(nil)).event(&api.Event{Body: &api.Event_ApprovalResolved{ApprovalResolved: tc.ar}})
		if b.String() != tc.want {
			t.Errorf("%s: rendered %q, want %q", tc.name, b.String(), tc.want)
		}
	}
}

// A load says which tools the next model calls get.
func TestRenderToolsLoaded(t *testing.T) {
	var b strings.Builder
	newRenderer(&b, client.NewViews(nil)).event(&api.Event{Body: &api.Event_ToolsLoaded{ToolsLoaded: &api.ToolsLoaded{Tools: []string{"files.write", "mcp.git.log"}, CallId: "call-1-1"}}})
	if want := "+ tools loaded for the next model calls: files.write, mcp.git.log\n"; b.String() != want {
		t.Fatalf("rendered %q, want %q", b.String(), want)
	}
}

// A call refused before it was resolved to a tool (one not loaded) is
// named as the model called it.
func TestRenderRefusedCall(t *testing.T) {
	var b strings.Builder
	r := newRenderer(&b, client.NewViews(nil))
	r.event(&api.Event{Body: &api.Event_ToolCallRecorded{ToolCallRecorded: &api.ToolCallRecorded{CallId: "call-1-1", ModelName: "tasks_list", Arguments: []byte(`{}`)}}})
	r.event(&api.Event{Body: &api.Event_ToolFailed{ToolFailed: &api.ToolFailed{CallId: "call-1-1", Kind: api.ToolFailureKind_TOOL_FAILURE_KIND_UNKNOWN_TOOL, Message: "not loaded"}}})
	if want := "✗ tasks_list failed (unknown_tool): not loaded\n"; !strings.HasSuffix(b.String(), want) {
		t.Fatalf("rendered %q, want it to end with %q", b.String(), want)
	}
}

// The prompt offers "a" with what it would allow: the tool's calls, the
// exact command for the shell; a running call's own question (decided once)
// does not offer it.
func TestPromptOffersAlways(t *testing.T) {
	for _, tc := range []struct {
		name      string
		tool      string
		duringRun bool
		want      string
	}{
		{"a write", "files.write", false, "? [y/N/a=always/s=skip] (a approves and allows files.write calls for this task, n REASON denies with a reason) "},
		{"a command", "shell.run", false, "? [y/N/a=always/s=skip] (a approves and allows this exact command for this task, n REASON denies with a reason) "},
		{"a running call's question", "delegate.run", true, "? [y/N/s=skip] (n REASON denies with a reason) "},
	} {
		var b strings.Builder
		p := &prompter{out: &promptWriter{w: &b}}
		p.event(&api.Event{Body: &api.Event_ApprovalRequested{ApprovalRequested: &api.ApprovalRequested{ApprovalId: "T.c1", CallId: "c1", Tool: tc.tool, DuringRun: tc.duringRun}}})
		p.ask()
		if got := b.String(); got != "approve T.c1"+tc.want {
			t.Errorf("%s: prompt %q, want %q", tc.name, got, "approve T.c1"+tc.want)
		}
	}
}

// A failure that supervision decided about says what it decided.
func TestRenderFailureDecision(t *testing.T) {
	for _, tc := range []struct {
		name string
		f    *api.Failure
		want string
	}{
		{"a provider failure", &api.Failure{Scope: api.FailureScope_FAILURE_SCOPE_CYCLE, Kind: "auth", Message: "bad key"}, "! auth failure: bad key\n"},
		{"a crashed tool", &api.Failure{Scope: api.FailureScope_FAILURE_SCOPE_TOOL, Kind: "panic", Message: "panic: boom", Decision: "stop"},
			"! panic failure: panic: boom [supervision: stopped]\n"},
		{"a Task restarted", &api.Failure{Scope: api.FailureScope_FAILURE_SCOPE_TASK, Kind: "panic", Message: "bug", Decision: "restart", Crashes: 1, Budget: 3},
			"! panic failure: bug [supervision: restarted (crash 1 of 3 allowed)]\n"},
	} {
		var b strings.Builder
		newRenderer(&b, client.NewViews(nil)).event(&api.Event{Body: &api.Event_Failure{Failure: tc.f}})
		if b.String() != tc.want {
			t.Errorf("%s: rendered %q, want %q", tc.name, b.String(), tc.want)
		}
	}
}

func TestTreeOrder(t *testing.T) {
	m := func(id, parent string) *api.TaskMeta { return &api.TaskMeta{TaskId: id, ParentId: parent} }
	// Newest first, as lemo tasks lists them; X's parent is not listed.
	metas := []*api.TaskMeta{m("G", "B"), m("C", "A"), m("X", "gone"), m("B", "A"), m("A", ""), m("R", "")}
	var got []string
	for _, r := range treeOrder(metas) {
		got = append(got, fmt.Sprintf("%s@%d", r.meta.GetTaskId(), r.depth))
	}
	want := []string{"X@0", "A@0", "B@1", "G@2", "C@1", "R@0"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("treeOrder = %v, want %v", got, want)
	}
}

func TestBelowTokens(t *testing.T) {
	m := func(id, parent string, tokens uint64) *api.TaskMeta {
		return &api.TaskMeta{TaskId: id, ParentId: parent, Budget: &api.BudgetSummary{Spent: &api.BudgetAmounts{Tokens: tokens}}}
	}
	metas := []*api.TaskMeta{m("G", "B", 5), m("C", "A", 7), m("B", "A", 11), m("A", "", 100), m("R", "", 3)}
	now := time.Now()
	for id, want := range map[string]string{"A": " +23 below", "B": " +5 below", "G": "", "R": ""} {
		if got := belowTokens(id, metas, now); got != want {
			t.Errorf("belowTokens(%s) = %q, want %q", id, got, want)
		}
	}
}

func TestTaskPath(t *testing.T) {
	parents := map[string]string{"C": "B", "B": "A", "A": "", "L": "L"}
	of := func(id string) (string, bool) { p, ok := parents[id]; return p, ok }
	for id, want := range map[string]string{"C": "A/B/C", "A": "A", "X": "X"} {
		if got := taskPath(id, of); got != want {
			t.Errorf("taskPath(%s) = %q, want %q", id, got, want)
		}
	}
	// A loop in bad data ends at the bound.
	if got := taskPath("L", of); strings.Count(got, "/") != 15 {
		t.Errorf("taskPath(L) = %q, want 16 elements", got)
	}
}

// lemo attach shows a line under the parent's calls for each child spawned,
// each child that ended and each that runs again.
func TestRenderChildLines(t *testing.T) {
	var b strings.Builder
	r := newRenderer(&b, client.NewViews(nil))
	r.event(&api.Event{Body: &api.Event_ChildSpawned{ChildSpawned: &api.ChildSpawned{ChildId: "C1", Title: "count the files"}}})
	r.event(&api.Event{Body: &api.Event_ChildEnded{ChildEnded: &api.ChildEnded{ChildId: "C1", Status: api.TaskStatus_TASK_STATUS_FAILED, Detail: "model call failed"}}})
	r.event(&api.Event{Body: &api.Event_MessageReceived{MessageReceived: &api.MessageReceived{From: "C1", Text: "a\nquestion"}}})
	r.event(&api.Event{Body: &api.Event_ChildReopened{ChildReopened: &api.ChildReopened{ChildId: "C1", By: "P", Detail: "reopened by message from P"}}})
	want := "  ↳ child task C1 started: count the files\n  ↳ child task C1 failed: model call failed\n✉ from C1: a question\n" +
		"  ↳ child task C1 runs again: reopened by message from P\n"
	if b.String() != want {
		t.Fatalf("rendered %q, want %q", b.String(), want)
	}
}
