package gateway

import (
	"context"
	"sync"

	"lemo/actors"
)

// feeds shares one hub subscription among all the subscriptions of the
// same principal and scope (one Task, or every Task): with many clients on
// one Task the hub then serves one subscriber, and each update reaches the
// pumps through an append and a non-blocking signal instead of a channel
// hand-off and a goroutine wake-up per client.
type feeds struct {
	g  *Gateway
	mu sync.Mutex
	m  map[feedKey]*feed
}

type feedKey struct {
	owner    string
	operator bool
	task     string
}

// feed is one hub subscription and the listeners it serves.
type feed struct {
	fs  *feeds
	key feedKey
	sub *actors.Subscription

	mu        sync.Mutex
	listeners map[*listener]struct{}
	closed    bool
}

// listener is one pump's queue in a feed.
type listener struct {
	f      *feed
	max    int
	notify chan struct{}

	mu    sync.Mutex
	queue []actors.Update
	spare []actors.Update
	// over: the queue reached max and dropped an update (the pump fell
	// behind); ended: the feed ended (the reason), or the hub dropped it
	// (fellBehind).
	over       bool
	ended      string
	fellBehind bool
}

func newFeeds(g *Gateway) *feeds { return &feeds{g: g, m: make(map[feedKey]*feed)} }

// join returns a listener that receives every update published after it
// returns (and possibly some before: pumps drop what they already sent).
func (fs *feeds) join(ctx context.Context, c actors.Caller, task string) (*listener, error) {
	key := feedKey{owner: c.Owner, operator: c.Operator, task: task}
	fs.mu.Lock()
	defer fs.mu.Unlock()
	f := fs.m[key]
	if f == nil {
		sub, err := fs.g.cfg.Daemon.Subscribe(ctx, c, actors.SubscribeOptions{TaskID: task, Buffer: fs.g.cfg.Limits.HubBuffer})
		if err != nil {
			return nil, err
		}
		f = &feed{fs: fs, key: key, sub: sub, listeners: make(map[*listener]struct{})}
		fs.m[key] = f
		fs.g.goroutine(f.run, nil)
	}
	l := &listener{f: f, max: fs.g.cfg.Limits.MaxQueue, notify: make(chan struct{}, 1)}
	f.mu.Lock()
	f.listeners[l] = struct{}{}
	f.mu.Unlock()
	return l, nil
}

// run hands every update of the hub subscription to the listeners, then
// tells them why it ended.
func (f *feed) run() {
	why, behind := "the daemon is stopping", false
	for u := range f.sub.C {
		if u.FellBehind {
			why, behind = "fell behind", true
			break
		}
		f.mu.Lock()
		for l := range f.listeners {
			l.push(u)
		}
		f.mu.Unlock()
	}
	f.fs.mu.Lock()
	if f.fs.m[f.key] == f {
		delete(f.fs.m, f.key)
	}
	f.fs.mu.Unlock()
	f.mu.Lock()
	f.closed = true
	for l := range f.listeners {
		l.end(why, behind)
	}
	f.mu.Unlock()
	f.sub.Close()
}

func (l *listener) signal() {
	select {
	case l.notify <- struct{}{}:
	default:
	}
}

func (l *listener) push(u actors.Update) {
	l.mu.Lock()
	if !l.over && l.ended == "" {
		// Past max the listener keeps what it has (the pump still sends
		// what its client has credit for, then the notice) and drops the
		// rest: the client resumes after the last update it got.
		if len(l.queue) < l.max {
			l.queue = append(l.queue, u)
		} else {
			l.over = true
		}
	}
	l.mu.Unlock()
	l.signal()
}

func (l *listener) end(why string, behind bool) {
	l.mu.Lock()
	l.ended, l.fellBehind = why, behind
	l.mu.Unlock()
	l.signal()
}

// take returns the queued updates (valid until the next take) and whether
// the listener fell behind or its feed ended.
func (l *listener) take() (us []actors.Update, over bool, ended string, behind bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	us = l.queue
	l.queue, l.spare = l.spare[:0], us
	return us, l.over, l.ended, l.fellBehind
}

// leave removes the listener; the last one closes the feed's hub
// subscription.
func (l *listener) leave() {
	f, fs := l.f, l.f.fs
	fs.mu.Lock()
	f.mu.Lock()
	delete(f.listeners, l)
	last := len(f.listeners) == 0 && !f.closed
	if last {
		f.closed = true
		if fs.m[f.key] == f {
			delete(fs.m, f.key)
		}
	}
	f.mu.Unlock()
	fs.mu.Unlock()
	if last {
		f.sub.Close() // its run ends when the channel closes
	}
}
