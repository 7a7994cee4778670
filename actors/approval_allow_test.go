package actors_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"lemo/actors"
	"lemo/api"
	"lemo/providers"
	"lemo/providers/fake"
)

// finishedCall waits until call has a result in Task id and the Task is
// finished again; it returns the history.
func finishedCall(t *testing.T, h *harness, id, call string) []*api.Event {
	t.Helper()
	return h.waitFor(id, call+" done and the task finished", func(evs []*api.Event) bool {
		return lastStatus(evs) == api.TaskStatus_TASK_STATUS_FINISHED && has(evs, func(e *api.Event) bool {
			return e.GetToolResult().GetCallId() == call || e.GetToolFailed().GetCallId() == call
		})
	})
}

func askedFor(evs []*api.Event, call string) bool {
	return has(evs, func(e *api.Event) bool { return e.GetApprovalRequested().GetCallId() == call })
}

func ranCall(evs []*api.Event, call string) bool {
	return has(evs, func(e *api.Event) bool { return e.GetToolResult().GetCallId() == call })
}

// "Always allow for this Task": the approved call runs, and the Task's next
// call of the same tool runs without asking, also after a daemon restart
// (the rule is in the Task's history). Another Task is still asked.
func TestAllowForTaskSurvivesRestart(t *testing.T) {
	h := newHarnessWith(t, callEachMessage("test_echo"), func(o *actors.Options) {
		o.Approval = actors.RulePolicy([]actors.PolicyRule{{Tool: "test.echo", Rule: "ask"}}, time.Hour)
	})
	id := h.create("first")
	h.waitStatus(id, api.TaskStatus_TASK_STATUS_AWAITING_APPROVAL)
	if _, err := h.d.AllowForTask(context.Background(), actors.Operator, id+".call-1-1", ""); err != nil {
		t.Fatal(err)
	}
	evs := finishedCall(t, h, id, "call-1-1")
	want := &api.ToolApproval{Tool: "test.echo", Rule: api.ApprovalRule_APPROVAL_RULE_ALLOW}
	if !has(evs, func(e *api.Event) bool {
		r := e.GetApprovalResolved()
		return r.GetOutcome() == api.ApprovalOutcome_APPROVAL_OUTCOME_APPROVED && proto.Equal(r.GetAllowRule(), want)
	}) || !ranCall(evs, "call-1-1") {
		t.Fatalf("the allowed approval:\n%s", dump(evs))
	}

	h.restart()
	if _, err := h.d.SendMessage(context.Background(), actors.Operator, id, "second"); err != nil {
		t.Fatal(err)
	}
	evs = finishedCall(t, h, id, "call-3-1")
	if askedFor(evs, "call-3-1") || !ranCall(evs, "call-3-1") {
		t.Fatalf("after the restart the same kind of call was asked about, or did not run:\n%s", dump(evs))
	}
	other := h.create("other task")
	h.waitStatus(other, api.TaskStatus_TASK_STATUS_AWAITING_APPROVAL)
	pending(t, h, 1)
}

