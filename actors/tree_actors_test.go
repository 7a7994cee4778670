package actors_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"lemo/actors"
	"lemo/api"
	"lemo/providers"
	"lemo/providers/fake"
	"lemo/tools"
	"lemo/tools/tasks"
)

// taskRow returns the live actor of Task id.
func taskRow(d *actors.Daemon, id string) (actors.ActorInfo, bool) {
	for _, a := range d.Inspect() {
		if a.Kind == "task" && strings.HasSuffix(a.ID, "/"+id) {
			return a, true
		}
	}
	return actors.ActorInfo{}, false
}

// underParent waits until the actor of Task child runs as a child of the
// actor of Task parent, which is a child of the task manager.
func underParent(t *testing.T, d *actors.Daemon, parent, child string) {
	t.Helper()
	eventually(t, "the child's actor under its parent's", func() error {
		p, ok := taskRow(d, parent)
		c, ok2 := taskRow(d, child)
		if !ok || !ok2 {
			return fmt.Errorf("actors: parent %v, child %v: %w", ok, ok2, errNotYet)
		}
		if !strings.HasSuffix(p.ID, "/tasks/"+parent) || c.ID != p.ID+"/"+child {
			return fmt.Errorf("parent's actor %s, child's %s; want the child's under the parent's", p.ID, c.ID)
		}
		return nil
	})
}

// A running child's actor is a child of its parent's actor, and the
// parent stays active while it runs even once the parent finished and
// its idle time passed (passivating it would stop the child's actor).
func TestTreeChildActorUnderParent(t *testing.T) {
	release := make(chan struct{})
	var h *harness
	plan := treePlan(func(last string, tool bool) fake.Turn {
		switch {
		case strings.Contains(last, "CHILD"):
			return fake.Turn{Text: "child done", Wait: release}
		case last == "PARENT":
			return fake.Turn{ToolCalls: []providers.ToolCall{fake.ToolCall("c1", "tasks_spawn", map[string]any{"request": "CHILD x"})}}
		default:
			return fake.Turn{Text: "done: " + last}
		}
	})
	h = newHarnessWith(t, plan, func(o *actors.Options) { o.IdleTimeout = 50 * time.Millisecond }, tasks.NewTree(lazyStoreOf(&h))...)
	id := h.create("PARENT")
	evs := h.waitStatus(id, api.TaskStatus_TASK_STATUS_FINISHED)
	child := ""
	for _, ev := range evs {
		if cs := ev.GetChildSpawned(); cs != nil {
			child = cs.GetChildId()
		}
	}
	if child == "" {
		t.Fatalf("no child spawned:\n%s", dump(evs))
	}
	underParent(t, h.d, id, child)
	// A Task created after the parent finished passivates; the parent,
	// idle for longer, does not while its child runs.
	other := h.create("OTHER")
	h.waitStatus(other, api.TaskStatus_TASK_STATUS_FINISHED)
	eventually(t, "the other Task passivated", func() error {
		if _, ok := taskRow(h.d, other); ok {
			return errNotYet
		}
		return nil
	})
	underParent(t, h.d, id, child)
	close(release)
	cevs := h.waitStatus(child, api.TaskStatus_TASK_STATUS_FINISHED)
	if has(cevs, func(e *api.Event) bool {
		return e.GetStatusChanged().GetPauseReason() == api.PauseReason_PAUSE_REASON_INTERRUPTED
	}) {
		t.Fatalf("the child was interrupted (its actor stopped with its parent's):\n%s", dump(cevs))
	}
	eventually(t, "both passivated", func() error {
		_, p := taskRow(h.d, id)
		_, c := taskRow(h.d, child)
		if p || c {
			return errNotYet
		}
		return nil
	})
}

