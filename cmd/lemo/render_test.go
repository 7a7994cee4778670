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
