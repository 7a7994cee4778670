package taskstate

import (
	"fmt"
	"strings"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"lemo/api"
	"lemo/prompt"
)

// Budgets. A Task's budget is state derived from its events, never a
// counter held only in memory: the limits come from TaskCreated.budget and
// BudgetRaised events, the spend from the reservation each CycleStarted
// carries, the usage each CycleFinished reports, BudgetCharged events and
// the times of status changes (api.FoldBudget is the one definition).
//
// The arithmetic is split so that a tree of Tasks can share one budget:
// CheckBudget is a pure function of limits, spend and need, and a Task's
// Ledger only supplies its own spend and its estimate of the next Cycle's
// input. A tree whose remaining budget is its root's calls CheckBudget with
// the root's limits and the tree's spend, in the one actor that owns that
// arithmetic (so concurrent children are serialised), and records each
// child's reservation in the child's CycleStarted as here.

// StepBudget: the budget cannot cover the next Cycle (or the working time
// ran out); the Task pauses with reason budget. Step.Bodies record it.
const StepBudget StepKind = 100

// Ledger is a Task's spend and the estimate of its next Cycle's input,
// folded from its events by State.Apply.
type Ledger struct {
	// Sum is the spend (api.FoldBudget); never nil once an event was
	// applied.
	Sum *api.BudgetSummary
	// last is the time of the last event applied (the working time of a
	// Task recovered after a crash ends there).
	last time.Time
	// content is the estimated tokens of everything the conversation holds
	// (messages, calls, results); startMark is its value when the last
	// Cycle started, inputMark its value when the last Cycle that recorded
	// an input summary started, lastInput that summary's estimate and
	// lastWindow its context window.
	content, startMark, inputMark uint64
	lastInput, lastWindow         uint64
	knownInput                    bool
}

func (l *Ledger) apply(ev *api.Event) {
	if l.Sum == nil {
		l.Sum = &api.BudgetSummary{}
	}
	api.FoldBudget(l.Sum, ev)
	l.last = ev.GetTime().AsTime()
	l.content += contentTokens(ev)
	switch b := ev.Body.(type) {
	case *api.Event_CycleStarted:
		l.startMark = l.content
	case *api.Event_CycleFinished:
		if in := b.CycleFinished.GetInput(); in != nil && in.GetEstimatedTokens() > 0 {
			l.lastInput, l.lastWindow, l.knownInput = in.GetEstimatedTokens(), in.GetWindowTokens(), true
			l.inputMark = l.startMark
		}
	}
}

// contentTokens estimates what ev adds to the conversation the model sees
// (prompt's UTF-8 estimate plus its per-message overhead).
func contentTokens(ev *api.Event) uint64 {
	n := 0
	switch b := ev.Body.(type) {
	case *api.Event_UserMessage:
		n = prompt.MessageOverhead + prompt.Estimate(b.UserMessage.GetText())
	case *api.Event_AssistantMessage:
		n = prompt.MessageOverhead + prompt.Estimate(b.AssistantMessage.GetText()) + prompt.Estimate(b.AssistantMessage.GetReasoning())
	case *api.Event_ToolCallRecorded:
		n = 2 + prompt.Estimate(b.ToolCallRecorded.GetModelName()) + prompt.EstimateBytes(b.ToolCallRecorded.GetArguments())
	case *api.Event_ToolResult:
		n = prompt.MessageOverhead + prompt.EstimateBytes(b.ToolResult.GetRetainedOutput())
	case *api.Event_ToolFailed:
		n = prompt.MessageOverhead + prompt.Estimate(b.ToolFailed.GetMessage())
	}
	return uint64(n)
}

