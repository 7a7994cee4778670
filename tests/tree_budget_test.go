package tests

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"lemo/api"
	"lemo/client"
	"lemo/providers/fake"
)

// The root's request and the children's have the same length, so a
// child's first Cycle reserves what the root's first one did (same
// model, instructions and tools).
const (
	budgetRootRequest = "BROOT spawn eight kids"
	budgetKidRequest  = "BKID-%d working on it"
)

// budgetTreeScript: the root spawns eight children at once (no wait);
// every other model call is held open, so each granted Cycle keeps its
// reservation until the daemon is killed (then it counts as spent).
var budgetTreeScript = func() []fake.Scenario {
	spawns := make([]fake.Call, 8)
	for i := range spawns {
		spawns[i] = call("tasks_spawn", fmt.Sprintf(`{"request":%q}`, fmt.Sprintf(budgetKidRequest, i+1)))
	}
	return []fake.Scenario{
		{Match: "BROOT", ToolCalls: spawns},
		{AfterTool: true, Match: "", Hold: true, Text: []string{"waiting"}},
		{Match: "", Hold: true, Text: []string{"working"}},
	}
}()

// Eight children spawned at once against a root budget that covers only
// five Cycles beyond the one that spawned them: never more than five
// Cycles start in the tree (each reserves at least what a child's first
// Cycle does), across a kill -9 at a random moment; each child's budget is
// capped at the root's remainder; a raise of a child beyond what the tree
// has left is refused.
func TestTreeBudgetSerialisedAcrossKill9(t *testing.T) {
	const iterations = 10
	seed := time.Now().UnixNano()
	rng := rand.New(rand.NewPCG(uint64(seed), 15))
	t.Logf("seed %d", seed)
	f := fake.StartServer(t, fake.Options{Flavor: fake.FlavorOllama, Script: budgetTreeScript})
	env := []string{"LEMO_OLLAMA_BASE_URL=" + f.URL()}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	for i := 0; i < iterations; i++ {
		data := filepath.Join(t.TempDir(), "data")
		d, c := serveTreeEnv(t, data, env)
		// The root's first Cycle is refused for a budget of 1 token: the
		// explanation says what a first Cycle reserves (R).
		m, err := c.CreateTask(ctx, client.CreateTask{Request: budgetRootRequest, Model: treeModel, Budget: &api.BudgetAmounts{Tokens: 1}})
		if err != nil {
			t.Fatal(err)
		}
		root := m.GetTaskId()
		waitTree(t, c, d.daemon, root, api.TaskStatus_TASK_STATUS_PAUSED)
		r := uint64(0)
		for _, ev := range treeHistory(t, c, root) {
			if sc := ev.GetStatusChanged(); sc.GetBudget() != nil {
				r = sc.GetBudget().GetNeeded()
			}
		}
		if r == 0 {
			t.Fatalf("the root did not pause for its budget:\n%s", dumpTree(c, root, ""))
		}
		// The spawning Cycle reports 15 tokens (the fake's usage); then
		// room for five Cycles of R and half of a sixth.
		limit := 15 + 5*r + r/2
		if _, err := c.RaiseBudget(ctx, root, &api.BudgetAmounts{Tokens: limit - 1}); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Continue(ctx, root, ""); err != nil {
			t.Fatal(err)
		}
		kids := waitKids(t, c, d.daemon, root, 8)
		// Each child's budget is the tree's remainder when it was spawned:
		// the first one's all the root had left after its spawning Cycle,
		// later ones' less what the tree reserved meanwhile.
		for j, k := range kids {
			tc := treeHistory(t, c, k)[0].GetTaskCreated()
			got := tc.GetBudget().GetTokens()
			if (j == 0 && got != limit-15) || got == 0 || got > limit-15 {
				t.Fatalf("child %d (%s) has a token budget of %d; want the root's remainder (%d for the first)", j, k, got, limit-15)
			}
		}
		if i == 0 {
			// A raise of a child beyond what the tree has left is refused.
			_, err := c.RaiseBudget(ctx, kids[0], &api.BudgetAmounts{Tokens: limit})
			if err == nil || !strings.Contains(err.Error(), "exceeds what the task's ancestors have left") || !strings.Contains(err.Error(), "raise the root task's budget first") {
				t.Fatalf("raise of a child beyond the tree's remainder: %v; want it refused", err)
			}
		}
		// kill -9 once a random number of the tree's Cycles started.
		target := rng.IntN(6)
		eventually(t, 60*time.Second, func() error {
			if n := treeCycles(t, c, root, kids); n < target {
				return fmt.Errorf("%d Cycles started, waiting for %d", n, target)
			}
			return nil
		})
		d.kill()
		_ = c.Close()
		d, c = serveTreeEnv(t, data, env)
		// Continue the tree: every Task goes on, asks the root, and is
		// granted a Cycle (held open) or paused for the tree's budget.
		if _, err := c.Continue(ctx, root, ""); err != nil && !errors.Is(err, client.ErrConflict) {
			t.Fatalf("continue %s: %v", root, err)
		}
		eventually(t, 60*time.Second, func() error {
			for _, id := range append([]string{root}, kids...) {
				m, err := c.Task(ctx, id)
				if err != nil {
					return err
				}
				budgetPaused := m.GetStatus() == api.TaskStatus_TASK_STATUS_PAUSED && m.GetPauseReason() == api.PauseReason_PAUSE_REASON_BUDGET
				held := m.GetStatus() == api.TaskStatus_TASK_STATUS_RUNNING && m.GetBudget().GetOpen() != nil
				if !budgetPaused && !held {
					return fmt.Errorf("task %s is %v (%s), neither paused for the budget nor in a granted Cycle", id, m.GetStatus(), m.GetStatusDetail())
				}
			}
			return nil
		})
		n := treeCycles(t, c, root, kids)
		if n > 5 {
			t.Fatalf("iteration %d: %d Cycles started in the tree, the budget covers 5\n%s", i, n, dumpTree(c, root, ""))
		}
		if n == 0 {
			t.Fatalf("iteration %d: no Cycle started beyond the spawn\n%s", i, dumpTree(c, root, ""))
		}
		// The children's spend is charged to the root: the tree has less
		// than one Cycle left.
		left := int64(limit) - int64(spentOf(t, c, root))
		for _, k := range kids {
			left -= int64(spentOf(t, c, k))
		}
		if left < 0 || uint64(left) >= r {
			t.Fatalf("iteration %d: the tree has %d tokens left, want less than one Cycle (%d) and not below zero", i, left, r)
		}
		t.Logf("iteration %d: killed once %d or more Cycles had started; %d Cycles in all, %d tokens left of %d", i, target, n, left, limit)
		d.stop()
		_ = c.Close()
	}
}

