package delegate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"lemo/tools"
)

// scriptedHandle is the session of a run whose agent the test scripts: it
// records every message the run sends towards the agent (the session is
// the agent's only writer, so nothing reaches the agent but these), and
// accepts them only when accept is set.
type scriptedHandle struct {
	accept   bool
	done     chan struct{}
	stopped  chan struct{}
	stopOnce sync.Once

	mu   sync.Mutex
	sent []any
}

func newScriptedHandle(accept bool) *scriptedHandle {
	return &scriptedHandle{accept: accept, done: make(chan struct{}), stopped: make(chan struct{})}
}

func (h *scriptedHandle) Send(m any) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.sent = append(h.sent, m)
	return h.accept
}
func (h *scriptedHandle) Done() <-chan struct{} { return h.done }
func (h *scriptedHandle) Err() error            { return nil }
func (h *scriptedHandle) Stop()                 { h.stopOnce.Do(func() { close(h.stopped) }) }

// steers returns the steering inputs the run tried to send.
func (h *scriptedHandle) steers() []*steerRequest {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []*steerRequest
	for _, m := range h.sent {
		if sr, ok := m.(*steerRequest); ok {
			out = append(out, sr)
		}
	}
	return out
}

// countedSteer sends input and counts the answers it gets.
type countedSteer struct {
	mu      sync.Mutex
	answers []error
	first   chan error
}

func sendCounted(ch chan tools.Steering, input string) *countedSteer {
	c := &countedSteer{first: make(chan error, 1)}
	ch <- tools.Steering{Input: json.RawMessage(input), Reply: func(err error) {
		c.mu.Lock()
		defer c.mu.Unlock()
		c.answers = append(c.answers, err)
		if len(c.answers) == 1 {
			c.first <- err
		}
	}}
	return c
}

func (c *countedSteer) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.answers)
}

var steeringKinds = []string{
	`{"kind":"steer","message":"focus on tests"}`,
	`{"kind":"follow_up","message":"then the docs"}`,
	`{"kind":"abort"}`,
}

// startScriptedRun runs the loop of an invocation whose prompt the agent
// accepted, over h.
func startScriptedRun(t *testing.T, h *scriptedHandle, steer chan tools.Steering) (*run, <-chan error) {
	t.Helper()
	dt, err := New(fakeConfig(t, randomHex()))
	if err != nil {
		t.Fatal(err)
	}
	call := tools.Call{TaskID: "task-1", CallID: "call-1", Owner: "alice", Steer: steer}
	r := newRun(dt, call, nil, runInput{Prompt: "go"}, t.TempDir())
	r.sess = newAgentSession(procSpec{}, KindPi, sessionLimits{}, nil, dt.cfg.Log)
	r.h, r.accepted, r.sessionID, r.pid = h, true, "3f6c2a9e-51d4-4b8e-9a0c-6d1e2f3a4b5c", 4242
	ended := make(chan error, 1)
	go func() {
		out, err := r.loop(context.Background())
		if err == nil {
			var res Result
			if err = json.Unmarshal(out, &res); err == nil && res.Status != StatusFailed {
				err = fmt.Errorf("status %s, want failed", res.Status)
			}
		}
		ended <- err
	}()
	t.Cleanup(func() {
		select {
		case <-h.done:
		default:
			close(h.done) // a test that failed early: end the run
			<-ended
		}
	})
	r.sess.events <- sessionEvent{kind: evStarted, pid: 4242}
	return r, ended
}

// An invocation whose agent crashed fails closed: steering, a follow-up
// and an abort that arrive while it ends are each answered once with
// ErrClosed, and none is sent towards any agent or retried.
func TestSteeringACrashedInvocationFailsClosed(t *testing.T) {
	h := newScriptedHandle(true)
	steer := make(chan tools.Steering, 8)
	r, ended := startScriptedRun(t, h, steer)
	// The agent crashes: the session reports it closed.
	r.sess.events <- sessionEvent{kind: evClosed, err: fmt.Errorf("%w: the agent exited", ErrClosed)}
	select {
	case <-h.stopped: // the run is ending: it stopped the session
	case <-time.After(10 * time.Second):
		t.Fatal("the run did not end after its agent crashed")
	}
	checkFailsClosed(t, h, steer, ended, 0)
}

// An invocation whose session is closed (it takes no more messages) fails
// closed too: each steering input is tried once, refused, answered once
// with ErrClosed, and never retried.
func TestSteeringAClosedInvocationFailsClosed(t *testing.T) {
	h := newScriptedHandle(false)
	steer := make(chan tools.Steering, 8)
	_, ended := startScriptedRun(t, h, steer)
	checkFailsClosed(t, h, steer, ended, len(steeringKinds))
}

// checkFailsClosed steers, follows up and aborts, expects ErrClosed for
// each, then ends the session and checks that each was answered once and
// that the run tried to send exactly attempts of them.
func checkFailsClosed(t *testing.T, h *scriptedHandle, steer chan tools.Steering, ended <-chan error, attempts int) {
	t.Helper()
	var sent []*countedSteer
	for _, in := range steeringKinds {
		c := sendCounted(steer, in)
		sent = append(sent, c)
		select {
		case err := <-c.first:
			if !errors.Is(err, ErrClosed) {
				t.Errorf("%s: answer %v, want ErrClosed", in, err)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: no answer", in)
		}
	}
	close(h.done) // the session's end reaches the run
	select {
	case err := <-ended:
		if err != nil {
			t.Errorf("the run: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the run did not end")
	}
	for i, c := range sent {
		if n := c.count(); n != 1 {
			t.Errorf("%s: answered %d times, want once", steeringKinds[i], n)
		}
	}
	if got := len(h.steers()); got != attempts {
		t.Errorf("the run tried to send %d steering inputs, want %d (no retries)", got, attempts)
	}
}