// EstimateInput estimates the input tokens of the Task's next Cycle: the
// input the last Cycle assembled plus what the conversation gained since
// that Cycle started, or, before any Cycle assembled one, overhead (the
// instructions and tool definitions) plus the whole conversation. It is
// capped at 70% of the last known context window (the ceiling a Cycle's
// input never exceeds once the model answered). Recalled evidence of a
// Task's first Cycle is not included; the Cycle's reported usage replaces
// the estimate when it ends.
func (l *Ledger) EstimateInput(overhead uint64) uint64 {
	var est uint64
	if l.knownInput {
		est = l.lastInput + (l.content - l.inputMark)
	} else {
		est = overhead + l.content
	}
	if l.lastWindow > 0 {
		est = min(est, uint64(prompt.Ceiling(int(l.lastWindow), true)))
	}
	return est
}

// CheckBudget returns the limit that need would cross given limits and
// what is spent (including open reservations), nil when every limit set
// covers it. A zero limit is no limit. Working time needs only to be left:
// need.TimeMs is what the explanation names as needed. Tokens are checked
// first, then cost, then time.
func CheckBudget(limits, spent, need *api.BudgetAmounts) *api.BudgetExceeded {
	check := func(name string, limit, spent, need uint64) *api.BudgetExceeded {
		if limit == 0 {
			return nil
		}
		left := uint64(0)
		if limit > spent {
			left = limit - spent
		}
		if need <= left && left > 0 {
			return nil
		}
		return &api.BudgetExceeded{Limit: name, LimitAmount: limit, Spent: spent, Remaining: left, Needed: need}
	}
	if e := check("tokens", limits.GetTokens(), spent.GetTokens(), need.GetTokens()); e != nil {
		return e
	}
	if e := check("cost", limits.GetCostNanoUsd(), spent.GetCostNanoUsd(), need.GetCostNanoUsd()); e != nil {
		return e
	}
	return check("time", limits.GetTimeMs(), spent.GetTimeMs(), need.GetTimeMs())
}

// StepAskBudget: the Task's tree shares its root's budget and the next
// Cycle has no grant yet; the shell asks the root (TreeGrant) with
// Step.Reservation and nothing is recorded until it answers.
const StepAskBudget StepKind = 101

// ReserveOptions are what a Cycle's reservation is computed from.
type ReserveOptions struct {
	// Tree: the Task's Cycles are also granted by its tree's root, which
	// owns the tree's arithmetic; Grant is the root's grant for Cycle
	// GrantCycle (nil: none yet).
	Tree       bool
	Grant      *api.BudgetReservation
	GrantCycle uint32
	Now        time.Time
	// Overhead is the estimated tokens of the instructions and tool
	// definitions (used before any Cycle recorded its input).
	Overhead uint64
	// OutputTokens is the output cap reserved for every Cycle.
	OutputTokens uint64
	// Day: the Task's owner has a daily budget (budgets.per_owner_day),
	// which the store checks when it commits the Cycle's start (CheckDay,
	// Step.DayChecked).
	Day bool
}

// Reservation is what the Task's next Cycle reserves: its estimated input
// and the output cap, priced with the Task's current price.
func (s *State) Reservation(o ReserveOptions) *api.BudgetReservation {
	in := s.Budget.EstimateInput(o.Overhead)
	p := s.Budget.Sum.GetPrice()
	r := &api.BudgetReservation{InputTokens: in, OutputTokens: o.OutputTokens, CostNanoUsd: api.Cost(p, in, 0, o.OutputTokens)}
	if p != nil {
		r.Price = proto.Clone(p).(*api.Price)
	}
	return r
}

// Reserve turns a StepStartCycle into a Cycle that carries its reservation
// in its CycleStarted (committed before the Cycle starts), or, when the
// remaining budget cannot cover it, into StepBudget: the Cycle does not
// start and the Task pauses with the explanation. Other steps pass
// unchanged.
func (s *State) Reserve(step Step, o ReserveOptions) Step {
	if step.Kind != StepStartCycle {
		return step
	}
	r := s.Reservation(o)
	if o.Tree && o.Grant != nil && o.GrantCycle == step.Cycle {
		r = o.Grant
	}
	if ex := CheckBudget(s.Budget.Sum.GetLimits(), api.BudgetSpent(s.Budget.Sum, o.Now), Need(r)); ex != nil {
		return s.BudgetPause(ex, r)
	}
	if o.Tree && r != o.Grant {
		return Step{Kind: StepAskBudget, Cycle: step.Cycle, Reservation: r}
	}
	step = WithReservation(step, r)
	step.DayChecked = o.Day
	return step
}

