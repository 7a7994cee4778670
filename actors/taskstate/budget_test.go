package taskstate

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"lemo/api"
)

// priced is $1 per million input tokens, $2 per million output tokens.
var priced = &api.Price{Known: true, Source: "config", InputNanoUsd: 1_000_000_000, OutputNanoUsd: 2_000_000_000, CachedInputNanoUsd: 500_000_000}

// buildBudget returns a State created with budget and price, running.
func buildBudget(t *testing.T, budget *api.BudgetAmounts, price *api.Price, bodies ...proto.Message) *State {
	t.Helper()
	s := New()
	s.TaskID = "T1"
	apply(s, Create(CreateInput{Owner: "alice", Model: "fake/m", Request: "do it", Budget: budget, Price: price}))
	apply(s, bodies)
	return s
}

func applyAt(s *State, at time.Time, bodies ...proto.Message) {
	for _, ev := range s.Stamp(bodies, at) {
		s.Apply(ev)
	}
}

func TestCheckBudget(t *testing.T) {
	for _, tc := range []struct {
		name         string
		limits, used *api.BudgetAmounts
		need         *api.BudgetAmounts
		want         string // "" or the limit crossed
		remaining    uint64
	}{
		{"no limits", nil, &api.BudgetAmounts{Tokens: 1 << 40}, &api.BudgetAmounts{Tokens: 10, TimeMs: 1}, "", 0},
		{"tokens cover", &api.BudgetAmounts{Tokens: 100}, &api.BudgetAmounts{Tokens: 40}, &api.BudgetAmounts{Tokens: 60}, "", 0},
		{"tokens short by one", &api.BudgetAmounts{Tokens: 100}, &api.BudgetAmounts{Tokens: 41}, &api.BudgetAmounts{Tokens: 60}, "tokens", 59},
		{"overspent", &api.BudgetAmounts{Tokens: 100}, &api.BudgetAmounts{Tokens: 130}, &api.BudgetAmounts{Tokens: 1}, "tokens", 0},
		{"cost short", &api.BudgetAmounts{Tokens: 1000, CostNanoUsd: 500}, &api.BudgetAmounts{Tokens: 1, CostNanoUsd: 200}, &api.BudgetAmounts{Tokens: 1, CostNanoUsd: 301}, "cost", 300},
		{"tokens before cost", &api.BudgetAmounts{Tokens: 10, CostNanoUsd: 10}, &api.BudgetAmounts{Tokens: 10, CostNanoUsd: 10}, &api.BudgetAmounts{Tokens: 1, CostNanoUsd: 1}, "tokens", 0},
		{"time left", &api.BudgetAmounts{TimeMs: 1000}, &api.BudgetAmounts{TimeMs: 999}, &api.BudgetAmounts{TimeMs: 1}, "", 0},
		{"time used up", &api.BudgetAmounts{TimeMs: 1000}, &api.BudgetAmounts{TimeMs: 1000}, &api.BudgetAmounts{TimeMs: 1}, "time", 0},
		{"zero need with nothing left", &api.BudgetAmounts{Tokens: 5}, &api.BudgetAmounts{Tokens: 5}, &api.BudgetAmounts{}, "tokens", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := CheckBudget(tc.limits, tc.used, tc.need)
			if got.GetLimit() != tc.want {
				t.Fatalf("CheckBudget = %v, want limit %q", got, tc.want)
			}
			if got != nil && got.GetRemaining() != tc.remaining {
				t.Fatalf("remaining = %d, want %d", got.GetRemaining(), tc.remaining)
			}
		})
	}
}

func TestReserveCarriesReservation(t *testing.T) {
	s := buildBudget(t, &api.BudgetAmounts{Tokens: 10_000}, priced)
	step := s.Next(NextOptions{})
	if step.Kind != StepStartCycle {
		t.Fatalf("Next = %v, want StepStartCycle", step.Kind)
	}
	got := s.Reserve(step, ReserveOptions{Now: now, Overhead: 300, OutputTokens: 1000})
	if got.Kind != StepStartCycle || len(got.Bodies) != 1 {
		t.Fatalf("Reserve = %v %v, want a Cycle start", got.Kind, kindsOf(got.Bodies))
	}
	r := got.Bodies[0].(*api.CycleStarted).GetReservation()
	// Overhead plus the request ("do it": 2 tokens and 4 of message overhead).
	if r.GetInputTokens() != 306 || r.GetOutputTokens() != 1000 {
		t.Fatalf("reservation = %v, want input 306 and output 1000", r)
	}
	// 306 input at $1/M and 1000 output at $2/M: $0.000306 + $0.002.
	if r.GetCostNanoUsd() != 2_306_000 || !r.GetPrice().GetKnown() {
		t.Fatalf("reservation cost = %d (price %v), want 2306000", r.GetCostNanoUsd(), r.GetPrice())
	}
	if step.Bodies[0].(*api.CycleStarted).GetReservation() != nil {
		t.Fatal("Reserve changed the step it was given")
	}
	// Other steps pass unchanged.
	fin := Step{Kind: StepFinish}
	if s.Reserve(fin, ReserveOptions{}).Kind != StepFinish {
		t.Fatal("Reserve changed a finish step")
	}
}

