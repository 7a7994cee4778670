package main

import (
	"strings"
	"testing"

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