// For a tool that judges its input the rule covers only the same input;
// the model's own request_approval is still asked; a deny the daemon
// adds later still refuses.
func TestAllowForTaskNeverLoosensMore(t *testing.T) {
	h := newHarnessWith(t, func(n int, req *providers.Request) fake.Turn {
		last := req.Messages[len(req.Messages)-1]
		if last.Role != providers.RoleUser {
			return fake.Turn{Text: "done"}
		}
		args := map[string]string{"text": last.Content}
		if q, ok := strings.CutPrefix(last.Content, "ask:"); ok {
			args = map[string]string{"text": q, "request_approval": "sure?"}
		}
		tool := "test_guarded"
		if strings.HasPrefix(last.Content, "raw") || strings.HasPrefix(last.Content, "ask:") {
			tool = "test_raw"
		}
		return fake.Turn{ToolCalls: []providers.ToolCall{fake.ToolCall("p", tool, args)}}
	}, func(o *actors.Options) {
		o.Approval = actors.RulePolicy([]actors.PolicyRule{{Tool: "test.raw", Rule: "ask"}}, time.Hour)
	}, append(extraTools(), rawTool{})...)
	ctx := context.Background()
	id := h.create("same")
	h.waitStatus(id, api.TaskStatus_TASK_STATUS_AWAITING_APPROVAL)
	if _, err := h.d.AllowForTask(ctx, actors.Operator, id+".call-1-1", ""); err != nil {
		t.Fatal(err)
	}
	finishedCall(t, h, id, "call-1-1")
	send := func(text string) {
		t.Helper()
		if _, err := h.d.SendMessage(ctx, actors.Operator, id, text); err != nil {
			t.Fatal(err)
		}
	}
	// test.guarded judges its input: the same input runs unasked...
	send("same")
	evs := finishedCall(t, h, id, "call-3-1")
	if askedFor(evs, "call-3-1") || !ranCall(evs, "call-3-1") {
		t.Fatalf("the same guarded input was asked about again:\n%s", dump(evs))
	}
	// ...another input is asked about.
	send("different")
	h.waitFor(id, "call-5-1 asked about", func(evs []*api.Event) bool { return askedFor(evs, "call-5-1") })
	if _, err := h.d.ResolveApproval(ctx, actors.Operator, id+".call-5-1", false, "no"); err != nil {
		t.Fatal(err)
	}
	finishedCall(t, h, id, "call-5-1")

	// test.raw: allowed as a tool (the daemon asks for it, the tool does
	// not judge its input)...
	send("raw one")
	h.waitFor(id, "call-7-1 asked about", func(evs []*api.Event) bool { return askedFor(evs, "call-7-1") })
	if _, err := h.d.AllowForTask(ctx, actors.Operator, id+".call-7-1", ""); err != nil {
		t.Fatal(err)
	}
	finishedCall(t, h, id, "call-7-1")
	send("raw two")
	evs = finishedCall(t, h, id, "call-9-1")
	if askedFor(evs, "call-9-1") || !ranCall(evs, "call-9-1") {
		t.Fatalf("another test.raw call was asked about:\n%s", dump(evs))
	}
	// ...but the model's own request is asked.
	send("ask:three")
	evs = h.waitFor(id, "call-11-1 asked about", func(evs []*api.Event) bool { return askedFor(evs, "call-11-1") })
	if !has(evs, func(e *api.Event) bool { return e.GetApprovalRequested().GetReason() == "the model asked: sure?" }) {
		t.Fatalf("the model's request:\n%s", dump(evs))
	}
	if _, err := h.d.ResolveApproval(ctx, actors.Operator, id+".call-11-1", true, ""); err != nil {
		t.Fatal(err)
	}
	finishedCall(t, h, id, "call-11-1")
	// A deny of the daemon wins over the allow.
	h.d.SetApproval(actors.RulePolicy([]actors.PolicyRule{{Tool: "test.raw", Rule: "deny"}}, 0), 0)
	send("raw four")
	evs = finishedCall(t, h, id, "call-13-1")
	if ranCall(evs, "call-13-1") || !has(evs, func(e *api.Event) bool {
		return e.GetToolFailed().GetCallId() == "call-13-1" && strings.Contains(e.GetToolFailed().GetMessage(), "denied by policy")
	}) {
		t.Fatalf("the daemon's deny did not win:\n%s", dump(evs))
	}
}

// An approval asked by a running call about its own work cannot be always
// allowed (it stays pending and can still be decided); a malformed id is
// refused with what is accepted.
func TestAllowForTaskRefusals(t *testing.T) {
	h := newHarness(t, callEachMessage("test_ask"), extraTools()...)
	ctx := context.Background()
	if _, err := h.d.AllowForTask(ctx, actors.Operator, "nodot", ""); !errors.Is(err, actors.ErrInvalid) || !strings.Contains(err.Error(), "want <task id>.<call id>") {
		t.Fatalf("bad id: err = %v", err)
	}
	id := h.create("x")
	h.waitStatus(id, api.TaskStatus_TASK_STATUS_AWAITING_APPROVAL)
	if _, err := h.d.AllowForTask(ctx, actors.Operator, id+".call-1-1.1", ""); !errors.Is(err, actors.ErrInvalid) || !strings.Contains(err.Error(), "not always allowed") {
		t.Fatalf("during-run approval: err = %v, want ErrInvalid", err)
	}
	pending(t, h, 1)
	if _, err := h.d.ResolveApproval(ctx, actors.Operator, id+".call-1-1.1", true, ""); err != nil {
		t.Fatal(err)
	}
	h.waitStatus(id, api.TaskStatus_TASK_STATUS_FINISHED)
}