func TestReserveRefusesAndExplains(t *testing.T) {
	for _, tc := range []struct {
		name   string
		budget *api.BudgetAmounts
		limit  string
		want   []string
	}{
		{"tokens", &api.BudgetAmounts{Tokens: 1000}, "tokens", []string{"token budget", "limit 1000 tokens", "spent 0 tokens", "remaining 1000 tokens", "needed 1106 tokens", "lemo budget T1 --add-tokens N"}},
		{"cost", &api.BudgetAmounts{CostNanoUsd: 2_000_000}, "cost", []string{"cost budget", "limit $0.002", "remaining $0.002", "needed $0.002106", "--add-cost USD"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := buildBudget(t, tc.budget, priced)
			got := s.Reserve(s.Next(NextOptions{}), ReserveOptions{Now: now, Overhead: 100, OutputTokens: 1000})
			if got.Kind != StepBudget || len(got.Bodies) != 1 {
				t.Fatalf("Reserve = %v %v, want StepBudget", got.Kind, kindsOf(got.Bodies))
			}
			sc := got.Bodies[0].(*api.StatusChanged)
			if sc.GetStatus() != api.TaskStatus_TASK_STATUS_PAUSED || sc.GetPauseReason() != api.PauseReason_PAUSE_REASON_BUDGET || sc.GetBudget().GetLimit() != tc.limit {
				t.Fatalf("pause = %v, want paused for the %s budget", sc, tc.limit)
			}
			for _, w := range tc.want {
				if !strings.Contains(sc.GetDetail(), w) {
					t.Errorf("detail %q lacks %q", sc.GetDetail(), w)
				}
			}
		})
	}
}

func TestReconcile(t *testing.T) {
	res := &api.BudgetReservation{InputTokens: 500, OutputTokens: 1000, CostNanoUsd: 2500, Price: priced}
	start := &api.CycleStarted{Cycle: 1, Reservation: res}
	for _, tc := range []struct {
		name      string
		bodies    []proto.Message
		tokens    uint64
		cost      uint64
		estimated uint32
	}{
		{"open reservation counts as spent", []proto.Message{start}, 1500, 2500, 0},
		{"usage replaces it", []proto.Message{start, &api.CycleFinished{Cycle: 1, Outcome: api.CycleOutcome_CYCLE_OUTCOME_COMPLETED, Usage: &api.Usage{PromptTokens: 400, CompletionTokens: 100}}}, 500, 600_000, 0},
		{"cached prompt tokens at the cached price", []proto.Message{start, &api.CycleFinished{Cycle: 1, Outcome: api.CycleOutcome_CYCLE_OUTCOME_COMPLETED, Usage: &api.Usage{PromptTokens: 400, CompletionTokens: 100, CachedPromptTokens: 200}}}, 500, 500_000, 0},
		{"no usage: the estimate stands", []proto.Message{start, &api.CycleFinished{Cycle: 1, Outcome: api.CycleOutcome_CYCLE_OUTCOME_COMPLETED}}, 1500, 2500, 1},
		{"cancelled: the estimate stands", []proto.Message{start, &api.CycleFinished{Cycle: 1, Outcome: api.CycleOutcome_CYCLE_OUTCOME_CANCELLED}}, 1500, 2500, 1},
		{"a delegate's charge", []proto.Message{&api.BudgetCharged{CallId: "c", Tokens: 70, CostNanoUsd: 9, Estimated: true}}, 70, 9, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := buildBudget(t, &api.BudgetAmounts{Tokens: 10_000}, priced, tc.bodies...)
			sp := s.Budget.Sum.GetSpent()
			if sp.GetTokens() != tc.tokens || sp.GetCostNanoUsd() != tc.cost || s.Budget.Sum.GetEstimatedCharges() != tc.estimated {
				t.Fatalf("spent %d tokens, %d nano-USD, %d estimated; want %d, %d, %d", sp.GetTokens(), sp.GetCostNanoUsd(), s.Budget.Sum.GetEstimatedCharges(), tc.tokens, tc.cost, tc.estimated)
			}
		})
	}
}

// After a crash (kill -9) during a Cycle, the open reservation counts as
// spent, recovery closes the Cycle without usage and it stays spent: the
// next reservation cannot take it again.
func TestRecoveryFailsClosed(t *testing.T) {
	res := &api.BudgetReservation{InputTokens: 500, OutputTokens: 1000}
	s := buildBudget(t, &api.BudgetAmounts{Tokens: 2000}, nil, &api.CycleStarted{Cycle: 1, Reservation: res})
	if got := s.Budget.Sum.GetSpent().GetTokens(); got != 1500 {
		t.Fatalf("spent with an open reservation = %d, want 1500", got)
	}
	apply(s, s.Recover(now))
	if s.Status != api.TaskStatus_TASK_STATUS_PAUSED || s.Budget.Sum.GetSpent().GetTokens() != 1500 || s.Budget.Sum.GetEstimatedCharges() != 1 {
		t.Fatalf("after recovery: %v, spent %d, estimated %d; want paused, 1500, 1", s.Status, s.Budget.Sum.GetSpent().GetTokens(), s.Budget.Sum.GetEstimatedCharges())
	}
	c, err := s.Continue("")
	if err != nil {
		t.Fatal(err)
	}
	apply(s, c)
	got := s.Reserve(s.Next(NextOptions{}), ReserveOptions{Now: now, OutputTokens: 1000})
	if got.Kind != StepBudget {
		t.Fatalf("Reserve after recovery = %v, want StepBudget (500 left, 1000+ needed)", got.Kind)
	}
}