// SharesTreeBudget reports whether the Task's Cycles need its tree root's
// grant: a child with a limit (its limits were capped by its parent's),
// or a root with a limit and children.
func (s *State) SharesTreeBudget() bool {
	if !api.HasBudget(s.Budget.Sum.GetLimits()) {
		return false
	}
	return s.ParentID != "" || len(s.Children) > 0
}

// TreeGrant is the root's answer to a Cycle of its tree that needs need:
// nil (granted) when the root's limits cover it on top of the root's own
// spend (sum), what its descendants recorded (desc) and the grants
// given and not yet recorded (pending); else the limit it would cross.
// One actor, the root's, calls it for the whole tree, one ask at a time,
// so concurrent children never overspend the tree.
func TreeGrant(sum *api.BudgetSummary, desc, pending, need *api.BudgetAmounts, now time.Time) *api.BudgetExceeded {
	return CheckBudget(sum.GetLimits(), Plus(Plus(api.BudgetSpent(sum, now), desc), pending), need)
}

// TreeRefused is the pause of a Task whose Cycle its tree's root refused
// (ex names the limit: the root's, or an ancestor's between them); nil
// when the Task no longer waits for a Cycle. The explanation names root,
// the Task whose budget to raise. With
// unread (the root could not read the tree's spend) the Task pauses too
// (fail closed), saying so.
func (s *State) TreeRefused(ex *api.BudgetExceeded, r *api.BudgetReservation, root, unread string) []proto.Message {
	if !s.Running() || s.CycleOpen {
		return nil
	}
	if unread != "" {
		return []proto.Message{&api.StatusChanged{Status: api.TaskStatus_TASK_STATUS_PAUSED, PauseReason: api.PauseReason_PAUSE_REASON_BUDGET,
			Detail: fmt.Sprintf("paused: the tree's budget (root task %s) could not be checked: %s; lemo continue %s tries again", root, unread, s.TaskID)}}
	}
	why := fmt.Sprintf("the budget of task %s covers this task's tree below it (what each task spends is charged to every ancestor); estimated input %d + output cap %d tokens", root, r.GetInputTokens(), r.GetOutputTokens())
	return []proto.Message{&api.StatusChanged{Status: api.TaskStatus_TASK_STATUS_PAUSED, PauseReason: api.PauseReason_PAUSE_REASON_BUDGET, Detail: Explain(root, ex, why), Budget: ex}}
}

// Need is what a reservation needs of each limit: its tokens, its cost and
// some working time left.
func Need(r *api.BudgetReservation) *api.BudgetAmounts {
	return &api.BudgetAmounts{Tokens: api.ReservedTokens(r), CostNanoUsd: r.GetCostNanoUsd(), TimeMs: 1}
}

// BudgetPause is the step that pauses the Task because ex refused the
// reservation r (nil when no Cycle was asked for).
func (s *State) BudgetPause(ex *api.BudgetExceeded, r *api.BudgetReservation) Step {
	why := ""
	if r != nil {
		why = fmt.Sprintf("estimated input %d + output cap %d tokens", r.GetInputTokens(), r.GetOutputTokens())
	}
	return Step{Kind: StepBudget, Bodies: []proto.Message{s.budgetPause(ex, why)}}
}

// WithReservation returns the Cycle step with r on its CycleStarted; step
// itself is not changed.
func WithReservation(step Step, r *api.BudgetReservation) Step {
	bodies := make([]proto.Message, len(step.Bodies))
	for i, b := range step.Bodies {
		if cs, ok := b.(*api.CycleStarted); ok && cs.GetCycle() == step.Cycle {
			cs = proto.Clone(cs).(*api.CycleStarted)
			cs.Reservation = r
			b = cs
		}
		bodies[i] = b
	}
	step.Bodies = bodies
	return step
}

