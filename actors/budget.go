package actors

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"lemo/actors/taskstate"
	"lemo/api"
	"lemo/persistence"
	"lemo/prompt"
	"lemo/tools"
)

// Pricer finds a model's price: what its provider publishes, else the
// daemon's pricing table, else a local model's zero price. It may do I/O
// (a provider's model list); the daemon calls it only outside actors, when
// a Task is created or continued with another model, and records the
// price in the Task's history.
type Pricer interface {
	// Price returns the price of model ("provider/model"); a price with
	// known false when none is published nor configured.
	Price(ctx context.Context, model string) (*api.Price, error)
}

// BudgetOptions are the daemon's budget settings.
type BudgetOptions struct {
	// Default is the budget of a Task that sets none in a dimension; zero
	// amounts: no limit.
	Default *api.BudgetAmounts
	// OutputTokens is the output cap each Cycle reserves (default 4096).
	// A Task with a token or cost limit sends it to the provider as the
	// call's maximum output, so the reservation bounds what the call can
	// spend.
	OutputTokens int
	// UnreportedTokens are charged, as an estimate, for a call of a tool
	// that spends model tokens of its own (the delegate) and reported no
	// usage (default 16384).
	UnreportedTokens int
	// PricingKey names the configuration that sets prices, for the error
	// that refuses a cost limit on a model without a known price.
	PricingKey string
	// PerOwnerDay is each owner's daily budget (tokens and cost; zero: no
	// limit): what the Cycles of an owner's Tasks that start on one UTC
	// day may spend together, raised for a day by RaiseOwnerBudget and
	// replaced by SetOwnerDayBudget.
	PerOwnerDay *api.BudgetAmounts
}

// SpendObserver is an Observer that also counts spend (tokens and cost by
// provider and model).
type SpendObserver interface {
	// Spent reports a charge: estimated is true when no usage was
	// reported and the reservation (or a tool's estimate) stands.
	Spent(provider, model string, tokens, costNanoUSD uint64, estimated bool)
}

type cmdRaiseBudget struct {
	add *api.BudgetAmounts
	by  string
}

// timeBudget fires when a running Task's working time may have run out.
type timeBudget struct{}

const defaultOutputTokens = 4096

func (o *BudgetOptions) outputTokens() uint64 {
	if o.OutputTokens <= 0 {
		return defaultOutputTokens
	}
	return uint64(o.OutputTokens)
}

// merged returns the budget of a new Task: what it asked for in each
// dimension, else the daemon's default.
func (o *BudgetOptions) merged(req *api.BudgetAmounts) *api.BudgetAmounts {
	pick := func(a, b uint64) uint64 {
		if a > 0 {
			return a
		}
		return b
	}
	d := o.Default
	out := &api.BudgetAmounts{Tokens: pick(req.GetTokens(), d.GetTokens()), CostNanoUsd: pick(req.GetCostNanoUsd(), d.GetCostNanoUsd()), TimeMs: pick(req.GetTimeMs(), d.GetTimeMs())}
	if !api.HasBudget(out) {
		return nil
	}
	return out
}

// price resolves model's price for a Task with budget; a cost limit on a
// model without a known price is refused, naming the configuration to set.
func (d *Daemon) price(ctx context.Context, model string, budget *api.BudgetAmounts) (*api.Price, error) {
	p := &api.Price{}
	if pr := d.env.deps.Pricer; pr != nil {
		got, err := pr.Price(ctx, model)
		if err != nil && budget.GetCostNanoUsd() > 0 {
			return nil, fmt.Errorf("%w: a cost limit needs the price of model %s: %v", ErrInvalid, model, err)
		}
		if got != nil {
			p = got
		}
	}
	if budget.GetCostNanoUsd() > 0 && !p.GetKnown() {
		key := d.env.opts.Budget.PricingKey
		if key == "" {
			key = "pricing"
		}
		return nil, fmt.Errorf("%w: a cost limit needs the price of model %s, and none is known (its provider publishes none): set %s in the config (an entry with model: %s and input, output, cached_input in USD per million tokens), or give no cost limit", ErrInvalid, model, key, model)
	}
	if d.env.ownerDay().GetCostNanoUsd() > 0 && !p.GetKnown() {
		key := d.env.opts.Budget.PricingKey
		if key == "" {
			key = "pricing"
		}
		return nil, fmt.Errorf("%w: the daily cost budget of each owner (budgets.per_owner_day.cost) needs the price of model %s, and none is known: set %s in the config for it, or choose a priced model", ErrInvalid, model, key)
	}
	return p, nil
}

