package memory

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"lemo/api"
	"lemo/persistence"
)

func TestOpenIndexesHistoryWrittenWithoutMemory(t *testing.T) {
	e := newEnv(t, Options{})
	a := e.task("o", t0)
	e.add("o", a, t0.Add(time.Minute), user("indexed while the memory ran: alpha"))
	e.flush() // in a segment: indexing it again would duplicate it
	e.close()

	// Appends without postings: a daemon that ran without the memory.
	dd, err := persistence.OpenDataDir(e.dir)
	if err != nil {
		t.Fatal(err)
	}
	st, err := persistence.Open(dd, persistence.Options{MemTableSize: 8 << 20})
	if err != nil {
		t.Fatal(err)
	}
	b := persistence.NewTaskID(t0)
	evs := []*api.Event{
		api.NewEvent(b, 1, timestamppb.New(t0), &api.TaskCreated{Owner: "o"}),
		api.NewEvent(b, 2, timestamppb.New(t0), user("written without the memory: bravo")),
	}
	for _, ev := range evs {
		if _, err := st.Append(context.Background(), persistence.Append{TaskID: b, Events: []*api.Event{ev}}); err != nil {
			t.Fatal(err)
		}
	}
	ev := api.NewEvent(a, 3, timestamppb.New(t0), user("also without the memory: charlie"))
	if _, err := st.Append(context.Background(), persistence.Append{TaskID: a, Events: []*api.Event{ev}}); err != nil {
		t.Fatal(err)
	}
	_ = st.Close()
	_ = dd.Close()

	e.open()
	for _, q := range []string{"alpha", "bravo", "charlie"} {
		if hits := e.search(Query{Owner: "o", Text: q}); len(hits) != 1 {
			t.Fatalf("%q: %d hits after Open caught up, want 1", q, len(hits))
		}
	}
	if m := e.markers(); len(m) != 0 {
		t.Fatalf("unindexed markers left after Open caught up: %q", m)
	}
	e.restart() // nothing more to catch up: no duplicates
	refs := e.indexedRefs("o")
	sort.Strings(refs)
	want := []string{string(persistence.EventRef(a, 2)), string(persistence.EventRef(a, 3)), string(persistence.EventRef(b, 2))}
	sort.Strings(want)
	if len(refs) != len(want) {
		t.Fatalf("indexed %q, want %q", refs, want)
	}
	for i := range refs {
		if refs[i] != want[i] {
			t.Fatalf("indexed %q, want %q", refs, want)
		}
	}
}

// markers returns the Tasks marked unindexed.
func (e *env) markers() []string {
	e.t.Helper()
	var tasks []string
	pre := persistence.UnindexedPrefix()
	err := e.st.View(func(v *persistence.Snapshot) error {
		return v.Scan(pre, persistence.ScanOptions{KeysOnly: true}, func(k, _ []byte) error {
			tasks = append(tasks, string(k[len(pre):]))
			return nil
		})
	})
	if err != nil {
		e.t.Fatal(err)
	}
	return tasks
}

