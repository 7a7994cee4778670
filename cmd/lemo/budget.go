package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"lemo/actors"
	"lemo/api"
	"lemo/client"
	"lemo/config"
	"lemo/metrics"
	"lemo/persistence"
	"lemo/providers"
	"lemo/providers/pricing"
)

// budgetFlags are a command's budget amounts: lemo run's limits (--max-*)
// or lemo budget's raises (--add-*).
type budgetFlags struct {
	tokens uint64
	cost   usdFlag
	time   time.Duration
}

// usdFlag is a dollar amount in nano-USD.
type usdFlag struct{ nano uint64 }

func (u *usdFlag) String() string {
	if u == nil || u.nano == 0 {
		return ""
	}
	return api.FormatUSD(u.nano)
}

func (u *usdFlag) Set(s string) error {
	n, err := api.ParseUSD(s)
	if err != nil {
		return err
	}
	u.nano = n
	return nil
}

// add registers the flags --max-* (limits) or --add-* (raises).
func (b *budgetFlags) add(fs *flag.FlagSet, raise bool) {
	if raise {
		fs.Uint64Var(&b.tokens, "add-tokens", 0, "raise the token limit by `N`")
		fs.Var(&b.cost, "add-cost", "raise the cost limit by `USD` US dollars (0.50)")
		fs.DurationVar(&b.time, "add-time", 0, "raise the working-time limit by `D` (10m)")
		return
	}
	fs.Uint64Var(&b.tokens, "max-tokens", 0, "budget: at most `N` tokens (input and output of the Task's model calls; default budgets.max_tokens)")
	fs.Var(&b.cost, "max-cost", "budget: at most `USD` US dollars (0.50), priced with the model's price (default budgets.max_cost)")
	fs.DurationVar(&b.time, "max-time", 0, "budget: at most `D` of working time (running, not paused nor waiting for approval; default budgets.max_time)")
}

func (b *budgetFlags) amounts() (*api.BudgetAmounts, error) {
	if b.time < 0 {
		return nil, usageError("a time budget must not be negative (got %s)", b.time)
	}
	a := &api.BudgetAmounts{Tokens: b.tokens, CostNanoUsd: b.cost.nano, TimeMs: uint64(b.time.Milliseconds())}
	if b.time > 0 && a.TimeMs == 0 {
		return nil, usageError("a time budget below a millisecond (%s) is not accepted", b.time)
	}
	if !api.HasBudget(a) {
		return nil, nil
	}
	return a, nil
}

