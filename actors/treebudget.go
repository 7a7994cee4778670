package actors

import (
	"github.com/asynkron/protoactor-go/actor"

	"lemo/actors/taskstate"
	"lemo/api"
)

// The tree's budget: a tree's remaining budget is its root's, and the
// root Task's actor is the one owner of that arithmetic. Before a Task of
// a tree with a budget starts a Cycle it checks its own limits and asks
// the root (through its ancestors, each a message through the manager);
// the root answers one ask at a time with taskstate.TreeGrant over its
// own spend, its descendants' recorded spend (read from the store for
// each ask) and the grants it gave that are not recorded yet. A grant is
// pending until the Task reports its CycleStarted durable (or a later ask
// of the same Task shows it was), so nothing held only in memory counts as
// spent beyond a grant in flight; a grant never recorded vanishes with it
// (that Cycle never started). A refused Task pauses with reason budget.

// cmdBudgetAsk asks the tree's root to grant a Cycle of Task from.
type cmdBudgetAsk struct {
	from  string
	cycle uint32
	r     *api.BudgetReservation
}

// cmdBudgetAnswer is the root's answer: granted when ex and err are nil;
// limitedBy names the Task whose limit refused (the root's or an
// ancestor's between it and the asker).
type cmdBudgetAnswer struct {
	root      string
	cycle     uint32
	r         *api.BudgetReservation
	ex        *api.BudgetExceeded
	err       string
	limitedBy string
}

// cmdBudgetDone tells the root that the grant for from's Cycle is recorded
// (or was not used): it is no longer pending.
type cmdBudgetDone struct {
	from  string
	cycle uint32
}

// budgetRead carries the descendants' spend read for an ask, the owner's
// Tasks it was derived from and the grants pending (in all and by Task).
type budgetRead struct {
	ask       *cmdBudgetAsk
	pending   *api.BudgetAmounts
	pendingBy map[string]*api.BudgetAmounts
	desc      *api.BudgetAmounts
	metas     []*api.TaskMeta
	err       error
}

type pendingGrant struct {
	cycle uint32
	need  *api.BudgetAmounts
}

// treeBudget is a Task's part of its tree's budget: as an asker, the
// Cycle it asked for and the grant it holds; as a root, the asks queued,
// whether one is being read, and the grants pending.
type treeBudget struct {
	asked      uint32
	grant      *api.BudgetReservation
	grantCycle uint32
	grantRoot  string

	asks    []*cmdBudgetAsk
	reading bool
	pending map[string]pendingGrant
}

// serving reports whether the root has asks to answer (it stays in memory
// until it did).
func (b *treeBudget) serving() bool { return b.reading || len(b.asks) > 0 }

func (b *treeBudget) done(c *cmdBudgetDone) {
	if p, ok := b.pending[c.from]; ok && p.cycle == c.cycle {
		delete(b.pending, c.from)
	}
}

// askBudget asks the tree's root to grant the Cycle of step, once.
func (t *task) askBudget(ctx actor.Context, step taskstate.Step) {
	if t.tb.asked == step.Cycle {
		return
	}
	t.tb.asked = step.Cycle
	to := t.st.ParentID
	if to == "" {
		to = t.id
	}
	t.tell(ctx, to, &cmdBudgetAsk{from: t.id, cycle: step.Cycle, r: step.Reservation})
}

// grantUsed reports a grant recorded with Cycle n's start to the root.
func (t *task) grantUsed(ctx actor.Context, n uint32) {
	if t.tb.grant == nil || t.tb.grantCycle != n {
		return
	}
	t.tell(ctx, t.tb.grantRoot, &cmdBudgetDone{from: t.id, cycle: n})
	t.tb.grant, t.tb.grantCycle, t.tb.grantRoot = nil, 0, ""
}

// onBudgetAsk forwards an ask to the Task's parent, or, at the root,
// queues it.
func (t *task) onBudgetAsk(ctx actor.Context, c *cmdBudgetAsk) {
	if t.st.ParentID != "" {
		t.tell(ctx, t.st.ParentID, c)
		return
	}
	t.tb.asks = append(t.tb.asks, c)
	t.nextBudgetAsk(ctx)
}