// Open reads only the Tasks the store marked unindexed: a Task whose
// watermark lags without a marker (which no append can leave) is not read.
// A store from before markers existed (no MarkersKey) is compared Task by
// Task once.
func TestOpenCatchesUpOnlyMarkedTasks(t *testing.T) {
	e := newEnv(t, Options{})
	a := e.task("o", t0)
	e.add("o", a, t0.Add(time.Minute), user("indexed while the memory ran: alpha"))
	e.flush()
	// Forge what no append leaves: a lagging watermark without a marker,
	// by winding the watermark back.
	if err := e.st.UpdateIndex([]persistence.KV{{Key: persistence.WatermarkKey(a), Value: persistence.WatermarkValue(1)}}); err != nil {
		t.Fatal(err)
	}
	e.restart()
	if refs := e.indexedRefs("o"); len(refs) != 1 {
		t.Fatalf("indexed %q after a restart with markers: the unmarked Task was read again", refs)
	}
	// Without MarkersKey, the store is one from before markers: Open
	// compares every Task and indexes the lag it finds (here: duplicates,
	// which is why the marked path must not read unmarked Tasks).
	if err := e.st.UpdateIndex([]persistence.KV{{Key: persistence.MarkersKey(), Delete: true}}); err != nil {
		t.Fatal(err)
	}
	e.restart()
	if refs := e.indexedRefs("o"); len(refs) != 2 {
		t.Fatalf("indexed %q after a restart without MarkersKey, want the lagging event read again", refs)
	}
	if err := e.st.View(func(v *persistence.Snapshot) error {
		ok, err := v.Has(persistence.MarkersKey())
		if err == nil && !ok {
			err = errors.New("MarkersKey not written after the full comparison")
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
}

func TestOpenRemovesBlocksOfInterruptedBuilds(t *testing.T) {
	e := newEnv(t, Options{})
	corpus(e, "o", 2, 20, 1)
	e.flush()
	live, _ := e.counts("o")
	// Blocks of a segment whose header was never committed.
	orphan := []persistence.KV{
		{Key: persistence.BlockKey("o", persistence.BlockTerms, 99, 0), Value: []byte("x")},
		{Key: persistence.BlockKey("o", persistence.BlockDocs, 99, 0), Value: []byte("x")},
		{Key: persistence.BlockKey("o", persistence.BlockOverflow, 99, 3), Value: []byte("x")},
	}
	if err := e.st.UpdateIndex(orphan); err != nil {
		t.Fatal(err)
	}
	before := len(e.indexedRefs("o"))
	e.restart()
	e.loaded() // the indexer's first step removes them
	for _, kv := range orphan {
		err := e.st.View(func(v *persistence.Snapshot) error {
			_, err := v.GetCopy(kv.Key)
			return err
		})
		if !errors.Is(err, persistence.ErrNotFound) {
			t.Fatalf("orphan block %q: %v, want it deleted", kv.Key, err)
		}
	}
	if segs, _ := e.counts("o"); segs != live || len(e.indexedRefs("o")) != before {
		t.Fatalf("live segments %d (was %d), documents %d (was %d)", segs, live, len(e.indexedRefs("o")), before)
	}
	if e.mem.nextSeg <= 99 {
		t.Fatalf("next segment %d would reuse the orphan's number", e.mem.nextSeg)
	}
}

func TestUpdateIndexOnlyWritesIndexRecords(t *testing.T) {
	e := newEnv(t, Options{})
	for _, k := range []string{"e/x", "k/o/f/x", "m/x", "i", ""} {
		if err := e.st.UpdateIndex([]persistence.KV{{Key: []byte(k), Value: []byte("v")}}); !errors.Is(err, persistence.ErrInvalid) {
			t.Errorf("UpdateIndex(%q) err = %v, want ErrInvalid", k, err)
		}
	}
}

func TestBackgroundIndexerBuildsSegments(t *testing.T) {
	e := newEnv(t, Options{IndexInterval: 5 * time.Millisecond, SegmentDocs: 10})
	corpus(e, "o", 2, 25, 1)
	deadline := time.Now().Add(10 * time.Second)
	for {
		segs, pending := e.counts("o")
		if segs > 0 && pending == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 10s: %d segments, %d pending", segs, pending)
		}
		time.Sleep(5 * time.Millisecond)
	}
	if hits := e.search(Query{Owner: "o", Text: "alpha bravo", Limit: 50}); len(hits) == 0 {
		t.Fatal("no hits after the background build")
	}
	if err := e.mem.Close(); err != nil {
		t.Fatal(err)
	}
	if err := e.mem.Flush(context.Background()); !errors.Is(err, ErrClosed) {
		t.Fatalf("Flush after Close: %v", err)
	}
}

// When the indexer builds an owner's pending documents into a segment:
// once there are enough of them, or once the first has waited two
// intervals; until then it does not read them.
func TestTooSoonToBuild(t *testing.T) {
	tests := []struct {
		name    string
		tracked int
		waited  time.Duration
		want    bool
	}{
		{"few, just seen", 3, 0, true},
		{"few, waited under two intervals", 255, 2*time.Second - 1, true},
		{"few, waited two intervals", 3, 2 * time.Second, false},
		{"a segment's worth", 256, 0, false},
		{"more", 2000, time.Millisecond, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tooSoonToBuild(tt.tracked, 256, tt.waited, time.Second); got != tt.want {
				t.Fatalf("tooSoonToBuild(%d, 256, %v, 1s) = %v, want %v", tt.tracked, tt.waited, got, tt.want)
			}
		})
	}
}

func TestPendingTrackerCountsEachDocumentOnce(t *testing.T) {
	now := t0
	var mu sync.Mutex
	clock := func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		return now
	}
	e := newEnv(t, Options{Now: clock})
	task := e.task("o", t0)

	// Postings whose append never commits: never counted, forgotten after
	// the grace period.
	lost := []*api.Event{api.NewEvent(task, 99, timestamppb.New(t0), user("never committed zulu"))}
	e.mem.Postings("o", lost)
	if hits := e.search(Query{Owner: "o", Text: "zulu"}); len(hits) != 0 {
		t.Fatalf("an uncommitted document was found: %+v", hits)
	}
	mu.Lock()
	now = now.Add(2 * pendingGrace)
	mu.Unlock()
	e.search(Query{Owner: "o", Text: "zulu"})
	if n := e.mem.track.size(); n != 0 {
		t.Fatalf("tracker holds %d entries after the grace period, want 0", n)
	}

	// A committed document the tracker missed is found by reconciliation.
	missed := []*api.Event{api.NewEvent(task, 2, timestamppb.New(t0), user("missed yankee"))}
	if _, err := e.st.Append(context.Background(), persistence.Append{TaskID: task, Events: missed, Extra: IndexEvents("o", missed)}); err != nil {
		t.Fatal(err)
	}
	e.seqs[task] = 2
	if hits := e.search(Query{Owner: "o", Text: "yankee"}); len(hits) != 0 {
		t.Fatalf("found before reconciliation: %+v", hits)
	}
	if n, err := e.mem.loadPending(false); err != nil || n != 1 {
		t.Fatalf("reconciliation added %d, %v; want 1", n, err)
	}
	if hits := e.search(Query{Owner: "o", Text: "yankee"}); len(hits) != 1 {
		t.Fatalf("after reconciliation: %d hits", len(hits))
	}

	// Queries running while documents are added and builds and merges
	// commit count every document exactly once, as pending or in a
	// segment: never fewer than were committed when they began, never more
	// than had been added when they ended.
	e.mem.opt.SegmentDocs, e.mem.opt.MergeFactor = 4, 2
	var committed, started atomic.Int64
	committed.Store(1) // "missed yankee"
	started.Store(1)
	done := make(chan struct{})
	errs := make(chan error, 1)
	queries := 0
	go func() {
		defer close(errs)
		for {
			select {
			case <-done:
				return
			default:
			}
			lo := committed.Load()
			n := 0
			err := e.mem.view(func(v *persistence.Snapshot) error {
				segs, err := e.mem.liveSegments(v, "o")
				if err != nil {
					return err
				}
				pend, err := e.mem.pendingDocs(v, "o", 0)
				if err != nil {
					return err
				}
				n = len(pend)
				for _, s := range segs {
					n += int(s.hdr.docs)
				}
				return nil
			})
			if hi := started.Load(); err == nil && (int64(n) < lo || int64(n) > hi) {
				err = fmt.Errorf("a query counted %d documents, want %d to %d", n, lo, hi)
			}
			if err != nil {
				errs <- err
				return
			}
			queries++
		}
	}()
	for i := 0; i < 60; i++ {
		started.Add(3)
		e.add("o", task, t0, user(fmt.Sprintf("xray %d a", i)), user(fmt.Sprintf("xray %d b", i)), user(fmt.Sprintf("xray %d c", i)))
		committed.Add(3)
		if err := e.mem.maintain(context.Background(), i%7 == 6); err != nil {
			t.Fatal(err)
		}
	}
	close(done)
	if err := <-errs; err != nil {
		t.Fatal(err)
	}
	e.flush()
	if segs, pending := e.counts("o"); segs == 0 || pending != 0 || e.mem.nextSeg < 20 {
		t.Fatalf("after the builds: %d segments, %d pending, %d segments written", segs, pending, e.mem.nextSeg)
	}
	t.Logf("%d concurrent queries, %d segments written", queries, e.mem.nextSeg)
}

// TestMergeLooksAgainAfterABuild: maintenance skips the merge check of an
// owner whose segments needed none and have not changed since, and checks
// again once a build added a segment.
func TestMergeLooksAgainAfterABuild(t *testing.T) {
	e := newEnv(t, Options{SegmentDocs: 4, MergeFactor: 2})
	t0 := time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)
	task := e.task("o", t0)
	e.add("o", task, t0, user("alpha one"), assistant("bravo one"))
	e.flush()
	e.flush() // nothing new: the merge check is skipped
	if segs, pending := e.counts("o"); segs != 1 || pending != 0 {
		t.Fatalf("after the first build: %d segments, %d pending; want 1, 0", segs, pending)
	}
	e.add("o", task, t0.Add(time.Minute), user("alpha two"), assistant("bravo two"))
	e.flush() // a second segment: two of a tier are merged
	if segs, pending := e.counts("o"); segs != 1 || pending != 0 {
		t.Fatalf("after the second build: %d segments, %d pending; want 1 (merged), 0", segs, pending)
	}
	if hits := e.search(Query{Owner: "o", Text: "alpha bravo", Limit: 10}); len(hits) != 4 {
		t.Fatalf("search after the merge: %d hits, want 4", len(hits))
	}
}
