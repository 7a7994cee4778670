package actors_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync/atomic"
	"testing"

	"lemo/actors"
	"lemo/api"
	"lemo/internal/failpoint"
	"lemo/providers"
	"lemo/providers/fake"
	"lemo/tools"
)

var errInjected = errors.New("injected commit failure")

// countTool counts its executions: its side effect.
type countTool struct {
	echoTool
	runs *atomic.Int32
}

func (countTool) Name() string { return "test.count" }
func (c countTool) Execute(ctx context.Context, call tools.Call, emit tools.Emit) (json.RawMessage, error) {
	c.runs.Add(1)
	return json.Marshal(map[string]string{"echo": "counted"})
}

// guardedCountTool needs approval and counts its executions.
type guardedCountTool struct{ countTool }

func (guardedCountTool) Name() string { return "test.guarded_count" }
func (guardedCountTool) Approval(json.RawMessage) tools.Approval {
	return tools.Approval{Required: true, Reason: "counted"}
}

// failOnce makes the failpoint name fail its first evaluation.
func failOnce(t *testing.T, name string) *atomic.Int32 {
	t.Helper()
	var n atomic.Int32
	t.Cleanup(failpoint.Enable(name, func(arg any) error {
		if _, ok := arg.([]*api.Event); !ok {
			t.Errorf("failpoint %s: argument %T, want []*api.Event", name, arg)
		}
		if n.Add(1) == 1 {
			return errInjected
		}
		return nil
	}))
	return &n
}

func countEvents(evs []*api.Event, pred func(*api.Event) bool) int {
	n := 0
	for _, e := range evs {
		if pred(e) {
			n++
		}
	}
	return n
}

// oneCrash checks that the failed commit was reported: the Task actor
// crashed once (logged with the error, counted by the observer) and was
// restarted from its log.
func oneCrash(t *testing.T, h *harness) {
	t.Helper()
	_, _, crashes := h.obs.snapshot()
	if crashes["restart"] != 1 || len(crashes) != 1 {
		t.Fatalf("crashes reported = %v, want one restart", crashes)
	}
}

func interrupted(n int) func([]*api.Event) bool {
	return func(evs []*api.Event) bool {
		return countEvents(evs, func(e *api.Event) bool {
			return e.GetStatusChanged().GetPauseReason() == api.PauseReason_PAUSE_REASON_INTERRUPTED
		}) >= n
	}
}

// The record of a call's start fails to commit: the tool has not run; the
// Task restarts from its log and pauses as interrupted. The start is one
// commit with the model's answer that asked for the call, so that answer
// is not recorded either. Continued, the model asks again; the Task
// records the call and its start and runs the tool once.
func TestCommitFailureAtToolStart(t *testing.T) {
	runs := new(atomic.Int32)
	h := newHarness(t, fake.Sequence(
		fake.Turn{ToolCalls: []providers.ToolCall{call("p", "test_count", "x")}},
		fake.Turn{ToolCalls: []providers.ToolCall{call("p", "test_count", "x")}},
		fake.Turn{Text: "done"},
	), countTool{runs: runs})
	fails := failOnce(t, actors.FailToolStart)
	id := h.create("count once")
	evs := h.waitFor(id, "the pause after the failed commit", interrupted(1))
	oneCrash(t, h)
	if fails.Load() < 1 || runs.Load() != 0 {
		t.Fatalf("failpoint evaluated %d times, tool ran %d times; want the start to fail before the tool ran", fails.Load(), runs.Load())
	}
	if has(evs, func(e *api.Event) bool { return e.GetToolExecutionStarted() != nil || e.GetToolCallRecorded() != nil }) {
		t.Fatalf("a start whose commit failed, or the call it was one commit with, is in the history:\n%s", dump(evs))
	}
	if _, err := h.d.Continue(context.Background(), actors.Operator, id, ""); err != nil {
		t.Fatalf("Continue: %v", err)
	}
	evs = h.waitStatus(id, api.TaskStatus_TASK_STATUS_FINISHED)
	checkContiguous(t, evs)
	if runs.Load() != 1 {
		t.Fatalf("tool ran %d times, want 1", runs.Load())
	}
	starts := countEvents(evs, func(e *api.Event) bool { return e.GetToolExecutionStarted() != nil })
	results := countEvents(evs, func(e *api.Event) bool { return e.GetToolResult() != nil })
	if starts != 1 || results != 1 {
		t.Fatalf("%d starts and %d results recorded, want one each:\n%s", starts, results, dump(evs))
	}
}

