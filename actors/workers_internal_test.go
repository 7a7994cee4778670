package actors

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"lemo/internal/testwait"
)

// A worker that finished its function runs the next one: functions run
// one after another start one goroutine; functions that block start one
// each (Go never waits for a worker), and all of them end with close.
func TestWorkersReuseAndNeverWait(t *testing.T) {
	w := newWorkers(4)
	started := func() int64 { return w.started.Load() }
	idle := func(n int) func() error {
		return func() error {
			if got := w.waiting(); got != n {
				return fmt.Errorf("%d workers wait, want %d", got, n)
			}
			return nil
		}
	}
	for i := range 50 {
		done := make(chan struct{})
		w.Go(func() { close(done) })
		<-done
		// The worker joins the waiting ones after its function: wait for
		// it, so the next Go finds it.
		eventually(t, "the worker to wait", idle(1))
		if got := started(); got != 1 {
			t.Fatalf("after %d functions run one at a time: %d workers started, want 1", i+1, got)
		}
	}

	// Eight functions that block together: Go starts a worker for each
	// one that finds none waiting, without waiting itself.
	release := make(chan struct{})
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		w.Go(func() {
			defer wg.Done()
			<-release
		})
	}
	if got := started(); got != 8 {
		t.Fatalf("eight blocked functions: %d workers started, want 8 (one reused, seven new)", got)
	}
	close(release)
	wg.Wait()
	// At most 4 wait; the others end.
	eventually(t, "four workers to wait", idle(4))

	w.close()
	w.wait()
	if n := w.waiting(); n != 0 {
		t.Fatalf("after close: %d workers idle, want 0", n)
	}
	// After close a function still runs, on a goroutine that ends with it.
	done := make(chan struct{})
	w.Go(func() { close(done) })
	<-done
	w.wait()
}

// eventually polls f until it returns nil or 10 s pass.
func eventually(t testing.TB, what string, f func() error) {
	t.Helper()
	testwait.Until(t, 10*time.Second, what, f)
}
