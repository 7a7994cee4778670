package actors

import (
	"fmt"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"lemo/actors/taskstate"
	"lemo/api"
	"lemo/internal/failpoint"
)

// The tree's budget: a tree's remaining budget is its root's, and the
// root Task's actor is the one owner of that arithmetic. Before a Task of
// a tree with a budget starts a Cycle it checks its own limits and asks
// the root (through its ancestors, each a message through the manager);
// the root answers one ask at a time with taskstate.TreeGrant and
// taskstate.PathGrant over its own spend, its descendants' recorded spend
// (read for each ask from the store's children index: the tree alone,
// not the owner's other Tasks) and the grants it gave that are not
// recorded yet (taskstate.Grants). A grant is pending until the Task
// reports its CycleStarted durable (or a later ask of the same Task shows
// it was), so nothing held only in memory counts as spent beyond a grant
// in flight. The root's queued asks and pending grants are kept in a
// rootBook the daemon holds for it across its actor's restarts and
// passivations: a crash of the root actor between a grant and its record
// forgets neither (fail closed). A refused Task pauses with reason budget.

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

// budgetRead carries the descendants read for an ask by the incarnation
// inc of the root, and the grants pending when the read started.
type budgetRead struct {
	inc     uint64
	ask     *cmdBudgetAsk
	pending map[string]taskstate.Grant
	nodes   []api.TreeNode
	err     error
}

// treeBudget is a Task's part of its tree's budget as an asker: the Cycle
// it asked for and the grant it holds (lost with its actor: a restarted
// asker asks again, and its earlier grant stops counting then). book is
// its part as a root, nil until it serves an ask.
type treeBudget struct {
	asked      uint32
	grant      *api.BudgetReservation
	grantCycle uint32
	grantRoot  string

	book *rootBook
}

// rootBook is what a tree's root holds of its tree's budget between
// answers: the asks queued, the one being read, and the grants pending. The daemon keeps it for the root
// (rootBooks) as long as it holds anything, so it outlives the root
// actor's incarnations.
type rootBook struct {
	asks    []*cmdBudgetAsk
	reading *cmdBudgetAsk
	grants  taskstate.Grants
}

func (b *rootBook) empty() bool {
	return b.reading == nil && len(b.asks) == 0 && b.grants.Len() == 0
}

// rootBooks are the roots' books by Task id.
type rootBooks struct {
	mu sync.Mutex
	m  map[string]*rootBook
}

// get returns the book of Task id, creating it when create is set (nil
// otherwise, when there is none).
func (r *rootBooks) get(id string, create bool) *rootBook {
	r.mu.Lock()
	defer r.mu.Unlock()
	b := r.m[id]
	if b == nil && create {
		if r.m == nil {
			r.m = map[string]*rootBook{}
		}
		b = &rootBook{}
		r.m[id] = b
	}
	return b
}

// drop forgets the book of Task id if it holds nothing.
func (r *rootBooks) drop(id string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if b := r.m[id]; b != nil && b.empty() {
		delete(r.m, id)
	}
}

// serving reports whether the root has asks to answer (it stays in memory
// until it did).
func (b *treeBudget) serving() bool {
	return b.book != nil && (b.book.reading != nil || len(b.book.asks) > 0)
}

// adoptBook takes up, as a new incarnation starts, the book a previous
// incarnation of the root left: an ask it was reading when it stopped is
// asked again (its read is dropped when it arrives: budgetRead.inc).
func (t *task) adoptBook() {
	b := t.env.books.get(t.id, false)
	if b == nil {
		return
	}
	t.tb.book = b
	if b.reading != nil {
		b.asks = append([]*cmdBudgetAsk{b.reading}, b.asks...)
		b.reading = nil
	}
}

// dropBook lets the daemon forget the root's book once it holds nothing.
func (t *task) dropBook() {
	if t.tb.book != nil {
		t.env.books.drop(t.id)
	}
}