// raiseBudget implements lemo budget.
func raiseBudget(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	f := newClientFlags("budget", "<task id> [--add-tokens N] [--add-cost USD] [--add-time D]\n       lemo budget --owner OWNER [--add-tokens N] [--add-cost USD]",
		"Raise a Task's budget (its owner or an operator), or, with --owner, an owner's daily\n"+
			"budget for the current UTC day (budgets.per_owner_day; an operator); --owner without an\n"+
			"amount shows the owner's day. A Task paused for its budget stays paused: go on with\n"+
			"lemo continue <id>.", stdout, stderr)
	var b budgetFlags
	b.add(f.fs, true)
	owner := f.fs.String("owner", "", "raise the daily budget of `OWNER` for today (UTC) instead of a Task's")
	pos, err := f.parse(args, 0, 1)
	if err != nil {
		return helpOK(err)
	}
	add, err := b.amounts()
	if err != nil {
		return err
	}
	ownerSet := false
	f.fs.Visit(func(fl *flag.Flag) { ownerSet = ownerSet || fl.Name == "owner" })
	switch {
	case ownerSet && len(pos) > 0:
		return usageError("give a task id (a Task's budget) or --owner OWNER (an owner's daily budget), not both")
	case ownerSet:
		return raiseOwnerBudget(ctx, f, *owner, add, stdout)
	case len(pos) == 0:
		return usageError("give the id of the task whose budget to raise, or --owner OWNER for an owner's daily budget")
	}
	if add == nil {
		return usageError("nothing to raise: give --add-tokens N, --add-cost USD or --add-time DURATION")
	}
	c, err := f.connect(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	id, err := resolveTask(ctx, c, pos[0])
	if err != nil {
		return err
	}
	m, err := c.RaiseBudget(ctx, id, add)
	if err != nil {
		return describe(err, id)
	}
	if f.json {
		printJSON(stdout, m)
		return nil
	}
	fmt.Fprintf(stdout, "task %s: budget raised; %s\n", id, client.SpendLine(m.GetBudget(), time.Now()))
	if m.GetStatus() == api.TaskStatus_TASK_STATUS_PAUSED {
		fmt.Fprintf(stdout, "it is paused: go on with lemo continue %s\n", id)
	}
	return nil
}

// raiseOwnerBudget is lemo budget --owner.
func raiseOwnerBudget(ctx context.Context, f *clientFlags, owner string, add *api.BudgetAmounts, stdout io.Writer) error {
	if err := persistence.ValidOwner(owner); err != nil {
		return usageError("--owner: %v", err)
	}
	if add.GetTimeMs() > 0 {
		return usageError("--add-time: a daily budget has no working-time limit; give --add-tokens N or --add-cost USD")
	}
	c, err := f.connect(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	raise := add.GetTokens() > 0 || add.GetCostNanoUsd() > 0
	var ob *api.OwnerBudget
	if raise {
		ob, err = c.RaiseOwnerBudget(ctx, owner, add)
	} else {
		ob, err = c.OwnerBudget(ctx, owner) // nothing to add: show the day
	}
	if err != nil {
		return err
	}
	if f.json {
		printJSON(stdout, ob)
		return nil
	}
	resets := ob.GetResets().AsTime().UTC().Format("2006-01-02 15:04 MST")
	if !raise {
		fmt.Fprintf(stdout, "owner %s on %s (UTC): %s; it resets at %s\n", owner, ob.GetDay(), ownerBudgetLine(ob), resets)
		return nil
	}
	fmt.Fprintf(stdout, "owner %s: daily budget raised for %s (UTC): %s; it resets at %s\n", owner, ob.GetDay(), ownerBudgetLine(ob), resets)
	fmt.Fprintln(stdout, "tasks paused by it stay paused: go on with lemo continue <id>")
	return nil
}

// ownerBudgetLine says what an owner spent today of its daily limits.
func ownerBudgetLine(ob *api.OwnerBudget) string {
	var parts []string
	l, s := ob.GetLimits(), ob.GetSpent()
	if l.GetTokens() > 0 {
		parts = append(parts, fmt.Sprintf("%d of %d tokens spent", s.GetTokens(), l.GetTokens()))
	}
	if l.GetCostNanoUsd() > 0 {
		parts = append(parts, fmt.Sprintf("%s of %s spent", api.FormatUSD(s.GetCostNanoUsd()), api.FormatUSD(l.GetCostNanoUsd())))
	}
	if len(parts) == 0 {
		return fmt.Sprintf("no daily limit (%d tokens, %s spent)", s.GetTokens(), api.FormatUSD(s.GetCostNanoUsd()))
	}
	return strings.Join(parts, ", ")
}

// spendColumns are lemo tasks' TOKENS, COST and TIME cells: used, and
// used/limit where a limit is set.
func spendColumns(b *api.BudgetSummary, now time.Time) (tokens, cost, working string) {
	spent := api.BudgetSpent(b, now)
	l := b.GetLimits()
	tokens = fmt.Sprint(spent.GetTokens())
	if l.GetTokens() > 0 {
		tokens += fmt.Sprintf("/%d", l.GetTokens())
	}
	cost = "-"
	if b.GetPrice().GetKnown() || spent.GetCostNanoUsd() > 0 {
		cost = api.FormatUSD(spent.GetCostNanoUsd())
	}
	if l.GetCostNanoUsd() > 0 {
		cost += "/" + api.FormatUSD(l.GetCostNanoUsd())
	}
	ms := func(v uint64) string { return (time.Duration(v) * time.Millisecond).Round(time.Second).String() }
	working = ms(spent.GetTimeMs())
	if l.GetTimeMs() > 0 {
		working += "/" + ms(l.GetTimeMs())
	}
	return tokens, cost, working
}

// ownerDayBudget is budgets.per_owner_day as the daemon takes it.
func ownerDayBudget(cfg *config.Config) *api.BudgetAmounts {
	return &api.BudgetAmounts{Tokens: uint64(max(cfg.Budgets.PerOwnerDay.Tokens, 0)), CostNanoUsd: configUSD(cfg.Budgets.PerOwnerDay.Cost)}
}

// configUSD is a cost key of the config in nano-dollars (0 when unset:
// Validate checked the rest).
func configUSD(s string) uint64 {
	cost, _ := api.ParseUSD(s) // 0 with an error for ""
	return cost
}

// budgetOptions are the budgets keys as the daemon takes them.
func budgetOptions(cfg *config.Config) actors.BudgetOptions {
	cost := configUSD(cfg.Budgets.MaxCost)
	return actors.BudgetOptions{
		PerOwnerDay:      ownerDayBudget(cfg),
		Default:          &api.BudgetAmounts{Tokens: uint64(max(cfg.Budgets.MaxTokens, 0)), CostNanoUsd: cost, TimeMs: uint64(max(cfg.Budgets.MaxTime, 0).Milliseconds())},
		OutputTokens:     cfg.Budgets.OutputTokens,
		UnreportedTokens: cfg.Budgets.UnreportedToolTokens,
		PricingKey:       "pricing.models (LEMO_PRICING_MODELS)",
	}
}

// newPricer prices models from the providers' published prices, the
// pricing table and the free providers.
func newPricer(cfg *config.Config, provs *providers.Registry) *pricing.Pricer {
	table := map[string]providers.Price{}
	for id, p := range cfg.Pricing.Parsed() {
		table[id] = providers.Price{Input: p.Input, Output: p.Output, CachedInput: p.CachedInput}
	}
	return pricing.New(provs, table, cfg.Pricing.Free)
}

// spendFold folds a Task's budget from the events a renderer shows and
// says when to show it: for a Task with limits, what is used and left
// after each status change and raise; for any Task, what it spent when it
// stops (paused, finished, failed, cancelled).
type spendFold struct {
	sum *api.BudgetSummary
}

func (f *spendFold) event(ev *api.Event) string {
	if f.sum == nil {
		f.sum = &api.BudgetSummary{}
	}
	api.FoldBudget(f.sum, ev)
	if !api.HasBudget(f.sum.GetLimits()) {
		if sc := ev.GetStatusChanged(); sc != nil && sc.GetStatus() != api.TaskStatus_TASK_STATUS_RUNNING && sc.GetStatus() != api.TaskStatus_TASK_STATUS_AWAITING_APPROVAL {
			return "spent: " + client.SpendLine(f.sum, ev.GetTime().AsTime())
		}
		return ""
	}
	switch b := ev.GetBody().(type) {
	case *api.Event_BudgetRaised:
		return "budget raised by " + b.BudgetRaised.GetBy() + ": " + client.SpendLine(f.sum, ev.GetTime().AsTime())
	case *api.Event_StatusChanged:
		return "budget: " + client.SpendLine(f.sum, ev.GetTime().AsTime())
	}
	return ""
}

// The daemon's metrics count spend (the Task's observer is checked for it
// at run time).
var _ actors.SpendObserver = (*metrics.Daemon)(nil)
