package actors_test

import (
	"context"
	"errors"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"

	"lemo/actors"
	"lemo/api"
	"lemo/prompt"
	"lemo/providers"
	"lemo/providers/fake"
)

func call(id, tool string, text string) providers.ToolCall {
	return fake.ToolCall(id, tool, map[string]string{"text": text})
}

// A Task whose scripted model calls two tools across three Cycles finishes;
// its history reads back in order after the store is closed and reopened.
func TestTaskTwoToolsThreeCycles(t *testing.T) {
	h := newHarness(t, fake.Sequence(
		fake.Turn{Text: "let me echo", ToolCalls: []providers.ToolCall{call("p1", "test_echo", "first")}},
		fake.Turn{ToolCalls: []providers.ToolCall{call("p2", "test_live", "second")}},
		fake.Turn{Text: "all done"},
	))
	id := h.create("echo twice")
	h.waitStatus(id, api.TaskStatus_TASK_STATUS_FINISHED)

	reqs := h.model.Requests()
	if len(reqs) != 3 {
		t.Fatalf("model calls = %d, want 3", len(reqs))
	}
	if got, _ := toolMessage(reqs[2], "call-1-1"); got != `{"echo":"first"}` {
		t.Fatalf("third request's result of call-1-1 = %q", got)
	}
	if got, _ := toolMessage(reqs[2], "call-2-1"); got != `{"echo":"second"}` {
		t.Fatalf("third request's live result of call-2-1 = %q", got)
	}
	cycles, tls, _ := h.obs.snapshot()
	if cycles["fake completed"] != 3 || tls["test.echo ok"] != 1 || tls["test.live ok"] != 1 {
		t.Fatalf("observed cycles %v, tools %v", cycles, tls)
	}

	h.restart()
	evs := h.history(id)
	checkContiguous(t, evs)
	want := []string{
		"task_created", "user_message", "status_changed",
		"cycle_started", "assistant_message", "tool_call_recorded", "cycle_finished", "tool_execution_started", "tool_result",
		"cycle_started", "assistant_message", "tool_call_recorded", "cycle_finished", "tool_execution_started", "tool_result",
		"cycle_started", "assistant_message", "cycle_finished", "status_changed",
	}
	if got := strings.Join(kinds(evs), " "); got != strings.Join(want, " ") {
		t.Fatalf("history kinds:\n got %s\nwant %s", got, strings.Join(want, " "))
	}
	last := evs[len(evs)-1].GetStatusChanged()
	if last.GetStatus() != api.TaskStatus_TASK_STATUS_FINISHED {
		t.Fatalf("final status = %v", last)
	}
	if am := evs[16].GetAssistantMessage(); am.GetText() != "all done" {
		t.Fatalf("final answer = %q", am.GetText())
	}
	if u := evs[17].GetCycleFinished().GetUsage(); u.GetPromptTokens() == 0 || u.GetEstimatedPromptTokens() == 0 {
		t.Fatalf("cycle usage = %v: want provider and estimated prompt tokens", u)
	}
}

// Pause while a tool runs, continue, finish: the live result is used.
func TestPauseWhileToolRunsThenContinue(t *testing.T) {
	h := newHarness(t, fake.Sequence(
		fake.Turn{ToolCalls: []providers.ToolCall{call("p1", "test_block", "b1")}},
		fake.Turn{Text: "done"},
	))
	id := h.create("block")
	eventually(t, "tool running", func() error {
		if !h.blocks.isRunning("b1") {
			return errNotYet
		}
		return nil
	})
	if _, err := h.d.Pause(context.Background(), actors.Operator, id); err != nil {
		t.Fatalf("Pause: %v", err)
	}
	h.waitStatus(id, api.TaskStatus_TASK_STATUS_PAUSED)
	h.blocks.release("b1")
	h.waitFor(id, "tool result while paused", func(evs []*api.Event) bool {
		return has(evs, func(e *api.Event) bool { return e.GetToolResult() != nil })
	})
	if n := len(h.model.Requests()); n != 1 {
		t.Fatalf("model called %d times while paused, want 1", n)
	}
	if _, err := h.d.Continue(context.Background(), actors.Operator, id, ""); err != nil {
		t.Fatalf("Continue: %v", err)
	}
	h.waitStatus(id, api.TaskStatus_TASK_STATUS_FINISHED)
	reqs := h.model.Requests()
	if got, _ := toolMessage(reqs[1], "call-1-1"); got != `{"released":"b1"}` {
		t.Fatalf("after continue the model saw %q, want the live result", got)
	}
}