// RaiseBudget raises a Task's limits (its owner or an operator), recorded
// as an event; a Task paused for its budget goes on when continued.
func (d *Daemon) RaiseBudget(ctx context.Context, c Caller, taskID string, add *api.BudgetAmounts) (*api.TaskMeta, error) {
	if err := d.env.deps.Store.CheckSpace(); err != nil {
		return nil, err
	}
	if err := validTaskID(taskID); err != nil {
		return nil, err
	}
	// A child's raise stays within what its tree has left (its root's
	// limits less the tree's spend). The check reads the store here; a
	// child's Cycles are still each checked against its own limits.
	if m, err := d.env.deps.Store.Meta(taskID); err == nil && m.GetParentId() != "" && (c.Operator || m.GetOwner() == c.Owner) {
		left, tokens, cost, working, err := d.env.treeLeft(m)
		if err != nil {
			return nil, err
		}
		if err := taskstate.RaiseWithin(add, left, tokens, cost, working); err != nil {
			return nil, fmt.Errorf("raise budget of task %s: %w", taskID, err)
		}
	}
	return d.taskCmd(ctx, c, taskID, &cmdRaiseBudget{add: add, by: c.Owner})
}

// continueWith continues the Task, recording the new model's price; a Task
// with a cost limit cannot continue with a model without a known price.
func (t *task) continueWith(c *cmdContinue) ([]proto.Message, error) {
	bodies, err := t.st.Continue(c.model)
	if err != nil {
		return nil, err
	}
	for _, b := range bodies {
		sc, ok := b.(*api.StatusChanged)
		if !ok || sc.GetModel() == "" {
			continue
		}
		if t.st.Budget.Sum.GetLimits().GetCostNanoUsd() > 0 && !c.price.GetKnown() {
			return nil, fmt.Errorf("%w: the task has a cost limit and model %s has no known price: set %s in the config", ErrInvalid, sc.GetModel(), t.pricingKey())
		}
		if t.env.ownerDay().GetCostNanoUsd() > 0 && !c.price.GetKnown() {
			return nil, fmt.Errorf("%w: owners have a daily cost budget (budgets.per_owner_day.cost) and model %s has no known price: set %s in the config", ErrInvalid, sc.GetModel(), t.pricingKey())
		}
		sc.Price = c.price
	}
	return bodies, nil
}

func (t *task) pricingKey() string {
	if k := t.env.opts.Budget.PricingKey; k != "" {
		return k
	}
	return "pricing"
}

// reserveOptions are what the next Cycle's reservation is computed from
// (taskstate.Reserve, through NextOptions.Budget).
func (t *task) reserveOptions() *taskstate.ReserveOptions {
	o := &taskstate.ReserveOptions{Now: t.env.now(), OutputTokens: t.env.opts.Budget.outputTokens(),
		Tree: t.st.SharesTreeBudget(), Grant: t.tb.grant, GrantCycle: t.tb.grantCycle, Day: hasDaily(t.env.ownerDay())}
	if !t.st.Budget.KnowsInput() {
		o.Overhead = t.overhead()
	}
	return o
}

// overhead estimates the instructions and tool definitions of a Cycle.
func (t *task) overhead() uint64 {
	instr := t.env.opts.Instructions
	if instr == "" {
		instr = prompt.DefaultInstructions
	}
	n := prompt.Estimate(instr) + prompt.MessageOverhead
	ts := t.st.ToolSet()
	regs, err := t.env.deps.Tools.Select(ts.Names, ts.Restricted())
	if err != nil {
		regs = t.availableTools()
	}
	for _, r := range regs {
		spec := r.Spec()
		n += prompt.EstimateTool(&spec)
	}
	return uint64(n)
}

