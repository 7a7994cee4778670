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
// and an append each did, and the copying was 8% of the daemon's CPU at 50
// Tasks. It never makes a function wait for a worker: with none waiting, a
// new goroutine runs it. The actor tree's mailboxes run on it (Schedule,
// the protoactor Dispatcher) and so do env.goroutine's functions.
type workers struct {
	work chan func() // unbuffered: a send succeeds only to a waiting worker
	stop chan struct{}
	once sync.Once
	idle atomic.Int32
	max  int32
	// started counts the goroutines started.
	started atomic.Int64
	// running counts the workers; wait waits for them to end after close.
	running sync.WaitGroup
}

func newWorkers(maxIdle int) *workers {
	return &workers{work: make(chan func()), stop: make(chan struct{}), max: int32(maxIdle)}
}

// Go runs f on a waiting worker, or on a new one.
func (w *workers) Go(f func()) {
	select {
	case w.work <- f:
		return
	default:
	}
	w.running.Add(1)
	w.started.Add(1)
	go w.loop(f)
}

func (w *workers) loop(f func()) {
	defer w.running.Done()
	for {
		f()
		f = nil // not kept alive while waiting
		if w.idle.Add(1) > w.max {
			w.idle.Add(-1)
			return
		}
		select {
		case f = <-w.work:
			w.idle.Add(-1)
		case <-w.stop:
			w.idle.Add(-1)
			return
		}
	}
}

// close ends the waiting workers, and every other one once its function
// returns; Go still runs functions after it (each on a goroutine that ends
// with it).
func (w *workers) close() { w.once.Do(func() { close(w.stop) }) }

// wait waits, after close, for every worker to end.
func (w *workers) wait() { w.running.Wait() }

// Schedule runs fn on a worker (protoactor's Dispatcher).
func (w *workers) Schedule(fn func()) { w.Go(fn) }

// Throughput is how many messages a mailbox processes before it yields
// (protoactor's default).
func (w *workers) Throughput() int { return 300 }