// Cancel while a tool runs: the tool's context is cancelled and the Task's
// live results are released (a follow-up sees them as unavailable).
func TestCancelWhileToolRuns(t *testing.T) {
	h := newHarness(t, fake.Sequence(
		fake.Turn{ToolCalls: []providers.ToolCall{call("p1", "test_live", "kept live")}},
		fake.Turn{ToolCalls: []providers.ToolCall{call("p2", "test_block", "b2")}},
		fake.Turn{Text: "after reopen"},
	))
	id := h.create("cancel me")
	eventually(t, "tool running", func() error {
		if !h.blocks.isRunning("b2") {
			return errNotYet
		}
		return nil
	})
	if _, err := h.d.Cancel(context.Background(), actors.Operator, id); err != nil {
		t.Fatalf("Cancel: %v", err)
	}
	evs := h.waitFor(id, "cancelled tool recorded", func(evs []*api.Event) bool {
		return has(evs, func(e *api.Event) bool {
			return e.GetToolFailed().GetKind() == api.ToolFailureKind_TOOL_FAILURE_KIND_CANCELLED
		})
	})
	if lastStatus(evs) != api.TaskStatus_TASK_STATUS_CANCELLED {
		t.Fatalf("status = %v, want cancelled", lastStatus(evs))
	}
	if !h.blocks.wasCancelled("b2") {
		t.Fatal("the tool's context was not cancelled")
	}
	if _, err := h.d.SendMessage(context.Background(), actors.Operator, id, "and now?"); err != nil {
		t.Fatalf("SendMessage: %v", err)
	}
	h.waitStatus(id, api.TaskStatus_TASK_STATUS_FINISHED)
	reqs := h.model.Requests()
	got, _ := toolMessage(reqs[2], "call-1-1")
	if got != prompt.MarkUnavailable {
		t.Fatalf("after cancel, the released live result reads %q, want the unavailable marker", got)
	}
	got, _ = toolMessage(reqs[2], "call-2-1")
	if !strings.Contains(got, "cancelled") {
		t.Fatalf("the cancelled call reads %q", got)
	}
}

// Restart: a Task that was running is paused (interrupted); its
// non-retained results are marked unavailable; continuing works and the
// model sees the markers.
func TestRestartPausesAndMarksUnavailable(t *testing.T) {
	h := newHarness(t, fake.Sequence(
		fake.Turn{ToolCalls: []providers.ToolCall{call("p1", "test_live", "gone after restart"), call("p2", "test_echo", "retained")}},
		fake.Turn{ToolCalls: []providers.ToolCall{call("p3", "test_block", "b3")}},
		fake.Turn{Text: "resumed"},
	))
	id := h.create("survive a restart")
	eventually(t, "tool running", func() error {
		if !h.blocks.isRunning("b3") {
			return errNotYet
		}
		return nil
	})
	h.restart()
	m, err := h.d.Task(context.Background(), actors.Operator, id)
	if err != nil {
		t.Fatal(err)
	}
	if m.GetStatus() != api.TaskStatus_TASK_STATUS_PAUSED || m.GetPauseReason() != api.PauseReason_PAUSE_REASON_INTERRUPTED {
		t.Fatalf("after restart: status %v reason %v, want paused interrupted", m.GetStatus(), m.GetPauseReason())
	}
	if _, err := h.d.Continue(context.Background(), actors.Operator, id, ""); err != nil {
		t.Fatalf("Continue: %v", err)
	}
	h.waitStatus(id, api.TaskStatus_TASK_STATUS_FINISHED)
	req := h.model.Requests()[2]
	if got, _ := toolMessage(req, "call-1-1"); got != prompt.MarkUnavailable {
		t.Fatalf("non-retained result after restart = %q, want the unavailable marker", got)
	}
	if got, _ := toolMessage(req, "call-1-2"); got != `{"echo":"retained"}` {
		t.Fatalf("retained result after restart = %q", got)
	}
	if got, _ := toolMessage(req, "call-2-1"); !strings.Contains(got, "interrupted") {
		t.Fatalf("the call cut by the restart reads %q, want an interruption", got)
	}
	checkContiguous(t, h.history(id))
}

