package gateway

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/protobuf/proto"

	"lemo/actors"
	"lemo/actors/taskstate"
	"lemo/api"
)

// pump streams one subscription to its client. It registers with the hub
// first, then replays history from the requested seqs, then forwards live
// updates, dropping events it already sent: the client sees every event
// once, in order. It sends only while the client has credit (Acks return
// it); without credit it queues, and a client that lets the queue pass its
// bound is told it fell behind and the subscription ends. The hub is never
// slowed: the pump always drains it.
type pump struct {
	g     *Gateway
	s     *session
	reqID uint64
	req   *api.SubscribeRequest

	acked atomic.Int64
	kick  chan struct{}
	stop  chan struct{}
	once  sync.Once
}

func newPump(g *Gateway, s *session, reqID uint64, req *api.SubscribeRequest) *pump {
	return &pump{g: g, s: s, reqID: reqID, req: req, kick: make(chan struct{}, 1), stop: make(chan struct{})}
}

// ack returns credit for n consumed updates. Safe from any goroutine.
func (p *pump) ack(n uint32) {
	p.acked.Add(int64(n))
	select {
	case p.kick <- struct{}{}:
	default:
	}
}

// close ends the subscription without telling the client (it asked, or
// its session ended).
func (p *pump) close() { p.once.Do(func() { close(p.stop) }) }

// item is one update waiting to be sent.
type item struct {
	u    *api.Update
	size int
	task string
	seq  uint64
	// below is a TreeEvent's Task (its seq in seq).
	below string
}

type snapTarget struct {
	task string
	next uint64
}

// pumpState is the pump goroutine's own state.
type pumpState struct {
	p      *pump
	ctx    context.Context
	caller actors.Caller
	lim    Limits

	snap     []snapTarget
	snapDone bool
	// seen is, per Task, the last seq queued or known to the client.
	seen     map[string]uint64
	sentLast map[string]uint64
	// belowSeen is, per Task below the subscribed one, the last seq the
	// TreeState sent covers: older TreeEvents held meanwhile are dropped.
	belowSeen map[string]uint64
	out       []item // ready to send, in order
	held      []item // live updates that arrived during the replay
	inflight  []int  // sizes of sent updates not yet acknowledged
	inBytes   int
	// nextSend is when live updates may leave next (Limits.Linger after
	// the last batch).
	nextSend time.Time
}

func (p *pump) run(ctx context.Context) {
	caller := p.s.caller()
	d := p.g.cfg.Daemon
	lim := p.g.cfg.Limits
	if task := p.req.GetTaskId(); task != "" {
		// Unknown or foreign Tasks read as not found before anything else.
		if _, err := d.Task(ctx, caller, task); err != nil {
			p.s.reply(p.reqID, errorResponse(toError(err)))
			return
		}
	}
	l, err := p.g.feeds.join(ctx, caller, p.req.GetTaskId())
	if err != nil {
		p.s.reply(p.reqID, errorResponse(toError(err)))
		return
	}
	defer l.leave()
	st := &pumpState{p: p, ctx: ctx, caller: caller, lim: lim, seen: make(map[string]uint64), sentLast: make(map[string]uint64)}
	var meta *api.TaskMeta
	if task := p.req.GetTaskId(); task != "" {
		if meta, err = d.Task(ctx, caller, task); err != nil {
			p.s.reply(p.reqID, errorResponse(toError(err)))
			return
		}
		if from := p.req.GetFromSeq(); from > 0 {
			st.snap = append(st.snap, snapTarget{task: task, next: from})
			st.seen[task] = from - 1
		}
	} else {
		for _, r := range p.req.GetResume() {
			if _, err := d.Task(ctx, caller, r.GetTaskId()); err != nil {
				continue // unknown, or not the caller's: nothing to replay
			}
			st.snap = append(st.snap, snapTarget{task: r.GetTaskId(), next: r.GetSeq() + 1})
			st.seen[r.GetTaskId()] = r.GetSeq()
		}
	}
	p.s.reply(p.reqID, &api.Response{Result: &api.Response_Subscribed{Subscribed: &api.Subscribed{Subscription: p.req.GetSubscription(), Task: meta}}})

	// Live updates leave at most every Linger: a lone update goes at once,
	// a steady stream (deltas) in batches, which costs far less per update
	// on both sides than a message each.
	linger := time.NewTimer(time.Hour)
	linger.Stop()
	defer linger.Stop()
	lingering := false
	for {
		if n := p.acked.Swap(0); n > 0 {
			st.release(int(n))
		}
		for {
			if err := st.fill(); err != nil {
				st.final(&api.Update{Body: &api.Update_Ended{Ended: &api.Ended{Reason: "read history: " + err.Error()}}})
				return
			}
			if st.snapDone && len(st.out) > 0 && !lingering {
				if wait := time.Until(st.nextSend); wait > 0 {
					linger.Reset(wait)
					lingering = true
				}
			}
			if !lingering {
				st.flush()
			}
			if st.snapDone || len(st.out) >= lim.CreditWindow || !st.credit() {
				break
			}
		}
		if len(st.out)+len(st.held) > lim.MaxQueue {
			st.flush() // what the client has credit for, lingering or not
			st.fellBehind()
			return
		}
		// While lingering the pump does not wake for each update: they
		// wait in its queue and are taken together when it ends.
		updates := l.notify
		if lingering {
			updates = nil
		}
		select {
		case <-linger.C:
			lingering = false
			if !st.take(l) {
				return
			}
		case <-updates:
			if !st.take(l) {
				return
			}
		case <-p.kick:
		case <-p.stop:
			return
		case <-ctx.Done():
			return
		}
	}
}

