package actors_test

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"

	"lemo/actors"
	"lemo/api"
	"lemo/providers"
	"lemo/providers/fake"
	"lemo/tools/tasks"
)

// gatedChildren are children whose model calls wait for the test: it
// sees which run and lets them finish one by one.
type gatedChildren struct {
	mu     sync.Mutex
	gates  map[string]chan struct{}
	active map[string]bool // asked the model, not released
}

func (g *gatedChildren) turn(name string) fake.Turn {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.gates[name] == nil {
		g.gates[name] = make(chan struct{})
	}
	g.active[name] = true
	return fake.Turn{Text: "answer of " + name, Wait: g.gates[name]}
}

// running returns the children running a model call, sorted.
func (g *gatedChildren) running() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	var out []string
	for n := range g.active {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

func (g *gatedChildren) release(name string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	delete(g.active, name)
	close(g.gates[name])
}

// forget forgets the calls a restart interrupted (their gates stay shut).
func (g *gatedChildren) forget() {
	g.mu.Lock()
	defer g.mu.Unlock()
	clear(g.active)
}

// The queue of children waiting for a place is derived from their
// recorded statuses: with 2 places daemon-wide, 5 spawned children run 2
// at a time before a restart and after it (continued with their parent),
// the 3 queued ones record that they are queued, and all 5 finish.
func TestTreeQueueSurvivesRestart(t *testing.T) {
	g := &gatedChildren{gates: make(map[string]chan struct{}), active: make(map[string]bool)}
	var h *harness
	plan := treePlan(func(last string, tool bool) fake.Turn {
		switch {
		case strings.HasPrefix(last, "CHILD-"):
			return g.turn(last)
		case last == "PARENT":
			var calls []providers.ToolCall
			for i := 1; i <= 5; i++ {
				calls = append(calls, fake.ToolCall(fmt.Sprintf("c%d", i), "tasks_spawn", map[string]any{"request": fmt.Sprintf("CHILD-%d", i)}))
			}
			return fake.Turn{ToolCalls: calls}
		default:
			return fake.Turn{Text: "spawned"}
		}
	})
	h = newHarnessWith(t, plan, func(o *actors.Options) { o.MaxRunningChildren = 2 }, tasks.NewTree(lazyStoreOf(&h))...)
	id := h.create("PARENT")
	evs := h.waitStatus(id, api.TaskStatus_TASK_STATUS_FINISHED)
	kids := map[string]string{} // request -> id
	for _, ev := range evs {
		if cs := ev.GetChildSpawned(); cs != nil {
			kids[cs.GetTitle()] = cs.GetChildId()
		}
	}
	if len(kids) != 5 {
		t.Fatalf("spawned %d children, want 5:\n%s", len(kids), dump(evs))
	}
	queued := func(want int) {
		t.Helper()
		eventually(t, fmt.Sprintf("%d children queued", want), func() error {
			n := 0
			for _, k := range kids {
				m, err := h.d.Task(context.Background(), actors.Operator, k)
				if err != nil {
					return err
				}
				if m.GetStatus() == api.TaskStatus_TASK_STATUS_CREATED && strings.HasPrefix(m.GetStatusDetail(), "queued") {
					n++
				}
			}
			if n != want {
				return fmt.Errorf("%d queued: %w", n, errNotYet)
			}
			return nil
		})
	}
	eventually(t, "two children running", func() error {
		if r := g.running(); len(r) != 2 {
			return fmt.Errorf("running %v: %w", r, errNotYet)
		}
		return nil
	})
	queued(3)
	h.restart()
	g.forget()
	queued(3)
	if _, err := h.d.Continue(context.Background(), actors.Operator, id, ""); err != nil {
		t.Fatalf("Continue the parent: %v", err)
	}
	for done := 0; done < 5; done++ {
		var next string
		eventually(t, "a child running", func() error {
			r := g.running()
			if len(r) > 2 {
				t.Fatalf("children %v run at once, more than the 2 places", r)
			}
			if len(r) == 0 {
				return errNotYet
			}
			next = r[0]
			return nil
		})
		g.release(next)
		h.waitStatus(kids[next], api.TaskStatus_TASK_STATUS_FINISHED)
	}
	for name, k := range kids {
		if st := lastStatus(h.history(k)); st != api.TaskStatus_TASK_STATUS_FINISHED {
			t.Fatalf("child %s is %v, want finished", name, st)
		}
	}
}