func (t *task) budgetDone(c *cmdBudgetDone) {
	if b := t.tb.book; b != nil {
		b.grants.Done(c.from, c.cycle)
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

// grantUsed reports a grant recorded with Cycle n's start to the root,
// or given back unused (the owner's daily budget refused that start).
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
	if t.tb.book == nil {
		t.tb.book = t.env.books.get(t.id, true)
	}
	t.tb.book.asks = append(t.tb.book.asks, c)
	t.nextBudgetAsk(ctx)
}

// nextBudgetAsk reads the descendants for the first queued ask. The
// asker's earlier grant is no longer pending (it asks only once that
// Cycle's start is recorded or never will be); the other pending grants
// are taken as of now, when the read starts, and counted unless the read
// shows their Cycle started (taskstate.Unrecorded): one confirmed during
// the read counts once, whether the read saw its record or not.
func (t *task) nextBudgetAsk(ctx actor.Context) {
	b := t.tb.book
	if b == nil || b.reading != nil || len(b.asks) == 0 || t.st == nil {
		return
	}
	a := b.asks[0]
	b.asks[0] = nil
	b.asks = b.asks[1:]
	b.grants.Asked(a.from)
	b.reading = a
	pending := b.grants.Snapshot()
	self, sys, store, id, inc := ctx.Self(), ctx.ActorSystem(), t.env.deps.Store, t.id, t.incarnation
	t.env.goroutine(func() {
		r := &budgetRead{inc: inc, ask: a, pending: pending}
		r.nodes, r.err = store.Descendants(id)
		if r.err != nil {
			r.err = fmt.Errorf("read the spend of task %s's tree: %w", id, r.err)
		}
		sys.Root.Send(self, r)
	})
}

// FailTreeGrant is the failpoint after a tree's root granted a Cycle and
// told the asker, before the asker recorded it: an error makes the root
// actor panic with it there (the argument is the asker's id).
const FailTreeGrant = "actors.tree-grant"

// onBudgetRead answers an ask (treeAnswer).
func (t *task) onBudgetRead(ctx actor.Context, m *budgetRead) {
	b := t.tb.book
	if b == nil || m.inc != t.incarnation || b.reading != m.ask {
		return // read by an earlier incarnation: the ask is read again
	}
	b.reading = nil
	a := m.ask
	ans := treeAnswer(t.id, t.st.Budget.Sum, t.meta.GetCycles(), m, &b.grants, t.env.now())
	if a.from == t.id {
		t.onBudgetAnswer(ctx, ans, nil)
	} else {
		t.tell(ctx, a.from, ans)
	}
	if ans.ex == nil && ans.err == "" && failpoint.Armed() {
		if err := failpoint.Eval(FailTreeGrant, a.from); err != nil {
			panic(err)
		}
	}
	t.nextBudgetAsk(ctx)
}

// treeAnswer is the root's answer to the ask read in m: the tree's limits
// (taskstate.TreeGrant over the root's spend sum, the descendants' and
// the grants pending when the read started that it did not see
// recorded), then every limited Task between the asker and the root
// (taskstate.PathGrant). rootCycles is the root's last recorded Cycle. A
// grant is added to grants.
func treeAnswer(root string, sum *api.BudgetSummary, rootCycles uint32, m *budgetRead, grants *taskstate.Grants, now time.Time) *cmdBudgetAnswer {
	a := m.ask
	ans := &cmdBudgetAnswer{root: root, cycle: a.cycle, r: a.r}
	if m.err != nil {
		ans.err = m.err.Error()
		return ans
	}
	need := taskstate.Need(a.r)
	pending, pendingBy := taskstate.Unrecorded(m.pending, m.nodes, root, rootCycles)
	if ans.ex = taskstate.TreeGrant(sum, taskstate.NodesSpent(m.nodes, now), pending, need, now); ans.ex != nil {
		ans.limitedBy = root
		return ans
	}
	// Every limited ancestor between the asker and this root is charged
	// the Cycle too.
	if ans.limitedBy, ans.ex = taskstate.PathGrant(m.nodes, root, a.from, pendingBy, need, now); ans.ex != nil {
		return ans
	}
	grants.Give(a.from, a.cycle, need)
	return ans
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
