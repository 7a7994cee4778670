package actors

import (
	"context"
	"fmt"
	"sync"

	"github.com/asynkron/protoactor-go/actor"

	"lemo/actors/taskstate"
	"lemo/api"
)

// Update is one item of a subscription: a committed event, a live delta,
// or the notice that the subscriber fell behind (the subscription then
// ends; resume from LastSeq + 1).
type Update struct {
	Event *api.Event
	Delta *api.Delta
	// Tree is an event of a Task below the subscribed one (see
	// api.TreeEvent); it carries none of the subscribed Task's seqs.
	Tree *api.TreeEvent
	// FellBehind ends the subscription: the subscriber did not keep up.
	FellBehind bool
	// LastSeq is, with FellBehind, the last seq delivered for the
	// subscribed Task.
	LastSeq uint64
}

// subscriber is the hub's side of one subscription.
type subscriber struct {
	taskID string // "" = every Task the caller may see
	caller Caller
	// queue holds the updates offered and not yet taken, at most max of
	// them (queue[head:]). It grows as updates wait, where a channel of
	// max would hold max × 40 bytes from the start (40 KB a subscription
	// by default, 2 MB for fifty clients) although a subscriber that keeps
	// up has a few at a time; ready tells the reader that it is not empty.
	mu    sync.Mutex
	queue []Update
	head  int
	max   int
	ready chan struct{}
	// ended is closed by the hub when it drops the subscriber (it fell
	// behind, or the hub stopped); behind says which.
	ended  chan struct{}
	once   sync.Once
	behind bool
}

func newSubscriber(taskID string, c Caller, max int) *subscriber {
	return &subscriber{taskID: taskID, caller: c, max: max, ready: make(chan struct{}, 1), ended: make(chan struct{})}
}

func (s *subscriber) end(behind bool) {
	s.once.Do(func() {
		s.behind = behind
		close(s.ended)
	})
}

func (s *subscriber) wants(taskID, owner string) bool {
	return (s.taskID == "" || s.taskID == taskID) && s.caller.CanSee(owner)
}

// update is what s gets of ev, an event of an owner's Task with the given
// ancestors: the event itself on a subscription to the Task (or to every
// Task), a TreeEvent on one to an ancestor, else nothing. A descendant has
// its root's owner; the owner check holds for it all the same.
func (s *subscriber) update(ev *api.Event, owner string, ancestors []string) (Update, bool) {
	if s.wants(ev.GetTaskId(), owner) {
		return Update{Event: ev}, true
	}
	if len(ancestors) == 0 || !s.caller.CanSee(owner) {
		return Update{}, false
	}
	if path := taskstate.Forward(s.taskID, ancestors, ev); path != nil {
		return Update{Tree: &api.TreeEvent{Path: path, Event: ev}}, true
	}
	return Update{}, false
}

// offer queues u without blocking; a full queue drops the subscriber.
func (s *subscriber) offer(u Update) bool {
	s.mu.Lock()
	n := len(s.queue) - s.head
	if n >= s.max {
		s.mu.Unlock()
		s.end(true)
		return false
	}
	if len(s.queue) == cap(s.queue) && s.head > 0 {
		// Move the waiting updates to the front rather than grow: the
		// array stays within twice what waited at once.
		copy(s.queue, s.queue[s.head:])
		clear(s.queue[n:])
		s.queue, s.head = s.queue[:n], 0
	}
	s.queue = append(s.queue, u)
	s.mu.Unlock()
	if n == 0 {
		select {
		case s.ready <- struct{}{}:
		default:
		}
	}
	return true
}

// take returns the oldest update waiting, if any.
func (s *subscriber) take() (Update, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.head == len(s.queue) {
		return Update{}, false
	}
	u := s.queue[s.head]
	s.queue[s.head] = Update{}
	s.head++
	if s.head == len(s.queue) {
		s.queue, s.head = s.queue[:0], 0
	}
	return u, true
}

type hubSubscribe struct {
	sub  *subscriber
	done chan struct{}
}

type hubUnsubscribe struct{ sub *subscriber }

type hubEvents struct {
	owner string
	// ancestors of the events' Task, root first (nil for a root): their
	// subscriptions get the events taskstate.ForwardedUp as TreeEvents.
	ancestors []string
	events    []*api.Event
}

type hubDelta struct {
	owner string
	delta *api.Delta
}

// hub fans committed events and live deltas out to subscribers. It never
// blocks: a subscriber that cannot keep up is dropped and told so.
type hub struct {
	env *env
	// subs are the subscribers by the Task they subscribed to ("": every
	// Task): an event is offered to those of its Task, of every Task and
	// of its ancestors only, not to every subscriber.
	subs map[string]map[*subscriber]struct{}
	// below is the progress of the running child Tasks (ProgressBelow).
	below belowTracker
}

func newHub(e *env) *hub { return &hub{env: e, subs: make(map[string]map[*subscriber]struct{})} }

func (h *hub) add(s *subscriber) {
	set := h.subs[s.taskID]
	if set == nil {
		set = make(map[*subscriber]struct{})
		h.subs[s.taskID] = set
	}
	set[s] = struct{}{}
}

func (h *hub) remove(s *subscriber) {
	if set := h.subs[s.taskID]; set != nil {
		delete(set, s)
		if len(set) == 0 {
			delete(h.subs, s.taskID)
		}
	}
}

// offerEvent offers ev to the subscribers of one Task (or of every Task)
// that want it; one whose queue is full is dropped.
func (h *hub) offerEvent(task string, ev *api.Event, m *hubEvents) {
	for s := range h.subs[task] {
		if u, ok := s.update(ev, m.owner, m.ancestors); ok && !s.offer(u) {
			h.remove(s)
		}
	}
}

