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

// readTool echoes like test.echo, counts its runs, and only reads.
type readTool struct {
	echoTool
	runs *atomic.Int32
}

func (readTool) Name() string                  { return "test.read" }
func (readTool) ReadOnly(json.RawMessage) bool { return true }
func (r readTool) Execute(ctx context.Context, c tools.Call, emit tools.Emit) (json.RawMessage, error) {
	r.runs.Add(1)
	return echoTool{}.Execute(ctx, c, emit)
}

// stateReadTool only reads but streams state: its state would reach
// clients before its start, so it never runs before its start is durable.
type stateReadTool struct{ readTool }

func (stateReadTool) Name() string                 { return "test.stateread" }
func (stateReadTool) StateSchema() json.RawMessage { return json.RawMessage(`{"type":"object"}`) }

// readBlockTool blocks like test.block, and only reads.
type readBlockTool struct{ *blockTool }

func (readBlockTool) Name() string                  { return "test.readblock" }
func (readBlockTool) ReadOnly(json.RawMessage) bool { return true }

// A step whose calls only read is one commit: the answer, the call's start
// and result and the next Cycle's start. The history is the one the same
// Task records with a tool that acts, event for event.
func TestReadOnlyStepIsOneAppend(t *testing.T) {
	const calls = 3
	for _, c := range []struct {
		name, tool string
		holdFor    time.Duration
		appends    int64
	}{
		// A minute: no hold here ends by time on a loaded machine.
		{"acts", "test_echo", time.Minute, 2 + 2*calls + 1}, // its start is durable before it runs
		{"reads", "test_read", time.Minute, 2 + calls + 1},  // one commit a step
		{"reads, streams state", "test_stateread", time.Minute, 2 + 2*calls + 1},
		{"reads, never held", "test_read", -1, 2 + 2*calls + 1}, // tasks.read_hold 0
	} {
		t.Run(c.name, func(t *testing.T) {
			runs := new(atomic.Int32)
			var turns []fake.Turn
			for i := 0; i < calls; i++ {
				turns = append(turns, fake.Turn{ToolCalls: []providers.ToolCall{call("p", c.tool, fmt.Sprint("x", i))}})
			}
			h := newHarnessWith(t, fake.Sequence(append(turns, fake.Turn{Text: "done"})...), func(o *actors.Options) { o.HoldFor = c.holdFor },
				readTool{runs: runs}, stateReadTool{readTool{runs: runs}})
			id := h.create("read three times")
			evs := h.waitStatus(id, api.TaskStatus_TASK_STATUS_FINISHED)
			checkContiguous(t, evs)
			want := []string{"task_created", "user_message", "status_changed"}
			for i := 0; i <= calls; i++ {
				want = append(want, "cycle_started", "assistant_message")
				if i < calls {
					want = append(want, "tool_call_recorded", "cycle_finished", "tool_execution_started", "tool_result")
				}
			}
			want = append(want, "cycle_finished", "status_changed")
			if got := strings.Join(kinds(evs), " "); got != strings.Join(want, " ") {
				t.Fatalf("history\n%s\nwant\n%s", got, strings.Join(want, " "))
			}
			if c.tool != "test_echo" && runs.Load() != calls {
				t.Fatalf("tool ran %d times, want %d", runs.Load(), calls)
			}
			h.waitAppends(c.appends, evs)
		})
	}
}

// bigReadTool only reads, and returns (and retains) 150 KiB.
type bigReadTool struct{ readTool }

func (bigReadTool) Name() string { return "test.readbig" }
func (bigReadTool) Execute(ctx context.Context, c tools.Call, emit tools.Emit) (json.RawMessage, error) {
	return json.Marshal(map[string]string{"echo": strings.Repeat("x", 150<<10)})
}

// newReadBlock is a blocking read-only tool with its own registry, released
// before the harness stops.
func newReadBlock() (readBlockTool, *blockRegistry) {
	reg := newBlockRegistry()
	return readBlockTool{&blockTool{reg: reg}}, reg
}

// A held call that outlasts HoldFor does not hide the answer: its start is
// recorded while it still runs, and its result after it.
func TestHoldEndsAfterHoldFor(t *testing.T) {
	tool, blocks := newReadBlock()
	h := newHarnessWith(t, fake.Sequence(
		fake.Turn{Text: "reading", ToolCalls: []providers.ToolCall{call("p", "test_readblock", "k")}},
		fake.Turn{Text: "done"},
	), func(o *actors.Options) { o.HoldFor = 20 * time.Millisecond }, tool)
	t.Cleanup(blocks.releaseAll)
	id := h.create("read slowly")
	h.waitFor(id, "the call's start", func(evs []*api.Event) bool {
		return has(evs, func(e *api.Event) bool { return e.GetToolExecutionStarted() != nil })
	})
	if !blocks.isRunning("k") || has(h.history(id), func(e *api.Event) bool { return e.GetToolResult() != nil }) {
		t.Fatal("the start was recorded only once the call ended")
	}
	blocks.release("k")
	evs := h.waitStatus(id, api.TaskStatus_TASK_STATUS_FINISHED)
	checkContiguous(t, evs)
	// The creation, the first Cycle's start, the answer with the call's
	// start (at HoldFor), the result with the next Cycle's start, the end.
	h.waitAppends(5, evs)
}