// budgetPause is the status change that pauses the Task for ex.
func (s *State) budgetPause(ex *api.BudgetExceeded, why string) *api.StatusChanged {
	return &api.StatusChanged{Status: api.TaskStatus_TASK_STATUS_PAUSED, PauseReason: api.PauseReason_PAUSE_REASON_BUDGET, Detail: Explain(s.TaskID, ex, why), Budget: ex}
}

// Explain says why a budget paused a Task: which limit, spent, remaining,
// needed, and how to go on.
func Explain(taskID string, ex *api.BudgetExceeded, why string) string {
	f, flag := func(v uint64) string { return fmt.Sprintf("%d tokens", v) }, "--add-tokens N"
	what := "the token budget cannot cover the next model call"
	switch ex.GetLimit() {
	case "cost":
		f, flag = api.FormatUSD, "--add-cost USD"
		what = "the cost budget cannot cover the next model call"
	case "time":
		f, flag = func(v uint64) string { return (time.Duration(v) * time.Millisecond).String() }, "--add-time DURATION"
		what = "the working-time budget ran out"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "paused: %s: limit %s, spent %s, remaining %s", what, f(ex.GetLimitAmount()), f(ex.GetSpent()), f(ex.GetRemaining()))
	if ex.GetLimit() != "time" {
		fmt.Fprintf(&b, ", needed %s", f(ex.GetNeeded()))
	}
	if why != "" {
		fmt.Fprintf(&b, " (%s)", why)
	}
	fmt.Fprintf(&b, "; raise it with lemo budget %s %s, then lemo continue", taskID, flag)
	return b.String()
}

// ChildBudget is the budget of a child Task: in each dimension where the
// parent has a limit, what the spawn asked for (0: everything left) but at
// most what the parent has left; where the parent has none, what it asked
// for (0: none). A parent with nothing left in a limited dimension cannot
// spawn (0 would mean no limit): the error says which. The tree's
// remaining budget stays its root's: the child's reservations are also
// checked against the root (CheckBudget with the root's limits and the
// tree's spend).
func ChildBudget(parentLimits, parentLeft, asked *api.BudgetAmounts) (*api.BudgetAmounts, error) {
	var errs []string
	dim := func(name string, limit, left, ask uint64) uint64 {
		switch {
		case limit == 0:
			return ask
		case left == 0:
			errs = append(errs, "no "+name+" left")
			return 0
		case ask == 0 || ask > left:
			return left
		}
		return ask
	}
	out := &api.BudgetAmounts{
		Tokens:      dim("tokens", parentLimits.GetTokens(), parentLeft.GetTokens(), asked.GetTokens()),
		CostNanoUsd: dim("cost", parentLimits.GetCostNanoUsd(), parentLeft.GetCostNanoUsd(), asked.GetCostNanoUsd()),
		TimeMs:      dim("working time", parentLimits.GetTimeMs(), parentLeft.GetTimeMs(), asked.GetTimeMs()),
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("%w: the parent task has %s for a child; raise its budget first", ErrInvalid, strings.Join(errs, ", "))
	}
	return out, nil
}

// RaiseWithin refuses a raise of a child's budget beyond what its
// ancestors have left (left: the root's BudgetLeft, in each dimension the
// root limits; limited says which).
func RaiseWithin(add, left *api.BudgetAmounts, tokens, cost, working bool) error {
	var errs []string
	if tokens && add.GetTokens() > left.GetTokens() {
		errs = append(errs, fmt.Sprintf("%d tokens asked, the tree has %d left", add.GetTokens(), left.GetTokens()))
	}
	if cost && add.GetCostNanoUsd() > left.GetCostNanoUsd() {
		errs = append(errs, fmt.Sprintf("%s asked, the tree has %s left", api.FormatUSD(add.GetCostNanoUsd()), api.FormatUSD(left.GetCostNanoUsd())))
	}
	if working && add.GetTimeMs() > left.GetTimeMs() {
		errs = append(errs, fmt.Sprintf("%s of working time asked, the tree has %s left", time.Duration(add.GetTimeMs())*time.Millisecond, time.Duration(left.GetTimeMs())*time.Millisecond))
	}
	if len(errs) > 0 {
		return fmt.Errorf("%w: the raise exceeds what the task's ancestors have left: %s; raise the root task's budget first", ErrInvalid, strings.Join(errs, "; "))
	}
	return nil
}

