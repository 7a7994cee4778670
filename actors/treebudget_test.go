package actors_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"lemo/actors"
	"lemo/api"
	"lemo/internal/failpoint"
	"lemo/providers"
	"lemo/providers/fake"
	"lemo/tools/tasks"
)

// The tree's root actor crashes (an injected panic) right after it
// granted a Cycle to one child and before that child recorded it. The
// root's restart stops its children's actors too, so the grant may never
// be recorded; the restarted root keeps it (and the asks it had queued)
// until the child asks again. Continued, the tree never runs more than
// the one Cycle its budget covers: the other child is refused and pauses
// for the budget, its model request never made. (That the book outlives
// the root's incarnations is TestRootBookOutlivesIncarnations.)
func TestTreeGrantSurvivesRootCrash(t *testing.T) {
	plan := treePlan(func(last string, tool bool) fake.Turn {
		switch {
		case strings.HasPrefix(last, "GKID"):
			return fake.Turn{Text: "kid done", Usage: providers.Usage{PromptTokens: 10, CompletionTokens: 5}}
		case last == "GROOT":
			return fake.Turn{ToolCalls: []providers.ToolCall{
				fake.ToolCall("s1", "tasks_spawn", map[string]any{"request": "GKID-1 go", "wait": true, "timeout": 60}),
				fake.ToolCall("s2", "tasks_spawn", map[string]any{"request": "GKID-2 go", "wait": true, "timeout": 60}),
			}, Usage: providers.Usage{PromptTokens: 10, CompletionTokens: 5}}
		}
		return fake.Turn{Text: "root done"}
	})
	var h *harness
	h = newHarnessWith(t, plan, func(o *actors.Options) { o.Budget.OutputTokens = 100; o.MaxParallelTools = 4 }, tasks.NewTree(lazyStoreOf(&h))...)
	ctx := context.Background()

	// What a child's first Cycle reserves (r): a probe with a request of
	// the same length, refused for a budget of 1 token.
	probe := createBudgetReq(t, h, "GKID-0 go", &api.BudgetAmounts{Tokens: 1})
	r := lastPause(h.waitStatus(probe, api.TaskStatus_TASK_STATUS_PAUSED)).GetBudget().GetNeeded()
	if r == 0 {
		t.Fatal("the probe did not pause for its budget")
	}

	var granted atomic.Value // the child granted first
	var held atomic.Bool
	release := make(chan struct{})
	var releaseOnce sync.Once
	t.Cleanup(failpoint.Enable(actors.FailTreeGrant, func(arg any) error {
		if granted.CompareAndSwap(nil, arg) {
			return errors.New("injected crash of the tree's root between a grant and its record")
		}
		return nil
	}))
	t.Cleanup(failpoint.Enable(actors.FailCycleStart, func(arg any) error {
		evs := arg.([]*api.Event)
		if x, _ := granted.Load().(string); x != "" && evs[0].GetTaskId() == x && held.CompareAndSwap(false, true) {
			<-release // the granted child's record waits until the other was answered
		}
		return nil
	}))
	t.Cleanup(func() { releaseOnce.Do(func() { close(release) }) })

	// The root's spawning Cycle is charged 15 tokens; then room for one
	// child Cycle and half of another.
	root := createBudgetReq(t, h, "GROOT", &api.BudgetAmounts{Tokens: 15 + r + r/2})
	var kids []string
	h.waitFor(root, "two children", func(evs []*api.Event) bool {
		kids = kids[:0]
		for _, e := range evs {
			if cs := e.GetChildSpawned(); cs != nil {
				kids = append(kids, cs.GetChildId())
			}
		}
		return len(kids) == 2
	})
	h.waitFor(root, "the root's crash", func(evs []*api.Event) bool {
		return has(evs, func(e *api.Event) bool { return e.GetFailure() != nil })
	})
	x, _ := granted.Load().(string)
	y := kids[0]
	if y == x {
		y = kids[1]
	}
	if x != kids[0] && x != kids[1] {
		t.Fatalf("the first grant went to %q, not to a child (%v)", x, kids)
	}
	// The root's restart stops its children's actors with it (each is
	// recovered paused, or waits for a place if it had not started): a
	// continue of the root carries on to them, and they ask again.
	if h.waitFor(root, "the root's recovery", func(evs []*api.Event) bool { return lastStatus(evs) == api.TaskStatus_TASK_STATUS_PAUSED }) != nil {
		if _, err := h.d.Continue(ctx, actors.Operator, root, ""); err != nil {
			t.Fatalf("continue the root: %v", err)
		}
	}
	evs := h.waitFor(y, "a pause for the tree's budget", func(evs []*api.Event) bool {
		return lastPause(evs).GetPauseReason() == api.PauseReason_PAUSE_REASON_BUDGET
	})
	if d := lastPause(evs).GetDetail(); !strings.Contains(d, "lemo budget "+root) {
		t.Fatalf("the refused child's pause does not name the root's budget: %s", d)
	}
	if has(evs, func(e *api.Event) bool { return e.GetCycleStarted() != nil }) {
		t.Fatalf("the refused child started a Cycle:\n%s", dump(evs))
	}
	// The granted child's Cycle start lands. If the root's restart had
	// stopped the child's actor before that, its next incarnation finds the
	// Cycle interrupted before the model call, and the reservation stands
	// (fail closed): it pauses for the budget without a model request. Else
	// it was granted again and runs its one Cycle. Either way the children
	// made at most the one model request the budget covers.
	releaseOnce.Do(func() { close(release) })
	xevs := h.waitFor(x, "the granted child's end", func(evs []*api.Event) bool {
		st := lastStatus(evs)
		return st == api.TaskStatus_TASK_STATUS_FINISHED || lastPause(evs).GetPauseReason() == api.PauseReason_PAUSE_REASON_BUDGET
	})
	kidRequests := 0
	for _, req := range h.model.Requests() {
		if m := req.Messages[len(req.Messages)-1]; strings.HasPrefix(m.Content, "GKID") {
			kidRequests++
		}
	}
	want := 1
	if lastStatus(xevs) != api.TaskStatus_TASK_STATUS_FINISHED {
		want = 0
		if !has(xevs, func(e *api.Event) bool {
			return e.GetCycleFinished().GetOutcome() == api.CycleOutcome_CYCLE_OUTCOME_CANCELLED
		}) {
			t.Fatalf("the granted child paused for the budget without an interrupted Cycle:\n%s", dump(xevs))
		}
	}
	if kidRequests != want {
		t.Fatalf("the children made %d model requests, want %d (the granted child %s):\n%s", kidRequests, want, lastStatus(xevs), dump(xevs))
	}
	if m, err := h.d.Task(ctx, actors.Operator, y); err != nil || m.GetStatus() != api.TaskStatus_TASK_STATUS_PAUSED {
		t.Fatalf("refused child = %v, %v; want paused", m, err)
	}
}

func createBudgetReq(t *testing.T, h *harness, request string, b *api.BudgetAmounts) string {
	t.Helper()
	m, err := h.d.CreateTask(context.Background(), actors.Operator, actors.CreateTask{Request: request, Model: "fake/m", Budget: b})
	if err != nil {
		t.Fatalf("CreateTask: %v", err)
	}
	return m.GetTaskId()
}