// holding starts a Task whose read-only call runs (and blocks) while the
// Task holds the append that asked for it (HoldFor an hour).
func holding(t *testing.T) (*harness, *blockRegistry, string) {
	tool, blocks := newReadBlock()
	h := newHarnessWith(t, fake.Sequence(
		fake.Turn{ToolCalls: []providers.ToolCall{call("p", "test_readblock", "k")}},
		fake.Turn{Text: "done"},
	), func(o *actors.Options) { o.HoldFor = time.Hour }, tool)
	t.Cleanup(blocks.releaseAll)
	id := h.create("read")
	eventually(t, "the held call runs", func() error {
		if !blocks.isRunning("k") {
			return fmt.Errorf("not running")
		}
		return nil
	})
	return h, blocks, id
}

// A command for the Task ends the hold: what it holds is recorded first,
// then the command, as behind any append. A cancel stops the held call.
func TestCommandEndsHold(t *testing.T) {
	h, blocks, id := holding(t)
	if has(h.history(id), func(e *api.Event) bool { return e.GetAssistantMessage() != nil }) {
		t.Fatal("the answer was recorded while its read-only call ran, within HoldFor")
	}
	if _, err := h.d.Cancel(context.Background(), actors.Operator, id); err != nil {
		t.Fatalf("Cancel: %v", err)
	}
	evs := h.waitFor(id, "the call's end", func(evs []*api.Event) bool {
		return has(evs, func(e *api.Event) bool { return e.GetToolFailed() != nil })
	})
	checkContiguous(t, evs)
	if !blocks.wasCancelled("k") {
		t.Fatal("the held call was not cancelled")
	}
	want := "task_created user_message status_changed cycle_started assistant_message tool_call_recorded cycle_finished tool_execution_started status_changed tool_failed"
	if got := strings.Join(kinds(evs), " "); got != want {
		t.Fatalf("history\n%s\nwant\n%s", got, want)
	}
	if lastStatus(evs) != api.TaskStatus_TASK_STATUS_CANCELLED {
		t.Fatalf("status %v, want cancelled", lastStatus(evs))
	}
}

// A daemon that stops records what a Task holds, then the held call's
// interruption, as for any running call.
func TestStopRecordsTheHold(t *testing.T) {
	h, _, id := holding(t)
	h.restart()
	evs := h.history(id)
	checkContiguous(t, evs)
	if !has(evs, func(e *api.Event) bool { return e.GetToolExecutionStarted() != nil }) ||
		!has(evs, func(e *api.Event) bool {
			return strings.HasPrefix(e.GetToolFailed().GetMessage(), "interrupted: the daemon stopped")
		}) {
		t.Fatalf("want the call's start and its interruption; history:\n%s", dump(evs))
	}
}

// A held append stays within holdBytes: results that would make it larger
// end the hold, and are recorded after it.
func TestHoldIsBounded(t *testing.T) {
	h := newHarnessWith(t, fake.Sequence(
		fake.Turn{ToolCalls: []providers.ToolCall{call("p1", "test_readbig", "a"), call("p2", "test_readbig", "b")}},
		fake.Turn{Text: "done"},
	), func(o *actors.Options) { o.HoldFor = time.Minute }, bigReadTool{})
	id := h.create("read twice, much")
	evs := h.waitStatus(id, api.TaskStatus_TASK_STATUS_FINISHED)
	checkContiguous(t, evs)
	// The creation, the first Cycle's start, the answer with both starts
	// and one result (the hold ends at the second), the second result with
	// the next Cycle's start, the end.
	h.waitAppends(5, evs)
}

// A held append records when each of its events was decided: the answer
// at its arrival, the call's result at its own, not all of them when the
// append goes to the store.
func TestHeldEventsKeepTheirTimes(t *testing.T) {
	h, blocks, id := holding(t)
	h.skew.Add(int64(time.Hour))
	blocks.release("k")
	evs := h.waitStatus(id, api.TaskStatus_TASK_STATUS_FINISHED)
	var answered, started, resulted time.Time
	for _, e := range evs {
		switch {
		case e.GetToolCallRecorded() != nil:
			answered = e.GetTime().AsTime()
		case e.GetToolExecutionStarted() != nil:
			started = e.GetTime().AsTime()
		case e.GetToolResult() != nil:
			resulted = e.GetTime().AsTime()
		}
	}
	if resulted.Sub(answered) < time.Hour || resulted.Sub(started) < time.Hour {
		t.Fatalf("answered %v, started %v, result %v: want the result an hour after the answer and the start\n%s", answered, started, resulted, dump(evs))
	}
}
