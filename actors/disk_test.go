package actors_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"lemo/actors"
	"lemo/actors/live"
	"lemo/api"
	"lemo/persistence"
	"lemo/providers"
	"lemo/providers/fake"
	"lemo/tools"
)

// When the disk turns full while a Task runs a tool, the tool is stopped
// and the Task pauses with reason disk_full (recorded in the store's
// reserve); new work is refused; once space is back the Task continues by
// itself and finishes, and a Task the disk did not pause is left as it is.
func TestDiskFullPausesAndResumes(t *testing.T) {
	var free atomic.Int64
	free.Store(1 << 40)
	h, reserve := diskHarness(t, &free)
	id := h.create("fill the disk")
	eventually(t, "the tool runs", func() error {
		if !h.blocks.isRunning("fill") {
			return errNotYet
		}
		return nil
	})
	other, err := h.d.CreateTask(context.Background(), actors.Operator, actors.CreateTask{Request: "not paused by the disk", Model: "fake/healthy"})
	if err != nil {
		t.Fatal(err)
	}
	h.waitStatus(other.GetTaskId(), api.TaskStatus_TASK_STATUS_FINISHED)

	free.Store(0) // the disk is full (the reserve is still there)
	evs := h.waitFor(id, "paused for the full disk", func(evs []*api.Event) bool {
		sc := evs[len(evs)-1].GetStatusChanged()
		return sc.GetStatus() == api.TaskStatus_TASK_STATUS_PAUSED && sc.GetPauseReason() == api.PauseReason_PAUSE_REASON_DISK_FULL
	})
	if !h.blocks.wasCancelled("fill") {
		t.Fatal("the running tool was not stopped when the disk turned full")
	}
	if !has(evs, func(e *api.Event) bool {
		return e.GetToolFailed().GetCallId() == "call-1-1" && e.GetToolFailed().GetKind() == api.ToolFailureKind_TOOL_FAILURE_KIND_CANCELLED
	}) {
		t.Fatalf("the stopped call was not closed as cancelled:\n%s", dump(evs))
	}
	checkContiguous(t, evs)
	if _, err := os.Stat(reserve); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("reserve file while paused on a full disk: %v, want it released for the pause", err)
	}
	if _, err := h.d.CreateTask(context.Background(), actors.Operator, actors.CreateTask{Request: "more", Model: "fake/healthy"}); !errors.Is(err, persistence.ErrDiskFull) {
		t.Fatalf("CreateTask on a full disk: %v, want ErrDiskFull", err)
	}
	if _, err := h.d.SendMessage(context.Background(), actors.Operator, other.GetTaskId(), "reopen"); !errors.Is(err, actors.ErrNoSpace) {
		t.Fatalf("SendMessage on a full disk: %v, want ErrNoSpace", err)
	}

	free.Store(1 << 40) // space is back
	evs = h.waitStatus(id, api.TaskStatus_TASK_STATUS_FINISHED)
	if !has(evs, func(e *api.Event) bool { return e.GetAssistantMessage().GetText() == "done after the disk" }) {
		t.Fatalf("the Task did not continue to its answer:\n%s", dump(evs))
	}
	checkContiguous(t, evs)
	if _, err := os.Stat(reserve); err != nil {
		t.Fatalf("reserve file once space is back: %v", err)
	}
	if m, _ := h.d.Task(context.Background(), actors.Operator, other.GetTaskId()); m.GetStatus() != api.TaskStatus_TASK_STATUS_FINISHED {
		t.Fatalf("a Task that was not paused by the disk: %v after space came back, want it left finished", m.GetStatus())
	}
}