// maxOutput is the output cap a Cycle sends: the reserved one when the
// Task has a token or cost limit or its owner a daily budget, else none
// (0).
func (t *task) maxOutput() int {
	l := t.st.Budget.Sum.GetLimits()
	if l.GetTokens() == 0 && l.GetCostNanoUsd() == 0 && !hasDaily(t.env.ownerDay()) {
		return 0
	}
	return int(t.env.opts.Budget.outputTokens())
}

// observeSpend reports the charge ev made, if any, to a SpendObserver.
func (t *task) observeSpend(ev *api.Event) {
	so, ok := t.env.deps.Observer.(SpendObserver)
	if !ok {
		return
	}
	provider, _, _ := strings.Cut(t.st.Model, "/")
	switch b := ev.Body.(type) {
	case *api.Event_CycleFinished:
		u := b.CycleFinished.GetUsage()
		used := u.GetPromptTokens() + u.GetCompletionTokens()
		r := t.lastReservation
		switch {
		case used > 0:
			so.Spent(provider, t.st.Model, used, api.Cost(r.GetPrice(), u.GetPromptTokens(), u.GetCachedPromptTokens(), u.GetCompletionTokens()), false)
		case r != nil:
			so.Spent(provider, t.st.Model, api.ReservedTokens(r), r.GetCostNanoUsd(), true)
		}
		t.lastReservation = nil
	case *api.Event_CycleStarted:
		t.lastReservation = b.CycleStarted.GetReservation()
	case *api.Event_BudgetCharged:
		c := b.BudgetCharged
		so.Spent(provider, t.st.Model, c.GetTokens(), c.GetCostNanoUsd(), c.GetEstimated())
	}
}

// armTimeBudget keeps a timer on a running Task's working time: it fires
// when the time left runs out. It is stopped when the Task stops running.
func (t *task) armTimeBudget(ctx actor.Context) {
	left, ok := t.st.TimeLeft(t.env.now())
	if !ok || t.stopping != nil {
		t.stopTimeBudget()
		return
	}
	if t.timeTimer != nil {
		return
	}
	self, sys := ctx.Self(), ctx.ActorSystem()
	t.timeTimer = time.AfterFunc(left, func() { sys.Root.Send(self, &timeBudget{}) })
}

func (t *task) stopTimeBudget() {
	if t.timeTimer != nil {
		t.timeTimer.Stop()
		t.timeTimer = nil
	}
}

// onTimeBudget stops a Task whose working time ran out: its model call and
// tools are stopped now, and the pause is recorded once the tools have
// reported (recordTimeUp), so each tool's outcome is recorded.
func (t *task) onTimeBudget(ctx actor.Context) {
	t.timeTimer = nil
	left, ok := t.st.TimeLeft(t.env.now())
	if !ok || t.stopping != nil || t.timeUp {
		return
	}
	if left > 0 {
		return // raised meanwhile: settle arms the timer again
	}
	t.env.log.Info().Str("task", t.id).Int("tools", len(t.tools)).Msg("the working-time budget ran out: stopping the task's model call and tools")
	t.timeUp = true
	t.stopCycle(ctx)
	for id, pid := range t.tools {
		if _, already := t.stopped[id]; !already {
			t.stopped[id] = "the task's working-time budget (it ran out)"
			ctx.Send(pid, &cancelTool{})
		}
	}
}

// recordTimeUp records the pause of a Task whose working time ran out once
// no tool of it runs any more.
func (t *task) recordTimeUp(ctx actor.Context) {
	if len(t.tools) > 0 {
		return
	}
	bodies := t.st.TimeUp(t.env.now())
	t.timeUp = false
	t.persist(ctx, bodies, nil, nil)
}

// toolCharge charges a call of a tool that spends model tokens of its own
// (tools.Spender, the delegate): what its output reports, else an
// estimate marked as such (Options.Budget.UnreportedTokens).
func (t *task) toolCharge(tool string, m *toolResult) []proto.Message {
	reg, ok := t.env.deps.Tools.Get(tool)
	if !ok {
		return nil
	}
	sp, ok := reg.Tool.(tools.Spender)
	if !ok {
		return nil
	}
	if m.err == nil {
		if s, ok := sp.Spent(m.output); ok {
			return []proto.Message{&api.BudgetCharged{CallId: m.callID, Tokens: uint64(max(s.Tokens, 0)), CostNanoUsd: api.PerMillion(s.CostUSD), Source: s.Source}}
		}
	}
	n := t.env.opts.Budget.unreportedTokens()
	// Priced like the Task's own model: the agent's price is unknown.
	return []proto.Message{&api.BudgetCharged{CallId: m.callID, Tokens: n, CostNanoUsd: api.Cost(t.st.Budget.Sum.GetPrice(), n/2, 0, n/2), Estimated: true, Source: tool + " (no usage reported: estimated)"}}
}