// take queues what the feed holds for the pump; false ends the pump.
func (st *pumpState) take(l *listener) bool {
	us, over, ended, behind := l.take()
	for _, u := range us {
		if !st.receive(u, true) {
			return false
		}
	}
	switch {
	case over || behind:
		st.flush() // what the client has credit for, lingering or not
		st.fellBehind()
		return false
	case ended != "":
		st.final(&api.Update{Body: &api.Update_Ended{Ended: &api.Ended{Reason: ended}}})
		return false
	}
	return true
}

// receive queues one update from the hub; false ends the pump.
func (st *pumpState) receive(u actors.Update, ok bool) bool {
	switch {
	case !ok:
		st.final(&api.Update{Body: &api.Update_Ended{Ended: &api.Ended{Reason: "the daemon is stopping"}}})
		return false
	case u.FellBehind:
		st.fellBehind()
		return false
	case u.Event != nil:
		st.live(item{u: &api.Update{Body: &api.Update_Event{Event: u.Event}}, task: u.Event.GetTaskId(), seq: u.Event.GetSeq()})
	case u.Delta != nil && !st.p.req.GetNoDeltas():
		st.live(item{u: &api.Update{Body: &api.Update_Delta{Delta: u.Delta}}})
	case u.Tree != nil:
		it := item{u: &api.Update{Body: &api.Update_TreeEvent{TreeEvent: u.Tree}}}
		if taskstate.IsProgress(u.Tree.GetEvent()) {
			// (Approvals are told again as they are: clients key on
			// their ids.)
			it.below, it.seq = u.Tree.GetEvent().GetTaskId(), u.Tree.GetEvent().GetSeq()
		}
		st.live(it)
	}
	return true
}

func (st *pumpState) live(it item) {
	if !st.snapDone {
		st.held = append(st.held, it)
		return
	}
	st.queue(it)
}

// queue appends it unless it is an event already queued or held by the
// client.
func (st *pumpState) queue(it item) {
	if last, ok := st.belowSeen[it.below]; ok && it.below != "" && it.seq <= last {
		return // the TreeState told of it
	}
	if it.task != "" {
		if last, ok := st.seen[it.task]; ok && it.seq <= last {
			return
		}
		st.seen[it.task] = it.seq
	}
	st.out = append(st.out, it)
}

