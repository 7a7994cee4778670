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

// Budgets over a real lemo serve pointed at the OpenRouter fake, which
// publishes per-token prices: the Cycle that would cross a token or cost
// budget never reaches the provider, lemo budget raises it and lemo
// continue finishes the Task; a cost limit on an unpriced model is refused;
// a kill -9 during a Cycle leaves its reservation counted as spent.
func TestBudgetsEndToEnd(t *testing.T) {
	key := fakeKey(t, "sk-or-v1-")
	usage := &fake.Usage{Prompt: 900, Completion: 100}
	list := []fake.Call{{Name: "tasks_list", Arguments: `{"limit":1}`}}
	srv := fake.StartServer(t, fake.Options{Flavor: fake.FlavorOpenRouter, APIKey: key, Script: []fake.Scenario{
		// Each run: a tool call, another after the result, then the
		// answer; the Tasks run one after the other.
		{Match: "BUDGETRUN", ToolCalls: list, Usage: usage},
		{AfterTool: true, Times: 1, ToolCalls: list, Usage: usage},
		{AfterTool: true, Times: 1, Text: []string{"done"}, Usage: usage},
		{Match: "COSTRUN", ToolCalls: list, Usage: usage},
		{AfterTool: true, Times: 1, ToolCalls: list, Usage: usage},
		{AfterTool: true, Text: []string{"done"}, Usage: usage},
		{Match: "HOLDRUN", Text: []string{"working"}, Hold: true},
	}})
	data := t.TempDir()
	env := []string{"LEMO_OPENROUTER_BASE_URL=" + srv.URL(), "OPENROUTER_API_KEY=" + key, "LEMO_BUDGETS_OUTPUT_TOKENS=100", "LEMO_HTTP_LISTEN=127.0.0.1:0",
		// The demo models, and sleep allowed without asking: fake/shell
		// runs its request as a shell command.
		"LEMO_FAKE_ENABLED=true", "LEMO_SHELL_ALLOW=sleep", "LEMO_OLLAMA_DISABLED=true"}
	d := serveWithEnv(t, data, env...)
	conn := d.connect(t, "")
	model := "openrouter/openai/gpt-4o"
	chats := func() int { return len(srv.ChatRequests()) }

	// runPaused runs lemo run with args and returns the Task it created,
	// which must have paused for its budget.
	runPaused := func(t *testing.T, request string, args ...string) *api.TaskMeta {
		t.Helper()
		out, code := cli(t, data, append([]string{"run", "-m", model, "--tools", "tasks.list", request}, args...)...)
		if code != 0 || !strings.Contains(out, "lemo continue") {
			t.Fatalf("lemo run exited %d:\n%s", code, out)
		}
		list, _, err := conn.ListTasks(context.Background(), "", 1)
		if err != nil || len(list) != 1 {
			t.Fatalf("ListTasks = %v, %v", list, err)
		}
		m := list[0]
		if m.GetStatus() != api.TaskStatus_TASK_STATUS_PAUSED || m.GetPauseReason() != api.PauseReason_PAUSE_REASON_BUDGET {
			t.Fatalf("task after lemo run = %v", m)
		}
		return m
	}
	raiseAndFinish := func(t *testing.T, id string, add ...string) *api.TaskMeta {
		t.Helper()
		if out, code := cli(t, data, append([]string{"budget", id}, add...)...); code != 0 || !strings.Contains(out, "budget raised") {
			t.Fatalf("lemo budget exited %d:\n%s", code, out)
		}
		if out, code := cli(t, data, "continue", id); code != 0 {
			t.Fatalf("lemo continue exited %d:\n%s", code, out)
		}
		return waitTask(t, conn, id, "finish", statusIs(api.TaskStatus_TASK_STATUS_FINISHED))
	}

	t.Run("tokens", func(t *testing.T) {
		// Each Cycle spends 1000 tokens and reserves its input estimate
		// plus 100: the third does not fit the 500 left.
		m := runPaused(t, "BUDGETRUN", "--max-tokens", "2500")
		id := m.GetTaskId()
		if n := chats(); n != 2 {
			t.Fatalf("provider saw %d chat requests, want 2", n)
		}
		for i, r := range srv.ChatRequests() {
			if mt, _ := r.JSON()["max_tokens"].(float64); mt != 100 {
				t.Fatalf("request %d max_tokens = %v, want the reserved 100", i, r.JSON()["max_tokens"])
			}
		}
		ex := m.GetBudget()
		if ex.GetSpent().GetTokens() != 2000 || !strings.Contains(m.GetStatusDetail(), "remaining 500 tokens") || !strings.Contains(m.GetStatusDetail(), "needed") {
			t.Fatalf("budget %v, detail %q", ex, m.GetStatusDetail())
		}
		if out, _ := cli(t, data, "tasks"); !strings.Contains(out, "2000/2500") {
			t.Fatalf("lemo tasks does not show the spend:\n%s", out)
		}
		m = raiseAndFinish(t, id, "--add-tokens", "5000")
		if n := chats(); n != 3 {
			t.Fatalf("provider saw %d chat requests, want 3", n)
		}
		if m.GetBudget().GetSpent().GetTokens() != 3000 || m.GetBudget().GetLimits().GetTokens() != 7500 {
			t.Fatalf("budget after finishing = %v", m.GetBudget())
		}
		if out, code := cli(t, data, "attach", id); code != 0 || !strings.Contains(out, "tokens 3000 of 7500 (4500 left)") || !strings.Contains(out, "budget raised by") {
			t.Fatalf("lemo attach exited %d without the spend:\n%s", code, out)
		}
	})

	t.Run("cost with published prices", func(t *testing.T) {
		// gpt-4o: $2.50 per million input, $10 output tokens. A Cycle costs
		// $0.00325; the third reservation needs more than the $0.0009 left.
		before := chats()
		m := runPaused(t, "COSTRUN", "--max-cost", "0.0074")
		if n := chats() - before; n != 2 {
			t.Fatalf("provider saw %d chat requests, want 2", n)
		}
		b := m.GetBudget()
		if b.GetPrice().GetSource() != "provider" || b.GetSpent().GetCostNanoUsd() != 6_500_000 || !strings.Contains(m.GetStatusDetail(), "cost budget") {
			t.Fatalf("budget %v, detail %q", b, m.GetStatusDetail())
		}
		m = raiseAndFinish(t, m.GetTaskId(), "--add-cost", "0.01")
		if n := chats() - before; n != 3 || m.GetBudget().GetSpent().GetCostNanoUsd() != 9_750_000 {
			t.Fatalf("requests %d, budget %v", n, m.GetBudget())
		}
		metrics := scrape(t, httpAddr(t, d.daemon))
		series := fmt.Sprintf(`lemo_model_tokens_total{estimated="false",model="%s",provider="openrouter"}`, model)
		// Both Tasks so far: three Cycles each of 1000 tokens, $0.00325.
		if metrics[series] != 6000 {
			t.Fatalf("%s = %v, want 6000", series, metrics[series])
		}
		if c := metrics[fmt.Sprintf(`lemo_model_cost_usd_total{estimated="false",model="%s",provider="openrouter"}`, model)]; c < 0.01949 || c > 0.01951 {
			t.Fatalf("cost metric = %v, want 0.0195", c)
		}
	})

	t.Run("time budget stops a running command", func(t *testing.T) {
		start := time.Now()
		out, code := cli(t, data, "run", "-m", "fake/shell", "--max-time", "1500ms", "sleep 120")
		if code != 0 || !strings.Contains(out, "working-time budget") {
			t.Fatalf("lemo run exited %d:\n%s", code, out)
		}
		if took := time.Since(start); took > 60*time.Second {
			t.Fatalf("lemo run took %s: the command was not stopped", took)
		}
		list, _, err := conn.ListTasks(context.Background(), "", 1)
		if err != nil || len(list) != 1 {
			t.Fatalf("ListTasks = %v, %v", list, err)
		}
		m := list[0]
		if m.GetPauseReason() != api.PauseReason_PAUSE_REASON_BUDGET || m.GetBudget().GetSpent().GetTimeMs() < 1500 {
			t.Fatalf("task = %v", m)
		}
		evs, err := conn.ReadHistory(context.Background(), m.GetTaskId(), 1)
		if err != nil {
			t.Fatal(err)
		}
		stopped := false
		for _, e := range evs {
			if f := e.GetToolFailed(); f.GetKind() == api.ToolFailureKind_TOOL_FAILURE_KIND_CANCELLED && strings.Contains(f.GetMessage(), "working-time budget") {
				stopped = true
			}
		}
		if !stopped {
			t.Fatalf("the command's outcome was not recorded as stopped by the time budget:\n%s", describeEvents(evs))
		}
	})

	t.Run("unpriced model refused", func(t *testing.T) {
		out, code := cli(t, data, "run", "-m", "openrouter/mystery/null-context", "--max-cost", "1", "hello")
		if code == 0 || !strings.Contains(out, "pricing.models") || !strings.Contains(out, "mystery/null-context") {
			t.Fatalf("lemo run exited %d:\n%s", code, out)
		}
	})

	t.Run("kill -9 with an open reservation", func(t *testing.T) {
		m, err := conn.CreateTask(context.Background(), client.CreateTask{Request: "HOLDRUN", Model: model, Tools: []string{"tasks.list"}, ToolsRestricted: true,
			Budget: &api.BudgetAmounts{Tokens: 1_000_000}})
		if err != nil {
			t.Fatal(err)
		}
		id := m.GetTaskId()
		held := waitTask(t, conn, id, "the Cycle's reservation", func(m *api.TaskMeta) bool { return m.GetBudget().GetOpen() != nil })
		reserved := api.ReservedTokens(held.GetBudget().GetOpen())
		eventually(t, 10*time.Second, func() error {
			for _, r := range srv.ChatRequests() {
				if strings.Contains(string(r.Body), "HOLDRUN") {
					return nil
				}
			}
			return fmt.Errorf("the held request has not arrived")
		})
		d.kill()
		d = serveWithEnv(t, data, env...)
		conn = d.connect(t, "")
		m, err = conn.Task(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		b := m.GetBudget()
		if m.GetStatus() != api.TaskStatus_TASK_STATUS_PAUSED || reserved == 0 || b.GetSpent().GetTokens() != reserved || b.GetEstimatedCharges() != 1 || b.GetOpen() != nil {
			t.Fatalf("after kill -9: %v, budget %v; want paused with the reservation of %d spent as an estimate", m.GetStatus(), b, reserved)
		}
		if out, _ := cli(t, data, "tasks"); !strings.Contains(out, fmt.Sprintf("%d/1000000", reserved)) {
			t.Fatalf("lemo tasks does not show the reservation as spent:\n%s", out)
		}
	})
}