const defaultUnreportedTokens = 16384

func (o *BudgetOptions) unreportedTokens() uint64 {
	if o.UnreportedTokens <= 0 {
		return defaultUnreportedTokens
	}
	return uint64(o.UnreportedTokens)
}

// recovered adds to the recovery bodies of s an estimated charge for every
// call of a tool that spends model tokens of its own (the delegate) whose
// outcome is now unknown: what its agent spent before the crash is not
// known, so an estimate counts (fail closed).
func (o *BudgetOptions) recovered(reg *tools.Registry, s *taskstate.State, bodies []proto.Message) []proto.Message {
	var extra []proto.Message
	for _, b := range bodies {
		f, ok := b.(*api.ToolFailed)
		if !ok || f.GetKind() != api.ToolFailureKind_TOOL_FAILURE_KIND_OUTCOME_UNKNOWN {
			continue
		}
		c := s.Calls[f.GetCallId()]
		if c == nil {
			continue
		}
		r, ok := reg.Get(c.Tool)
		if !ok {
			continue
		}
		if _, ok := r.Tool.(tools.Spender); !ok {
			continue
		}
		n := o.unreportedTokens()
		extra = append(extra, &api.BudgetCharged{CallId: c.ID, Tokens: n, CostNanoUsd: api.Cost(s.Budget.Sum.GetPrice(), n/2, 0, n/2), Estimated: true,
			Source: c.Tool + " (outcome unknown after a crash: estimated)"})
	}
	return append(bodies, extra...)
}

// recoveryCharge is recovered over reg, for the recovery at startup.
func (o BudgetOptions) recoveryCharge(reg *tools.Registry) func(*taskstate.State, []proto.Message) []proto.Message {
	return func(s *taskstate.State, b []proto.Message) []proto.Message { return o.recovered(reg, s, b) }
}

// descendantsSpent is what the descendants of Task id have spent by now,
// derived from their recorded histories as the store's children index
// keeps them (persistence.Store.Descendants). It reads the store: call it
// outside actors.
func (e *env) descendantsSpent(id string) (*api.BudgetAmounts, error) {
	nodes, err := e.deps.Store.Descendants(id)
	if err != nil {
		return nil, fmt.Errorf("read the spend of task %s's tree: %w", id, err)
	}
	return taskstate.NodesSpent(nodes, e.now()), nil
}

// treeLeft is what the tree of the Task whose meta is m has left: its
// root's limits less the spend of the root and all its descendants; the
// root's meta and which limits it sets.
func (e *env) treeLeft(m *api.TaskMeta) (left *api.BudgetAmounts, tokens, cost, working bool, err error) {
	root := m
	for root.GetParentId() != "" {
		if root, err = e.deps.Store.Meta(root.GetParentId()); err != nil {
			return nil, false, false, false, fmt.Errorf("read the ancestors of task %s: %w", m.GetTaskId(), err)
		}
	}
	desc, err := e.descendantsSpent(root.GetTaskId())
	if err != nil {
		return nil, false, false, false, err
	}
	left, tokens, cost, working = taskstate.TreeLeft(root.GetBudget(), desc, e.now())
	return left, tokens, cost, working, nil
}

func hasDaily(l *api.BudgetAmounts) bool {
	return l.GetTokens() > 0 || l.GetCostNanoUsd() > 0
}

// ownerDay is each owner's daily budget in force (SetOwnerDayBudget).
func (e *env) ownerDay() *api.BudgetAmounts { return e.dayLimits.Load() }

