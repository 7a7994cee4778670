package actors_test

import (
	"context"
	"encoding/json"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"lemo/actors"
	"lemo/api"
	"lemo/persistence"
	"lemo/providers"
	"lemo/providers/fake"
	"lemo/tools"
)

// crashyTool's approval rule panics: a bug that crashes the Task actor
// itself (approval rules are evaluated inside the Task).
type crashyTool struct {
	echoTool
	crashes *atomic.Int32
}

func (crashyTool) Name() string { return "test.crashy" }
func (c crashyTool) Approval(json.RawMessage) tools.Approval {
	c.crashes.Add(1)
	panic("approval rule bug")
}

func TestTaskActorCrashRestartsFromHistory(t *testing.T) {
	crashes := new(atomic.Int32)
	h := newHarness(t, fake.Sequence(
		fake.Turn{ToolCalls: []providers.ToolCall{call("p", "test_crashy", "x")}},
	), crashyTool{crashes: crashes})
	other := newHarnessTaskThatFinishes(t, h)
	id := h.create("crash the task")
	evs := h.waitFor(id, "pause after the crash", func(evs []*api.Event) bool {
		return has(evs, func(e *api.Event) bool {
			return e.GetStatusChanged().GetPauseReason() == api.PauseReason_PAUSE_REASON_INTERRUPTED
		})
	})
	if crashes.Load() != 1 {
		t.Fatalf("crashes = %d, want 1", crashes.Load())
	}
	checkContiguous(t, evs)
	h.waitStatus(other, api.TaskStatus_TASK_STATUS_FINISHED)

	// It keeps crashing on every continue: after the budget (3 restarts) it
	// is stopped and recorded as failed.
	for i := 0; i < 3; i++ {
		if _, err := h.d.Continue(context.Background(), actors.Operator, id, ""); err != nil {
			t.Fatalf("Continue %d: %v", i, err)
		}
		want := int32(i + 2)
		eventually(t, "next crash", func() error {
			if crashes.Load() < want {
				return errNotYet
			}
			return nil
		})
		if i < 2 {
			h.waitFor(id, "paused again", func(evs []*api.Event) bool {
				n := 0
				for _, e := range evs {
					if e.GetStatusChanged().GetPauseReason() == api.PauseReason_PAUSE_REASON_INTERRUPTED {
						n++
					}
				}
				return n == i+2
			})
		}
	}
	evs = h.waitStatus(id, api.TaskStatus_TASK_STATUS_FAILED)
	if !has(evs, func(e *api.Event) bool {
		return e.GetFailure().GetScope() == api.FailureScope_FAILURE_SCOPE_TASK && strings.Contains(e.GetFailure().GetMessage(), "approval rule bug")
	}) {
		t.Fatalf("task failure not recorded:\n%s", dump(evs))
	}
	checkContiguous(t, evs)
	if _, _, crashed := h.obs.snapshot(); crashed["restart"] != 3 || crashed["stop"] != 1 {
		t.Fatalf("observed crashes %v, want 3 restarts and 1 stop", crashed)
	}
	// The failed Task still answers commands (a fresh activation).
	if _, err := h.d.Cancel(context.Background(), actors.Operator, id); err != nil {
		t.Fatalf("Cancel after failure: %v", err)
	}
}

// newHarnessTaskThatFinishes starts a healthy Task beside a crashing one.
func newHarnessTaskThatFinishes(t *testing.T, h *harness) string {
	t.Helper()
	m, err := h.d.CreateTask(context.Background(), actors.Operator, actors.CreateTask{Request: "healthy", Model: "fake/healthy"})
	if err != nil {
		t.Fatal(err)
	}
	return m.GetTaskId()
}

// A daemon that died with a call executing and another recorded but not
// started: at startup the first becomes outcome unknown (never re-run), the
// Task is paused as interrupted, and continuing runs only the second.
func TestRecoveryMarksOutcomeUnknown(t *testing.T) {
	h := newHarness(t, fake.Sequence(
		fake.Turn{Text: "recovered"},
	))
	h.stop()
	id := persistence.NewTaskID(time.Now())
	writeHistory(t, h.dir, id,
		&api.TaskCreated{Owner: "operator", Model: "fake/m", Title: "crashed"},
		&api.UserMessage{Text: "do two things"},
		&api.StatusChanged{Status: api.TaskStatus_TASK_STATUS_RUNNING},
		&api.CycleStarted{Cycle: 1, Model: "fake/m"},
		&api.AssistantMessage{Cycle: 1, ToolCallIds: []string{"call-1-1", "call-1-2"}},
		&api.ToolCallRecorded{CallId: "call-1-1", Cycle: 1, Tool: "test.echo", Arguments: []byte(`{"text":"ran"}`), ModelName: "test_echo"},
		&api.ToolCallRecorded{CallId: "call-1-2", Cycle: 1, Tool: "test.echo", Arguments: []byte(`{"text":"not yet"}`), ModelName: "test_echo"},
		&api.CycleFinished{Cycle: 1, Outcome: api.CycleOutcome_CYCLE_OUTCOME_COMPLETED},
		&api.ToolExecutionStarted{CallId: "call-1-1"},
	)
	h.start()
	evs := h.history(id)
	if lastStatus(evs) != api.TaskStatus_TASK_STATUS_PAUSED {
		t.Fatalf("after startup:\n%s", dump(evs))
	}
	if !has(evs, func(e *api.Event) bool {
		return e.GetToolFailed().GetCallId() == "call-1-1" && e.GetToolFailed().GetKind() == api.ToolFailureKind_TOOL_FAILURE_KIND_OUTCOME_UNKNOWN
	}) {
		t.Fatalf("call-1-1 not marked outcome unknown:\n%s", dump(evs))
	}
	if _, err := h.d.Continue(context.Background(), actors.Operator, id, ""); err != nil {
		t.Fatal(err)
	}
	evs = h.waitStatus(id, api.TaskStatus_TASK_STATUS_FINISHED)
	starts := 0
	for _, e := range evs {
		if s := e.GetToolExecutionStarted(); s != nil {
			starts++
			if s.GetCallId() == "call-1-1" && e.GetSeq() > 9 {
				t.Fatalf("call-1-1 was executed again:\n%s", dump(evs))
			}
		}
	}
	if starts != 2 {
		t.Fatalf("execution starts = %d, want 2 (the original call-1-1 and call-1-2):\n%s", starts, dump(evs))
	}
	req := h.model.Requests()[0]
	if got, _ := toolMessage(req, "call-1-1"); !strings.HasPrefix(got, "[outcome unknown") {
		t.Fatalf("model saw %q for call-1-1", got)
	}
	if got, _ := toolMessage(req, "call-1-2"); got != `{"echo":"not yet"}` {
		t.Fatalf("model saw %q for call-1-2", got)
	}
	checkContiguous(t, evs)
}

// writeHistory appends bodies as a Task's history straight into the store.
func writeHistory(t *testing.T, dir, id string, bodies ...proto.Message) {
	t.Helper()
	dd, err := persistence.OpenDataDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer dd.Close()
	st, err := persistence.Open(dd, persistence.Options{Log: testLog(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	var evs []*api.Event
	for i, b := range bodies {
		evs = append(evs, api.NewEvent(id, uint64(i+1), timestamppb.Now(), b))
	}
	if _, err := st.Append(context.Background(), persistence.Append{TaskID: id, Events: evs}); err != nil {
		t.Fatal(err)
	}
}
