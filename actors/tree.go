package actors

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"google.golang.org/protobuf/proto"

	"lemo/actors/taskstate"
	"lemo/api"
	"lemo/persistence"
	"lemo/tools"
)

// Agent trees: the shell that carries out taskstate's tree rules. A spawn
// commits the parent's ChildSpawned with the child's creation (one
// transaction); a message or a child's end commits the sender's record with
// the recipient's inbox entry; the recipient takes its inbox into its
// history in a commit that deletes the entries. Cascades follow the
// recorded links through the manager, which activates dormant Tasks.

// Tree commands routed by the manager to a Task (caller: Operator).

// cmdInbox asks a Task to take its inbox into its history.
type cmdInbox struct{}

// cmdStart starts a spawned child (created, not yet running).
type cmdStart struct{}

// cmdCascade carries a parent's pause, continue or cancel to a child.
type cmdCascade struct{ c taskstate.Cascade }

// Requests of a running tree call to its Task.

type spawnReq struct {
	callID, childID string
	in              taskstate.SpawnInput
	reply           chan spawnReply
}

type spawnReply struct {
	id     string
	queued bool
	err    error
}

type waitReq struct {
	ids   []string
	mode  taskstate.WaitMode
	done  <-chan struct{}
	reply chan waitReply
}

type waitReply struct {
	ended []*taskstate.Child
	err   error
}

type sendReq struct {
	callID, to, text string
	peer             taskstate.Peer
	reply            chan sendReply
}

type sendReply struct {
	relation string
	err      error
}

type waitMsgReq struct {
	callID string
	done   <-chan struct{}
	reply  chan []taskstate.Received
}

// inboxRead carries the entries a Task read of its inbox.
type inboxRead struct {
	incarnation uint64
	items       []persistence.InboxItem
	err         error
}

// treeExtra is what an append of the tree adds: appends of other Tasks in
// the same commit, extra keys computed from the stamped events, and the
// Tasks to tell to take their inbox once it is durable.
type treeExtra struct {
	also   []persistence.Append
	extra  func(evs []*api.Event) ([]persistence.KV, error)
	notify []string
}

// treeBridge is a running call's tools.Tree: it asks the call's Task.
type treeBridge struct {
	env    *env
	sys    *actor.ActorSystem
	task   *actor.PID
	taskID string
	callID string
}

var _ tools.Tree = (*treeBridge)(nil)

// ask sends m to the Task and waits for the answer on ch or for ctx.
func ask[T any](ctx context.Context, b *treeBridge, m any, ch chan T) (T, error) {
	b.sys.Root.Send(b.task, m)
	select {
	case r := <-ch:
		return r, nil
	case <-ctx.Done():
		var zero T
		return zero, ctx.Err()
	}
}

