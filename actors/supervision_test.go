package actors_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"lemo/actors"
	"lemo/api"
	"lemo/providers"
	"lemo/providers/fake"
	"lemo/tools"
)

// failures returns the Failure records of scope in evs, in order.
func failures(evs []*api.Event, scope api.FailureScope) []*api.Failure {
	var out []*api.Failure
	for _, e := range evs {
		if f := e.GetFailure(); f != nil && f.GetScope() == scope {
			out = append(out, f)
		}
	}
	return out
}

// actorRow returns the live actor whose path ends with suffix (or of kind
// suffix when no path does).
func actorRow(d *actors.Daemon, suffix string) (actors.ActorInfo, bool) {
	for _, a := range d.Inspect() {
		if strings.HasSuffix(a.ID, "/"+suffix) || a.Kind == suffix {
			return a, true
		}
	}
	return actors.ActorInfo{}, false
}

// A tool whose goroutine panics fails its Tool actor: the Task's
// supervision stops it and records the call as failed with the decision
// (a Failure of scope tool, decision stop); the Task goes on and finishes.
// The decision is counted and shown on the Task's inspector row.
func TestSupervisionStopsACrashedTool(t *testing.T) {
	h := newHarness(t, fake.Sequence(
		fake.Turn{ToolCalls: []providers.ToolCall{call("p", "test_panic", "x")}},
		fake.Turn{Text: "done"},
	))
	id := h.create("crash a tool")
	evs := h.waitStatus(id, api.TaskStatus_TASK_STATUS_FINISHED)
	checkContiguous(t, evs)
	if !has(evs, func(e *api.Event) bool {
		return e.GetToolFailed().GetCallId() == "call-1-1" && e.GetToolFailed().GetKind() == api.ToolFailureKind_TOOL_FAILURE_KIND_PANIC
	}) {
		t.Fatalf("the crashed call is not recorded as a panic:\n%s", dump(evs))
	}
	fs := failures(evs, api.FailureScope_FAILURE_SCOPE_TOOL)
	if len(fs) != 1 || fs[0].GetDecision() != "stop" || fs[0].GetCallId() != "call-1-1" || fs[0].GetKind() != "panic" || !strings.Contains(fs[0].GetMessage(), "tool exploded") {
		t.Fatalf("tool failures %v, want one for call-1-1 of kind panic with decision stop:\n%s", fs, dump(evs))
	}
	if d := h.obs.decided(); d["tool stop"] != 1 || len(d) != 1 {
		t.Fatalf("decisions %v, want one tool stop", d)
	}
	row, ok := actorRow(h.d, id)
	if !ok || row.StoppedChildren != 1 || !strings.HasPrefix(row.LastDecision, "tool-call-1-1: stop (panic): panic: tool exploded") {
		t.Fatalf("the Task's row = %+v (found %v), want one stopped child and its decision", row, ok)
	}
}

// A model call whose goroutine panics is decided by the Task's supervision
// as well: the Cycle's Failure carries the decision, and the Task's row
// counts the stopped Cycle.
func TestSupervisionStopsACrashedCycle(t *testing.T) {
	h := newHarness(t, func(n int, req *providers.Request) fake.Turn { return fake.Turn{Panic: "model exploded"} })
	id := h.create("crash the model call")
	evs := h.waitStatus(id, api.TaskStatus_TASK_STATUS_FAILED)
	fs := failures(evs, api.FailureScope_FAILURE_SCOPE_CYCLE)
	if len(fs) != 1 || fs[0].GetDecision() != "stop" || fs[0].GetKind() != "panic" || fs[0].GetCycle() != 1 {
		t.Fatalf("cycle failures %v, want one of kind panic with decision stop:\n%s", fs, dump(evs))
	}
	// The result the Cycle was reporting when it failed is what is
	// recorded: its input summary survives the crash.
	if !has(evs, func(e *api.Event) bool {
		return e.GetCycleFinished().GetOutcome() == api.CycleOutcome_CYCLE_OUTCOME_FAILED && e.GetCycleFinished().GetInput() != nil
	}) {
		t.Fatalf("the failed Cycle lost its input summary:\n%s", dump(evs))
	}
	if d := h.obs.decided(); d["cycle stop"] != 1 || len(d) != 1 {
		t.Fatalf("decisions %v, want one cycle stop", d)
	}
	row, ok := actorRow(h.d, id)
	if !ok || row.StoppedChildren != 1 || !strings.HasPrefix(row.LastDecision, "cycle-1: stop (panic)") {
		t.Fatalf("the Task's row = %+v (found %v), want one stopped child and its decision", row, ok)
	}
}

