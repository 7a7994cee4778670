package actors

import "sync"

// appending tracks each Task's appends in flight across the incarnations
// of its actor. An append runs on a goroutine and lands after the actor
// that made it may have stopped (its parent restarted, supervision
// restarted it); the next incarnation loads its history only once those
// appends landed or failed, so it never decides from a history that
// misses them (its own first append would then conflict with theirs).
// The zero value is ready.
type appending struct {
	mu sync.Mutex
	m  map[string]*inFlight
}

type inFlight struct {
	n    int
	done chan struct{}
}

// begin records an append of task id in flight; the function it returns
// records that it landed or failed. Call begin from the actor, before the
// append's goroutine starts.
func (a *appending) begin(id string) (end func()) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.m == nil {
		a.m = make(map[string]*inFlight)
	}
	f := a.m[id]
	if f == nil {
		f = &inFlight{done: make(chan struct{})}
		a.m[id] = f
	}
	f.n++
	var once sync.Once
	return func() {
		once.Do(func() {
			a.mu.Lock()
			defer a.mu.Unlock()
			if f.n--; f.n == 0 {
				close(f.done)
				delete(a.m, id)
			}
		})
	}
}

// settled returns a channel closed once the appends of task id in flight
// now have landed or failed (closed already when there are none).
func (a *appending) settled(id string) <-chan struct{} {
	a.mu.Lock()
	defer a.mu.Unlock()
	if f := a.m[id]; f != nil {
		return f.done
	}
	done := make(chan struct{})
	close(done)
	return done
}