func (b *treeBridge) Spawn(ctx context.Context, in tools.SpawnRequest) (string, bool, error) {
	id := persistence.NewTaskID(b.env.now())
	// What the tree's other children spent is charged to this Task: the
	// child's budget is capped at what is left once it is counted. Only a
	// Task with limits caps its children (taskstate.ChildBudget), so only
	// then are its descendants read (the store's children index).
	self, err := b.env.deps.Store.Meta(b.taskID)
	if err != nil {
		return "", false, err
	}
	desc := &api.BudgetAmounts{}
	if api.HasBudget(self.GetBudget().GetLimits()) {
		if desc, err = b.env.descendantsSpent(b.taskID); err != nil {
			return "", false, err
		}
	}
	var price *api.Price
	if in.Model != "" && b.env.deps.Pricer != nil {
		price, _ = b.env.deps.Pricer.Price(ctx, in.Model) // none known: refused only under a cost limit
	}
	ws := ""
	if in.FreshWorkspace {
		if b.env.opts.WorkspaceRoot == "" {
			return "", false, fmt.Errorf("%w: the daemon has no workspace root for a fresh workspace", ErrInvalid)
		}
		ws = filepath.Join(b.env.workspaces.Root, id)
		if err := os.MkdirAll(ws, 0o700); err != nil {
			return "", false, fmt.Errorf("create workspace: %w", err)
		}
	}
	for _, t := range in.Tools {
		if _, ok := b.env.deps.Tools.Get(t); !ok {
			return "", false, fmt.Errorf("%w: unknown tool %q", ErrInvalid, t)
		}
	}
	if in.Model != "" {
		if _, err := b.env.deps.Providers.Model(ctx, in.Model); err != nil {
			return "", false, fmt.Errorf("%w: model %s: %v", ErrInvalid, in.Model, err)
		}
	}
	m := &spawnReq{callID: b.callID, childID: id, reply: make(chan spawnReply, 1), in: taskstate.SpawnInput{
		CallID: b.callID, Request: in.Request, Model: in.Model, Instructions: in.Instructions, Tools: in.Tools, Workspace: ws,
		Budget: &api.BudgetAmounts{Tokens: in.MaxTokens, CostNanoUsd: in.MaxCostNanoUSD, TimeMs: uint64(in.MaxTime.Milliseconds())}, DescendantsSpent: desc, Price: price,
		DailyCost: b.env.ownerDay().GetCostNanoUsd() > 0}}
	r, err := ask(ctx, b, m, m.reply)
	if ws != "" && (err != nil || r.err != nil || r.id != id) {
		_ = os.Remove(ws) // not this call's child: leave no empty folder
	}
	if err != nil {
		return "", false, err
	}
	if r.err == nil && r.id != id {
		// An earlier run of this call spawned the child (the call runs
		// again after a restart): it may still wait for a place.
		if m, err := b.env.deps.Store.Meta(r.id); err == nil {
			r.queued = taskstate.IsQueued(m)
		}
	}
	return r.id, r.queued, r.err
}

func (b *treeBridge) Wait(ctx context.Context, ids []string, any bool, timeout time.Duration) ([]tools.ChildEnd, error) {
	mode := taskstate.WaitAll
	if any {
		mode = taskstate.WaitAny
	}
	wctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	m := &waitReq{ids: ids, mode: mode, done: wctx.Done(), reply: make(chan waitReply, 1)}
	r, err := ask(wctx, b, m, m.reply)
	if err != nil && ctx.Err() == nil {
		// The timeout passed: report what ended so far (the Task answers a
		// wait whose caller stopped waiting at once).
		now := &waitReq{ids: ids, mode: mode, done: wctx.Done(), reply: make(chan waitReply, 1)}
		if r, err2 := ask(ctx, b, now, now.reply); err2 == nil {
			if r.err != nil {
				return nil, r.err
			}
			return ends(r.ended), err
		}
	}
	if err != nil {
		return nil, err
	}
	return ends(r.ended), r.err
}

func ends(cs []*taskstate.Child) []tools.ChildEnd {
	out := make([]tools.ChildEnd, 0, len(cs))
	for _, c := range cs {
		e := c.Ended
		out = append(out, tools.ChildEnd{ID: c.ID, Status: taskstate.StatusName(e.GetStatus()), Answer: e.GetAnswer(), Detail: e.GetDetail(),
			PromptTokens: e.GetUsage().GetPromptTokens(), CompletionTokens: e.GetUsage().GetCompletionTokens()})
	}
	return out
}

func (b *treeBridge) Send(ctx context.Context, to, text string) (tools.Sent, error) {
	if to == "parent" {
		self, err := b.env.deps.Store.Meta(b.taskID)
		if err != nil {
			return tools.Sent{}, err
		}
		if self.GetParentId() == "" {
			return tools.Sent{}, fmt.Errorf("%w: this task has no parent (a person started it)", ErrInvalid)
		}
		to = self.GetParentId()
	}
	peer := taskstate.Peer{ID: to}
	var status api.TaskStatus
	if persistence.ValidTaskID(to) == nil {
		meta, err := b.env.deps.Store.Meta(to)
		switch {
		case err == nil:
			peer.Exists, peer.Owner, peer.ParentID = true, meta.GetOwner(), meta.GetParentId()
			status = meta.GetStatus()
		case !errors.Is(err, persistence.ErrNotFound):
			return tools.Sent{}, err
		}
	}
	m := &sendReq{callID: b.callID, to: to, text: text, peer: peer, reply: make(chan sendReply, 1)}
	r, err := ask(ctx, b, m, m.reply)
	if err != nil {
		return tools.Sent{}, err
	}
	if r.err != nil {
		return tools.Sent{}, r.err
	}
	d := taskstate.MessageDelivery(status)
	return tools.Sent{ID: to, Relation: r.relation, Status: taskstate.StatusName(status), Read: d.Read, Note: d.Note}, nil
}