func TestEstimateInput(t *testing.T) {
	s := buildBudget(t, &api.BudgetAmounts{Tokens: 1 << 30}, nil)
	first := s.Budget.EstimateInput(100)
	if first != 106 {
		t.Fatalf("first estimate = %d, want 106 (overhead 100 + request 6)", first)
	}
	// A Cycle that recorded its input: the next estimate starts from it
	// and adds what came since that Cycle started.
	applyAt(s, now, &api.CycleStarted{Cycle: 1}, &api.AssistantMessage{Cycle: 1, Text: strings.Repeat("a", 400)},
		&api.CycleFinished{Cycle: 1, Outcome: api.CycleOutcome_CYCLE_OUTCOME_COMPLETED, Input: &api.InputSummary{EstimatedTokens: 900, WindowTokens: 100_000}})
	if got := s.Budget.EstimateInput(100); got != 900+4+100 {
		t.Fatalf("estimate after a Cycle = %d, want %d", got, 900+4+100)
	}
	// A cancelled Cycle recorded no input: the last known one still
	// counts from its own start.
	applyAt(s, now, &api.UserMessage{Text: strings.Repeat("b", 40)}, &api.CycleStarted{Cycle: 2}, &api.CycleFinished{Cycle: 2, Outcome: api.CycleOutcome_CYCLE_OUTCOME_CANCELLED})
	if got := s.Budget.EstimateInput(100); got != 900+104+14 {
		t.Fatalf("estimate after a cancelled Cycle = %d, want %d", got, 900+104+14)
	}
	// Capped at 70% of the window.
	applyAt(s, now, &api.CycleStarted{Cycle: 3}, &api.CycleFinished{Cycle: 3, Outcome: api.CycleOutcome_CYCLE_OUTCOME_COMPLETED, Input: &api.InputSummary{EstimatedTokens: 5000, WindowTokens: 1000}})
	if got := s.Budget.EstimateInput(100); got != 700 {
		t.Fatalf("estimate = %d, want the ceiling 700", got)
	}
}

func TestRaiseBudget(t *testing.T) {
	s := buildBudget(t, &api.BudgetAmounts{Tokens: 100, TimeMs: 1000}, nil)
	for _, tc := range []struct {
		name string
		add  *api.BudgetAmounts
		want string
	}{
		{"nothing", &api.BudgetAmounts{}, "nothing to add"},
		{"no cost limit", &api.BudgetAmounts{Tokens: 5, CostNanoUsd: 5}, "no cost limit"},
	} {
		if _, err := s.RaiseBudget(tc.add, "bob"); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: RaiseBudget = %v, want ErrInvalid saying %q", tc.name, err, tc.want)
		}
	}
	b, err := s.RaiseBudget(&api.BudgetAmounts{Tokens: 50, TimeMs: 500}, "bob")
	if err != nil {
		t.Fatal(err)
	}
	apply(s, b)
	if l := s.Budget.Sum.GetLimits(); l.GetTokens() != 150 || l.GetTimeMs() != 1500 || l.GetCostNanoUsd() != 0 {
		t.Fatalf("limits after raise = %v, want 150 tokens, 1500 ms, no cost", l)
	}
}

func TestWorkingTime(t *testing.T) {
	s := New()
	s.TaskID = "T1"
	t0 := now
	applyAt(s, t0, Create(CreateInput{Owner: "a", Model: "fake/m", Request: "x", Budget: &api.BudgetAmounts{TimeMs: 10_000}})...) // running from t0
	if left, ok := s.TimeLeft(t0.Add(4 * time.Second)); !ok || left != 6*time.Second {
		t.Fatalf("TimeLeft after 4s = %v %v, want 6s", left, ok)
	}
	// Waiting for an approval stops the clock; running again restarts it.
	applyAt(s, t0.Add(2*time.Second), &api.StatusChanged{Status: api.TaskStatus_TASK_STATUS_AWAITING_APPROVAL})
	applyAt(s, t0.Add(100*time.Second), &api.StatusChanged{Status: api.TaskStatus_TASK_STATUS_RUNNING})
	if left, _ := s.TimeLeft(t0.Add(101 * time.Second)); left != 7*time.Second {
		t.Fatalf("TimeLeft = %v, want 7s (2s + 1s worked)", left)
	}
	// A crash: the last event was at +103s, recovery pauses at +5000s;
	// only the time until the last event counts.
	applyAt(s, t0.Add(103*time.Second), &api.CycleStarted{Cycle: 1})
	applyAt(s, t0.Add(5000*time.Second), s.Recover(t0.Add(5000*time.Second))...)
	if got := s.Budget.Sum.GetSpent().GetTimeMs(); got != 5000 {
		t.Fatalf("worked = %d ms, want 5000 (2s + 3s)", got)
	}
	if _, ok := s.TimeLeft(t0.Add(6000 * time.Second)); ok {
		t.Fatal("TimeLeft of a paused Task reports a running clock")
	}
}