// SetOwnerDayBudget replaces each owner's daily budget (nil or zero
// amounts: none); Cycles that start from now on are checked against it.
// It is safe to call at any time (a configuration reload).
func (d *Daemon) SetOwnerDayBudget(l *api.BudgetAmounts) {
	d.env.dayLimits.Store(&api.BudgetAmounts{Tokens: l.GetTokens(), CostNanoUsd: l.GetCostNanoUsd()})
}

// dayCheck is the store's check of a Cycle's start against the Task's
// owner's daily budget (taskstate.CheckDay); nil without one.
func (t *task) dayCheck() persistence.DayCheck {
	limits, owner := t.env.ownerDay(), t.st.Owner
	if !hasDaily(limits) {
		return nil
	}
	return func(day time.Time, spent, raised, charge *api.BudgetAmounts) error {
		if ex := taskstate.CheckDay(limits, raised, spent, charge); ex != nil {
			return &taskstate.DayExceeded{Owner: owner, Day: day, Raised: raised, Ex: ex}
		}
		return nil
	}
}

// RaiseOwnerBudget raises owner's daily budget for the current UTC day by
// add (tokens, cost), recorded in the store; operators only. Tasks paused
// by the daily budget go on when continued. It returns the owner's budget
// for the day after the raise.
func (d *Daemon) RaiseOwnerBudget(ctx context.Context, c Caller, owner string, add *api.BudgetAmounts) (*api.OwnerBudget, error) {
	if !c.Operator {
		return nil, fmt.Errorf("%w: only an operator raises an owner's daily budget", ErrPermission)
	}
	if err := persistence.ValidOwner(owner); err != nil {
		return nil, fmt.Errorf("%w: owner %q: %v", ErrInvalid, owner, err)
	}
	var errs []string
	if add.GetTimeMs() > 0 {
		errs = append(errs, "a daily budget has no working-time limit (give --add-tokens or --add-cost)")
	}
	l := d.env.ownerDay()
	if add.GetTokens() > 0 && l.GetTokens() == 0 {
		errs = append(errs, "there is no daily token limit to raise (budgets.per_owner_day.tokens is not set)")
	}
	if add.GetCostNanoUsd() > 0 && l.GetCostNanoUsd() == 0 {
		errs = append(errs, "there is no daily cost limit to raise (budgets.per_owner_day.cost is not set)")
	}
	if add.GetTokens() == 0 && add.GetCostNanoUsd() == 0 && len(errs) == 0 {
		errs = append(errs, "nothing to add: give --add-tokens N or --add-cost USD above zero")
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("%w: raise the daily budget of owner %s: %s", ErrInvalid, owner, strings.Join(errs, "; "))
	}
	if err := d.env.deps.Store.CheckSpace(); err != nil {
		return nil, err
	}
	now := d.env.now()
	if err := d.env.deps.Store.RaiseDay(owner, now, persistence.NewTaskID(now), add); err != nil {
		return nil, fmt.Errorf("raise the daily budget of owner %s: %w", owner, err)
	}
	return d.OwnerBudget(ctx, c, owner)
}

// OwnerBudget returns owner's daily budget for the current UTC day: the
// limits (raises included), the raises and the spend recorded. An owner
// sees its own; an operator any.
func (d *Daemon) OwnerBudget(ctx context.Context, c Caller, owner string) (*api.OwnerBudget, error) {
	if !c.CanSee(owner) {
		return nil, fmt.Errorf("%w: owner %s", ErrNotFound, owner)
	}
	now := d.env.now()
	spent, raised, err := d.env.deps.Store.DaySpend(owner, now)
	if err != nil {
		return nil, err
	}
	l := d.env.ownerDay()
	limits := &api.BudgetAmounts{}
	if l.GetTokens() > 0 {
		limits.Tokens = taskstate.Plus(l, raised).GetTokens()
	}
	if l.GetCostNanoUsd() > 0 {
		limits.CostNanoUsd = taskstate.Plus(l, raised).GetCostNanoUsd()
	}
	midnight := time.Date(now.UTC().Year(), now.UTC().Month(), now.UTC().Day(), 0, 0, 0, 0, time.UTC)
	return &api.OwnerBudget{Owner: owner, Day: midnight.Format(time.DateOnly), Limits: limits, Raised: raised, Spent: spent, Resets: timestamppb.New(midnight.Add(24 * time.Hour))}, nil
}
