package memorytool

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"lemo/memory"
	"lemo/tools"
)

// recorder is a hand-written fake tools.MemoryRecorder.
type recorder struct {
	record func(ctx context.Context, f tools.Fact) (string, error)
}

func (r recorder) RecordFact(ctx context.Context, f tools.Fact) (string, error) {
	return r.record(ctx, f)
}

// searcher is a hand-written fake Searcher.
type searcher struct {
	search func(ctx context.Context, q memory.Query) ([]memory.Hit, error)
}

func (s searcher) Search(ctx context.Context, q memory.Query) ([]memory.Hit, error) {
	return s.search(ctx, q)
}

func registry(t *testing.T, s Searcher) *tools.Registry {
	t.Helper()
	reg := tools.NewRegistry()
	for _, tl := range New(s, Config{}) {
		if err := reg.Register(tl); err != nil {
			t.Fatal(err)
		}
	}
	return reg
}

// run validates the input, executes the tool and validates its output and
// what it retains.
func run(t *testing.T, reg *tools.Registry, name string, call tools.Call, input string) (json.RawMessage, json.RawMessage, error) {
	t.Helper()
	r, ok := reg.Get(name)
	if !ok {
		t.Fatalf("%s not registered", name)
	}
	call.Input = json.RawMessage(input)
	if err := r.ValidateInput(call.Input); err != nil {
		return nil, nil, err
	}
	out, err := r.Tool.Execute(context.Background(), call, nil)
	if err != nil {
		return nil, nil, err
	}
	if err := r.ValidateOutput(out); err != nil {
		t.Fatalf("%s output: %v\n%s", name, err, out)
	}
	kept := r.Tool.Retain(out, call.Input)
	if err := r.ValidateOutput(kept); err != nil {
		t.Fatalf("%s retained: %v\n%s", name, err, kept)
	}
	return out, kept, nil
}

func TestRecord(t *testing.T) {
	reg := registry(t, nil)
	var got tools.Fact
	rec := recorder{record: func(_ context.Context, f tools.Fact) (string, error) {
		got = f
		return "01JFACT", nil
	}}
	out, kept, err := run(t, reg, NameRecord, tools.Call{Owner: "alice", Memory: rec}, `{"content":"The key is in vault.","supersedes":"01JOLD"}`)
	if err != nil {
		t.Fatal(err)
	}
	if got != (tools.Fact{Content: "The key is in vault.", Supersedes: "01JOLD", Method: NameRecord}) {
		t.Fatalf("recorded %+v", got)
	}
	if string(out) != `{"id":"01JFACT","supersedes":"01JOLD"}` || string(kept) != string(out) {
		t.Fatalf("output %s, retained %s", out, kept)
	}
	// The optional source is passed on as given.
	if _, _, err := run(t, reg, NameRecord, tools.Call{Memory: rec}, `{"content":"Port 6021.","source":"cat config.yaml on cg-edge-1"}`); err != nil {
		t.Fatal(err)
	}
	if got != (tools.Fact{Content: "Port 6021.", Method: NameRecord, Source: "cat config.yaml on cg-edge-1"}) {
		t.Fatalf("recorded with a source: %+v", got)
	}
	if _, _, err := run(t, reg, NameRecord, tools.Call{}, `{"content":"x"}`); !errors.Is(err, ErrNoMemory) {
		t.Fatalf("without memory: %v", err)
	}
	boom := errors.New("memory: fact not found")
	failing := recorder{record: func(context.Context, tools.Fact) (string, error) { return "", boom }}
	if _, _, err := run(t, reg, NameRecord, tools.Call{Memory: failing}, `{"content":"x","supersedes":"NOPE"}`); !errors.Is(err, boom) {
		t.Fatalf("recorder error: %v", err)
	}
	for _, bad := range []string{`{}`, `{"content":""}`, `{"content":"x","supersedes":"a/b"}`, `{"content":"x","extra":1}`,
		`{"content":"` + strings.Repeat("x", MaxFactBytes+1) + `"}`, `{"content":"x","source":"` + strings.Repeat("s", MaxSourceBytes+1) + `"}`,
		`{"content":"x","source":7}`} {
		if _, _, err := run(t, reg, NameRecord, tools.Call{Memory: rec}, bad); err == nil {
			t.Errorf("input %.60s accepted", bad)
		}
	}
}