func TestTimeUp(t *testing.T) {
	s := buildBudget(t, &api.BudgetAmounts{TimeMs: 1000}, nil, cycleWithCalls(1, "c1", "c2")...)
	apply(s, []proto.Message{&api.ToolExecutionStarted{CallId: "c1"}})
	got := s.TimeUp(now.Add(2 * time.Second))
	if k := kindsOf(got); !eq(k, []string{"ToolFailed", "StatusChanged"}) {
		t.Fatalf("TimeUp = %v, want the running call stopped and a pause", k)
	}
	if f := got[0].(*api.ToolFailed); f.GetCallId() != "c1" || f.GetKind() != api.ToolFailureKind_TOOL_FAILURE_KIND_CANCELLED || !strings.Contains(f.GetMessage(), "working-time budget") {
		t.Fatalf("stopped call = %v", f)
	}
	sc := got[1].(*api.StatusChanged)
	if sc.GetPauseReason() != api.PauseReason_PAUSE_REASON_BUDGET || sc.GetBudget().GetLimit() != "time" || sc.GetBudget().GetSpent() < 1000 {
		t.Fatalf("pause = %v", sc)
	}
	apply(s, got)
	if s.TimeUp(now) != nil {
		t.Fatal("TimeUp of a paused Task returned events")
	}
}

func TestChildBudget(t *testing.T) {
	limits := &api.BudgetAmounts{Tokens: 1000, CostNanoUsd: 500}
	for _, tc := range []struct {
		name  string
		left  *api.BudgetAmounts
		asked *api.BudgetAmounts
		want  *api.BudgetAmounts
		err   string
	}{
		{"everything left", &api.BudgetAmounts{Tokens: 400, CostNanoUsd: 300}, nil, &api.BudgetAmounts{Tokens: 400, CostNanoUsd: 300}, ""},
		{"asks for less", &api.BudgetAmounts{Tokens: 400, CostNanoUsd: 300}, &api.BudgetAmounts{Tokens: 100}, &api.BudgetAmounts{Tokens: 100, CostNanoUsd: 300}, ""},
		{"asks for more: capped", &api.BudgetAmounts{Tokens: 400, CostNanoUsd: 300}, &api.BudgetAmounts{Tokens: 4000, CostNanoUsd: 1}, &api.BudgetAmounts{Tokens: 400, CostNanoUsd: 1}, ""},
		{"a dimension the parent does not limit", &api.BudgetAmounts{Tokens: 400, CostNanoUsd: 300}, &api.BudgetAmounts{TimeMs: 60_000}, &api.BudgetAmounts{Tokens: 400, CostNanoUsd: 300, TimeMs: 60_000}, ""},
		{"nothing left", &api.BudgetAmounts{Tokens: 0, CostNanoUsd: 300}, nil, nil, "no tokens left"},
	} {
		got, err := ChildBudget(limits, tc.left, tc.asked)
		switch {
		case tc.err != "":
			if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%s: ChildBudget = %v, %v; want an error saying %q", tc.name, got, err, tc.err)
			}
		case err != nil || !proto.Equal(got, tc.want):
			t.Errorf("%s: ChildBudget = %v, %v; want %v", tc.name, got, err, tc.want)
		}
	}
}

func TestRaiseWithin(t *testing.T) {
	left := &api.BudgetAmounts{Tokens: 500, CostNanoUsd: 1000}
	if err := RaiseWithin(&api.BudgetAmounts{Tokens: 500}, left, true, true, false); err != nil {
		t.Fatalf("a raise within what is left: %v", err)
	}
	if err := RaiseWithin(&api.BudgetAmounts{TimeMs: 1 << 30}, left, true, true, false); err != nil {
		t.Fatalf("a raise of a dimension the tree does not limit: %v", err)
	}
	err := RaiseWithin(&api.BudgetAmounts{Tokens: 501, CostNanoUsd: 2000}, left, true, true, false)
	if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "501 tokens asked, the tree has 500 left") || !strings.Contains(err.Error(), "$0.000002 asked") {
		t.Fatalf("RaiseWithin = %v", err)
	}
}

// budgeted is a root Task "P" with limits, its price, and spent tokens of
// its own (one finished Cycle).
func budgeted(t *testing.T, limits *api.BudgetAmounts, price *api.Price, spent uint64) *State {
	t.Helper()
	s := New()
	s.TaskID = "P"
	apply(s, Create(CreateInput{Owner: "alice", Model: "fake/m", Request: "r", Tools: []string{"tasks.spawn"}, ToolsRestricted: true, Budget: limits, Price: price}))
	if spent > 0 {
		apply(s, []proto.Message{&api.CycleStarted{Cycle: 1, Reservation: &api.BudgetReservation{InputTokens: 10, OutputTokens: 10}},
			&api.CycleFinished{Cycle: 1, Usage: &api.Usage{PromptTokens: spent, CompletionTokens: 0}}})
	}
	return s
}