func (b *treeBridge) WaitMessages(ctx context.Context) ([]tools.TreeMessage, error) {
	m := &waitMsgReq{callID: b.callID, done: ctx.Done(), reply: make(chan []taskstate.Received, 1)}
	rs, err := ask(ctx, b, m, m.reply)
	if err != nil {
		return nil, err
	}
	out := make([]tools.TreeMessage, len(rs))
	for i, r := range rs {
		out[i] = tools.TreeMessage{From: r.From, Text: r.Text}
	}
	return out, nil
}

// treeRequest handles a tree call's request; false when m is none.
func (t *task) treeRequest(ctx actor.Context, m any) bool {
	switch m := m.(type) {
	case *spawnReq:
		t.onSpawn(ctx, m)
	case *waitReq:
		t.waits = append(t.waits, m)
		t.checkWaits()
	case *waitMsgReq:
		t.msgWaits = append(t.msgWaits, m)
		t.checkWaits()
	case *sendReq:
		t.onSend(ctx, m)
	case *inboxRead:
		t.onInboxRead(ctx, m)
	case *budgetRead:
		t.onBudgetRead(ctx, m)
	default:
		return false
	}
	return true
}

// onSpawn spawns the children of m and of the spawn requests queued behind
// it, in one commit: the parent's records and every child's creation.
func (t *task) onSpawn(ctx actor.Context, m *spawnReq) {
	reqs := []*spawnReq{m}
	kept := t.queue[:0]
	for _, q := range t.queue {
		if r, ok := q.(*spawnReq); ok {
			reqs = append(reqs, r)
			continue
		}
		kept = append(kept, q)
	}
	clear(t.queue[len(kept):])
	t.queue = kept
	o := t.env.opts
	var parent []proto.Message
	var also []persistence.Append
	var ok []*spawnReq
	var ids []string
	for _, r := range reqs {
		if id, found := t.st.ExistingChild(r.callID); found {
			r.reply <- spawnReply{id: id}
			continue
		}
		r.in.Earlier, r.in.Now = len(ok), t.env.now()
		sp, err := t.st.Spawn(r.childID, r.in, taskstate.TreeLimits{MaxDepth: o.MaxDepth, MaxChildren: o.MaxChildren})
		if err != nil {
			if errors.Is(err, taskstate.ErrLimit) {
				err = limitError{err}
			}
			r.reply <- spawnReply{err: err}
			continue
		}
		child := taskstate.New()
		child.TaskID = sp.ChildID
		parent = append(parent, sp.Parent...)
		also = append(also, persistence.Append{TaskID: sp.ChildID, Events: child.Stamp(sp.Child, t.env.now())})
		ok = append(ok, r)
		ids = append(ids, sp.ChildID)
	}
	if len(ok) == 0 {
		return
	}
	now := t.env.now()
	t.persistTree(ctx, parent, &treeExtra{also: also}, func(ctx actor.Context) {
		// The manager starts each now, or queues it behind the running
		// children; each call learns which.
		for i, r := range ok {
			r, id := r, ids[i]
			ctx.Send(t.env.tasks, &childStart{id: id, parent: t.id, created: now, reply: func(queued bool) { r.reply <- spawnReply{id: id, queued: queued} }})
		}
	}, func(err error) {
		for _, r := range ok {
			r.reply <- spawnReply{err: err}
		}
	})
}