// nextBudgetAsk reads the descendants' spend for the first queued ask.
// The asker's earlier grant is no longer pending (it asks only once that
// Cycle's start is recorded or never will be); the other pending grants
// are counted as of now, so one confirmed during the read counts twice at
// worst, never not at all.
func (t *task) nextBudgetAsk(ctx actor.Context) {
	if t.tb.reading || len(t.tb.asks) == 0 {
		return
	}
	a := t.tb.asks[0]
	t.tb.asks[0] = nil
	t.tb.asks = t.tb.asks[1:]
	delete(t.tb.pending, a.from)
	pending := &api.BudgetAmounts{}
	pendingBy := make(map[string]*api.BudgetAmounts, len(t.tb.pending))
	for task, p := range t.tb.pending {
		pending = taskstate.Plus(pending, p.need)
		pendingBy[task] = p.need
	}
	t.tb.reading = true
	self, sys, e, owner, id := ctx.Self(), ctx.ActorSystem(), t.env, t.st.Owner, t.id
	t.env.goroutine(func() {
		r := &budgetRead{ask: a, pending: pending, pendingBy: pendingBy}
		if r.metas, r.err = e.ownerMetas(owner, id); r.err == nil {
			r.desc = taskstate.TreeSpent(id, r.metas, e.now())
		}
		sys.Root.Send(self, r)
	})
}

// onBudgetRead answers an ask: taskstate.TreeGrant.
func (t *task) onBudgetRead(ctx actor.Context, m *budgetRead) {
	t.tb.reading = false
	a := m.ask
	ans := &cmdBudgetAnswer{root: t.id, cycle: a.cycle, r: a.r}
	switch {
	case m.err != nil:
		ans.err = m.err.Error()
	default:
		need := taskstate.Need(a.r)
		if ans.ex = taskstate.TreeGrant(t.st.Budget.Sum, m.desc, m.pending, need, t.env.now()); ans.ex != nil {
			ans.limitedBy = t.id
		} else {
			// Every limited ancestor between the asker and this root is
			// charged the Cycle too.
			ans.limitedBy, ans.ex = taskstate.PathGrant(m.metas, t.id, a.from, m.pendingBy, need, t.env.now())
		}
	}
	if ans.ex == nil && ans.err == "" {
		if t.tb.pending == nil {
			t.tb.pending = map[string]pendingGrant{}
		}
		t.tb.pending[a.from] = pendingGrant{cycle: a.cycle, need: taskstate.Need(a.r)}
	}
	if a.from == t.id {
		t.onBudgetAnswer(ctx, ans, nil)
	} else {
		t.tell(ctx, a.from, ans)
	}
	t.nextBudgetAsk(ctx)
}

// onBudgetAnswer takes the root's answer for the Cycle the Task asked
// for: a grant it starts the Cycle with (reconcile), or the budget pause.
// A stale answer's grant is given back.
func (t *task) onBudgetAnswer(ctx actor.Context, c *cmdBudgetAnswer, r chan reply) {
	granted := c.ex == nil && c.err == ""
	if c.cycle != t.tb.asked || !t.st.Running() || t.st.CycleOpen {
		if c.cycle == t.tb.asked {
			t.tb.asked = 0 // not waiting any more: a continue asks again
		}
		if granted {
			t.tell(ctx, c.root, &cmdBudgetDone{from: t.id, cycle: c.cycle})
		}
		replyTo(r, reply{meta: t.meta})
		return
	}
	t.tb.asked = 0
	if granted {
		t.tb.grant, t.tb.grantCycle, t.tb.grantRoot = c.r, c.cycle, c.root
		replyTo(r, reply{meta: t.meta})
		return
	}
	if c.err != "" {
		t.env.log.Error().Str("task", t.id).Str("root", c.root).Str("err", c.err).Msg("the tree's budget could not be read: pausing")
	}
	by := c.limitedBy
	if by == "" {
		by = c.root
	}
	t.persist(ctx, t.st.TreeRefused(c.ex, c.r, by, c.err), []chan reply{r}, nil)
}