func TestSpawnBudget(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	priced := &api.Price{Known: true, InputNanoUsd: 1_000_000, OutputNanoUsd: 1_000_000}
	for _, tc := range []struct {
		name      string
		s         *State
		in        SpawnInput
		want      *api.BudgetAmounts
		wantPrice bool
		err       string
	}{
		{name: "no limits: the child has none", s: budgeted(t, nil, nil, 0), in: SpawnInput{}, want: nil},
		{name: "capped at the parent's remainder", s: budgeted(t, &api.BudgetAmounts{Tokens: 1000}, nil, 300), in: SpawnInput{}, want: &api.BudgetAmounts{Tokens: 700}},
		{name: "descendants' spend is charged to the parent", s: budgeted(t, &api.BudgetAmounts{Tokens: 1000}, nil, 300),
			in: SpawnInput{DescendantsSpent: &api.BudgetAmounts{Tokens: 600}}, want: &api.BudgetAmounts{Tokens: 100}},
		{name: "asks for less", s: budgeted(t, &api.BudgetAmounts{Tokens: 1000}, nil, 300), in: SpawnInput{Budget: &api.BudgetAmounts{Tokens: 50}}, want: &api.BudgetAmounts{Tokens: 50}},
		{name: "asks for more: capped", s: budgeted(t, &api.BudgetAmounts{Tokens: 1000}, nil, 300), in: SpawnInput{Budget: &api.BudgetAmounts{Tokens: 5000}}, want: &api.BudgetAmounts{Tokens: 700}},
		{name: "nothing left: refused", s: budgeted(t, &api.BudgetAmounts{Tokens: 1000}, nil, 400),
			in: SpawnInput{DescendantsSpent: &api.BudgetAmounts{Tokens: 600}}, err: "no tokens left"},
		{name: "same model: the parent's price", s: budgeted(t, &api.BudgetAmounts{CostNanoUsd: 1_000_000}, priced, 0), in: SpawnInput{},
			want: &api.BudgetAmounts{CostNanoUsd: 1_000_000}, wantPrice: true},
		{name: "another model without a price and a cost limit: refused", s: budgeted(t, &api.BudgetAmounts{CostNanoUsd: 1_000_000}, priced, 0),
			in: SpawnInput{Model: "fake/other"}, err: "no known price"},
		{name: "another model without a price under a daily cost budget: refused", s: budgeted(t, nil, priced, 0),
			in: SpawnInput{Model: "fake/other", DailyCost: true}, err: "budgets.per_owner_day.cost"},
		{name: "a priced model under a daily cost budget", s: budgeted(t, nil, priced, 0),
			in: SpawnInput{Model: "fake/other", DailyCost: true, Price: priced}, want: nil, wantPrice: true},
	} {
		in := tc.in
		in.CallID, in.Request, in.Now = "c", "work", now
		sp, err := tc.s.Spawn("C", in, TreeLimits{})
		if tc.err != "" {
			if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%s: Spawn = %v; want an error saying %q", tc.name, err, tc.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: Spawn: %v", tc.name, err)
			continue
		}
		created := sp.Child[0].(*api.TaskCreated)
		if !proto.Equal(created.GetBudget(), tc.want) {
			t.Errorf("%s: child budget = %v; want %v", tc.name, created.GetBudget(), tc.want)
		}
		if tc.wantPrice != created.GetPrice().GetKnown() {
			t.Errorf("%s: child price = %v", tc.name, created.GetPrice())
		}
	}
}

func TestTreeSpent(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	meta := func(id, parent string, tokens uint64) *api.TaskMeta {
		return &api.TaskMeta{TaskId: id, ParentId: parent, Budget: &api.BudgetSummary{Spent: &api.BudgetAmounts{Tokens: tokens}}}
	}
	metas := []*api.TaskMeta{meta("R", "", 1), meta("A", "R", 10), meta("B", "R", 20), meta("A1", "A", 100), meta("X", "", 1000), meta("X1", "X", 10000)}
	for _, tc := range []struct {
		root string
		want uint64
	}{{"R", 130}, {"A", 100}, {"B", 0}, {"X", 10000}} {
		if got := TreeSpent(tc.root, metas, now).GetTokens(); got != tc.want {
			t.Errorf("TreeSpent(%s) = %d tokens; want %d", tc.root, got, tc.want)
		}
	}
	// A running Task's working time grows until now.
	running := meta("Z", "R", 5)
	running.Budget.Spent.TimeMs = 1000
	running.Budget.RunningSince = timestamppb.New(now.Add(-2 * time.Second))
	if got := NodesSpent(Descendants("R", append(metas, running)), now); got.GetTokens() != 135 || got.GetTimeMs() != 3000 {
		t.Errorf("NodesSpent(R with a running child) = %v; want 135 tokens, 3000 ms", got)
	}
	left, tokens, cost, _ := TreeLeft(&api.BudgetSummary{Limits: &api.BudgetAmounts{Tokens: 200}, Spent: &api.BudgetAmounts{Tokens: 1}}, TreeSpent("R", metas, now), now)
	if left.GetTokens() != 69 || !tokens || cost {
		t.Errorf("TreeLeft = %v %v %v; want 69 tokens left", left, tokens, cost)
	}
}