// fill reads history into the queue while the replay lasts and the queue
// is short; at its end it marks the subscription live and releases the
// updates held meanwhile.
func (st *pumpState) fill() error {
	d := st.p.g.cfg.Daemon
	for !st.snapDone && len(st.out) < st.lim.CreditWindow {
		if len(st.snap) == 0 {
			st.snapDone = true
			if task := st.p.req.GetTaskId(); task != "" {
				// What runs below the Task now, so a client attaching
				// mid-run (or again) shows what one attached from the
				// start shows; TreeEvents held meanwhile that it covers
				// are dropped.
				ts, err := d.ProgressBelow(st.ctx, st.caller, task)
				if err != nil {
					return err
				}
				st.belowSeen = make(map[string]uint64)
				for _, te := range ts.GetEvents() {
					ev := te.GetEvent()
					st.belowSeen[ev.GetTaskId()] = max(st.belowSeen[ev.GetTaskId()], ev.GetSeq())
				}
				st.out = append(st.out, item{u: &api.Update{Body: &api.Update_TreeState{TreeState: ts}}})
				// What waits below the Task, so a client that (re)subscribes
				// can ask for it; live TreeEvents follow (an approval
				// requested meanwhile may come twice: clients key on its id).
				below, err := d.PendingBelow(st.ctx, st.caller, task)
				if err != nil {
					return err
				}
				for _, te := range below {
					st.out = append(st.out, item{u: &api.Update{Body: &api.Update_TreeEvent{TreeEvent: te}}})
				}
			}
			st.out = append(st.out, item{u: &api.Update{Body: &api.Update_CaughtUp{CaughtUp: &api.CaughtUp{}}}})
			for _, it := range st.held {
				st.queue(it)
			}
			st.held = nil
			return nil
		}
		t := &st.snap[0]
		evs, err := d.History(st.ctx, st.caller, t.task, t.next, st.lim.SnapshotPage)
		if err != nil {
			return err
		}
		for _, ev := range evs {
			st.queue(item{u: &api.Update{Body: &api.Update_Event{Event: ev}}, task: t.task, seq: ev.GetSeq()})
		}
		if len(evs) < st.lim.SnapshotPage {
			st.snap = st.snap[1:]
		} else {
			t.next = evs[len(evs)-1].GetSeq() + 1
		}
	}
	return nil
}

func (st *pumpState) credit() bool {
	return len(st.inflight) < st.lim.CreditWindow && (st.inBytes < st.lim.MaxUnackedBytes || len(st.inflight) == 0)
}

// release returns the credit of n acknowledged updates.
func (st *pumpState) release(n int) {
	n = min(n, len(st.inflight))
	for _, s := range st.inflight[:n] {
		st.inBytes -= s
	}
	st.inflight = st.inflight[n:]
}

// flush sends queued updates in batches while there is credit.
func (st *pumpState) flush() {
	sent := 0 // of st.out
	for sent < len(st.out) && st.credit() {
		batch := &api.UpdateBatch{Subscription: st.p.req.GetSubscription()}
		bytes := 0
		for sent < len(st.out) && st.credit() {
			it := &st.out[sent]
			if it.size == 0 {
				it.size = cachedSize.Size(it.u)
			}
			if len(batch.Updates) > 0 && bytes+it.size > st.lim.MaxMessageBytes {
				break
			}
			batch.Updates = append(batch.Updates, it.u)
			bytes += it.size
			st.inflight = append(st.inflight, it.size)
			st.inBytes += it.size
			if it.task != "" {
				st.sentLast[it.task] = it.seq
			}
			sent++
		}
		st.p.g.out.send(st.p.s.client, batch)
		if st.snapDone {
			st.nextSend = time.Now().Add(st.lim.Linger)
		}
	}
	clear(st.out[:sent])
	if sent == len(st.out) {
		// All sent (the usual case): the queue keeps its array, where
		// slicing the sent items off its front made appends allocate anew.
		st.out = st.out[:0]
	} else {
		st.out = st.out[sent:]
	}
}

// cachedSize sizes an update with the sizes already known of what it
// holds: an event the store encoded (which computed them) is not sized
// again, field by field, for each of its subscribers. Events are not
// changed once recorded, so a size known is the size.
var cachedSize = proto.MarshalOptions{UseCachedSize: true}

// final sends a last update regardless of credit.
func (st *pumpState) final(u *api.Update) {
	st.p.g.out.send(st.p.s.client, &api.UpdateBatch{Subscription: st.p.req.GetSubscription(), Updates: []*api.Update{u}})
}

func (st *pumpState) fellBehind() {
	fb := &api.FellBehind{}
	for task, seq := range st.sentLast {
		fb.Last = append(fb.Last, &api.TaskSeq{TaskId: task, Seq: seq})
	}
	st.p.g.log.Debug().Str("session", st.p.s.id).Uint64("subscription", st.p.req.GetSubscription()).Msg("a client fell behind; its subscription ended")
	st.final(&api.Update{Body: &api.Update_FellBehind{FellBehind: fb}})
}
