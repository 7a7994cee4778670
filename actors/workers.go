package actors

import (
	"sync"
	"sync/atomic"
)

// maxIdleWorkers bounds the goroutines a workers keeps waiting for work:
// enough for the mailboxes and the Cycles, calls and appends of some fifty
// Tasks at work at once, few enough that their stacks (shrunk by the
// garbage collector while they wait) cost little.
const maxIdleWorkers = 128

// workers runs functions on goroutines kept between them: one that has
// finished its function waits for the next, up to maxIdleWorkers, so the
// stack its work grew serves the next function. A goroutine started for
// each function begins with a small stack and grows it, by copying, every
// time: a Task's message handler, a Cycle's input assembly and model call
// and an append each did, and the copying was 6-8% of the daemon's CPU at
// 50 Tasks. It never makes a function wait for a worker: with none waiting,
// a new goroutine runs it. The actor tree's mailboxes run on it (Schedule,
// the protoactor Dispatcher) and so do env.goroutine's functions.
type workers struct {
	mu     sync.Mutex
	idle   []*worker // waiting, the last to finish last (its stack is warm)
	closed bool
	max    int
	// started counts the goroutines started; running the ones not ended
	// (wait waits for them after close).
	started atomic.Int64
	running sync.WaitGroup
}

// worker is a waiting goroutine's hand: its next function, or nil to end.
// The channel holds one, so handing a function to a waiting worker never
// blocks.
type worker struct{ next chan func() }

func newWorkers(maxIdle int) *workers { return &workers{max: maxIdle} }

// Go runs f on a waiting worker, or on a new one.
func (w *workers) Go(f func()) {
	w.mu.Lock()
	if n := len(w.idle); n > 0 {
		wk := w.idle[n-1]
		w.idle[n-1] = nil
		w.idle = w.idle[:n-1]
		w.mu.Unlock()
		wk.next <- f
		return
	}
	w.mu.Unlock()
	w.running.Add(1)
	w.started.Add(1)
	go w.loop(&worker{next: make(chan func(), 1)}, f)
}

func (w *workers) loop(wk *worker, f func()) {
	defer w.running.Done()
	for f != nil {
		f()
		w.mu.Lock()
		if w.closed || len(w.idle) >= w.max {
			w.mu.Unlock()
			return
		}
		w.idle = append(w.idle, wk)
		w.mu.Unlock()
		f = <-wk.next
	}
}

// waiting is how many workers wait for a function.
func (w *workers) waiting() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.idle)
}

// close ends the waiting workers, and every other one once its function
// returns; Go still runs functions after it (each on a goroutine that ends
// with it).
func (w *workers) close() {
	w.mu.Lock()
	idle := w.idle
	w.idle, w.closed = nil, true
	w.mu.Unlock()
	for _, wk := range idle {
		wk.next <- nil
	}
}

// wait waits, after close, for every worker to end.
func (w *workers) wait() { w.running.Wait() }

// Schedule runs fn on a worker (protoactor's Dispatcher).
func (w *workers) Schedule(fn func()) { w.Go(fn) }

// Throughput is how many messages a mailbox processes before it yields
// (protoactor's default).
func (w *workers) Throughput() int { return 300 }