func TestSearch(t *testing.T) {
	var got memory.Query
	at := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	hits := []memory.Hit{
		{TaskID: "T1", Seq: 4, Kind: memory.KindToolResult, Time: at, Source: "call c1", Score: 3.14159, Relevance: 0.5, Text: "partial", TextBytes: 5000, Truncated: true, Untrusted: true},
		{TaskID: "T2", FactID: "F1", Kind: memory.KindFact, Time: at, Source: "fact F1", Score: 2, Text: "whole", TextBytes: 5, SupersededBy: "F2"},
	}
	s := searcher{search: func(_ context.Context, q memory.Query) ([]memory.Hit, error) {
		got = q
		return hits, nil
	}}
	reg := registry(t, s)
	out, kept, err := run(t, reg, NameSearch, tools.Call{TaskID: "T9", Owner: "alice"},
		`{"query":"deploy key","kinds":["fact","tool_result"],"task":"T1","since":"2026-11-01T00:00:00Z","until":"2026-12-01T00:00:00+01:00","limit":5}`)
	if err != nil {
		t.Fatal(err)
	}
	want := memory.Query{Owner: "alice", Text: "deploy key", Kinds: []memory.Kind{memory.KindFact, memory.KindToolResult}, Task: "T1",
		Since: time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC), Until: time.Date(2026, 12, 1, 0, 0, 0, 0, time.FixedZone("", 3600)), Limit: 5, TextBytes: 1000}
	if got.Owner != want.Owner || got.Text != want.Text || len(got.Kinds) != 2 || got.Kinds[0] != want.Kinds[0] || got.Task != want.Task ||
		!got.Since.Equal(want.Since) || !got.Until.Equal(want.Until) || got.Limit != 5 || got.TextBytes != 1000 {
		t.Fatalf("query %+v\nwant  %+v", got, want)
	}
	var res searchOutput
	if err := json.Unmarshal(out, &res); err != nil {
		t.Fatal(err)
	}
	r := res.Results[0]
	if r.Task != "T1" || r.Seq != 4 || r.Kind != "tool_result" || r.Score != 3.142 || !r.Untrusted || r.Text != untrustedMark+"partial" ||
		r.Read != `tasks.read_block {"task":"T1","seq":4}` || r.Time != "2026-11-30T12:00:00Z" {
		t.Fatalf("first result %+v", r)
	}
	if f := res.Results[1]; f.Fact != "F1" || f.Seq != 0 || f.SupersededBy != "F2" || f.Read != "" {
		t.Fatalf("fact result %+v", f)
	}
	if strings.Contains(string(kept), "partial") || strings.Contains(string(kept), "whole") || !strings.Contains(string(kept), `"task":"T1"`) {
		t.Fatalf("retained %s: want references without text", kept)
	}
	// Defaults and bounds.
	if _, _, err := run(t, reg, NameSearch, tools.Call{Owner: "bob"}, `{"query":"x"}`); err != nil || got.Owner != "bob" || got.Limit != 10 {
		t.Fatalf("defaults: %+v %v", got, err)
	}
	for _, bad := range []string{`{}`, `{"query":""}`, `{"query":"x","limit":21}`, `{"query":"x","kinds":["memo"]}`, `{"query":"x","task":"a/b"}`} {
		if _, _, err := run(t, reg, NameSearch, tools.Call{Owner: "a"}, bad); err == nil {
			t.Errorf("input %s accepted", bad)
		}
	}
	if _, _, err := run(t, reg, NameSearch, tools.Call{Owner: "a"}, `{"query":"x","since":"yesterday"}`); err == nil || !strings.Contains(err.Error(), "RFC 3339") {
		t.Fatalf("a bad time: %v", err)
	}
	boom := errors.New("memory: closed")
	reg = registry(t, searcher{search: func(context.Context, memory.Query) ([]memory.Hit, error) { return nil, boom }})
	if _, _, err := run(t, reg, NameSearch, tools.Call{Owner: "a"}, `{"query":"x"}`); !errors.Is(err, boom) {
		t.Fatalf("searcher error: %v", err)
	}
}