// RaiseBudget records a raise of the Task's limits by who. Only limits
// that are set can be raised; the Task's status does not change (a paused
// Task goes on when continued).
func (s *State) RaiseBudget(add *api.BudgetAmounts, by string) ([]proto.Message, error) {
	l := s.Budget.Sum.GetLimits()
	var errs []string
	if !api.HasBudget(add) {
		errs = append(errs, "nothing to add: give --add-tokens, --add-cost or --add-time with an amount above zero")
	}
	if add.GetTokens() > 0 && l.GetTokens() == 0 {
		errs = append(errs, "the task has no token limit to raise")
	}
	if add.GetCostNanoUsd() > 0 && l.GetCostNanoUsd() == 0 {
		errs = append(errs, "the task has no cost limit to raise")
	}
	if add.GetTimeMs() > 0 && l.GetTimeMs() == 0 {
		errs = append(errs, "the task has no working-time limit to raise")
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("%w: raise budget of task %s: %s", ErrInvalid, s.TaskID, strings.Join(errs, "; "))
	}
	return []proto.Message{&api.BudgetRaised{Add: &api.BudgetAmounts{Tokens: add.GetTokens(), CostNanoUsd: add.GetCostNanoUsd(), TimeMs: add.GetTimeMs()}, By: by}}, nil
}

// TimeLeft is the working time the Task has left by now; ok is false when
// it has no working-time limit or is not running (its clock stands).
func (s *State) TimeLeft(now time.Time) (left time.Duration, ok bool) {
	l := s.Budget.Sum.GetLimits().GetTimeMs()
	if l == 0 || s.Budget.Sum.GetRunningSince() == nil {
		return 0, false
	}
	spent := api.BudgetSpent(s.Budget.Sum, now).GetTimeMs()
	if spent >= l {
		return 0, true
	}
	return time.Duration(l-spent) * time.Millisecond, true
}

// TimeUp returns the events that pause a running Task whose working time
// ran out: the model call in flight is cancelled, calls whose execution
// started and that are still open are closed as stopped (the caller
// stopped their tools and recorded what they reported first), and the
// Task pauses with reason budget. nil when the Task is not running.
func (s *State) TimeUp(now time.Time) []proto.Message {
	if !s.Running() {
		return nil
	}
	out := s.closeCycle("cancelled: the working-time budget ran out")
	for _, c := range s.OpenCalls() {
		if c.Started {
			out = append(out, s.cancelRunApprovals(c.ID, "the call was stopped: the working-time budget ran out")...)
			out = append(out, &api.ToolFailed{CallId: c.ID, Kind: api.ToolFailureKind_TOOL_FAILURE_KIND_CANCELLED,
				Message: "stopped: the task's working-time budget ran out while the tool ran; it may have had partial effects"})
		}
	}
	l := s.Budget.Sum.GetLimits().GetTimeMs()
	spent := api.BudgetSpent(s.Budget.Sum, now).GetTimeMs()
	ex := &api.BudgetExceeded{Limit: "time", LimitAmount: l, Spent: spent}
	if l > spent {
		ex.Remaining = l - spent
	}
	return append(out, s.budgetPause(ex, ""))
}

// KnowsInput reports whether a Cycle has recorded its input estimate, so
// the next reservation needs no overhead estimate.
func (l *Ledger) KnowsInput() bool { return l.knownInput }

// workedUntil is the time of the last event applied, as the end of the
// working time of a Task recovered after a crash; nil before any event.
func (l *Ledger) workedUntil() *timestamppb.Timestamp {
	if l.last.IsZero() {
		return nil
	}
	return timestamppb.New(l.last)
}

