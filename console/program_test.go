package console

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/x/exp/teatest"

	"lemo/api"
)

// keysMsg turns key names into the messages a terminal would produce.
func typeKeys(tm *teatest.TestModel, keys ...string) {
	for _, k := range keys {
		tm.Send(keyMsg(k))
	}
}

func waitScreen(t *testing.T, tm *teatest.TestModel, what string, d time.Duration) {
	t.Helper()
	teatest.WaitFor(t, tm.Output(), func(b []byte) bool { return bytes.Contains(b, []byte(what)) },
		teatest.WithDuration(d), teatest.WithCheckInterval(10*time.Millisecond))
}

// The real bubbletea program, driven with keys, while 1,000 deltas a
// second stream for a second: the screen keeps up (the last delta shows
// at once) and the program renders about 20 frames a second, not one per
// delta.
func TestProgramUnderLoad(t *testing.T) {
	f := fixture()
	inbox := make(chan item, 1<<16)
	tools, _ := f.Tools(context.Background())
	m := newModel(context.Background(), f, Options{}, plainStyles(), inbox, tools, f.metas)
	tm := teatest.NewTestModel(t, m, teatest.WithInitialTermSize(80, 24))
	waitScreen(t, tm, "tool-call-1-1", 5*time.Second) // the tree arrived
	typeKeys(tm, "down", "down", "down", "enter")
	waitScreen(t, tm, "let me sleep", 5*time.Second)

	const deltas = 1000
	start := time.Now()
	tick := time.NewTicker(time.Millisecond)
	for i := range deltas {
		<-tick.C // pace: 1,000 a second
		inbox <- item{u: textDelta(taskA, 2, fmt.Sprintf("d%d ", i))}
	}
	tick.Stop()
	sent := time.Now()
	waitScreen(t, tm, fmt.Sprintf("d%d d%d", deltas-2, deltas-1), 2*time.Second)
	lag := time.Since(sent)
	elapsed := time.Since(start)

	typeKeys(tm, "x")
	waitScreen(t, tm, "Cancel task …AAAAAA? [y/N]", 5*time.Second)
	typeKeys(tm, "y")
	waitScreen(t, tm, "cancelled task …AAAAAA", 5*time.Second)
	typeKeys(tm, "q")
	final := tm.FinalModel(t, teatest.WithFinalTimeout(5*time.Second)).(*Model)

	if final.applied < deltas {
		t.Errorf("applied %d updates, want at least %d", final.applied, deltas)
	}
	// Frames: at most one per 50ms of the run, plus one per key and per
	// answer; one render per delta would be 1,000.
	limit := int(elapsed/(50*time.Millisecond)) + 40
	if final.renders > limit {
		t.Errorf("%d renders in %v, want at most %d", final.renders, elapsed.Round(time.Millisecond), limit)
	}
	if calls := f.recorded(); len(calls) != 1 || calls[0] != "cancel "+taskA+" " {
		t.Errorf("calls = %q", calls)
	}
	t.Logf("%d deltas in %v: %d renders, last delta on screen %v after it was sent", deltas, elapsed.Round(time.Millisecond), final.renders, lag.Round(time.Millisecond))
}

// Run reads the tools and Tasks, follows from each listed Task's last
// seq, shows what arrives, and ends (its goroutine with it) on q.
func TestRun(t *testing.T) {
	f := fixture()
	delivered := make(chan struct{})
	f.follow = func(ctx context.Context, fn func(*api.Update) error) error {
		ev := api.NewEvent(taskC, 8, ts(8), &api.UserMessage{Text: "and once more"})
		if err := fn(eventUpdate(ev)); err != nil {
			return err
		}
		close(delivered)
		<-ctx.Done()
		return nil
	}
	in, keys := io.Pipe()
	var out syncBuffer
	done := make(chan error, 1)
	go func() { done <- Run(context.Background(), f, Terminal{In: in, Out: &out}, Options{}) }()
	<-delivered
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(out.String(), "echo approve me") {
		if time.Now().After(deadline) {
			t.Fatalf("the console did not show the tree:\n%s", out.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	if _, err := keys.Write([]byte("q")); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not end on q")
	}
	_ = keys.Close()
	f.mu.Lock()
	defer f.mu.Unlock()
	want := map[string]uint64{taskA: 8, taskB: 9, taskC: 7}
	if fmt.Sprint(f.resume) != fmt.Sprint(want) {
		t.Errorf("followed from %v, want %v", f.resume, want)
	}
}

// syncBuffer is a bytes.Buffer safe for a writer and a reader.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

var _ tea.Model = (*Model)(nil)