// offerDelta offers m's delta to the subscribers of one Task (or of
// every Task) that want it.
func (h *hub) offerDelta(task string, m *hubDelta) {
	for s := range h.subs[task] {
		if s.wants(m.delta.GetTaskId(), m.owner) && !s.offer(Update{Delta: m.delta}) {
			h.remove(s)
		}
	}
}

func (h *hub) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *hubSubscribe:
		h.add(m.sub)
		close(m.done)
	case *hubUnsubscribe:
		h.remove(m.sub)
	case *hubEvents:
		h.below.events(m)
		// Each subscriber gets the events in order: events outside, the
		// subscribers that may want one inside.
		for _, ev := range m.events {
			h.offerEvent("", ev, m)
			if task := ev.GetTaskId(); task != "" {
				h.offerEvent(task, ev, m)
			}
			for _, a := range m.ancestors {
				if a != "" && a != ev.GetTaskId() {
					h.offerEvent(a, ev, m)
				}
			}
		}
	case *hubBelow:
		m.reply <- h.below.state(m.caller, m.taskID)
	case *hubDelta:
		h.offerDelta("", m)
		if task := m.delta.GetTaskId(); task != "" {
			h.offerDelta(task, m)
		}
	case *actor.Stopping:
		for _, set := range h.subs {
			for s := range set {
				s.end(false)
			}
		}
		h.subs = nil
	}
}

// SubscribeOptions select what a subscription delivers.
type SubscribeOptions struct {
	// TaskID subscribes to one Task; "" to every Task the caller may see
	// (live only).
	TaskID string
	// FromSeq, for one Task, first delivers its committed events from this
	// seq (0: live only), then live ones, with no gap and no duplicate.
	FromSeq uint64
	// Buffer bounds the queue between the hub and the reader (default:
	// Options.SubscriptionBuffer).
	Buffer int
}

// Subscription delivers Updates on C until Close, the daemon's stop, or
// the reader falling behind (a final Update with FellBehind). C is closed
// at the end.
type Subscription struct {
	C    <-chan Update
	stop chan struct{}
	once sync.Once
	done chan struct{}
}

// Close ends the subscription and waits for its goroutine.
func (s *Subscription) Close() {
	s.once.Do(func() { close(s.stop) })
	<-s.done
}

// Subscribe registers with the hub first, then replays the snapshot from
// FromSeq, dropping live duplicates, so the stream has no gap.
func (d *Daemon) Subscribe(ctx context.Context, c Caller, o SubscribeOptions) (*Subscription, error) {
	if err := d.usable(); err != nil {
		return nil, err
	}
	if o.TaskID != "" {
		if _, err := d.Task(ctx, c, o.TaskID); err != nil {
			return nil, err
		}
	}
	e := d.env
	buf := o.Buffer
	if buf <= 0 {
		buf = e.opts.SubscriptionBuffer
	}
	sub := newSubscriber(o.TaskID, c, buf)
	registered := make(chan struct{})
	e.system.Root.Send(e.hub, &hubSubscribe{sub: sub, done: registered})
	select {
	case <-registered:
	case <-ctx.Done():
		e.system.Root.Send(e.hub, &hubUnsubscribe{sub: sub})
		return nil, ctx.Err()
	}
	// The queue that bounds the subscription is the hub's (sub.queue): out
	// only hands updates to the reader, and a queue of buf there too
	// doubled the bound.
	out := make(chan Update, min(buf, outBuffer))
	s := &Subscription{C: out, stop: make(chan struct{}), done: make(chan struct{})}
	e.goroutine(func() {
		defer close(s.done)
		defer close(out)
		defer e.system.Root.Send(e.hub, &hubUnsubscribe{sub: sub})
		run := subscriptionRun{d: d, sub: sub, out: out, stop: s.stop}
		run.serve(o)
	})
	return s, nil
}

// outBuffer bounds the queue between a subscription's goroutine and its
// reader.
const outBuffer = 32

type subscriptionRun struct {
	d    *Daemon
	sub  *subscriber
	out  chan<- Update
	stop <-chan struct{}
	last uint64 // last seq delivered (one-Task subscriptions)
}

// send delivers u unless the subscription ends first.
func (r *subscriptionRun) send(u Update) bool {
	select {
	case r.out <- u:
		return true
	case <-r.stop:
		return false
	case <-r.sub.ended:
		return false
	}
}

var errStop = fmt.Errorf("subscription stopped")

func (r *subscriptionRun) serve(o SubscribeOptions) {
	if o.TaskID != "" && o.FromSeq > 0 {
		err := r.d.env.deps.Store.Events(o.TaskID, o.FromSeq, 0, func(ev *api.Event) error {
			if !r.send(Update{Event: ev}) {
				return errStop
			}
			r.last = ev.GetSeq()
			return nil
		})
		if err != nil {
			r.end()
			return
		}
	}
	for {
		u, ok := r.sub.take()
		if !ok {
			select {
			case <-r.sub.ready:
				continue
			case <-r.sub.ended:
				r.end()
				return
			case <-r.stop:
				return
			}
		}
		if u.Event != nil && r.sub.taskID != "" {
			if u.Event.GetSeq() <= r.last {
				continue
			}
			r.last = u.Event.GetSeq()
		}
		if !r.send(u) {
			r.end()
			return
		}
	}
}

// end tells a subscriber that fell behind where to resume.
func (r *subscriptionRun) end() {
	select {
	case <-r.sub.ended:
	default:
		return
	}
	if r.sub.behind {
		select {
		case r.out <- Update{FellBehind: true, LastSeq: r.last}:
		case <-r.stop:
		}
	}
}
