// Package failpoint lets tests make chosen steps of the daemon fail, to run
// the error paths a healthy machine never takes: the writer's commit, the
// index's commit, the recording of a tool's start and end, an approval's
// resolution. The packages that own the steps name their failpoints.
//
// Production code never enables one: a step then pays one atomic load.
//
// Lifecycle:
//  1. A test calls Enable(name, fn) and defers (or t.Cleanup) the returned
//     disable function. Failpoints are process-wide: tests that enable them
//     must not run in parallel with tests of the same steps.
//  2. The step calls Eval(name, arg) (after Armed, when building arg costs
//     something); fn decides from arg whether the step fails, and with what.
//  3. The step fails with that error as it would with a real one.
//
// Example:
//
//	defer failpoint.Enable(persistence.FailCommit, func(arg any) error {
//		return errors.New("injected")
//	})()
package failpoint

import (
	"sync"
	"sync/atomic"
)

var (
	armed  atomic.Int32 // enabled failpoints
	mu     sync.Mutex
	points = map[string]func(arg any) error{}
)

// Armed reports whether any failpoint is enabled.
func Armed() bool { return armed.Load() > 0 }

// Eval returns the error the failpoint name injects for arg; nil when it is
// not enabled or lets this evaluation pass.
func Eval(name string, arg any) error {
	if armed.Load() == 0 {
		return nil
	}
	mu.Lock()
	fn := points[name]
	mu.Unlock()
	if fn == nil {
		return nil
	}
	return fn(arg)
}

// Enable makes every evaluation of name call fn, until the returned
// function disables it. fn runs on the step's goroutine: it may block to
// hold the step, and must be safe for concurrent use.
func Enable(name string, fn func(arg any) error) (disable func()) {
	mu.Lock()
	defer mu.Unlock()
	if _, ok := points[name]; !ok {
		armed.Add(1)
	}
	points[name] = fn
	var once sync.Once
	return func() {
		once.Do(func() {
			mu.Lock()
			defer mu.Unlock()
			delete(points, name)
			armed.Add(-1)
		})
	}
}
