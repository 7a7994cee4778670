package client

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"sync"

	"lemo/api"
)

// SubscribeOptions select what a subscription delivers.
type SubscribeOptions struct {
	// TaskID subscribes to one Task; "" to every Task the token may see.
	TaskID string
	// FromSeq, for one Task, first replays its committed events from this
	// seq (0: live only).
	FromSeq uint64
	// Resume, for every Task, replays each named Task's events after the
	// given seq first.
	Resume map[string]uint64
	// NoDeltas leaves out live deltas.
	NoDeltas bool
}

// Subscription delivers updates in order on C: committed events (once
// each), live deltas, CaughtUp when the replay is done, and a final
// FellBehind or Ended before C is closed. Reading C returns credit to the
// daemon; a reader that stops reading falls behind, it never slows the
// daemon.
type Subscription struct {
	// C delivers the updates.
	C <-chan *api.Update
	// Task is the Task's metadata when one Task was subscribed.
	Task *api.TaskMeta

	c      *Conn
	id     uint64
	window int
	out    chan *api.Update
	inbox  chan []*api.Update // batches as they arrived
	last   chan *api.Update   // the final update, once
	once   sync.Once
	stop   chan struct{}
	stopOn sync.Once
	done   chan struct{}
}

const outBuffer = 64

func newSubscription(c *Conn, id uint64, window int) *Subscription {
	// out's buffer lets the reader take updates without a handoff each;
	// an update counts as read (and is acknowledged) once it is in out,
	// so a reader that stops holds at most window+outBuffer of them.
	s := &Subscription{c: c, id: id, window: window, out: make(chan *api.Update, outBuffer), inbox: make(chan []*api.Update, window+64),
		last: make(chan *api.Update, 1), stop: make(chan struct{}), done: make(chan struct{})}
	s.C = s.out
	return s
}

// push queues a batch for the reader; false when the queue is full (each
// batch holds at least one update, and the daemon sends at most the credit
// window unacknowledged, so a full queue means it broke its window).
func (s *Subscription) push(us []*api.Update) bool {
	select {
	case s.inbox <- us:
		return true
	default:
		return false
	}
}

// end delivers the final update after everything queued.
func (s *Subscription) end(u *api.Update) {
	s.once.Do(func() { s.last <- u })
}

// run hands updates to the reader and acknowledges them.
func (s *Subscription) run() {
	defer close(s.done)
	defer close(s.out)
	consumed := 0
	every := max(s.window/4, 1)
	give := func(u *api.Update) bool {
		select {
		case s.out <- u:
			return true
		case <-s.stop:
			return false
		}
	}
	for {
		select {
		case batch := <-s.inbox:
			for _, u := range batch {
				if !give(u) {
					return
				}
				// Acknowledging every window/4 keeps the daemon in credit
				// as long as updates are read, at a fraction of the
				// messages.
				consumed++
				if consumed >= every {
					s.c.tell(&api.Request{Command: &api.Request_Ack{Ack: &api.Ack{Subscription: s.id, Count: uint32(consumed)}}})
					consumed = 0
				}
			}
		case u := <-s.last:
			for len(s.inbox) > 0 { // what arrived before the end
				for _, v := range <-s.inbox {
					if !give(v) {
						return
					}
				}
			}
			give(u)
			return
		case <-s.stop:
			return
		}
	}
}

// Close ends the subscription; C is closed.
func (s *Subscription) Close() {
	s.stopOn.Do(func() {
		close(s.stop)
		s.c.mu.Lock()
		mine := s.c.subs[s.id] == s
		if mine {
			delete(s.c.subs, s.id)
		}
		s.c.mu.Unlock()
		if mine {
			s.c.tell(&api.Request{Command: &api.Request_Unsubscribe{Unsubscribe: &api.UnsubscribeRequest{Subscription: s.id}}})
		}
	})
	<-s.done
}

// Subscribe starts a subscription: the daemon registers it first, then
// replays history from the requested seqs, then streams live updates, so
// nothing is missed or repeated.
func (c *Conn) Subscribe(ctx context.Context, o SubscribeOptions) (*Subscription, error) {
	req := &api.SubscribeRequest{TaskId: o.TaskID, FromSeq: o.FromSeq, NoDeltas: o.NoDeltas}
	for task, seq := range o.Resume {
		req.Resume = append(req.Resume, &api.TaskSeq{TaskId: task, Seq: seq})
	}
	window := 256
	if w := c.Welcome(); w != nil && w.GetCreditWindow() > 0 {
		window = int(w.GetCreditWindow())
	}
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil, ErrClosed
	}
	id := c.nextID.Add(1)
	req.Subscription = id
	s := newSubscription(c, id, window)
	c.subs[id] = s
	c.mu.Unlock()
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		s.run()
	}()
	resp, err := c.call(ctx, &api.Request{Command: &api.Request_Subscribe{Subscribe: req}})
	if err != nil {
		s.Close()
		return nil, err
	}
	s.Task = resp.GetSubscribed().GetTask()
	return s, nil
}

func randomName() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return base64.RawURLEncoding.EncodeToString(b[:])
}