// A child activated while its parent is dormant (continued after a
// restart) activates its parent first and runs under it.
func TestTreeDormantParentActivatedFirst(t *testing.T) {
	release := make(chan struct{})
	var h *harness
	plan := treePlan(func(last string, tool bool) fake.Turn {
		switch {
		case strings.Contains(last, "CHILD"):
			return fake.Turn{Text: "child done", Wait: release}
		case last == "PARENT":
			return fake.Turn{ToolCalls: []providers.ToolCall{fake.ToolCall("c1", "tasks_spawn", map[string]any{"request": "CHILD x"})}}
		default:
			return fake.Turn{Text: "done: " + last}
		}
	})
	h = newTreeHarness(t, plan)
	id := h.create("PARENT")
	evs := h.waitStatus(id, api.TaskStatus_TASK_STATUS_FINISHED)
	child := ""
	for _, ev := range evs {
		if cs := ev.GetChildSpawned(); cs != nil {
			child = cs.GetChildId()
		}
	}
	h.waitFor(child, "its Cycle", func(evs []*api.Event) bool {
		return has(evs, func(e *api.Event) bool { return e.GetCycleStarted() != nil })
	})
	h.restart()
	if _, ok := taskRow(h.d, id); ok {
		t.Fatal("the parent is active right after the restart")
	}
	h.waitStatus(child, api.TaskStatus_TASK_STATUS_PAUSED)
	if _, err := h.d.Continue(context.Background(), actors.Operator, child, ""); err != nil {
		t.Fatalf("Continue the child: %v", err)
	}
	underParent(t, h.d, id, child)
	close(release)
	h.waitStatus(child, api.TaskStatus_TASK_STATUS_FINISHED)
}

// A child Task's actor that keeps crashing is decided by its parent's
// supervision: restarted from its history within the budget (each crash
// recorded with decision restart), then stopped and recorded failed, and
// the parent is told (its wait returns the failure). The decisions are
// the parent's, at level child_task; the manager decides none.
func TestTreeChildCrashDecidedByParent(t *testing.T) {
	crashes := new(atomic.Int32)
	var h *harness
	plan := treePlan(func(last string, tool bool) fake.Turn {
		switch {
		case strings.Contains(last, "CHILD"):
			return fake.Turn{ToolCalls: []providers.ToolCall{call("p", "test_crashy", "x")}}
		case last == "PARENT":
			return fake.Turn{ToolCalls: []providers.ToolCall{fake.ToolCall("c1", "tasks_spawn", map[string]any{"request": "CHILD x", "wait": true, "timeout": 60})}}
		default:
			return fake.Turn{Text: "parent saw: " + last}
		}
	})
	h = newHarness(t, plan, append(tasks.NewTree(lazyStoreOf(&h)), crashyTool{crashes: crashes})...)
	id := h.create("PARENT")
	var child string
	h.waitFor(id, "a child", func(evs []*api.Event) bool {
		for _, ev := range evs {
			if cs := ev.GetChildSpawned(); cs != nil {
				child = cs.GetChildId()
			}
		}
		return child != ""
	})
	for i := 1; i <= 3; i++ {
		h.waitFor(child, fmt.Sprintf("pause %d after a crash", i), interrupted(i))
		if i == 1 {
			underParent(t, h.d, id, child) // the restarted child's actor is still the parent's child
		}
		if _, err := h.d.Continue(context.Background(), actors.Operator, child, ""); err != nil {
			t.Fatalf("Continue %d: %v", i, err)
		}
	}
	cevs := h.waitStatus(child, api.TaskStatus_TASK_STATUS_FAILED)
	fs := failures(cevs, api.FailureScope_FAILURE_SCOPE_TASK)
	want := []string{"restart", "restart", "restart", "stop"}
	if len(fs) != len(want) {
		t.Fatalf("%d Task failures recorded, want %d:\n%s", len(fs), len(want), dump(cevs))
	}
	for i, f := range fs {
		if f.GetDecision() != want[i] || f.GetCrashes() != uint32(i+1) {
			t.Errorf("failure %d = %v, want decision %s after crash %d", i+1, f, want[i], i+1)
		}
	}
	pevs := h.waitStatus(id, api.TaskStatus_TASK_STATUS_FINISHED)
	if !has(pevs, func(e *api.Event) bool {
		return e.GetChildEnded().GetChildId() == child && e.GetChildEnded().GetStatus() == api.TaskStatus_TASK_STATUS_FAILED
	}) {
		t.Fatalf("the parent was not told that its child failed:\n%s", dump(pevs))
	}
	if d := h.obs.decided(); d["child_task restart"] != 3 || d["child_task stop"] != 1 || d["task restart"]+d["task stop"] != 0 {
		t.Fatalf("decisions %v, want 3 child_task restarts and 1 stop, none by the manager", d)
	}
	eventually(t, "the parent's row", func() error {
		row, ok := taskRow(h.d, id)
		if !ok {
			return fmt.Errorf("the parent is not active: %w", errNotYet)
		}
		if row.StoppedChildren != 1 || !strings.HasPrefix(row.LastDecision, child+": stop (panic): approval rule bug") {
			return fmt.Errorf("the parent's row = %+v, want one stopped child Task and its decision", row)
		}
		return nil
	})
	if row, ok := actorRow(h.d, "tasks"); !ok || row.StoppedChildren != 0 || row.LastDecision != "" {
		t.Fatalf("the manager's row = %+v (found %v), want no decision of its own", row, ok)
	}
}

