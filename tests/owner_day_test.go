package tests

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"lemo/api"
	"lemo/client"
	"lemo/providers/fake"
)

// Each owner's daily budget over a real lemo serve: two Tasks of one
// owner together reach budgets.per_owner_day.tokens, and the third Cycle
// pauses before its model request (the provider sees exactly the two
// allowed), explaining the daily limit and its reset; an operator's
// lemo budget --owner raises the day and lemo continue finishes the Task.
func TestOwnerDailyBudgetEndToEnd(t *testing.T) {
	// Each Cycle reports 100,000 tokens; a reservation is far smaller.
	usage := &fake.Usage{Prompt: 90_000, Completion: 10_000}
	srv := fake.StartServer(t, fake.Options{Flavor: fake.FlavorOllama, Script: []fake.Scenario{
		{Match: "DAYRUN-A", Text: []string{"done"}, Usage: usage},
		{Match: "DAYRUN-B", ToolCalls: []fake.Call{{Name: "tasks_list", Arguments: `{"limit":1}`}}, Usage: usage},
		{AfterTool: true, Text: []string{"done after the tool"}, Usage: usage},
	}})
	data := t.TempDir()
	d, conn := serveTreeEnv(t, data, []string{"LEMO_OLLAMA_BASE_URL=" + srv.URL(), "LEMO_BUDGETS_OUTPUT_TOKENS=100",
		"LEMO_BUDGETS_PER_OWNER_DAY_TOKENS=200200"})
	ctx := context.Background()
	chats := func() int { return len(srv.ChatRequests()) }

	if out, code := cli(t, data, "run", "-m", treeModel, "DAYRUN-A one Cycle"); code != 0 || !strings.Contains(out, "done") {
		t.Fatalf("lemo run (A) exited %d:\n%s", code, out)
	}
	out, code := cli(t, data, "run", "-m", treeModel, "DAYRUN-B a tool, then the answer")
	if code != 0 || !strings.Contains(out, "lemo continue") {
		t.Fatalf("lemo run (B) exited %d:\n%s\n%s", code, out, d.logs())
	}
	if n := chats(); n != 2 {
		t.Fatalf("the provider saw %d chat requests, want 2: the third Cycle does not fit the day", n)
	}
	list, _, err := conn.ListTasks(ctx, "", 1)
	if err != nil || len(list) != 1 {
		t.Fatalf("ListTasks = %v, %v", list, err)
	}
	b := list[0]
	ex := b.GetBudget()
	if b.GetStatus() != api.TaskStatus_TASK_STATUS_PAUSED || b.GetPauseReason() != api.PauseReason_PAUSE_REASON_BUDGET {
		t.Fatalf("task B = %v, want paused for the budget", b)
	}
	owner := b.GetOwner()
	for _, w := range []string{"daily tokens budget of owner " + owner, "spent 200000 tokens", "remaining 200 tokens", "needed", "UTC midnight", "lemo budget --owner " + owner} {
		if !strings.Contains(b.GetStatusDetail(), w) {
			t.Errorf("explanation %q lacks %q", b.GetStatusDetail(), w)
		}
	}
	if ex.GetSpent().GetTokens() != 100_000 {
		t.Fatalf("task B's own spend = %v, want its one Cycle's 100000 tokens", ex.GetSpent())
	}
	if out, code := cli(t, data, "budget", "--owner", owner); code != 0 || !strings.Contains(out, "200000 of 200200 tokens spent") || !strings.Contains(out, "resets at") {
		t.Fatalf("lemo budget --owner (show) exited %d:\n%s", code, out)
	}
	// Bad input is refused with what is accepted.
	if out, code := cli(t, data, "budget", "--owner", owner, "--add-time", "1h"); code == 0 || !strings.Contains(out, "no working-time limit") {
		t.Fatalf("lemo budget --owner --add-time exited %d:\n%s", code, out)
	}
	if out, code := cli(t, data, "budget", "--owner", owner, "--add-cost", "1"); code == 0 || !strings.Contains(out, "budgets.per_owner_day.cost") {
		t.Fatalf("lemo budget --owner --add-cost without a daily cost limit exited %d:\n%s", code, out)
	}
	if out, code := cli(t, data, "budget", "--owner", owner, "--add-tokens", "100000"); code != 0 || !strings.Contains(out, "daily budget raised") || !strings.Contains(out, "200000 of 300200 tokens spent") {
		t.Fatalf("lemo budget --owner exited %d:\n%s", code, out)
	}
	if out, code := cli(t, data, "continue", b.GetTaskId()); code != 0 {
		t.Fatalf("lemo continue exited %d:\n%s", code, out)
	}
	waitTask(t, conn, b.GetTaskId(), "finish", statusIs(api.TaskStatus_TASK_STATUS_FINISHED))
	if n := chats(); n != 3 {
		t.Fatalf("the provider saw %d chat requests, want 3", n)
	}
}

// After kill -9 during a held model call, the Cycle's reservation counts
// in its owner's day (fail closed): with a daily budget that leaves less
// than another Cycle beside it, the next Task pauses before its request.
func TestOwnerDailyBudgetAcrossKill9(t *testing.T) {
	srv := fake.StartServer(t, fake.Options{Flavor: fake.FlavorOllama, Script: []fake.Scenario{
		{Match: "DAYHOLD", Text: []string{"working"}, Hold: true},
	}})
	data := t.TempDir()
	env := []string{"LEMO_OLLAMA_BASE_URL=" + srv.URL(), "LEMO_BUDGETS_OUTPUT_TOKENS=100", "LEMO_BUDGETS_PER_OWNER_DAY_TOKENS=1000000000"}
	d, conn := serveTreeEnv(t, data, env)
	ctx := context.Background()
	m, err := conn.CreateTask(ctx, client.CreateTask{Request: "DAYHOLD-1 go", Model: treeModel})
	if err != nil {
		t.Fatal(err)
	}
	held := waitTask(t, conn, m.GetTaskId(), "the Cycle's reservation", func(m *api.TaskMeta) bool { return m.GetBudget().GetOpen() != nil })
	r := api.ReservedTokens(held.GetBudget().GetOpen())
	eventually(t, 10*time.Second, func() error {
		if len(srv.ChatRequests()) == 0 {
			return fmt.Errorf("the held request has not arrived")
		}
		return nil
	})
	d.kill()
	_ = conn.Close()
	// The daily budget now leaves half a Cycle beside the open one.
	env[len(env)-1] = fmt.Sprintf("LEMO_BUDGETS_PER_OWNER_DAY_TOKENS=%d", r+r/2)
	d, conn = serveTreeEnv(t, data, env)
	m2, err := conn.CreateTask(ctx, client.CreateTask{Request: "DAYHOLD-2 go", Model: treeModel})
	if err != nil {
		t.Fatal(err)
	}
	p := waitTask(t, conn, m2.GetTaskId(), "a pause for the daily budget", statusIs(api.TaskStatus_TASK_STATUS_PAUSED))
	if p.GetPauseReason() != api.PauseReason_PAUSE_REASON_BUDGET || !strings.Contains(p.GetStatusDetail(), fmt.Sprintf("spent %d tokens", r)) {
		t.Fatalf("second task = %v (%s); want paused for the daily budget with the first Cycle's %d tokens spent", p.GetStatus(), p.GetStatusDetail(), r)
	}
	if n := len(srv.ChatRequests()); n != 1 {
		t.Fatalf("the provider saw %d chat requests, want 1 (the held one)\n%s", n, d.logs())
	}
}