// Plus returns a + b in each dimension (saturating); nil counts as zero.
func Plus(a, b *api.BudgetAmounts) *api.BudgetAmounts {
	add := func(x, y uint64) uint64 {
		if s := x + y; s >= x {
			return s
		}
		return ^uint64(0)
	}
	return &api.BudgetAmounts{Tokens: add(a.GetTokens(), b.GetTokens()), CostNanoUsd: add(a.GetCostNanoUsd(), b.GetCostNanoUsd()), TimeMs: add(a.GetTimeMs(), b.GetTimeMs())}
}

// TreeSpent is what the descendants of root have spent by now (each one's
// spend is derived from its own history: TaskMeta.budget), found among
// metas by their parent links. It is what the Task root is charged for
// its tree beyond its own spend; root itself is not counted.
func TreeSpent(root string, metas []*api.TaskMeta, now time.Time) *api.BudgetAmounts {
	return NodesSpent(Descendants(root, metas), now)
}

// Descendants returns the descendants of root among metas (found by their
// parent links), breadth first, as the store's children index reads them
// (persistence.Store.Descendants).
func Descendants(root string, metas []*api.TaskMeta) []api.TreeNode {
	kids := map[string][]*api.TaskMeta{}
	for _, m := range metas {
		if p := m.GetParentId(); p != "" {
			kids[p] = append(kids[p], m)
		}
	}
	var out []api.TreeNode
	seen := map[string]bool{root: true}
	queue := []string{root}
	for len(queue) > 0 {
		id := queue[0]
		queue = queue[1:]
		for _, m := range kids[id] {
			if seen[m.GetTaskId()] {
				continue
			}
			seen[m.GetTaskId()] = true
			out = append(out, api.TreeNodeOf(m))
			queue = append(queue, m.GetTaskId())
		}
	}
	return out
}

// NodesSpent is what the Tasks nodes spent by now, together: for a root's
// descendants, what the root is charged for its tree beyond its own spend.
func NodesSpent(nodes []api.TreeNode, now time.Time) *api.BudgetAmounts {
	out := &api.BudgetAmounts{}
	for i := range nodes {
		nodes[i].AddSpent(out, now)
	}
	return out
}

// TreeLeft is what the tree of a root with spend sum has left by now when
// its descendants spent desc: the root's limits less both (the tree's
// remaining budget is its root's); which limits are set as BudgetLeft.
func TreeLeft(sum *api.BudgetSummary, desc *api.BudgetAmounts, now time.Time) (left *api.BudgetAmounts, tokens, cost, working bool) {
	l := sum.GetLimits()
	s := Plus(api.BudgetSpent(sum, now), desc)
	left = &api.BudgetAmounts{Tokens: sat(l.GetTokens(), s.GetTokens()), CostNanoUsd: sat(l.GetCostNanoUsd(), s.GetCostNanoUsd()), TimeMs: sat(l.GetTimeMs(), s.GetTimeMs())}
	return left, l.GetTokens() > 0, l.GetCostNanoUsd() > 0, l.GetTimeMs() > 0
}

// PathGrant checks a Cycle that Task asker needs against the limits of the
// asker and every ancestor between it and the tree's root (the root's are
// TreeGrant's): what a child spends is charged to every ancestor, so each
// limited Task on the path must cover its own spend, its descendants'
// recorded spend, the root's pending grants to Tasks under it, and need
// (for the asker without descendants this is its own Reserve's check).
// nodes are the root's descendants (their links and each one's recorded
// spend), pending the grants not yet recorded by Task. It returns the
// first Task (nearest the asker) whose limit refuses, and how.
func PathGrant(nodes []api.TreeNode, root, asker string, pending map[string]*api.BudgetAmounts, need *api.BudgetAmounts, now time.Time) (string, *api.BudgetExceeded) {
	byID := make(map[string]*api.TreeNode, len(nodes))
	for i := range nodes {
		byID[nodes[i].ID] = &nodes[i]
	}
	parent := func(id string) string {
		if n := byID[id]; n != nil {
			return n.Parent
		}
		return ""
	}
	// under reports whether id is anc or one of its descendants.
	under := func(id, anc string) bool {
		for i := 0; id != "" && i <= maxTreeWalk; i++ {
			if id == anc {
				return true
			}
			id = parent(id)
		}
		return false
	}
	id := asker
	for i := 0; i < maxTreeWalk; i, id = i+1, parent(id) {
		n := byID[id]
		if id == "" || id == root || n == nil {
			return "", nil
		}
		if !api.HasBudget(n.Limits) {
			continue
		}
		spent := &api.BudgetAmounts{}
		for j := range nodes {
			if under(nodes[j].ID, id) {
				nodes[j].AddSpent(spent, now)
			}
		}
		held := &api.BudgetAmounts{}
		for task, p := range pending {
			if under(task, id) {
				held = Plus(held, p)
			}
		}
		if ex := CheckBudget(n.Limits, Plus(spent, held), need); ex != nil {
			return id, ex
		}
	}
	return "", nil
}

