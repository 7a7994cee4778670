package actors_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"lemo/actors"
	"lemo/api"
	"lemo/persistence"
	"lemo/providers"
	"lemo/providers/fake"
	"lemo/providers/pricing"
	"lemo/tools"
)

// echoTurn calls test.echo and reports usage of 900 prompt and 100
// completion tokens.
func echoTurn() fake.Turn {
	return fake.Turn{ToolCalls: []providers.ToolCall{fake.ToolCall("p", "test_echo", map[string]string{"text": "x"})}, Usage: providers.Usage{PromptTokens: 900, CompletionTokens: 100}}
}

func createBudget(t *testing.T, h *harness, model string, b *api.BudgetAmounts) string {
	t.Helper()
	m, err := h.d.CreateTask(context.Background(), actors.Operator, actors.CreateTask{Request: "go", Model: model, Budget: b})
	if err != nil {
		t.Fatalf("CreateTask: %v", err)
	}
	return m.GetTaskId()
}

func lastPause(evs []*api.Event) *api.StatusChanged {
	var sc *api.StatusChanged
	for _, e := range evs {
		if s := e.GetStatusChanged(); s != nil {
			sc = s
		}
	}
	return sc
}

func meta(t *testing.T, h *harness, id string) *api.TaskMeta {
	t.Helper()
	m, err := h.d.Task(context.Background(), actors.Operator, id)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// A Task whose third Cycle would cross its token budget pauses before the
// third model request, says why, and finishes once the budget is raised
// and the Task continued.
func TestTokenBudgetPausesBeforeTheCycleThatWouldCrossIt(t *testing.T) {
	h := newHarnessWith(t, fake.Sequence(echoTurn(), echoTurn(), fake.Turn{Text: "done", Usage: providers.Usage{PromptTokens: 900, CompletionTokens: 100}}),
		func(o *actors.Options) { o.Budget.OutputTokens = 100 })
	// Each Cycle spends 1000 tokens and reserves about 800: the third
	// reservation does not fit the 500 left.
	id := createBudget(t, h, "fake/m", &api.BudgetAmounts{Tokens: 2500})
	evs := h.waitStatus(id, api.TaskStatus_TASK_STATUS_PAUSED)
	if n := len(h.model.Requests()); n != 2 {
		t.Fatalf("model requests = %d, want 2; history:\n%s", n, dump(evs))
	}
	for i, r := range h.model.Requests() {
		if r.MaxOutputTokens != 100 {
			t.Fatalf("request %d MaxOutputTokens = %d, want the reserved 100", i, r.MaxOutputTokens)
		}
	}
	for _, e := range evs {
		if cs := e.GetCycleStarted(); cs != nil {
			r := cs.GetReservation()
			if r.GetInputTokens() == 0 || r.GetOutputTokens() != 100 || api.ReservedTokens(r) > 1500 {
				t.Fatalf("cycle %d reservation = %v", cs.GetCycle(), r)
			}
		}
	}
	sc := lastPause(evs)
	ex := sc.GetBudget()
	if sc.GetPauseReason() != api.PauseReason_PAUSE_REASON_BUDGET || ex.GetLimit() != "tokens" || ex.GetSpent() != 2000 || ex.GetRemaining() != 500 || ex.GetNeeded() <= 500 {
		t.Fatalf("pause = %v, want budget: tokens spent 2000, remaining 500, needed > 500", sc)
	}
	for _, w := range []string{"limit 2500 tokens", "spent 2000 tokens", "remaining 500 tokens", "needed", "--add-tokens"} {
		if !strings.Contains(sc.GetDetail(), w) {
			t.Errorf("explanation %q lacks %q", sc.GetDetail(), w)
		}
	}
	if m := meta(t, h, id); m.GetBudget().GetSpent().GetTokens() != 2000 || m.GetPauseReason() != api.PauseReason_PAUSE_REASON_BUDGET {
		t.Fatalf("meta = %v", m)
	}
	// Continue without a raise: it pauses again, no request is made.
	if _, err := h.d.Continue(context.Background(), actors.Operator, id, ""); err != nil {
		t.Fatal(err)
	}
	h.waitFor(id, "a second budget pause", func(evs []*api.Event) bool {
		n := 0
		for _, e := range evs {
			if e.GetStatusChanged().GetPauseReason() == api.PauseReason_PAUSE_REASON_BUDGET {
				n++
			}
		}
		return n == 2
	})
	if n := len(h.model.Requests()); n != 2 {
		t.Fatalf("model requests after continuing without a raise = %d, want 2", n)
	}
	if _, err := h.d.RaiseBudget(context.Background(), actors.Operator, id, &api.BudgetAmounts{Tokens: 5000}); err != nil {
		t.Fatal(err)
	}
	if _, err := h.d.Continue(context.Background(), actors.Operator, id, ""); err != nil {
		t.Fatal(err)
	}
	evs = h.waitStatus(id, api.TaskStatus_TASK_STATUS_FINISHED)
	if n := len(h.model.Requests()); n != 3 {
		t.Fatalf("model requests = %d, want 3", n)
	}
	if !has(evs, func(e *api.Event) bool {
		return e.GetBudgetRaised().GetAdd().GetTokens() == 5000 && e.GetBudgetRaised().GetBy() == "operator"
	}) {
		t.Fatalf("no raise recorded:\n%s", dump(evs))
	}
	m := meta(t, h, id)
	if m.GetBudget().GetSpent().GetTokens() != 3000 || m.GetBudget().GetLimits().GetTokens() != 7500 || m.GetBudget().GetEstimatedCharges() != 0 {
		t.Fatalf("budget = %v, want 3000 of 7500 spent, no estimate", m.GetBudget())
	}
	checkContiguous(t, evs)
}

// Without reported usage the reservation stands, marked as an estimate.
func TestBudgetWithoutUsageKeepsTheEstimate(t *testing.T) {
	h := newHarness(t, fake.Sequence(fake.Turn{Text: "hi", NoUsage: true}))
	id := createBudget(t, h, "fake/m", &api.BudgetAmounts{Tokens: 100_000})
	evs := h.waitStatus(id, api.TaskStatus_TASK_STATUS_FINISHED)
	var reserved uint64
	for _, e := range evs {
		if cs := e.GetCycleStarted(); cs != nil {
			reserved = api.ReservedTokens(cs.GetReservation())
		}
	}
	b := meta(t, h, id).GetBudget()
	if reserved == 0 || b.GetSpent().GetTokens() != reserved || b.GetEstimatedCharges() != 1 {
		t.Fatalf("budget = %v, want the reservation of %d spent and one estimated charge", b, reserved)
	}
}

// A cost budget priced from the config's table: the Cycle that would cross
// it does not start.
func TestCostBudgetWithPriceTable(t *testing.T) {
	h := newHarnessWith(t, fake.Sequence(echoTurn(), echoTurn(), fake.Turn{Text: "done"}), func(o *actors.Options) { o.Budget.OutputTokens = 100 })
	h.stop()
	// $1 per million input tokens, $10 per million output tokens: each
	// Cycle costs $0.0019, each reservation about $0.0017.
	h.pricer = pricing.New(nil, map[string]providers.Price{"fake/m": {Input: 1, Output: 10, CachedInput: 0.5}}, nil)
	h.start()
	id := createBudget(t, h, "fake/m", &api.BudgetAmounts{CostNanoUsd: 5_000_000})
	evs := h.waitStatus(id, api.TaskStatus_TASK_STATUS_PAUSED)
	if n := len(h.model.Requests()); n != 2 {
		t.Fatalf("model requests = %d, want 2; history:\n%s", n, dump(evs))
	}
	ex := lastPause(evs).GetBudget()
	if ex.GetLimit() != "cost" || ex.GetSpent() != 3_800_000 || ex.GetRemaining() != 1_200_000 || ex.GetNeeded() <= 1_200_000 {
		t.Fatalf("pause = %v, want cost: spent $0.0038, remaining $0.0012", lastPause(evs))
	}
	if p := meta(t, h, id).GetBudget().GetPrice(); p.GetSource() != "config" || p.GetOutputNanoUsd() != 10_000_000_000 {
		t.Fatalf("recorded price = %v", p)
	}
}

// A cost limit on a model with no known price is refused at creation,
// naming the configuration to set; nothing is created.
func TestCostLimitRefusedWithoutPrice(t *testing.T) {
	h := newHarnessWith(t, fake.Echo(), func(o *actors.Options) { o.Budget.PricingKey = "pricing.models" })
	h.stop()
	h.pricer = pricing.New(nil, map[string]providers.Price{"fake/other": {Input: 1, Output: 1}}, []string{"ollama"})
	h.start()
	_, err := h.d.CreateTask(context.Background(), actors.Operator, actors.CreateTask{Request: "go", Model: "fake/m", Budget: &api.BudgetAmounts{CostNanoUsd: 1}})
	if !errors.Is(err, actors.ErrInvalid) || !strings.Contains(err.Error(), "set pricing.models") || !strings.Contains(err.Error(), "fake/m") {
		t.Fatalf("CreateTask = %v, want ErrInvalid naming pricing.models and the model", err)
	}
	list, _, err := h.d.ListTasks(context.Background(), actors.Operator, "", 10)
	if err != nil || len(list) != 0 {
		t.Fatalf("tasks after the refusal = %v, %v; want none", list, err)
	}
	// Tokens alone need no price.
	id := createBudget(t, h, "fake/m", &api.BudgetAmounts{Tokens: 100_000})
	h.waitStatus(id, api.TaskStatus_TASK_STATUS_FINISHED)
}

// A working-time budget that runs out while a tool runs stops the tool,
// records its outcome and pauses the Task; a raise and continue go on.
func TestTimeBudgetStopsARunningTool(t *testing.T) {
	h := newHarness(t, fake.Sequence(
		fake.Turn{ToolCalls: []providers.ToolCall{fake.ToolCall("p", "test_block", map[string]string{"text": "tb"})}},
		fake.Turn{Text: "after"},
	))
	id := createBudget(t, h, "fake/m", &api.BudgetAmounts{TimeMs: 300})
	eventually(t, "the tool to run", func() error {
		if !h.blocks.isRunning("tb") {
			return errNotYet
		}
		return nil
	})
	evs := h.waitStatus(id, api.TaskStatus_TASK_STATUS_PAUSED)
	if !h.blocks.wasCancelled("tb") {
		t.Fatal("the running tool was not stopped")
	}
	if !has(evs, func(e *api.Event) bool {
		f := e.GetToolFailed()
		return f.GetKind() == api.ToolFailureKind_TOOL_FAILURE_KIND_CANCELLED && strings.Contains(f.GetMessage(), "working-time budget")
	}) {
		t.Fatalf("the tool's outcome was not recorded as stopped by the time budget:\n%s", dump(evs))
	}
	sc := lastPause(evs)
	if sc.GetPauseReason() != api.PauseReason_PAUSE_REASON_BUDGET || sc.GetBudget().GetLimit() != "time" || sc.GetBudget().GetSpent() < 300 {
		t.Fatalf("pause = %v", sc)
	}
	if _, err := h.d.RaiseBudget(context.Background(), actors.Operator, id, &api.BudgetAmounts{TimeMs: 60_000}); err != nil {
		t.Fatal(err)
	}
	if _, err := h.d.Continue(context.Background(), actors.Operator, id, ""); err != nil {
		t.Fatal(err)
	}
	h.waitStatus(id, api.TaskStatus_TASK_STATUS_FINISHED)
	if n := len(h.model.Requests()); n != 2 {
		t.Fatalf("model requests = %d, want 2", n)
	}
}

// A daemon killed outright during a Cycle leaves its reservation open: at
// startup it counts as spent (fail closed), the Cycle is closed without
// usage and the estimate stands, so a continue cannot spend it again.
func TestOpenReservationAfterCrashFailsClosed(t *testing.T) {
	h := newHarness(t, fake.Echo())
	h.stop()
	id := persistence.NewTaskID(time.Now())
	writeHistory(t, h.dir, id,
		&api.TaskCreated{Owner: "operator", Model: "fake/m", Title: "crashed", Budget: &api.BudgetAmounts{Tokens: 6000}},
		&api.UserMessage{Text: "go"},
		&api.StatusChanged{Status: api.TaskStatus_TASK_STATUS_RUNNING},
		&api.CycleStarted{Cycle: 1, Model: "fake/m", Reservation: &api.BudgetReservation{InputTokens: 1000, OutputTokens: 4096}},
	)
	h.start()
	m := meta(t, h, id)
	b := m.GetBudget()
	if m.GetStatus() != api.TaskStatus_TASK_STATUS_PAUSED || b.GetSpent().GetTokens() != 5096 || b.GetEstimatedCharges() != 1 {
		t.Fatalf("after startup: %v, budget %v; want paused, 5096 spent as an estimate", m.GetStatus(), b)
	}
	if _, err := h.d.Continue(context.Background(), actors.Operator, id, ""); err != nil {
		t.Fatal(err)
	}
	evs := h.waitFor(id, "a budget pause", func(evs []*api.Event) bool {
		return lastPause(evs).GetPauseReason() == api.PauseReason_PAUSE_REASON_BUDGET
	})
	if n := len(h.model.Requests()); n != 0 {
		t.Fatalf("model requests = %d, want 0:\n%s", n, dump(evs))
	}
}

// spendTool spends model tokens of its own (as the delegate does): it
// reports {"tokens": N} for the text N, and fails for "fail".
type spendTool struct{ echoTool }

func (spendTool) Name() string { return "test.spend" }
func (spendTool) ResultSchema() json.RawMessage {
	return json.RawMessage(`{"type":"object"}`)
}
func (spendTool) Execute(ctx context.Context, c tools.Call, emit tools.Emit) (json.RawMessage, error) {
	var in struct{ Text string }
	_ = json.Unmarshal(c.Input, &in)
	if in.Text == "fail" {
		return nil, errors.New("the agent died")
	}
	return json.RawMessage(`{"tokens":` + in.Text + `}`), nil
}
func (spendTool) Spent(out json.RawMessage) (tools.Spend, bool) {
	var r struct{ Tokens int64 }
	if json.Unmarshal(out, &r) != nil || r.Tokens == 0 {
		return tools.Spend{}, false
	}
	return tools.Spend{Tokens: r.Tokens, CostUSD: 0.25, Source: "test agent"}, true
}

// What a tool's own agent spends is charged to the Task: its report, or an
// estimate marked as such when it reports nothing.
func TestToolSpendIsCharged(t *testing.T) {
	h := newHarnessWith(t, fake.Sequence(
		fake.Turn{ToolCalls: []providers.ToolCall{
			fake.ToolCall("a", "test_spend", map[string]string{"text": "700"}),
			fake.ToolCall("b", "test_spend", map[string]string{"text": "fail"}),
		}, Usage: providers.Usage{PromptTokens: 90, CompletionTokens: 10}},
		fake.Turn{Text: "done", Usage: providers.Usage{PromptTokens: 90, CompletionTokens: 10}},
	), func(o *actors.Options) { o.Budget.UnreportedTokens = 333 }, spendTool{})
	id := createBudget(t, h, "fake/m", &api.BudgetAmounts{Tokens: 100_000})
	evs := h.waitStatus(id, api.TaskStatus_TASK_STATUS_FINISHED)
	var reported, estimated *api.BudgetCharged
	for _, e := range evs {
		if c := e.GetBudgetCharged(); c != nil && c.GetEstimated() {
			estimated = c
		} else if c != nil {
			reported = c
		}
	}
	if reported.GetTokens() != 700 || reported.GetCostNanoUsd() != 250_000_000 || reported.GetCallId() != "call-1-1" {
		t.Fatalf("reported charge = %v, want 700 tokens, $0.25 for call-1-1:\n%s", reported, dump(evs))
	}
	if estimated.GetTokens() != 333 || estimated.GetCallId() != "call-1-2" || !strings.Contains(estimated.GetSource(), "estimated") {
		t.Fatalf("estimated charge = %v, want 333 tokens for call-1-2", estimated)
	}
	b := meta(t, h, id).GetBudget()
	if b.GetSpent().GetTokens() != 200+700+333 || b.GetEstimatedCharges() != 1 {
		t.Fatalf("budget = %v, want 1233 tokens with one estimate", b)
	}
}

// A delegate-like call running when the daemon was killed: its agent's
// spend is unknown, so recovery charges the estimate (fail closed).
func TestRecoveryChargesAnUnknownSpend(t *testing.T) {
	h := newHarnessWith(t, fake.Echo(), func(o *actors.Options) { o.Budget.UnreportedTokens = 333 }, spendTool{})
	h.stop()
	id := persistence.NewTaskID(time.Now())
	writeHistory(t, h.dir, id,
		&api.TaskCreated{Owner: "operator", Model: "fake/m", Title: "crashed", Budget: &api.BudgetAmounts{Tokens: 10_000}},
		&api.UserMessage{Text: "go"},
		&api.StatusChanged{Status: api.TaskStatus_TASK_STATUS_RUNNING},
		&api.CycleStarted{Cycle: 1, Model: "fake/m"},
		&api.AssistantMessage{Cycle: 1, ToolCallIds: []string{"call-1-1", "call-1-2"}},
		&api.ToolCallRecorded{CallId: "call-1-1", Cycle: 1, Tool: "test.spend", Arguments: []byte(`{"text":"5"}`), ModelName: "test_spend"},
		&api.ToolCallRecorded{CallId: "call-1-2", Cycle: 1, Tool: "test.echo", Arguments: []byte(`{"text":"x"}`), ModelName: "test_echo"},
		&api.CycleFinished{Cycle: 1, Outcome: api.CycleOutcome_CYCLE_OUTCOME_COMPLETED, Usage: &api.Usage{PromptTokens: 90, CompletionTokens: 10}},
		&api.ToolExecutionStarted{CallId: "call-1-1"},
		&api.ToolExecutionStarted{CallId: "call-1-2"},
	)
	h.start()
	evs := h.history(id)
	var charges []*api.BudgetCharged
	for _, e := range evs {
		if c := e.GetBudgetCharged(); c != nil {
			charges = append(charges, c)
		}
	}
	if len(charges) != 1 || charges[0].GetCallId() != "call-1-1" || charges[0].GetTokens() != 333 || !charges[0].GetEstimated() {
		t.Fatalf("charges = %v, want one estimate of 333 for the spending call:\n%s", charges, dump(evs))
	}
	if b := meta(t, h, id).GetBudget(); b.GetSpent().GetTokens() != 100+333 || b.GetEstimatedCharges() != 1 {
		t.Fatalf("budget = %v, want 433 spent with one estimate", b)
	}
}

// Two Tasks of one owner together reach the owner's daily token budget:
// the third Cycle pauses before its model request, saying which limit,
// spent, remaining, needed and when it resets; an operator's raise for
// the day and a continue finish it. Another owner is not affected.
func TestOwnerDailyBudget(t *testing.T) {
	const used = 100_000
	usage := providers.Usage{PromptTokens: used - 10_000, CompletionTokens: 10_000}
	plan := func(n int, req *providers.Request) fake.Turn {
		last := req.Messages[len(req.Messages)-1]
		switch {
		case last.Role == providers.RoleTool:
			return fake.Turn{Text: "done after the tool", Usage: usage}
		case strings.HasPrefix(last.Content, "DAY-B"):
			return fake.Turn{ToolCalls: []providers.ToolCall{fake.ToolCall("p", "test_echo", map[string]string{"text": "x"})}, Usage: usage}
		}
		return fake.Turn{Text: "done", Usage: usage}
	}
	h := newHarnessWith(t, plan, func(o *actors.Options) {
		o.Budget.OutputTokens = 100
		o.Budget.PerOwnerDay = &api.BudgetAmounts{Tokens: 2*used + 200}
	})
	ctx := context.Background()
	create := func(owner, request string) string {
		m, err := h.d.CreateTask(ctx, actors.Caller{Owner: owner}, actors.CreateTask{Request: request, Model: "fake/m"})
		if err != nil {
			t.Fatalf("CreateTask: %v", err)
		}
		return m.GetTaskId()
	}
	a := create("alice", "DAY-A one Cycle")
	h.waitStatus(a, api.TaskStatus_TASK_STATUS_FINISHED)
	b := create("alice", "DAY-B a tool, then an answer")
	evs := h.waitStatus(b, api.TaskStatus_TASK_STATUS_PAUSED)
	if n := len(h.model.Requests()); n != 2 {
		t.Fatalf("model requests = %d, want 2 (the third Cycle does not fit the day); history:\n%s", n, dump(evs))
	}
	sc := lastPause(evs)
	ex := sc.GetBudget()
	if sc.GetPauseReason() != api.PauseReason_PAUSE_REASON_BUDGET || ex.GetLimit() != "daily tokens" || ex.GetSpent() != 2*used || ex.GetRemaining() != 200 || ex.GetNeeded() <= 200 {
		t.Fatalf("pause = %v, want the daily tokens limit: spent %d, remaining 200", sc, 2*used)
	}
	for _, w := range []string{"owner alice", "resets at", "UTC midnight", "lemo budget --owner alice --add-tokens N", "lemo continue " + b} {
		if !strings.Contains(sc.GetDetail(), w) {
			t.Errorf("explanation %q lacks %q", sc.GetDetail(), w)
		}
	}
	// Continued without a raise, its Cycle's start (now alone in its
	// commit) is refused again; no request is made.
	if _, err := h.d.Continue(ctx, actors.Operator, b, ""); err != nil {
		t.Fatal(err)
	}
	h.waitFor(b, "a second daily pause", func(evs []*api.Event) bool {
		return countEvents(evs, func(e *api.Event) bool { return e.GetStatusChanged().GetBudget().GetLimit() == "daily tokens" }) == 2
	})
	if n := len(h.model.Requests()); n != 2 {
		t.Fatalf("model requests after continuing without a raise = %d, want 2", n)
	}
	// Another owner still has its whole day.
	c := create("bob", "DAY-C bob's")
	h.waitStatus(c, api.TaskStatus_TASK_STATUS_FINISHED)
	// Only an operator raises the day; a raise of a dimension without a
	// limit is refused, saying why.
	if _, err := h.d.RaiseOwnerBudget(ctx, actors.Caller{Owner: "alice"}, "alice", &api.BudgetAmounts{Tokens: 1}); !errors.Is(err, actors.ErrPermission) {
		t.Fatalf("owner's own raise: %v, want ErrPermission", err)
	}
	if _, err := h.d.RaiseOwnerBudget(ctx, actors.Operator, "alice", &api.BudgetAmounts{CostNanoUsd: 1}); !errors.Is(err, actors.ErrInvalid) || !strings.Contains(err.Error(), "budgets.per_owner_day.cost") {
		t.Fatalf("raise of an unset cost limit: %v, want ErrInvalid naming the key", err)
	}
	ob, err := h.d.RaiseOwnerBudget(ctx, actors.Operator, "alice", &api.BudgetAmounts{Tokens: used})
	if err != nil {
		t.Fatal(err)
	}
	if ob.GetLimits().GetTokens() != 3*used+200 || ob.GetSpent().GetTokens() != 2*used || ob.GetRaised().GetTokens() != used {
		t.Fatalf("owner budget after the raise = %v", ob)
	}
	if _, err := h.d.Continue(ctx, actors.Operator, b, ""); err != nil {
		t.Fatal(err)
	}
	h.waitStatus(b, api.TaskStatus_TASK_STATUS_FINISHED)
	if n := len(h.model.Requests()); n != 4 {
		t.Fatalf("model requests = %d, want 4", n)
	}
	if ob, _ := h.d.OwnerBudget(ctx, actors.Operator, "alice"); ob.GetSpent().GetTokens() != 3*used {
		t.Fatalf("alice's day = %v, want %d tokens spent", ob, 3*used)
	}
	// A reload lowers the daily budget: bob's next Task is checked
	// against the new one.
	h.d.SetOwnerDayBudget(&api.BudgetAmounts{Tokens: used + 100})
	d := create("bob", "DAY-D bob's second")
	if sc := lastPause(h.waitStatus(d, api.TaskStatus_TASK_STATUS_PAUSED)); sc.GetBudget().GetLimit() != "daily tokens" || sc.GetBudget().GetLimitAmount() != used+100 {
		t.Fatalf("pause after the daily budget was lowered = %v", sc)
	}
}