// The record of a call's result fails to commit after the tool ran: the
// Task restarts from its log, which says the call started and never
// ended, and records the outcome as unknown instead of running it again.
func TestCommitFailureAtToolEnd(t *testing.T) {
	runs := new(atomic.Int32)
	h := newHarness(t, fake.Sequence(
		fake.Turn{ToolCalls: []providers.ToolCall{call("p", "test_count", "x")}},
		fake.Turn{Text: "done"},
	), countTool{runs: runs})
	failOnce(t, actors.FailToolEnd)
	id := h.create("count once")
	evs := h.waitFor(id, "the pause after the failed commit", interrupted(1))
	oneCrash(t, h)
	unknown := func(e *api.Event) bool {
		return e.GetToolFailed().GetKind() == api.ToolFailureKind_TOOL_FAILURE_KIND_OUTCOME_UNKNOWN
	}
	if !has(evs, unknown) || has(evs, func(e *api.Event) bool { return e.GetToolResult() != nil }) {
		t.Fatalf("want the call recorded as outcome unknown, without a result:\n%s", dump(evs))
	}
	if _, err := h.d.Continue(context.Background(), actors.Operator, id, ""); err != nil {
		t.Fatalf("Continue: %v", err)
	}
	evs = h.waitStatus(id, api.TaskStatus_TASK_STATUS_FINISHED)
	checkContiguous(t, evs)
	if runs.Load() != 1 {
		t.Fatalf("tool ran %d times, want 1: a side effect was re-run", runs.Load())
	}
	if n := countEvents(evs, func(e *api.Event) bool { return e.GetToolExecutionStarted() != nil }); n != 1 || countEvents(evs, unknown) != 1 {
		t.Fatalf("%d starts, %d unknown outcomes, want one each:\n%s", n, countEvents(evs, unknown), dump(evs))
	}
}

// An approval's resolution fails to commit: the caller gets the error, the
// approval stays pending (nothing ran), and resolving it again works.
func TestCommitFailureAtApprovalResolution(t *testing.T) {
	runs := new(atomic.Int32)
	h := newHarness(t, fake.Sequence(
		fake.Turn{ToolCalls: []providers.ToolCall{call("p", "test_guarded_count", "x")}},
		fake.Turn{Text: "done"},
	), guardedCountTool{countTool{runs: runs}})
	id := h.create("approve")
	h.waitStatus(id, api.TaskStatus_TASK_STATUS_AWAITING_APPROVAL)
	failOnce(t, actors.FailApprovalResolve)
	approval := id + ".call-1-1"
	_, err := h.d.ResolveApproval(context.Background(), actors.Operator, approval, true, "")
	if err == nil || !strings.Contains(err.Error(), errInjected.Error()) {
		t.Fatalf("ResolveApproval with a failed commit = %v, want the commit's error", err)
	}
	evs := h.waitFor(id, "the pause after the failed commit", interrupted(1))
	oneCrash(t, h)
	if has(evs, func(e *api.Event) bool { return e.GetApprovalResolved() != nil }) || runs.Load() != 0 {
		t.Fatalf("a resolution whose commit failed took effect (tool ran %d times):\n%s", runs.Load(), dump(evs))
	}
	pending(t, h, 1)
	if _, err := h.d.ResolveApproval(context.Background(), actors.Operator, approval, true, ""); err != nil {
		t.Fatalf("ResolveApproval again: %v", err)
	}
	if _, err := h.d.Continue(context.Background(), actors.Operator, id, ""); err != nil {
		t.Fatalf("Continue: %v", err)
	}
	evs = h.waitStatus(id, api.TaskStatus_TASK_STATUS_FINISHED)
	checkContiguous(t, evs)
	if runs.Load() != 1 {
		t.Fatalf("tool ran %d times, want 1", runs.Load())
	}
	if n := countEvents(evs, func(e *api.Event) bool { return e.GetApprovalResolved() != nil }); n != 1 {
		t.Fatalf("%d resolutions recorded, want 1:\n%s", n, dump(evs))
	}
}