func (t *task) onSend(ctx actor.Context, m *sendReq) {
	rel, err := t.st.Relation(m.peer)
	if err != nil {
		m.reply <- sendReply{err: err}
		return
	}
	bodies, err := t.st.Send(m.to, m.text, m.callID)
	if err != nil || bodies == nil {
		m.reply <- sendReply{relation: rel, err: err}
		return
	}
	from, to, text := t.id, m.to, m.text
	x := &treeExtra{notify: []string{to}, extra: func(evs []*api.Event) ([]persistence.KV, error) {
		kv, err := persistence.InboxPut(to, &api.InboxEntry{From: from, FromSeq: evs[0].GetSeq(), Text: text})
		return []persistence.KV{kv}, err
	}}
	t.persistTree(ctx, bodies, x, func(actor.Context) { m.reply <- sendReply{relation: rel} }, func(err error) { m.reply <- sendReply{err: err} })
}

// checkWaits answers the waits that are over (or whose call stopped
// waiting).
func (t *task) checkWaits() {
	kept := t.waits[:0]
	for _, w := range t.waits {
		done, ended, err := t.st.WaitState(w.ids, w.mode)
		if err != nil || done || closed(w.done) {
			w.reply <- waitReply{ended: ended, err: err}
			continue
		}
		kept = append(kept, w)
	}
	clear(t.waits[len(kept):])
	t.waits = kept
	keptM := t.msgWaits[:0]
	for _, w := range t.msgWaits {
		after := uint64(0)
		if c := t.st.Calls[w.callID]; c != nil {
			after = c.AfterSeq
		}
		if ms := t.st.MessagesAfter(after); len(ms) > 0 || closed(w.done) {
			w.reply <- ms
			continue
		}
		keptM = append(keptM, w)
	}
	clear(t.msgWaits[len(keptM):])
	t.msgWaits = keptM
}

