package actors_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"lemo/actors"
	"lemo/api"
	"lemo/providers"
	"lemo/providers/fake"
)

// A model call that panics (a bug in a provider) ends its Cycle as a
// recorded failure of kind "panic", decided by the Task's supervision
// (decision "stop"): the Task fails instead of hanging, a
// retry fails the same way, the Task actor itself never crashes, and Tasks
// running beside it (one with a tool call in flight, one created after)
// are unaffected.
func TestCyclePanicIsARecordedFailure(t *testing.T) {
	h := newHarness(t, func(n int, req *providers.Request) fake.Turn {
		switch first := req.Messages[0].Content; {
		case first == "panic":
			return fake.Turn{Panic: "model exploded"}
		case first == "block" && !hasTool(req):
			return fake.Turn{ToolCalls: []providers.ToolCall{call("b", "test_block", "b1")}}
		}
		return fake.Turn{Text: "fine"}
	})
	blocked := h.create("block")
	eventually(t, "the blocking tool to start", func() error {
		if !h.blocks.isRunning("b1") {
			return errNotYet
		}
		return nil
	})

	id := h.create("panic")
	evs := h.waitStatus(id, api.TaskStatus_TASK_STATUS_FAILED)
	checkContiguous(t, evs)
	if err := panicRecorded(evs, 1); err != nil {
		t.Fatalf("%v; history:\n%s", err, dump(evs))
	}

	// Retrying gets an answer at once and fails the same way: the Task
	// is not stuck behind the first panic.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := h.d.Continue(ctx, actors.Operator, id, ""); err != nil {
		t.Fatalf("Continue after the panic: %v", err)
	}
	evs = h.waitFor(id, "a second recorded panic", func(evs []*api.Event) bool {
		return panicRecorded(evs, 2) == nil && lastStatus(evs) == api.TaskStatus_TASK_STATUS_FAILED
	})
	checkContiguous(t, evs)

	// The Task beside it still runs its tool call, and finishes when it is
	// released; a Task created after the panics answers.
	if lastStatus(h.history(blocked)) != api.TaskStatus_TASK_STATUS_RUNNING || h.blocks.wasCancelled("b1") {
		t.Fatalf("the Task beside the panic was disturbed:\n%s", dump(h.history(blocked)))
	}
	h.blocks.release("b1")
	h.waitStatus(blocked, api.TaskStatus_TASK_STATUS_FINISHED)
	after := h.create("after")
	evs = h.waitStatus(after, api.TaskStatus_TASK_STATUS_FINISHED)
	if !has(evs, func(e *api.Event) bool { return e.GetAssistantMessage().GetText() == "fine" }) {
		t.Fatalf("the Task created after the panic did not answer:\n%s", dump(evs))
	}

	cycles, _, crashes := h.obs.snapshot()
	if len(crashes) != 0 {
		t.Errorf("Task actor crashes %v: a Cycle's panic must not crash its Task", crashes)
	}
	if cycles["fake panic"] != 2 {
		t.Errorf("cycles by outcome %v, want 2 panics", cycles)
	}
	if d := h.obs.decided(); d["cycle stop"] != 2 || len(d) != 1 {
		t.Errorf("supervision decisions %v, want the 2 crashed Cycles stopped", d)
	}
}

// panicRecorded checks that evs hold n failed Cycles, each with a Failure
// of kind "panic" naming the panic's value.
func panicRecorded(evs []*api.Event, n int) error {
	finished, failures := 0, 0
	for _, e := range evs {
		if e.GetCycleFinished().GetOutcome() == api.CycleOutcome_CYCLE_OUTCOME_FAILED && strings.Contains(e.GetCycleFinished().GetError(), "model exploded") {
			finished++
		}
		if f := e.GetFailure(); f != nil {
			if f.GetScope() != api.FailureScope_FAILURE_SCOPE_CYCLE || f.GetKind() != "panic" || !strings.Contains(f.GetMessage(), "panic: model exploded") || f.GetDecision() != "stop" {
				return fmt.Errorf("failure %v, want a Cycle failure of kind panic naming the value, which supervision stopped", f)
			}
			failures++
		}
	}
	if finished != n || failures != n {
		return fmt.Errorf("%d failed Cycles and %d failures recorded, want %d of each", finished, failures, n)
	}
	return nil
}
