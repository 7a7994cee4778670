package actors_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"lemo/actors"
	"lemo/api"
	"lemo/providers"
	"lemo/providers/fake"
)

// StopCall stops one running call and leaves the Task running: the call's
// context is cancelled, the stop is recorded as a cancelled failure that
// names who stopped it, and the model sees that failure in the next Cycle.
func TestStopOneCall(t *testing.T) {
	h := newHarness(t, fake.Sequence(
		fake.Turn{ToolCalls: []providers.ToolCall{call("p1", "test_block", "stop me"), call("p2", "test_block", "keep me")}},
		fake.Turn{Text: "carried on"},
	))
	id := h.create("two blocking calls")
	eventually(t, "both calls running", func() error {
		if !h.blocks.isRunning("stop me") || !h.blocks.isRunning("keep me") {
			return errNotYet
		}
		return nil
	})
	ctx := context.Background()
	if _, err := h.d.StopCall(ctx, actors.Caller{Owner: "mallory"}, id, "call-1-1"); !errors.Is(err, actors.ErrNotFound) {
		t.Fatalf("StopCall by another owner: %v, want ErrNotFound", err)
	}
	if _, err := h.d.StopCall(ctx, actors.Operator, id, "call-9-9"); !errors.Is(err, actors.ErrNotFound) {
		t.Fatalf("StopCall of a call that is not running: %v, want ErrNotFound", err)
	}
	if _, err := h.d.StopCall(ctx, actors.Operator, id, ""); !errors.Is(err, actors.ErrInvalid) {
		t.Fatalf("StopCall without a call id: %v, want ErrInvalid", err)
	}
	meta, err := h.d.StopCall(ctx, actors.Operator, id, "call-1-1")
	if err != nil {
		t.Fatalf("StopCall: %v", err)
	}
	if meta.GetStatus() != api.TaskStatus_TASK_STATUS_RUNNING {
		t.Fatalf("status after StopCall = %v, want running", meta.GetStatus())
	}
	evs := h.waitFor(id, "the stopped call recorded", func(evs []*api.Event) bool {
		return has(evs, func(e *api.Event) bool { return e.GetToolFailed().GetCallId() == "call-1-1" })
	})
	var failed *api.ToolFailed
	for _, e := range evs {
		if f := e.GetToolFailed(); f != nil {
			failed = f
		}
	}
	if failed.GetKind() != api.ToolFailureKind_TOOL_FAILURE_KIND_CANCELLED || !strings.Contains(failed.GetMessage(), "stopped by operator") {
		t.Fatalf("the stopped call was recorded as %v", failed)
	}
	if !h.blocks.wasCancelled("stop me") || h.blocks.wasCancelled("keep me") {
		t.Fatalf("cancelled: stop me %v, keep me %v; want only the stopped call", h.blocks.wasCancelled("stop me"), h.blocks.wasCancelled("keep me"))
	}
	if lastStatus(evs) != api.TaskStatus_TASK_STATUS_RUNNING {
		t.Fatalf("status = %v, want running while the other call runs", lastStatus(evs))
	}
	h.blocks.release("keep me")
	h.waitStatus(id, api.TaskStatus_TASK_STATUS_FINISHED)
	reqs := h.model.Requests()
	if got, _ := toolMessage(reqs[len(reqs)-1], "call-1-1"); !strings.Contains(got, "stopped by operator") {
		t.Fatalf("the model saw the stopped call as %q", got)
	}
	if _, err := h.d.StopCall(ctx, actors.Operator, id, "call-1-2"); !errors.Is(err, actors.ErrNotFound) {
		t.Fatalf("StopCall of a finished call: %v, want ErrNotFound", err)
	}
}