func closed(ch <-chan struct{}) bool {
	if ch == nil {
		return false
	}
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// readInbox reads the Task's inbox on a goroutine, unless a read or take
// is under way (it reads again once that is recorded).
func (t *task) readInbox(ctx actor.Context) {
	if t.inboxBusy {
		t.inboxAgain = true
		return
	}
	t.inboxBusy = true
	inc, self, sys, store, id := t.incarnation, ctx.Self(), ctx.ActorSystem(), t.env.deps.Store, t.id
	t.env.goroutine(func() {
		items, err := store.Inbox(id, 256)
		sys.Root.Send(self, &inboxRead{incarnation: inc, items: items, err: err})
	})
}

func (t *task) onInboxRead(ctx actor.Context, m *inboxRead) {
	if m.incarnation != t.incarnation {
		return
	}
	done := func() {
		t.inboxBusy = false
		if t.inboxAgain {
			t.inboxAgain = false
			t.readInbox(ctx)
		}
	}
	if m.err != nil {
		t.env.log.Error().Err(m.err).Str("task", t.id).Msg("read the task's inbox")
		done()
		return
	}
	if len(m.items) == 0 || !t.st.Exists() {
		done()
		return
	}
	entries := make([]*api.InboxEntry, len(m.items))
	dels := make([]persistence.KV, len(m.items))
	for i, it := range m.items {
		entries[i] = it.Entry
		dels[i] = persistence.KV{Key: it.Key, Delete: true}
	}
	bodies := t.st.Take(entries)
	if len(m.items) == 256 {
		t.inboxAgain = true // more to take
	}
	x := &treeExtra{extra: func([]*api.Event) ([]persistence.KV, error) { return dels, nil }}
	if len(bodies) == 0 {
		// Entries the Task cannot take: delete them alone.
		store := t.env.deps.Store
		t.env.goroutine(func() {
			if _, err := store.Append(context.Background(), persistence.Append{TaskID: t.id, Extra: dels}); err != nil {
				t.env.log.Error().Err(err).Str("task", t.id).Msg("drop inbox entries")
			}
		})
		done()
		return
	}
	t.persistTree(ctx, bodies, x, func(actor.Context) { done() }, func(error) { done() })
}

// parentEntry is the inbox entry that tells the Task's parent, in the
// commit of evs, that they end the Task or make it run again (nil: they
// do neither, or it is a root).
func (t *task) parentEntry(evs []*api.Event) *api.InboxEntry {
	if e := t.st.EndEntry(evs); e != nil {
		return e
	}
	return t.st.ReopenEntry(evs)
}

// treeCommand handles the tree's commands; false when c is none.
func (t *task) treeCommand(ctx actor.Context, c any, r chan reply) bool {
	switch c := c.(type) {
	case *cmdInbox:
		t.readInbox(ctx)
		replyTo(r, reply{meta: t.meta})
	case *cmdStart:
		bodies := t.st.Start("spawned by task " + t.st.ParentID)
		if bodies == nil && !t.st.Running() {
			// Cancelled while it was queued: its place frees at once.
			ctx.Send(t.env.tasks, &childEnded{id: t.id})
		}
		t.persist(ctx, bodies, []chan reply{r}, nil)
	case *cmdQueued:
		t.persist(ctx, t.st.Queue(c.holding, c.limit), []chan reply{r}, nil)
	case *cmdBudgetAsk:
		t.onBudgetAsk(ctx, c)
		replyTo(r, reply{meta: t.meta})
	case *cmdBudgetAnswer:
		t.onBudgetAnswer(ctx, c, r)
	case *cmdBudgetDone:
		t.budgetDone(c)
		replyTo(r, reply{meta: t.meta})
	case *cmdCascade:
		t.persist(ctx, t.st.FromParent(c.c), []chan reply{r}, func(ctx actor.Context) {
			switch c.c {
			case taskstate.CascadeCancel:
				t.stopWork(ctx)
			case taskstate.CascadePause:
				t.stopCycle(ctx)
			case taskstate.CascadeContinue:
				t.askPlace(ctx)
			}
			t.cascade(ctx, c.c)
		})
	default:
		return false
	}
	return true
}

// cascade carries c to the Task's children that have not ended; each
// carries it on to its own.
func (t *task) cascade(ctx actor.Context, c taskstate.Cascade) {
	for _, id := range t.st.LiveChildren() {
		t.tell(ctx, id, &cmdCascade{c: c})
	}
}

// tell sends a tree command to another Task through the manager (which
// activates a dormant one).
func (t *task) tell(ctx actor.Context, id string, cmd any) {
	ctx.Send(t.env.tasks, &taskCommand{taskID: id, caller: Operator, cmd: cmd})
}

// stopWork stops the Task's model call and cancels its running tools.
func (t *task) stopWork(ctx actor.Context) {
	t.stopCycle(ctx)
	for _, pid := range t.tools {
		ctx.Send(pid, &cancelTool{})
	}
	t.releaseLive(false)
}

// rerunnable reports whether a tool's started call runs again after a
// restart (tools.Rerunnable).
func rerunnable(reg *tools.Registry) func(string) bool {
	if reg == nil {
		return nil
	}
	return func(name string) bool {
		r, ok := reg.Get(name)
		if !ok {
			return false
		}
		rr, ok := r.Tool.(tools.Rerunnable)
		return ok && rr.Rerunnable()
	}
}

// workspaceOwner names the Task whose folder of the workspace root this
// Task works in: its own, or for a child the one it inherited from its
// parent (recorded at the spawn from the parent's recorded workspace).
func (t *task) workspaceOwner() string {
	root := t.env.workspaces.Root
	if t.st.ParentID == "" || root == "" || filepath.Dir(filepath.Clean(t.st.Workspace)) != root {
		return t.id
	}
	return filepath.Base(t.st.Workspace)
}

// limitError is a tree limit's refusal as the tools know it
// (tools.ErrLimit).
type limitError struct{ error }

func (e limitError) Is(target error) bool { return target == tools.ErrLimit }
func (e limitError) Unwrap() error        { return e.error }
