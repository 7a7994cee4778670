package memory

import (
	"context"
	"strings"
	"testing"
	"time"

	"lemo/persistence"
)

// A store indexed by an older tokenizer is indexed again when it is opened:
// its old terms would otherwise match wrongly without any error.
func TestOpenReindexesAnOlderFormat(t *testing.T) {
	e := newEnv(t, Options{})
	task := e.task("alice", t0)
	e.add("alice", task, t0, user("Which team owns the billing cluster?"), assistant("The billing cluster is owned by Aiko's team."))
	fact, err := e.mem.RecordFact(context.Background(), "alice", task, "call-1-1", FactInput{Content: "Aiko's team owned billing until March.", Source: "org chart, January"})
	if err != nil {
		t.Fatal(err)
	}
	e.flush()
	// Make it a store of the older format: its segments hold terms of the
	// old tokenizer ("owned", not the stem "own").
	e.close()
	e.open()
	e.loaded()
	e.flush()
	var old []persistence.KV
	err = e.st.View(func(v *persistence.Snapshot) error {
		return v.Scan(persistence.IndexOwnerPrefix("alice"), persistence.ScanOptions{KeysOnly: true}, func(k, _ []byte) error {
			old = append(old, persistence.KV{Key: append([]byte(nil), k...), Delete: true})
			return nil
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	old = append(old, persistence.KV{Key: persistence.IndexFormatKey(), Value: []byte("lemo-memory-1")})
	old = append(old, IndexEvents("alice", nil)...)
	stale := analyze(docInfo{ref: string(persistence.EventRef(task, 99)), kind: KindUserMessage, time: t0.UnixMilli(), source: "user"}, "owned zzstale", false)
	stale.terms[0].term = "owned" // the old tokenizer kept "owned" whole
	old = append(old, persistence.KV{Key: persistence.PendingKey("alice", persistence.EventRef(task, 99)), Value: stale.encode()})
	if err := e.st.UpdateIndex(old); err != nil {
		t.Fatal(err)
	}
	e.restart()

	var format []byte
	_ = e.st.View(func(v *persistence.Snapshot) error {
		format, err = v.GetCopy(persistence.IndexFormatKey())
		return err
	})
	if string(format) != formatValue {
		t.Fatalf("format after Open = %q, want %q", format, formatValue)
	}
	hits := e.search(Query{Owner: "alice", Text: "owns", Limit: 10})
	kinds := map[Kind]bool{}
	for _, h := range hits {
		if h.Seq == 99 {
			t.Fatalf("the old index's record survived: %+v", h)
		}
		kinds[h.Kind] = true
	}
	if !kinds[KindUserMessage] || !kinds[KindAssistantMessage] || !kinds[KindFact] {
		t.Fatalf("search for a stem after the re-index: %+v", hits)
	}
	// The fact was indexed again with its source.
	hits = e.search(Query{Owner: "alice", Text: "org chart", Limit: 10})
	if len(hits) != 1 || hits[0].FactID != fact || !strings.Contains(hits[0].Source, "source: org chart, January") {
		t.Fatalf("search for the fact's source: %+v", hits)
	}
	if hits := e.search(Query{Owner: "alice", Text: "zzstale"}); len(hits) != 0 {
		t.Fatalf("old terms still match: %+v", hits)
	}
}

// A format this code does not know stops Open with an error that says so.
func TestOpenRefusesAnUnknownFormat(t *testing.T) {
	e := newEnv(t, Options{})
	if err := e.st.UpdateIndex([]persistence.KV{{Key: persistence.IndexFormatKey(), Value: []byte("lemo-memory-9")}}); err != nil {
		t.Fatal(err)
	}
	_ = e.mem.Close()
	_, err := Open(context.Background(), e.st, e.opt)
	if err == nil || !strings.Contains(err.Error(), `format "lemo-memory-9"`) {
		t.Fatalf("Open = %v, want the unknown format named", err)
	}
	if err := e.st.UpdateIndex([]persistence.KV{{Key: persistence.IndexFormatKey(), Value: []byte(formatValue)}}); err != nil {
		t.Fatal(err)
	}
	if e.mem, err = Open(context.Background(), e.st, e.opt); err != nil {
		t.Fatal(err)
	}
}

// Documents confirmed since a query's pending set was made are a new layer
// on top of it, not a rebuild, and search finds them as before; a build
// that removes documents makes the set anew.
func TestPendingSetGrowsInLayers(t *testing.T) {
	e := newEnv(t, Options{})
	task := e.task("o", t0)
	e.add("o", task, t0, user("alpha bravo charlie"))
	if hits := e.search(Query{Owner: "o", Text: "alpha"}); len(hits) != 1 {
		t.Fatalf("hits = %+v", hits)
	}
	layers := func() int {
		e.mem.track.mu.Lock()
		defer e.mem.track.mu.Unlock()
		op := e.mem.track.owners["o"]
		if op == nil || op.set == nil {
			return 0
		}
		return len(op.set.layers)
	}
	e.add("o", task, t0.Add(time.Minute), user("alpha delta"), assistant("alpha echo foxtrot"))
	hits := e.search(Query{Owner: "o", Text: "alpha delta"})
	if len(hits) != 3 || hits[0].Seq != 3 {
		t.Fatalf("after two more documents: %+v", hits)
	}
	if n := layers(); n != 2 {
		t.Fatalf("the set has %d layers, want 2 (the first set and the documents added since)", n)
	}
	e.flush()
	if hits := e.search(Query{Owner: "o", Text: "alpha delta"}); len(hits) != 3 || hits[0].Seq != 3 {
		t.Fatalf("after a build: %+v", hits)
	}
	e.add("o", task, t0.Add(2*time.Minute), user("alpha golf"))
	if hits := e.search(Query{Owner: "o", Text: "alpha"}); len(hits) != 4 {
		t.Fatalf("after a build and one more document: %+v", hits)
	}
	if n := layers(); n != 1 {
		t.Fatalf("after a build the set has %d layers, want it made anew (1)", n)
	}
}
