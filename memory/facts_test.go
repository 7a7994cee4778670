package memory

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"lemo/persistence"
)

func TestFactsAreStoredWithProvenanceAndIndexed(t *testing.T) {
	e := newEnv(t, Options{Now: func() time.Time { return t0.Add(time.Hour) }})
	task := e.task("alice", t0)
	id, err := e.mem.RecordFact(context.Background(), "alice", task, "call-1-1", FactInput{Content: "  The deploy key lives in vault path secret/deploy.  ", Method: "memory.record"})
	if err != nil {
		t.Fatal(err)
	}
	f, err := e.mem.Fact("alice", id)
	if err != nil {
		t.Fatal(err)
	}
	want := Fact{ID: id, Owner: "alice", Task: task, Call: "call-1-1", Method: "memory.record", Content: "The deploy key lives in vault path secret/deploy.", Time: t0.Add(time.Hour)}
	if *f != want {
		t.Fatalf("fact = %+v\nwant %+v", *f, want)
	}
	hits := e.search(Query{Owner: "alice", Text: "deploy key vault", TextBytes: 1000})
	if len(hits) != 1 || hits[0].FactID != id || hits[0].TaskID != task || hits[0].Seq != 0 || hits[0].Kind != KindFact ||
		hits[0].Text != want.Content || hits[0].Source != "fact "+id+" recorded by memory.record in call call-1-1" {
		t.Fatalf("hits = %+v", hits)
	}
	// Other owners do not see it, and cannot read it by id.
	if hits := e.search(Query{Owner: "bob", Text: "deploy key vault"}); len(hits) != 0 {
		t.Fatalf("bob sees %+v", hits)
	}
	if _, err := e.mem.Fact("bob", id); !errors.Is(err, persistence.ErrNotFound) {
		t.Fatalf("Fact(bob) err = %v", err)
	}

	// A correction supersedes it; both stay, the old one says so.
	id2, err := e.mem.RecordFact(context.Background(), "alice", task, "call-1-1", FactInput{Content: "The deploy key moved to vault path secret/deploy-v2.", Supersedes: id, Method: "memory.record"})
	if err != nil {
		t.Fatal(err)
	}
	e.flush()
	e.restart()
	hits = e.search(Query{Owner: "alice", Text: "deploy key vault"})
	if len(hits) != 2 {
		t.Fatalf("after the correction and a restart: %+v", hits)
	}
	for _, h := range hits {
		switch h.FactID {
		case id:
			if h.SupersededBy != id2 {
				t.Fatalf("old fact: superseded by %q, want %q", h.SupersededBy, id2)
			}
		case id2:
			if h.SupersededBy != "" || !strings.Contains(h.Source, "superseding fact "+id) {
				t.Fatalf("new fact: %+v", h)
			}
		default:
			t.Fatalf("unexpected hit %+v", h)
		}
	}
	if f2, err := e.mem.Fact("alice", id); err != nil || *f2 != want {
		t.Fatalf("the superseded fact changed: %+v %v", f2, err)
	}
}

func TestRecordFactRejects(t *testing.T) {
	e := newEnv(t, Options{MaxFactBytes: 64})
	task := e.task("alice", t0)
	other := e.task("bob", t0)
	bobFact, err := e.mem.RecordFact(context.Background(), "bob", other, "c", FactInput{Content: "bob's fact"})
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		task string
		call string
		f    FactInput
		want error
	}{
		{"empty", task, "c", FactInput{Content: "  "}, ErrInvalid},
		{"too long", task, "c", FactInput{Content: strings.Repeat("x", 65)}, ErrInvalid},
		{"invalid utf-8", task, "c", FactInput{Content: "a\xffb"}, ErrInvalid},
		{"no call", task, "", FactInput{Content: "xylophone"}, ErrInvalid},
		{"unknown supersedes", task, "c", FactInput{Content: "xylophone", Supersedes: persistence.NewTaskID(t0)}, ErrFactNotFound},
		{"malformed supersedes", task, "c", FactInput{Content: "xylophone", Supersedes: "a/b"}, ErrFactNotFound},
		{"other owner's fact", task, "c", FactInput{Content: "xylophone", Supersedes: bobFact}, ErrFactNotFound},
		{"unknown task", persistence.NewTaskID(t0), "c", FactInput{Content: "xylophone"}, persistence.ErrNotFound},
	}
	for _, c := range cases {
		_, err := e.mem.RecordFact(context.Background(), "alice", c.task, c.call, c.f)
		if !errors.Is(err, c.want) {
			t.Errorf("%s: err = %v, want %v", c.name, err, c.want)
		}
	}
	if hits := e.search(Query{Owner: "alice", Text: "xylophone"}); len(hits) != 0 {
		t.Fatalf("a rejected fact was indexed: %+v", hits)
	}
}

// A fact's source (where it came from) is kept, shown in its provenance and
// searchable; one that is too long is refused with the limit named.
func TestFactSource(t *testing.T) {
	e := newEnv(t, Options{})
	task := e.task("alice", t0)
	id, err := e.mem.RecordFact(context.Background(), "alice", task, "call-1-1", FactInput{Content: "The customs gateway listens on port 6443.",
		Method: "memory.record", Source: "  cat services/customs-gateway/config.yaml\n on cg-edge-1 "})
	if err != nil {
		t.Fatal(err)
	}
	f, err := e.mem.Fact("alice", id)
	if err != nil {
		t.Fatal(err)
	}
	if f.Source != "cat services/customs-gateway/config.yaml on cg-edge-1" || f.Content != "The customs gateway listens on port 6443." {
		t.Fatalf("fact = %+v", f)
	}
	hits := e.search(Query{Owner: "alice", Text: "config yaml cg-edge-1", TextBytes: 1000})
	if len(hits) != 1 || hits[0].FactID != id || !strings.HasSuffix(hits[0].Source, ", source: cat services/customs-gateway/config.yaml on cg-edge-1") ||
		hits[0].Text != f.Content {
		t.Fatalf("search by source: %+v", hits)
	}
	_, err = e.mem.RecordFact(context.Background(), "alice", task, "call-1-1", FactInput{Content: "x", Source: strings.Repeat("s", MaxFactSourceBytes+1)})
	if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "the limit is 512") {
		t.Fatalf("a long source: %v", err)
	}
}