// maxTreeWalk bounds a walk up a tree's links (deeper than any limit
// allows; a loop in damaged links ends there).
const maxTreeWalk = 64

// Grants are the Cycles a tree's root granted whose askers have not yet
// reported their CycleStarted durable: each counts as spent from the
// moment it is given until its asker reports it recorded (Done), asks for
// another Cycle (by then the granted one was recorded, and counts in the
// asker's spend, or never will be), or gives it back. The root keeps them
// beyond its actor's restarts (the daemon holds them for it), so a crash
// of the root alone forgets no grant in flight: the tree fails closed. A
// crash of the daemon forgets them with the askers that held them, whose
// Cycles either never started or were recorded with their reservation.
type Grants struct {
	pending map[string]Grant
}

// Grant is one Cycle granted to a Task and what it needs.
type Grant struct {
	Cycle uint32
	Need  *api.BudgetAmounts
}

// Asked takes a new ask of task: its earlier grant is no longer pending.
func (g *Grants) Asked(task string) { delete(g.pending, task) }

// Give records the grant of task's Cycle cycle, which needs need.
func (g *Grants) Give(task string, cycle uint32, need *api.BudgetAmounts) {
	if g.pending == nil {
		g.pending = map[string]Grant{}
	}
	g.pending[task] = Grant{Cycle: cycle, Need: need}
}

// Done takes task's report that its Cycle cycle is recorded (or was not
// used): that grant is no longer pending; another Cycle's stays.
func (g *Grants) Done(task string, cycle uint32) {
	if p, ok := g.pending[task]; ok && p.Cycle == cycle {
		delete(g.pending, task)
	}
}

// Held is what the pending grants need, in all and by Task.
func (g *Grants) Held() (*api.BudgetAmounts, map[string]*api.BudgetAmounts) {
	return Unrecorded(g.Snapshot(), nil, "", 0)
}

// Snapshot copies the pending grants. The root takes it when it starts
// reading its descendants' recorded spend, not when the read arrives: a
// grant reported recorded during the read may be missing from what was
// read, and must still count (Unrecorded).
func (g *Grants) Snapshot() map[string]Grant {
	out := make(map[string]Grant, len(g.pending))
	for task, p := range g.pending {
		out[task] = p
	}
	return out
}

// Unrecorded is what the grants of snap (pending when the root's read of
// its tree began) need beyond what the read saw, in all and by Task: a
// grant of Cycle n to a Task whose read node shows Cycle n or a later one
// started (its reservation is in its spend) is not counted again; every
// other grant counts. root and rootCycles are the root's own: its grants
// to itself are seen in its own spend once its Cycle started.
func Unrecorded(snap map[string]Grant, nodes []api.TreeNode, root string, rootCycles uint32) (*api.BudgetAmounts, map[string]*api.BudgetAmounts) {
	seen := make(map[string]uint32, len(snap))
	if len(snap) > 0 {
		for i := range nodes {
			if _, ok := snap[nodes[i].ID]; ok {
				seen[nodes[i].ID] = nodes[i].Cycles
			}
		}
		if root != "" {
			seen[root] = rootCycles
		}
	}
	all := &api.BudgetAmounts{}
	by := make(map[string]*api.BudgetAmounts, len(snap))
	for task, p := range snap {
		if c, ok := seen[task]; ok && c >= p.Cycle {
			continue
		}
		all = Plus(all, p.Need)
		by[task] = p.Need
	}
	return all, by
}

