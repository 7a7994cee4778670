package actors_test

import (
	"strings"
	"testing"

	"lemo/actors"
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

// A spawn with wait returns the child's answer; the child names its
// parent and the parent records its spawn and its end.
func TestTreeSpawnWaitInProcess(t *testing.T) {
	h := newTreeHarness(t, treePlan(func(last string, tool bool) fake.Turn {
		switch {
		case tool:
			return fake.Turn{Text: "parent got: " + last}
		case strings.Contains(last, "CHILD"):
			return fake.Turn{Text: "child answer"}
		case last == "PARENT":
			return fake.Turn{ToolCalls: []providers.ToolCall{fake.ToolCall("c1", "tasks_spawn", map[string]any{"request": "CHILD x", "wait": true, "timeout": 10})}}
		default:
			return fake.Turn{Text: "parent saw: " + last}
		}
	}))
	id := h.create("PARENT")
	evs := h.waitStatus(id, api.TaskStatus_TASK_STATUS_FINISHED)
	var child string
	ended := false
	for _, ev := range evs {
		if cs := ev.GetChildSpawned(); cs != nil {
			child = cs.GetChildId()
		}
		if ce := ev.GetChildEnded(); ce != nil && ce.GetChildId() == child && ce.GetAnswer() == "child answer" {
			ended = true
		}
	}
	if child == "" || !ended {
		t.Fatalf("parent history lacks the child's spawn or end:\n%s", dump(evs))
	}
	if tc := h.history(child)[0].GetTaskCreated(); tc.GetParentId() != id || tc.GetDepth() != 1 {
		t.Fatalf("child TaskCreated = %v", tc)
	}
	var result string
	for _, ev := range evs {
		if r := ev.GetToolResult(); r != nil {
			result = string(r.GetRetainedOutput())
		}
	}
	if !strings.Contains(result, `"answer":"child answer"`) || !strings.Contains(result, `"status":"finished"`) {
		t.Fatalf("spawn result = %q, want the child's answer in it", result)
	}
}

// With one running child allowed daemon-wide, a second spawn queues and
// says so, and starts when the first ends.
func TestTreeRunningChildrenQueue(t *testing.T) {
	release := make(chan struct{})
	var h *harness
	plan := treePlan(func(last string, tool bool) fake.Turn {
		switch {
		case strings.Contains(last, "CHILD-1"):
			return fake.Turn{Text: "one", Wait: release}
		case strings.Contains(last, "CHILD-2"):
			return fake.Turn{Text: "two"}
		case last != "PARENT":
			return fake.Turn{Text: "spawned: " + last}
		default:
			return fake.Turn{ToolCalls: []providers.ToolCall{
				fake.ToolCall("c1", "tasks_spawn", map[string]any{"request": "CHILD-1"}),
				fake.ToolCall("c2", "tasks_spawn", map[string]any{"request": "CHILD-2"}),
			}}
		}
	})
	h = newHarnessWith(t, plan, func(o *actors.Options) { o.MaxRunningChildren = 1; o.MaxParallelTools = 1 }, tasks.NewTree(lazyStoreOf(&h))...)
	id := h.create("PARENT")
	evs := h.waitStatus(id, api.TaskStatus_TASK_STATUS_FINISHED)
	var kids []string
	for _, ev := range evs {
		if cs := ev.GetChildSpawned(); cs != nil {
			kids = append(kids, cs.GetChildId())
		}
	}
	if len(kids) != 2 {
		t.Fatalf("spawned %d children, want 2:\n%s", len(kids), dump(evs))
	}
	if lastStatus(h.history(kids[1])) != api.TaskStatus_TASK_STATUS_UNSPECIFIED { // created, never started
		t.Fatalf("the second child runs while the first holds the only place:\n%s", dump(h.history(kids[1])))
	}
	var results []string
	for _, ev := range evs {
		if r := ev.GetToolResult(); r != nil {
			results = append(results, string(r.GetRetainedOutput()))
		}
	}
	if len(results) != 2 || strings.Contains(results[0], "queued") || !strings.Contains(results[1], `"status":"queued"`) {
		t.Fatalf("spawn results = %q, want the second queued", results)
	}
	close(release)
	h.waitStatus(kids[0], api.TaskStatus_TASK_STATUS_FINISHED)
	h.waitStatus(kids[1], api.TaskStatus_TASK_STATUS_FINISHED)
}