func TestReserveInTree(t *testing.T) {
	s := buildBudget(t, &api.BudgetAmounts{Tokens: 10_000}, priced)
	step := s.Next(NextOptions{})
	o := ReserveOptions{Now: now, Overhead: 300, OutputTokens: 1000, Tree: true}
	// Without a grant: ask the root, record nothing.
	ask := s.Reserve(step, o)
	if ask.Kind != StepAskBudget || len(ask.Bodies) != 0 || ask.Cycle != step.Cycle || api.ReservedTokens(ask.Reservation) != 1306 {
		t.Fatalf("Reserve without a grant = %v %v %v, want StepAskBudget for 1306 tokens", ask.Kind, kindsOf(ask.Bodies), ask.Reservation)
	}
	// With the grant for this Cycle: the Cycle starts with the granted reservation.
	o.Grant, o.GrantCycle = ask.Reservation, step.Cycle
	got := s.Reserve(step, o)
	if got.Kind != StepStartCycle || got.Bodies[0].(*api.CycleStarted).GetReservation() != ask.Reservation {
		t.Fatalf("Reserve with the grant = %v %v", got.Kind, kindsOf(got.Bodies))
	}
	// A grant for another Cycle does not count.
	o.GrantCycle = step.Cycle + 1
	if k := s.Reserve(step, o).Kind; k != StepAskBudget {
		t.Fatalf("Reserve with another Cycle's grant = %v, want StepAskBudget", k)
	}
	// Its own limits are checked before asking.
	small := buildBudget(t, &api.BudgetAmounts{Tokens: 1000}, priced)
	if k := small.Reserve(small.Next(NextOptions{}), ReserveOptions{Now: now, Overhead: 300, OutputTokens: 1000, Tree: true}).Kind; k != StepBudget {
		t.Fatalf("Reserve over its own limit = %v, want StepBudget", k)
	}
}

func TestTreeGrant(t *testing.T) {
	sum := &api.BudgetSummary{Limits: &api.BudgetAmounts{Tokens: 5000}, Spent: &api.BudgetAmounts{Tokens: 1000}}
	need := &api.BudgetAmounts{Tokens: 1000, TimeMs: 1}
	for _, tc := range []struct {
		name          string
		sum           *api.BudgetSummary
		desc, pending uint64
		want          string // "" granted, else the remaining tokens named
	}{
		{"room left", sum, 1000, 1000, ""},
		{"exactly enough", sum, 2000, 1000, ""},
		{"descendants' spend counts", sum, 3001, 0, "999"},
		{"pending grants count", sum, 0, 3500, "500"},
		{"a root without limits grants all", &api.BudgetSummary{}, 1 << 40, 1 << 40, ""},
	} {
		ex := TreeGrant(tc.sum, &api.BudgetAmounts{Tokens: tc.desc}, &api.BudgetAmounts{Tokens: tc.pending}, need, now)
		switch {
		case tc.want == "" && ex != nil:
			t.Errorf("%s: refused %v", tc.name, ex)
		case tc.want != "" && (ex == nil || ex.GetLimit() != "tokens" || fmt.Sprint(ex.GetRemaining()) != tc.want):
			t.Errorf("%s: TreeGrant = %v, want refused with %s tokens remaining", tc.name, ex, tc.want)
		}
	}
}

func TestTreeRefused(t *testing.T) {
	s := buildBudget(t, &api.BudgetAmounts{Tokens: 10_000}, priced)
	got := s.TreeRefused(&api.BudgetExceeded{Limit: "tokens", LimitAmount: 5000, Spent: 4500, Remaining: 500, Needed: 1306}, &api.BudgetReservation{InputTokens: 306, OutputTokens: 1000}, "ROOT", "")
	if len(got) != 1 {
		t.Fatalf("TreeRefused = %v", got)
	}
	sc := got[0].(*api.StatusChanged)
	if sc.GetPauseReason() != api.PauseReason_PAUSE_REASON_BUDGET || !strings.Contains(sc.GetDetail(), "the budget of task ROOT") || !strings.Contains(sc.GetDetail(), "lemo budget ROOT --add-tokens") {
		t.Fatalf("pause = %v", sc)
	}
	got = s.TreeRefused(nil, nil, "ROOT", "disk error")
	if sc := got[0].(*api.StatusChanged); sc.GetPauseReason() != api.PauseReason_PAUSE_REASON_BUDGET || !strings.Contains(sc.GetDetail(), "could not be checked: disk error") {
		t.Fatalf("pause when the tree's spend could not be read = %v", sc)
	}
}