// waitKids waits until root recorded n children and returns their ids.
func waitKids(t *testing.T, c *client.Conn, d *daemon, root string, n int) []string {
	t.Helper()
	var ids []string
	eventually(t, 60*time.Second, func() error {
		spawned, _ := children(treeHistory(t, c, root))
		if len(spawned) < n {
			return fmt.Errorf("%d children spawned, want %d\n%s", len(spawned), n, d.logs())
		}
		ids = ids[:0]
		for _, s := range spawned {
			ids = append(ids, s.GetChildId())
		}
		return nil
	})
	return ids
}

// treeCycles counts the Cycles that started with a reservation in the
// tree, beyond the root's first (the one that spawned the children).
func treeCycles(t *testing.T, c *client.Conn, root string, kids []string) int {
	t.Helper()
	n := 0
	for _, id := range append([]string{root}, kids...) {
		for _, ev := range treeHistory(t, c, id) {
			if cs := ev.GetCycleStarted(); cs.GetReservation() != nil {
				n++
			}
		}
	}
	return n - 1
}

// spentOf is a Task's own recorded token spend.
func spentOf(t *testing.T, c *client.Conn, id string) uint64 {
	t.Helper()
	m, err := c.Task(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return m.GetBudget().GetSpent().GetTokens()
}

// A middle Task's limit covers its whole subtree: a root without a budget
// spawns M with room for two and a half Cycles; M spawns two children,
// each capped at M's remainder, so each alone fits. Of the three Cycles
// that then ask (M's next and each child's first), the tree grants at
// most two, and the rest pause for the budget naming M.
func TestTreeBudgetMiddleLimitCoversItsSubtree(t *testing.T) {
	script := []fake.Scenario{
		{Match: "PGROOT", Capture: `PGROOT (\d+)`, ToolCalls: []fake.Call{call("tasks_spawn", `{"request":"PGMID split the work","max_tokens":$1}`)}},
		{Match: "PGMID", ToolCalls: []fake.Call{call("tasks_spawn", `{"request":"PGKID-1 take part one"}`), call("tasks_spawn", `{"request":"PGKID-2 take part two"}`)}},
		{AfterTool: true, Match: "", Hold: true, Text: []string{"waiting"}},
		{Match: "", Hold: true, Text: []string{"working"}},
	}
	f := fake.StartServer(t, fake.Options{Flavor: fake.FlavorOllama, Script: script})
	data := filepath.Join(t.TempDir(), "data")
	d, c := serveTreeEnv(t, data, []string{"LEMO_OLLAMA_BASE_URL=" + f.URL()})
	ctx := context.Background()

	// What a first Cycle reserves (R): a probe refused for a 1-token budget.
	probe, err := c.CreateTask(ctx, client.CreateTask{Request: "PGPROBE take part one", Model: treeModel, Budget: &api.BudgetAmounts{Tokens: 1}})
	if err != nil {
		t.Fatal(err)
	}
	waitTree(t, c, d.daemon, probe.GetTaskId(), api.TaskStatus_TASK_STATUS_PAUSED)
	r := uint64(0)
	for _, ev := range treeHistory(t, c, probe.GetTaskId()) {
		if sc := ev.GetStatusChanged(); sc.GetBudget() != nil {
			r = sc.GetBudget().GetNeeded()
		}
	}
	if r == 0 {
		t.Fatal("the probe did not pause for its budget")
	}
	// M's spawning Cycle is charged the fake's 15 tokens; then room for
	// two and a half Cycles of R.
	limit := 15 + 2*r + r/2
	root, err := c.CreateTask(ctx, client.CreateTask{Request: fmt.Sprintf("PGROOT %d", limit), Model: treeModel})
	if err != nil {
		t.Fatal(err)
	}
	mid := waitKids(t, c, d.daemon, root.GetTaskId(), 1)[0]
	if got := treeHistory(t, c, mid)[0].GetTaskCreated().GetBudget().GetTokens(); got != limit {
		t.Fatalf("M's token budget = %d, want the %d tasks.spawn asked for", got, limit)
	}
	kids := waitKids(t, c, d.daemon, mid, 2)
	eventually(t, 60*time.Second, func() error {
		for _, id := range append([]string{mid}, kids...) {
			m, err := c.Task(ctx, id)
			if err != nil {
				return err
			}
			budgetPaused := m.GetStatus() == api.TaskStatus_TASK_STATUS_PAUSED && m.GetPauseReason() == api.PauseReason_PAUSE_REASON_BUDGET
			held := m.GetStatus() == api.TaskStatus_TASK_STATUS_RUNNING && m.GetBudget().GetOpen() != nil && (id != mid || m.GetCycles() > 1)
			if !budgetPaused && !held {
				return fmt.Errorf("task %s is %v (%s), neither paused for the budget nor in a granted Cycle", id, m.GetStatus(), m.GetStatusDetail())
			}
		}
		return nil
	})
	granted, paused := treeCycles(t, c, mid, kids), 0
	for _, id := range append([]string{mid}, kids...) {
		for _, ev := range treeHistory(t, c, id) {
			if sc := ev.GetStatusChanged(); sc.GetPauseReason() == api.PauseReason_PAUSE_REASON_BUDGET {
				paused++
				if !strings.Contains(sc.GetDetail(), "lemo budget "+mid) {
					t.Errorf("task %s paused without naming M (%s) as the budget to raise: %s", id, mid, sc.GetDetail())
				}
			}
		}
	}
	if granted < 1 || granted > 2 || paused == 0 {
		t.Fatalf("%d Cycles granted under M and %d paused for the budget; M's limit covers two\n%s", granted, paused, dumpTree(c, root.GetTaskId(), ""))
	}
}
