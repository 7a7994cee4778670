package actors_test

import (
	"strings"
	"testing"

	"lemo/api"
	"lemo/persistence"
	"lemo/providers"
	"lemo/providers/fake"
	"lemo/tools/tasks"
)


// treePlan answers by the last message: a script keyed by markers.
func treePlan(answer func(last string, tool bool) fake.Turn) fake.Plan {
	return func(n int, req *providers.Request) fake.Turn {
		m := req.Messages[len(req.Messages)-1]
		return answer(m.Content, m.Role == providers.RoleTool)
	}
}

func newTreeHarness(t *testing.T, plan fake.Plan) *harness {
	t.Helper()
	var h *harness
	h = newHarness(t, plan, tasks.NewTree(lazyStoreOf(&h))...)
	return h
}

// lazyStoreOf reads the harness *p points to once a tool runs.
func lazyStoreOf(p **harness) tasks.Store { return lazyPtr{p} }

type lazyPtr struct{ p **harness }

func (s lazyPtr) Meta(task string) (*api.TaskMeta, error) { return (*s.p).store.Meta(task) }
func (s lazyPtr) ListTasks(o persistence.ListOptions) ([]*api.TaskMeta, string, error) {
	return (*s.p).store.ListTasks(o)
}
func (s lazyPtr) ReadEvents(task string, from uint64, limit int) ([]*api.Event, error) {
	return (*s.p).store.ReadEvents(task, from, limit)
}

func TestTreeSpawnWaitInProcess(t *testing.T) {
	h := newTreeHarness(t, treePlan(func(last string, tool bool) fake.Turn {
		switch {
		case tool:
			return fake.Turn{Text: "parent got: " + last}
		case strings.Contains(last, "CHILD"):
			return fake.Turn{Text: "child answer"}
		default:
			return fake.Turn{ToolCalls: []providers.ToolCall{fake.ToolCall("c1", "tasks_spawn", map[string]any{"request": "CHILD x", "wait": true, "timeout": 10})}}
		}
	}))
	id := h.create("PARENT")
	defer func() {
		for _, ev := range h.history(id) {
			if cs := ev.GetChildSpawned(); cs != nil {
				t.Logf("child:\n%s", dump(h.history(cs.GetChildId())))
			}
		}
	}()
	evs := h.waitStatus(id, api.TaskStatus_TASK_STATUS_FINISHED)
	t.Log(dump(evs))
}