// A tool that panics, a tool whose output fails its schema and a model that
// fails mid-stream each become recorded failures; other Tasks are unaffected.
func TestFailuresAreRecorded(t *testing.T) {
	midStream := &providers.Error{Provider: "fake", Class: providers.ClassTransient, Message: "connection reset"}
	h := newHarness(t, func(n int, req *providers.Request) fake.Turn {
		last := req.Messages[0].Content
		switch {
		case last == "panic" && n >= 0 && !hasTool(req):
			return fake.Turn{ToolCalls: []providers.ToolCall{call("p", "test_panic", "x")}}
		case last == "bad" && !hasTool(req):
			return fake.Turn{ToolCalls: []providers.ToolCall{call("p", "test_bad", "x")}}
		case last == "stream":
			return fake.Turn{Text: "partial answer that breaks", Err: midStream, FailAfter: 2}
		case last == "invalid" && !hasTool(req):
			return fake.Turn{ToolCalls: []providers.ToolCall{fake.ToolCall("p", "test_echo", map[string]int{"text": 5}), fake.ToolCall("q", "nope", map[string]string{})}}
		}
		return fake.Turn{Text: "fine"}
	})
	ids := map[string]string{}
	for _, r := range []string{"panic", "bad", "stream", "invalid", "healthy"} {
		ids[r] = h.create(r)
	}
	evs := h.waitStatus(ids["panic"], api.TaskStatus_TASK_STATUS_FINISHED)
	if !has(evs, func(e *api.Event) bool {
		f := e.GetToolFailed()
		return f.GetKind() == api.ToolFailureKind_TOOL_FAILURE_KIND_PANIC && strings.Contains(f.GetMessage(), "tool exploded")
	}) {
		t.Fatalf("panic not recorded:\n%s", dump(evs))
	}
	evs = h.waitStatus(ids["bad"], api.TaskStatus_TASK_STATUS_FINISHED)
	if !has(evs, func(e *api.Event) bool {
		f := e.GetToolFailed()
		return f.GetKind() == api.ToolFailureKind_TOOL_FAILURE_KIND_INVALID_OUTPUT && strings.Contains(f.GetMessage(), "echo")
	}) {
		t.Fatalf("invalid output not recorded:\n%s", dump(evs))
	}
	evs = h.waitStatus(ids["stream"], api.TaskStatus_TASK_STATUS_FAILED)
	if !has(evs, func(e *api.Event) bool {
		return e.GetFailure().GetKind() == "transient" && strings.Contains(e.GetFailure().GetMessage(), "connection reset")
	}) || !has(evs, func(e *api.Event) bool {
		return e.GetCycleFinished().GetOutcome() == api.CycleOutcome_CYCLE_OUTCOME_FAILED
	}) {
		t.Fatalf("mid-stream failure not recorded:\n%s", dump(evs))
	}
	evs = h.waitStatus(ids["invalid"], api.TaskStatus_TASK_STATUS_FINISHED)
	if !has(evs, func(e *api.Event) bool {
		return e.GetToolFailed().GetKind() == api.ToolFailureKind_TOOL_FAILURE_KIND_INVALID_INPUT && strings.Contains(e.GetToolFailed().GetMessage(), "/text")
	}) || !has(evs, func(e *api.Event) bool {
		return e.GetToolFailed().GetKind() == api.ToolFailureKind_TOOL_FAILURE_KIND_UNKNOWN_TOOL && strings.Contains(e.GetToolFailed().GetMessage(), "test_echo")
	}) || has(evs, func(e *api.Event) bool { return e.GetToolExecutionStarted() != nil }) {
		t.Fatalf("rejected calls not recorded as such:\n%s", dump(evs))
	}
	h.waitStatus(ids["healthy"], api.TaskStatus_TASK_STATUS_FINISHED)
	// The failed Task can be continued (a retry) and then answers.
	if _, err := h.d.Continue(context.Background(), actors.Operator, ids["stream"], ""); err != nil {
		t.Fatal(err)
	}
	evs = h.waitFor(ids["stream"], "second failure", func(evs []*api.Event) bool {
		n := 0
		for _, e := range evs {
			if e.GetFailure() != nil {
				n++
			}
		}
		return n == 2
	})
	checkContiguous(t, evs)
}

func hasTool(req *providers.Request) bool {
	for _, m := range req.Messages {
		if m.Role == providers.RoleTool {
			return true
		}
	}
	return false
}