// A Task actor that keeps crashing: each crash within the budget restarts
// it, and its next incarnation records the crash (decision restart, with
// its count and the budget) before the pause it recovers to; the crash past
// the budget stops it, and it is recorded failed (decision stop) — events
// that reach its subscribers like any other.
func TestSupervisionRestartsThenFailsACrashingTask(t *testing.T) {
	crashes := new(atomic.Int32)
	h := newHarness(t, func(n int, req *providers.Request) fake.Turn {
		return fake.Turn{ToolCalls: []providers.ToolCall{call("p", "test_crashy", "x")}}
	}, crashyTool{crashes: crashes})
	id := h.create("crash the task")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	sub, err := h.d.Subscribe(ctx, actors.Operator, actors.SubscribeOptions{TaskID: id, FromSeq: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()

	for i := 1; i <= 3; i++ {
		h.waitFor(id, fmt.Sprintf("pause %d after a crash", i), interrupted(i))
		if _, err := h.d.Continue(ctx, actors.Operator, id, ""); err != nil {
			t.Fatalf("Continue %d: %v", i, err)
		}
	}
	evs := h.waitStatus(id, api.TaskStatus_TASK_STATUS_FAILED)
	checkContiguous(t, evs)
	fs := failures(evs, api.FailureScope_FAILURE_SCOPE_TASK)
	want := []string{"restart", "restart", "restart", "stop"}
	if len(fs) != len(want) {
		t.Fatalf("%d Task failures recorded, want %d:\n%s", len(fs), len(want), dump(evs))
	}
	for i, f := range fs {
		if f.GetDecision() != want[i] || f.GetCrashes() != uint32(i+1) || f.GetBudget() != 3 || f.GetKind() != "panic" || !strings.Contains(f.GetMessage(), "approval rule bug") {
			t.Errorf("failure %d = %v, want decision %s after crash %d of budget 3", i+1, f, want[i], i+1)
		}
	}
	// Each restart is recorded right before the pause it recovers to.
	for i, e := range evs {
		if e.GetFailure().GetDecision() == "restart" {
			if i+1 >= len(evs) || evs[i+1].GetStatusChanged().GetPauseReason() != api.PauseReason_PAUSE_REASON_INTERRUPTED {
				t.Fatalf("the restart at seq %d is not followed by its pause:\n%s", e.GetSeq(), dump(evs))
			}
		}
	}
	if d := h.obs.decided(); d["task restart"] != 3 || d["task stop"] != 1 {
		t.Fatalf("decisions %v, want 3 Task restarts and 1 stop", d)
	}
	row, ok := actorRow(h.d, "tasks")
	if !ok || row.StoppedChildren != 1 || !strings.HasPrefix(row.LastDecision, id+": stop (panic): approval rule bug") {
		t.Fatalf("the manager's row = %+v (found %v), want one stopped Task and its decision", row, ok)
	}

	// The subscriber saw it fail: the record made after the actor stopped
	// is published too.
	for {
		select {
		case u, ok := <-sub.C:
			if !ok {
				t.Fatal("the subscription ended before the failure reached it")
			}
			if u.Event.GetStatusChanged().GetStatus() == api.TaskStatus_TASK_STATUS_FAILED {
				if f := evs[u.Event.GetSeq()-2].GetFailure(); f.GetDecision() != "stop" {
					t.Fatalf("the failed status at seq %d does not follow the stop decision:\n%s", u.Event.GetSeq(), dump(evs))
				}
				return
			}
		case <-ctx.Done():
			t.Fatalf("the subscriber never saw the Task fail:\n%s", dump(h.history(id)))
		}
	}
}

// A Task actor whose append fails crashes with a store error: it restarts
// from its log, and the crash is recorded as kind "store".
func TestSupervisionRecordsAStoreCrash(t *testing.T) {
	runs := new(atomic.Int32)
	h := newHarness(t, fake.Sequence(
		fake.Turn{ToolCalls: []providers.ToolCall{call("p", "test_count", "x")}},
	), countTool{runs: runs})
	failOnce(t, actors.FailToolStart)
	id := h.create("count once")
	evs := h.waitFor(id, "the pause after the failed commit", interrupted(1))
	fs := failures(evs, api.FailureScope_FAILURE_SCOPE_TASK)
	if len(fs) != 1 || fs[0].GetKind() != "store" || fs[0].GetDecision() != "restart" || fs[0].GetCrashes() != 1 || !strings.Contains(fs[0].GetMessage(), errInjected.Error()) {
		t.Fatalf("Task failures %v, want one store crash with decision restart:\n%s", fs, dump(evs))
	}
	if d := h.obs.decided(); d["task restart"] != 1 || len(d) != 1 {
		t.Fatalf("decisions %v, want one Task restart", d)
	}
}

// panicSession panics in Run.
type panicSession struct{}

func (panicSession) Run(ctx context.Context, inbox <-chan any) error { panic("session exploded") }

// sessionCrashTool starts a session that panics, waits until supervision
// decided about it, and returns the error its handle reports.
type sessionCrashTool struct {
	echoTool
	decided func() bool
}

func (sessionCrashTool) Name() string { return "test.session_crash" }
func (t sessionCrashTool) Execute(ctx context.Context, c tools.Call, emit tools.Emit) (json.RawMessage, error) {
	h, err := c.Sessions.Start("boom", panicSession{})
	if err != nil {
		return nil, err
	}
	<-h.Done()
	for !t.decided() {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(time.Millisecond):
		}
	}
	return json.Marshal(map[string]any{"echo": h.Err().Error()})
}

// A session whose goroutine panics fails its actor: the Tool's supervision
// stops it, and the call, told through its handle, goes on.
func TestSupervisionStopsACrashedSession(t *testing.T) {
	var h *harness
	tool := sessionCrashTool{decided: func() bool { return h.obs.decided()["session stop"] == 1 }}
	h = newHarness(t, fake.Sequence(
		fake.Turn{ToolCalls: []providers.ToolCall{call("p", "test_session_crash", "x")}},
		fake.Turn{Text: "done"},
	), tool)
	id := h.create("crash a session")
	evs := h.waitStatus(id, api.TaskStatus_TASK_STATUS_FINISHED)
	if !has(evs, func(e *api.Event) bool {
		return string(e.GetToolResult().GetRetainedOutput()) == `{"echo":"panic: session exploded"}`
	}) {
		t.Fatalf("the call did not go on with its session's panic:\n%s", dump(evs))
	}
	if d := h.obs.decided(); d["session stop"] != 1 || len(d) != 1 {
		t.Fatalf("decisions %v, want one session stop", d)
	}
}
