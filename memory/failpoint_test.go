package memory

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"lemo/internal/failpoint"
	"lemo/persistence"
)

// The commit that makes a new segment live fails: Flush reports it, the
// documents stay pending and searchable, and the next Flush builds them
// into a segment: every document is found exactly once, before and after a
// restart.
func TestIndexCommitFailure(t *testing.T) {
	e := newEnv(t, Options{})
	task := e.task("o", t0)
	words := []string{"alpha", "bravo", "charlie", "delta", "echo", "foxtrot"}
	for i, w := range words {
		e.add("o", task, t0.Add(time.Duration(i)*time.Minute), user(fmt.Sprintf("note about %s", w)))
	}
	injected := errors.New("injected index commit failure")
	pending := persistence.PendingPrefix("o")
	var fails atomic.Int32
	t.Cleanup(failpoint.Enable(persistence.FailIndexCommit, func(arg any) error {
		// The commit that makes the segment live deletes the documents
		// it holds from the pending ones.
		for _, kv := range arg.([]persistence.KV) {
			if kv.Delete && bytes.HasPrefix(kv.Key, pending) {
				if fails.Add(1) == 1 {
					return injected
				}
				return nil
			}
		}
		return nil
	}))

	if err := e.mem.Flush(context.Background()); !errors.Is(err, injected) {
		t.Fatalf("Flush with a failed segment commit = %v, want the injected failure", err)
	}
	if segs, pend := e.counts("o"); segs != 0 || pend != len(words) {
		t.Fatalf("after the failed commit: %d segments, %d pending; want 0 and %d", segs, pend, len(words))
	}
	once := func(when string) {
		t.Helper()
		for _, w := range words {
			hits := e.search(Query{Owner: "o", Text: w, Limit: 5})
			if len(hits) != 1 || hits[0].TaskID != task {
				t.Fatalf("%s: search %q = %v, want the one note", when, w, hits)
			}
		}
	}
	once("after the failed commit")
	e.flush()
	if segs, pend := e.counts("o"); segs != 1 || pend != 0 {
		t.Fatalf("after the next Flush: %d segments, %d pending; want 1 and 0", segs, pend)
	}
	once("after the next Flush")
	e.restart()
	once("after a restart")
	if fails.Load() != 2 {
		t.Fatalf("segment commits = %d, want the failed one and its retry", fails.Load())
	}
}