// Len is the number of pending grants.
func (g *Grants) Len() int { return len(g.pending) }

// CheckDay is the rule of an owner's daily budget: the Cycle's charge (its
// reservation, as the store attributes it to the day) must fit what is
// left of the day's limits (limits, each raised by what operators added
// that day: raised) after the spend recorded that day (spent, open
// reservations included). A zero limit is no limit; working time has none.
// It returns the limit crossed ("daily tokens" or "daily cost"), with the
// amounts as of the day, raises included; nil when the Cycle fits.
func CheckDay(limits, raised, spent, charge *api.BudgetAmounts) *api.BudgetExceeded {
	eff := &api.BudgetAmounts{}
	if limits.GetTokens() > 0 {
		eff.Tokens = Plus(limits, raised).GetTokens()
	}
	if limits.GetCostNanoUsd() > 0 {
		eff.CostNanoUsd = Plus(limits, raised).GetCostNanoUsd()
	}
	ex := CheckBudget(eff, spent, &api.BudgetAmounts{Tokens: charge.GetTokens(), CostNanoUsd: charge.GetCostNanoUsd()})
	if ex != nil {
		ex.Limit = "daily " + ex.GetLimit()
	}
	return ex
}

// DayExceeded is the refusal of a Cycle's start by its owner's daily
// budget (the error the store's check returns).
type DayExceeded struct {
	Owner string
	// Day is the UTC day (its midnight); the budget resets a day later.
	Day    time.Time
	Raised *api.BudgetAmounts
	Ex     *api.BudgetExceeded
}

func (e *DayExceeded) Error() string {
	return fmt.Sprintf("%s budget of owner %s on %s: limit %d, spent %d, remaining %d, needed %d", e.Ex.GetLimit(), e.Owner, e.Day.Format(time.DateOnly),
		e.Ex.GetLimitAmount(), e.Ex.GetSpent(), e.Ex.GetRemaining(), e.Ex.GetNeeded())
}

// DayPause is the pause of a running Task whose Cycle its owner's daily
// budget refused: which limit, spent, remaining, needed, when the budget
// resets (UTC midnight) and how to go on. It is recorded instead of the
// Cycle's start, after what was recorded with it (so the Task's state is
// not checked here: it is the one the start was decided on).
func (s *State) DayPause(e *DayExceeded) []proto.Message {
	f, flag := func(v uint64) string { return fmt.Sprintf("%d tokens", v) }, "--add-tokens N"
	if e.Ex.GetLimit() == "daily cost" {
		f, flag = api.FormatUSD, "--add-cost USD"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "paused: the %s budget of owner %s cannot cover the next model call: limit %s today", e.Ex.GetLimit(), e.Owner, f(e.Ex.GetLimitAmount()))
	if r := e.Raised; r.GetTokens() > 0 || r.GetCostNanoUsd() > 0 {
		n := r.GetTokens()
		if e.Ex.GetLimit() == "daily cost" {
			n = r.GetCostNanoUsd()
		}
		fmt.Fprintf(&b, " (%s of it raised today)", f(n))
	}
	reset := e.Day.Add(24 * time.Hour)
	fmt.Fprintf(&b, ", spent %s, remaining %s, needed %s; it resets at %s (UTC midnight); an operator can raise it for today with lemo budget --owner %s %s, then lemo continue %s",
		f(e.Ex.GetSpent()), f(e.Ex.GetRemaining()), f(e.Ex.GetNeeded()), reset.Format("2006-01-02 15:04 MST"), e.Owner, flag, s.TaskID)
	return []proto.Message{&api.StatusChanged{Status: api.TaskStatus_TASK_STATUS_PAUSED, PauseReason: api.PauseReason_PAUSE_REASON_BUDGET, Detail: b.String(), Budget: e.Ex}}
}