// crashOnceTool's approval rule panics the first time it is evaluated.
type crashOnceTool struct {
	echoTool
	crashes *atomic.Int32
}

func (crashOnceTool) Name() string { return "test.crash_once" }
func (c crashOnceTool) Approval(json.RawMessage) tools.Approval {
	if c.crashes.Add(1) == 1 {
		panic("approval rule bug")
	}
	return tools.Approval{}
}

// A parent's crash restarts its subtree: the running child's actor stops
// with the parent's, is activated again under the parent's next
// incarnation and recovers from its history (paused, interrupted);
// continuing the parent continues it, and it finishes.
func TestTreeParentRestartRecoversChild(t *testing.T) {
	release := make(chan struct{})
	crashes := new(atomic.Int32)
	// The parent crashes only once its child's model call is under way,
	// so that the child has started (its Cycle's start is durable before
	// the call) and recovers as interrupted; else it would still be
	// queued, which another test covers.
	childCalling := make(chan struct{})
	called := sync.OnceFunc(func() { close(childCalling) })
	var h *harness
	plan := treePlan(func(last string, tool bool) fake.Turn {
		switch {
		case strings.Contains(last, "CHILD"):
			called()
			return fake.Turn{Text: "child done", Wait: release}
		case last == "PARENT":
			return fake.Turn{ToolCalls: []providers.ToolCall{fake.ToolCall("c1", "tasks_spawn", map[string]any{"request": "CHILD x"})}}
		case tool && crashes.Load() == 0:
			return fake.Turn{ToolCalls: []providers.ToolCall{call("p", "test_crash_once", "x")}, Wait: childCalling}
		default:
			return fake.Turn{Text: "parent done"}
		}
	})
	h = newHarness(t, plan, append(tasks.NewTree(lazyStoreOf(&h)), crashOnceTool{crashes: crashes})...)
	id := h.create("PARENT")
	h.waitFor(id, "pause after the crash", interrupted(1))
	child := ""
	for _, ev := range h.history(id) {
		if cs := ev.GetChildSpawned(); cs != nil {
			child = cs.GetChildId()
		}
	}
	cevs := h.waitFor(child, "its pause with the parent's restart", interrupted(1))
	if fs := failures(cevs, api.FailureScope_FAILURE_SCOPE_TASK); len(fs) != 0 {
		t.Fatalf("the child recorded a crash of its own: %v", fs)
	}
	underParent(t, h.d, id, child)
	if d := h.obs.decided(); d["task restart"] != 1 || d["child_task restart"]+d["child_task stop"] != 0 {
		t.Fatalf("decisions %v, want the parent's one restart and none about the child", d)
	}
	if _, err := h.d.Continue(context.Background(), actors.Operator, id, ""); err != nil {
		t.Fatalf("Continue the parent: %v", err)
	}
	close(release)
	h.waitStatus(child, api.TaskStatus_TASK_STATUS_FINISHED)
	h.waitStatus(id, api.TaskStatus_TASK_STATUS_FINISHED)
}