// Every limited ancestor between a Task and its root is charged what the
// Task and its siblings spend: a Cycle its own limits and the root's allow
// is refused when a middle Task's subtree would exceed the middle's limit.
func TestPathGrant(t *testing.T) {
	meta := func(id, parent string, limit, spent uint64) *api.TaskMeta {
		sum := &api.BudgetSummary{Spent: &api.BudgetAmounts{Tokens: spent}}
		if limit > 0 {
			sum.Limits = &api.BudgetAmounts{Tokens: limit}
		}
		return &api.TaskMeta{TaskId: id, ParentId: parent, Budget: sum}
	}
	// R (the root) → M (limit 10,000, spent 1,000) → C1, C2 (spent 3,000
	// each); M → N (no limit) → G (spent 1,000).
	metas := []*api.TaskMeta{
		meta("R", "", 100_000, 0), meta("M", "R", 10_000, 1000),
		meta("C1", "M", 0, 3000), meta("C2", "M", 0, 3000),
		meta("N", "M", 0, 0), meta("G", "N", 0, 1000), meta("X", "R", 0, 50_000),
	}
	need := &api.BudgetAmounts{Tokens: 1500, TimeMs: 1}
	for _, tc := range []struct {
		name    string
		asker   string
		pending map[string]*api.BudgetAmounts
		need    *api.BudgetAmounts
		who     string // "" granted
	}{
		{"the middle Task has room: 8,000 of 10,000 spent", "C1", nil, need, ""},
		{"the middle's subtree would pass its limit", "C1", nil, &api.BudgetAmounts{Tokens: 2001, TimeMs: 1}, "M"},
		{"a grandchild is charged to the middle too", "G", nil, &api.BudgetAmounts{Tokens: 2001, TimeMs: 1}, "M"},
		{"grants pending in the middle's subtree count", "C1", map[string]*api.BudgetAmounts{"C2": {Tokens: 1000}}, need, "M"},
		{"grants pending elsewhere do not", "C1", map[string]*api.BudgetAmounts{"X": {Tokens: 1000}}, need, ""},
		{"a child of the root has no middle", "X", nil, &api.BudgetAmounts{Tokens: 90_000, TimeMs: 1}, ""},
		{"the middle's own Cycle is charged its subtree's spend", "M", nil, &api.BudgetAmounts{Tokens: 2001, TimeMs: 1}, "M"},
		{"and its children's pending grants", "M", map[string]*api.BudgetAmounts{"G": {Tokens: 1000}}, need, "M"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			who, ex := PathGrant(Descendants("R", metas), "R", tc.asker, tc.pending, tc.need, now)
			if who != tc.who || (tc.who == "") != (ex == nil) {
				t.Fatalf("PathGrant = %q, %v; want refused by %q", who, ex, tc.who)
			}
		})
	}
}

// A grant counts until its asker reports it recorded or asks again; a
// report for another Cycle leaves it pending.
func TestGrants(t *testing.T) {
	need := func(n uint64) *api.BudgetAmounts { return &api.BudgetAmounts{Tokens: n, TimeMs: 1} }
	type op struct {
		kind  string // give, done, asked
		task  string
		cycle uint32
		n     uint64
	}
	for _, tc := range []struct {
		name string
		ops  []op
		want uint64            // tokens held in all
		by   map[string]uint64 // tokens held by Task
	}{
		{"none", nil, 0, map[string]uint64{}},
		{"given grants count", []op{{"give", "A", 1, 100}, {"give", "B", 3, 50}}, 150, map[string]uint64{"A": 100, "B": 50}},
		{"recorded: no longer pending", []op{{"give", "A", 1, 100}, {"give", "B", 3, 50}, {"done", "A", 1, 0}}, 50, map[string]uint64{"B": 50}},
		{"a report of another Cycle leaves it", []op{{"give", "A", 2, 100}, {"done", "A", 1, 0}}, 100, map[string]uint64{"A": 100}},
		{"a new ask drops the asker's earlier grant", []op{{"give", "A", 1, 100}, {"asked", "A", 0, 0}}, 0, map[string]uint64{}},
		{"and only the asker's", []op{{"give", "A", 1, 100}, {"give", "B", 1, 70}, {"asked", "A", 0, 0}, {"give", "A", 2, 30}}, 100, map[string]uint64{"A": 30, "B": 70}},
		{"a report from a Task without a grant changes nothing", []op{{"give", "A", 1, 100}, {"done", "C", 1, 0}}, 100, map[string]uint64{"A": 100}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var g Grants
			for _, o := range tc.ops {
				switch o.kind {
				case "give":
					g.Give(o.task, o.cycle, need(o.n))
				case "done":
					g.Done(o.task, o.cycle)
				case "asked":
					g.Asked(o.task)
				}
			}
			all, by := g.Held()
			if all.GetTokens() != tc.want || g.Len() != len(tc.by) {
				t.Fatalf("Held = %d tokens in %d grants, want %d in %d", all.GetTokens(), g.Len(), tc.want, len(tc.by))
			}
			for task, n := range tc.by {
				if by[task].GetTokens() != n {
					t.Errorf("held by %s = %d tokens, want %d", task, by[task].GetTokens(), n)
				}
			}
		})
	}
}

// An owner's daily budget: the Cycle's charge must fit what the day's
// limits, raised by the day's raises, leave after the day's spend.
func TestCheckDay(t *testing.T) {
	a := func(tokens, cost uint64) *api.BudgetAmounts {
		return &api.BudgetAmounts{Tokens: tokens, CostNanoUsd: cost}
	}
	for _, tc := range []struct {
		name                          string
		limits, raised, spent, charge *api.BudgetAmounts
		want                          string // "" fits, else the limit crossed
		remaining                     uint64
	}{
		{"no daily budget", a(0, 0), a(0, 0), a(1<<40, 1<<40), a(1000, 1000), "", 0},
		{"room left", a(10_000, 0), a(0, 0), a(4000, 0), a(6000, 0), "", 0},
		{"over the token limit", a(10_000, 0), a(0, 0), a(4001, 0), a(6000, 0), "daily tokens", 5999},
		{"a raise makes room", a(10_000, 0), a(1, 0), a(4001, 0), a(6000, 0), "", 0},
		{"a raise of cost leaves tokens alone", a(10_000, 0), a(0, 500), a(4001, 0), a(6000, 0), "daily tokens", 5999},
		{"over the cost limit", a(0, 1000), a(0, 0), a(900, 900), a(10, 101), "daily cost", 100},
		{"nothing left: even a free Cycle waits", a(0, 1000), a(0, 0), a(0, 1000), a(10, 0), "daily cost", 0},
		{"tokens are checked before cost", a(100, 100), a(0, 0), a(100, 100), a(1, 1), "daily tokens", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ex := CheckDay(tc.limits, tc.raised, tc.spent, tc.charge)
			switch {
			case tc.want == "" && ex != nil:
				t.Fatalf("CheckDay = %v, want the Cycle to fit", ex)
			case tc.want != "" && (ex == nil || ex.GetLimit() != tc.want || ex.GetRemaining() != tc.remaining):
				t.Fatalf("CheckDay = %v, want %s crossed with %d remaining", ex, tc.want, tc.remaining)
			}
		})
	}
}