func TestCommandsAreValidated(t *testing.T) {
	h := newHarness(t, fake.Echo())
	ctx := context.Background()
	cases := []struct {
		name string
		in   actors.CreateTask
		want string
	}{
		{"empty request", actors.CreateTask{Model: "fake/m"}, "request is empty"},
		{"bad model id", actors.CreateTask{Request: "x", Model: "nomodel"}, "want provider/model"},
		{"unknown provider", actors.CreateTask{Request: "x", Model: "other/m"}, "unknown provider"},
		{"unknown model", actors.CreateTask{Request: "x", Model: "fake/zzz"}, "not found"},
		{"unknown tool", actors.CreateTask{Request: "x", Model: "fake/m", Tools: []string{"nope"}, ToolsRestricted: true}, "unknown tool"},
		{"relative workspace", actors.CreateTask{Request: "x", Model: "fake/m", Workspace: "rel"}, "absolute"},
		{"NUL in the request", actors.CreateTask{Request: "title\x00hidden", Model: "fake/m"}, "control character U+0000"},
		{"escape in the request", actors.CreateTask{Request: "\x1b[31mred", Model: "fake/m"}, "control character U+001B"},
		{"invalid UTF-8", actors.CreateTask{Request: "caf\xe9", Model: "fake/m"}, "not valid UTF-8"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := h.d.CreateTask(ctx, actors.Operator, c.in)
			if !errors.Is(err, actors.ErrInvalid) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err = %v, want ErrInvalid mentioning %q", err, c.want)
			}
		})
	}
	if _, err := h.d.Pause(ctx, actors.Operator, "01ARZ3NDEKTSV4RRFFQ69G5FAV"); !errors.Is(err, actors.ErrNotFound) {
		t.Fatalf("Pause(unknown) err = %v, want ErrNotFound", err)
	}
	if _, err := h.d.Pause(ctx, actors.Operator, "bad/id"); !errors.Is(err, actors.ErrInvalid) {
		t.Fatalf("Pause(bad id) err = %v, want ErrInvalid", err)
	}
	id := h.create("hello")
	h.waitStatus(id, api.TaskStatus_TASK_STATUS_FINISHED)
	_, err := h.d.Pause(ctx, actors.Operator, id)
	if err == nil || !strings.Contains(err.Error(), "finished") {
		t.Fatalf("Pause(finished) err = %v", err)
	}
	// Another owner cannot see or control the Task.
	bob := actors.Caller{Owner: "bob"}
	if _, err := h.d.SendMessage(ctx, bob, id, "hi"); !errors.Is(err, actors.ErrNotFound) {
		t.Fatalf("foreign SendMessage err = %v, want ErrNotFound", err)
	}
	if _, err := h.d.History(ctx, bob, id, 1, 0); !errors.Is(err, actors.ErrNotFound) {
		t.Fatalf("foreign History err = %v, want ErrNotFound", err)
	}
}

// A step is two appends (two commits for a Task alone): the model's answer
// with the start of the call it asks for, and the call's result with the
// next Cycle's start; the final answer carries the Task's end. The
// creation is an append of its own (its answer to the creator goes out
// before the first Cycle starts), and so is the first Cycle's start.
func TestStepIsTwoAppends(t *testing.T) {
	runs := new(atomic.Int32)
	const calls = 3
	var turns []fake.Turn
	for i := 0; i < calls; i++ {
		turns = append(turns, fake.Turn{ToolCalls: []providers.ToolCall{call("p", "test_count", "x")}})
	}
	h := newHarness(t, fake.Sequence(append(turns, fake.Turn{Text: "done"})...), countTool{runs: runs})
	id := h.create("count three times")
	evs := h.waitStatus(id, api.TaskStatus_TASK_STATUS_FINISHED)
	checkContiguous(t, evs)
	if runs.Load() != calls {
		t.Fatalf("tool ran %d times, want %d", runs.Load(), calls)
	}
	h.waitAppends(int64(2+2*calls+1), evs)
}

// A finished Task that stays in memory (until it passivates) holds its own
// state, not its history or what its Cycles and calls were given: their
// stopped actors can outlive their stop (protoactor keeps the last child's
// PID, process and actor in its parent's set of children). Measured as
// the live heap that 150 more finished Tasks of ten steps add.
func TestFinishedTaskHoldsLittle(t *testing.T) {
	plan := func(n int, req *providers.Request) fake.Turn {
		results := 0
		for _, m := range req.Messages {
			if m.Role == providers.RoleTool {
				results++
			}
		}
		if results < 10 {
			return fake.Turn{ToolCalls: []providers.ToolCall{call("p", "test_echo", strings.Repeat("x", 50))}}
		}
		return fake.Turn{Text: "done"}
	}
	h := newHarness(t, plan)
	run := func(n int) uint64 {
		ids := make([]string, n)
		for i := range ids {
			ids[i] = h.create("go")
		}
		for _, id := range ids {
			h.waitStatus(id, api.TaskStatus_TASK_STATUS_FINISHED)
		}
		h.model.ForgetRequests()
		runtime.GC()
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		return ms.HeapAlloc
	}
	before := run(50)
	// Few enough that the store's memtable never rotates here (an arena
	// more or less would swamp the figure).
	const n = 150
	after := run(n)
	// What it held before: some 30 KB (its history, with its Cycles'
	// input summaries, and its last Cycle's and call's inputs).
	per := (int64(after) - int64(before)) / n
	t.Logf("a finished Task holds %d bytes", per)
	if per > 16<<10 {
		t.Fatalf("a finished Task holds %d bytes of live heap, want at most 16 KiB", per)
	}
}
