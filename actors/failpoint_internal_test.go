package actors

import (
	"testing"

	"google.golang.org/protobuf/proto"

	"lemo/api"
)

func TestStepFailpoint(t *testing.T) {
	evs := func(bodies ...proto.Message) []*api.Event {
		out := make([]*api.Event, len(bodies))
		for i, b := range bodies {
			out[i] = api.NewEvent("t", uint64(i+1), nil, b)
		}
		return out
	}
	for _, c := range []struct {
		name string
		evs  []*api.Event
		want string
	}{
		{"message", evs(&api.UserMessage{Text: "hi"}), ""},
		{"start", evs(&api.ToolExecutionStarted{CallId: "c"}), FailToolStart},
		{"result", evs(&api.ToolResult{CallId: "c"}), FailToolEnd},
		{"failure", evs(&api.ToolFailed{CallId: "c"}), FailToolEnd},
		{"end then start of the next call", evs(&api.ToolResult{CallId: "a"}, &api.ToolExecutionStarted{CallId: "b"}), FailToolStart},
		{"denial: the call never ran", evs(&api.ApprovalResolved{ApprovalId: "a"}, &api.ToolFailed{CallId: "c", Kind: api.ToolFailureKind_TOOL_FAILURE_KIND_NOT_APPROVED}), FailApprovalResolve},
		{"approval", evs(&api.ApprovalResolved{ApprovalId: "a"}), FailApprovalResolve},
		{"end cancels the call's approvals", evs(&api.ApprovalResolved{ApprovalId: "a"}, &api.ToolResult{CallId: "c"}), FailToolEnd},
		{"cycle start", evs(&api.StatusChanged{Status: api.TaskStatus_TASK_STATUS_RUNNING}, &api.CycleStarted{Cycle: 1}), FailCycleStart},
		{"a result and the next Cycle's start", evs(&api.ToolResult{CallId: "c"}, &api.CycleStarted{Cycle: 2}), FailToolEnd},
		{"end as outcome unknown", evs(&api.ApprovalResolved{ApprovalId: "a"}, &api.ToolFailed{CallId: "c", Kind: api.ToolFailureKind_TOOL_FAILURE_KIND_OUTCOME_UNKNOWN}), FailToolEnd},
	} {
		if got := stepFailpoint(c.evs); got != c.want {
			t.Errorf("%s: stepFailpoint = %q, want %q", c.name, got, c.want)
		}
	}
}