// The pause names the owner's daily limit, spend, remaining, need, the
// reset at UTC midnight and the operator's raise.
func TestDayPause(t *testing.T) {
	s := buildBudget(t, nil, priced)
	s.Owner = "alice"
	day := time.Date(2026, 12, 6, 0, 0, 0, 0, time.UTC)
	ex := CheckDay(&api.BudgetAmounts{Tokens: 5000}, &api.BudgetAmounts{Tokens: 1000}, &api.BudgetAmounts{Tokens: 4000}, &api.BudgetAmounts{Tokens: 2500})
	got := s.DayPause(&DayExceeded{Owner: "alice", Day: day, Raised: &api.BudgetAmounts{Tokens: 1000}, Ex: ex})
	if len(got) != 1 {
		t.Fatalf("DayPause = %v", got)
	}
	sc := got[0].(*api.StatusChanged)
	if sc.GetPauseReason() != api.PauseReason_PAUSE_REASON_BUDGET || sc.GetBudget().GetLimit() != "daily tokens" {
		t.Fatalf("pause = %v", sc)
	}
	for _, w := range []string{"daily tokens budget of owner alice", "limit 6000 tokens today (1000 tokens of it raised today)", "spent 4000 tokens", "remaining 2000 tokens", "needed 2500 tokens", "resets at 2026-12-07 00:00 UTC", "lemo budget --owner alice --add-tokens N", "lemo continue " + s.TaskID} {
		if !strings.Contains(sc.GetDetail(), w) {
			t.Errorf("explanation %q lacks %q", sc.GetDetail(), w)
		}
	}
	// Reserve marks a Cycle's start as checked against the owner's day.
	step := s.Reserve(s.Next(NextOptions{}), ReserveOptions{Now: now, OutputTokens: 100, Day: true})
	if step.Kind != StepStartCycle || !step.DayChecked {
		t.Fatalf("Reserve with a daily budget = %v checked %v, want a Cycle start checked against the day", step.Kind, step.DayChecked)
	}
	// Chain still chains it after what precedes it.
	o := NextOptions{Now: now, Budget: &ReserveOptions{Now: now, OutputTokens: 100, Day: true}}
	if _, steps, _ := s.Chain([]proto.Message{&api.UserMessage{Text: "more"}}, o); len(steps) != 1 || steps[0].Kind != StepStartCycle || !steps[0].DayChecked {
		t.Fatalf("Chain with a daily budget = %v, want the checked Cycle start chained", steps)
	}
}

// A grant pending when the root's read began counts unless the read shows
// its Cycle started (then its reservation is in the Task's spend).
func TestUnrecorded(t *testing.T) {
	need := func(n uint64) *api.BudgetAmounts { return &api.BudgetAmounts{Tokens: n, TimeMs: 1} }
	snap := map[string]Grant{"A": {Cycle: 2, Need: need(100)}, "B": {Cycle: 1, Need: need(10)}, "R": {Cycle: 4, Need: need(1)}}
	nodes := func(a, b uint32) []api.TreeNode {
		return []api.TreeNode{{ID: "A", Cycles: a}, {ID: "B", Cycles: b}, {ID: "X", Cycles: 9}}
	}
	for _, tc := range []struct {
		name       string
		nodes      []api.TreeNode
		rootCycles uint32
		want       uint64
		counted    []string
	}{
		{"nothing recorded yet", nodes(1, 0), 3, 111, []string{"A", "B", "R"}},
		{"A's Cycle 2 read: not counted again", nodes(2, 0), 3, 11, []string{"B", "R"}},
		{"a later Cycle read: the granted one started before", nodes(3, 1), 3, 1, []string{"R"}},
		{"the root's own Cycle recorded", nodes(1, 0), 4, 110, []string{"A", "B"}},
		{"a Task the read did not return still counts", []api.TreeNode{{ID: "X", Cycles: 9}}, 0, 111, []string{"A", "B", "R"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			all, by := Unrecorded(snap, tc.nodes, "R", tc.rootCycles)
			if all.GetTokens() != tc.want || len(by) != len(tc.counted) {
				t.Fatalf("Unrecorded = %d tokens by %v; want %d by %v", all.GetTokens(), by, tc.want, tc.counted)
			}
			for _, id := range tc.counted {
				if by[id] == nil {
					t.Errorf("%s's grant is not counted", id)
				}
			}
		})
	}
}