// A call whose result the full disk refused is closed by the pause without
// it; its live output (here the stopped tool's, empty) is released then,
// not kept (with any spill file on that disk) until the Task's actor
// stops.
func TestDiskFullReleasesUnrecordedResults(t *testing.T) {
	var free atomic.Int64
	free.Store(1 << 40)
	lv := newLive(t, live.Limits{})
	h, _ := diskHarnessLive(t, &free, lv)
	id := h.create("fill the disk")
	eventually(t, "the tool runs", func() error {
		if !h.blocks.isRunning("fill") {
			return errNotYet
		}
		return nil
	})
	if u := lv.Usage(); u.Results != 1 {
		t.Fatalf("live results while the tool runs: %+v, want 1", u)
	}
	free.Store(0)
	h.waitFor(id, "paused for the full disk", func(evs []*api.Event) bool {
		sc := evs[len(evs)-1].GetStatusChanged()
		return sc.GetPauseReason() == api.PauseReason_PAUSE_REASON_DISK_FULL
	})
	if u := lv.Usage(); u.Results != 0 {
		t.Fatalf("live results once the pause is recorded: %+v, want none", u)
	}
}

// diskHarness is a harness whose store reads its free space from free (plus
// the reserve's 16 MiB once released), with a model that runs test.block
// ("fill") and then answers.
func diskHarness(t *testing.T, free *atomic.Int64) (*harness, string) {
	return diskHarnessLive(t, free, nil)
}

// diskHarnessLive is diskHarness keeping the live results in lv (nil: the
// daemon's default).
func diskHarnessLive(t *testing.T, free *atomic.Int64, lv *live.Accountant) (*harness, string) {
	h := &harness{t: t, dir: t.TempDir(), blocks: newBlockRegistry(), obs: newCountingObserver(), live: lv}
	reserve := filepath.Join(h.dir, "space.reserve")
	h.freeBytes = func(string) (int64, error) {
		f := free.Load()
		if _, err := os.Stat(reserve); err != nil {
			f += 16 << 20 // the released reserve (2 memtables of 8 MiB)
		}
		return f, nil
	}
	h.model = fake.NewScriptedModel("m", 8192, fake.Sequence(
		fake.Turn{ToolCalls: []providers.ToolCall{call("p1", "test_block", "fill")}},
		fake.Turn{Text: "done after the disk"},
	))
	h.tools = tools.NewRegistry()
	if err := h.tools.Register(&blockTool{reg: h.blocks}); err != nil {
		t.Fatal(err)
	}
	h.opts = actors.Options{WorkspaceRoot: t.TempDir(), ToolGrace: 5 * time.Second, ShutdownTimeout: 20 * time.Second}
	h.start()
	t.Cleanup(h.close)
	return h, reserve
}

// When not even the pause fits (the disk is full beyond the reserve), the
// Task stops its tool, starts nothing and records nothing; it records the
// pause once space is back, and continues.
func TestDiskFullPauseWaitsForSpace(t *testing.T) {
	var free atomic.Int64
	free.Store(1 << 40)
	h, _ := diskHarness(t, &free)
	id := h.create("fill the disk")
	eventually(t, "the tool runs", func() error {
		if !h.blocks.isRunning("fill") {
			return errNotYet
		}
		return nil
	})
	before := len(h.history(id))
	free.Store(-16 << 20) // nothing free, even once the reserve is released
	eventually(t, "the tool stopped", func() error {
		if !h.blocks.wasCancelled("fill") {
			return errNotYet
		}
		return nil
	})
	if evs := h.history(id); len(evs) != before || lastStatus(evs) != api.TaskStatus_TASK_STATUS_RUNNING {
		t.Fatalf("with no space at all the task recorded %d events (status %v), want none:\n%s", len(evs)-before, lastStatus(evs), dump(evs))
	}
	free.Store(1 << 40)
	evs := h.waitStatus(id, api.TaskStatus_TASK_STATUS_FINISHED)
	if !has(evs, func(e *api.Event) bool {
		return e.GetStatusChanged().GetPauseReason() == api.PauseReason_PAUSE_REASON_DISK_FULL
	}) {
		t.Fatalf("the pause for the full disk was never recorded:\n%s", dump(evs))
	}
	checkContiguous(t, evs)
}
