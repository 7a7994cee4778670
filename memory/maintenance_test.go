package memory

import (
	"context"
	"errors"
	"sort"
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
