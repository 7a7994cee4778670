package memory

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"lemo/persistence"
	"lemo/prompt"
)

func TestPassageSpans(t *testing.T) {
	words := func(n int) string { return strings.Repeat("word ", n) }
	lines := func(n int) string {
		var b strings.Builder
		for i := 0; b.Len() < n; i++ {
			fmt.Fprintf(&b, "line %d of the catalog\n", i)
		}
		return b.String()[:n]
	}
	tests := []struct {
		name string
		text string
		want int // passages; 0: indexed whole
	}{
		{"empty", "", 0},
		{"short", words(10), 0},
		{"at the bound", strings.Repeat("x", passageMinBytes), 0},
		{"just over the bound", words(passageMinBytes/5 + 1), 2},
		{"lines", lines(10_000), 13},
		{"no spaces", strings.Repeat("x", 5000), 6},
		{"json escapes", strings.Repeat(`entry one\nentry two\n`, 300), 9},
		{"bounded", lines(1 << 20), maxPassages},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			spans := passageSpans(tt.text)
			if len(spans) != tt.want {
				t.Fatalf("passageSpans(%d bytes) = %d passages %v, want %d", len(tt.text), len(spans), spans, tt.want)
			}
			if len(spans) == 0 {
				return
			}
			if spans[0][0] != 0 || (spans[len(spans)-1][1] != len(tt.text) && len(spans) < maxPassages) {
				t.Fatalf("spans %v do not cover the text of %d bytes", spans, len(tt.text))
			}
			for i, s := range spans {
				if n := s[1] - s[0]; n <= 0 || n > passageBytes+passageOverlap {
					t.Fatalf("passage %d %v has %d bytes, want 1..%d", i, s, n, passageBytes+passageOverlap)
				}
				if i == 0 {
					continue
				}
				prev := spans[i-1]
				if s[0] <= prev[0] || s[0] >= prev[1] {
					t.Fatalf("passage %d %v does not overlap the previous %v", i, s, prev)
				}
				if ov := prev[1] - s[0]; ov > passageOverlap+passageCut {
					t.Fatalf("passage %d overlaps the previous by %d bytes, want at most %d", i, ov, passageOverlap+passageCut)
				}
				if c := tt.text[s[0]-1]; strings.Contains(tt.name, "lines") && c != '\n' {
					t.Fatalf("passage %d starts after %q, want a line break", i, c)
				}
				if strings.Contains(tt.name, "json") && tt.text[s[0]-2:s[0]] != `\n` {
					t.Fatalf("passage %d starts after %q, want a JSON line break", i, tt.text[s[0]-2:s[0]])
				}
			}
		})
	}
}

func TestPassageRef(t *testing.T) {
	base := persistence.EventRef("T1", 7)
	task, seq, fact, from, to, ok := parseDocRef(string(passageRef(base, 1000, 2024)))
	if !ok || task != "T1" || seq != 7 || fact != "" || from != 1000 || to != 2024 {
		t.Fatalf("parseDocRef(passageRef) = %q %d %q %d-%d %v", task, seq, fact, from, to, ok)
	}
	task, seq, _, from, to, ok = parseDocRef(string(base))
	if !ok || task != "T1" || seq != 7 || from != 0 || to != 0 {
		t.Fatalf("parseDocRef(EventRef) = %q %d %d-%d %v", task, seq, from, to, ok)
	}
	if _, _, fact, _, _, ok := parseDocRef(string(persistence.FactRef("T1", "F1"))); !ok || fact != "F1" {
		t.Fatalf("parseDocRef(FactRef) = %q %v", fact, ok)
	}
	for _, bad := range [][]byte{passageRef(base, 5, 5), passageRef(persistence.FactRef("T1", "F1"), 0, 9), []byte("T1/e\x00p")} {
		if _, _, _, _, _, ok := parseDocRef(string(bad)); ok {
			t.Errorf("parseDocRef(%q) ok", bad)
		}
	}
}

// catalog is a long document (about 9 KB) whose one line answers a
// question; the rest shares none of its words.
func catalog() (string, string) {
	var b strings.Builder
	for i := 0; i < 120; i++ {
		fmt.Fprintf(&b, "rack %d: routine inventory, %d pallets of stock, nothing to report\n", i, i%7)
		if i == 70 {
			b.WriteString("The quarantine cage for damaged hazmat pallets is bay Q7, key held by the night supervisor.\n")
		}
	}
	return b.String(), "Where is the quarantine cage for damaged hazmat pallets?"
}

// A long record is found by the passage that matches, and shown as that
// passage, labelled with where it lies and its handle, not whole; a search
// returns the record once, with the passage.
func TestLongRecordIsFoundAndShownByItsPassage(t *testing.T) {
	e := newEnv(t, Options{})
	a := e.task("o", t0)
	doc, q := catalog()
	seq := e.add("o", a, t0.Add(time.Minute), user("Read the warehouse ledger."), result("c1", fmt.Sprintf("%q", doc)))
	// A short record that shares some of the question's words, and more
	// records to give the index an average length.
	b := e.task("o", t0.Add(time.Minute))
	e.add("o", b, t0.Add(2*time.Minute), assistant("Damaged pallets are photographed before they are moved."))
	for i := 0; i < 20; i++ {
		e.add("o", b, t0.Add(3*time.Minute), assistant(fmt.Sprintf("Shift note %d: the loading dock was swept and the forklift charged.", i)))
	}
	for _, flush := range []bool{false, true} {
		if flush {
			e.flush() // the same from a segment
		}
		hits := e.search(Query{Owner: "o", Text: "quarantine cage hazmat pallets", Limit: 10, TextBytes: 4000})
		if len(hits) == 0 || hits[0].Seq != seq+1 {
			t.Fatalf("flush %v: search hits %+v, want the catalog first", flush, hits)
		}
		n := 0
		for _, h := range hits {
			if h.TaskID == a && h.Seq == seq+1 {
				n++
			}
		}
		if n != 1 {
			t.Fatalf("flush %v: the catalog is %d hits, want 1", flush, n)
		}
		h := hits[0]
		if h.PassageTo == 0 || !strings.Contains(h.Text, "bay Q7") || len(h.Text) > passageBytes+passageOverlap || h.TextBytes <= len(h.Text) {
			t.Fatalf("flush %v: hit %d-%d of %d bytes, text:\n%s", flush, h.PassageFrom, h.PassageTo, h.TextBytes, h.Text)
		}

		c := e.task("o", t0.Add(time.Hour))
		ev := e.recall("o", c, history(c, user(q)))
		got := ""
		for _, x := range ev {
			if x.Kind == "tool_result" {
				got = x.Text
			}
		}
		if got == "" {
			t.Fatalf("flush %v: recalled %q, want the catalog", flush, describe(ev))
		}
		if !strings.Contains(got, "bay Q7") || !strings.Contains(got, "the passage that matches") ||
			!strings.Contains(got, prompt.Handle(a, seq+1)) || strings.Contains(got, "rack 0:") || len(got) > passageBytes+passageOverlap+200 {
			t.Fatalf("flush %v: recalled excerpt:\n%s", flush, got)
		}
	}
}

// A store indexed with whole records (lemo-memory-2) is indexed again
// with passages when it is opened.
func TestOpenReindexesWholeRecordsAsPassages(t *testing.T) {
	e := newEnv(t, Options{})
	a := e.task("o", t0)
	doc, _ := catalog()
	seq := e.add("o", a, t0, result("c1", fmt.Sprintf("%q", doc)))
	e.flush()
	var old []persistence.KV
	err := e.st.View(func(v *persistence.Snapshot) error {
		return v.Scan(persistence.IndexOwnerPrefix("o"), persistence.ScanOptions{KeysOnly: true}, func(k, _ []byte) error {
			old = append(old, persistence.KV{Key: append([]byte(nil), k...), Delete: true})
			return nil
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	ref := persistence.EventRef(a, seq)
	whole := analyze(docInfo{ref: string(ref), kind: KindToolResult, time: t0.UnixMilli(), source: "call c1"}, fmt.Sprintf("%q", doc), true)
	old = append(old, persistence.KV{Key: persistence.PendingKey("o", ref), Value: whole.encode()},
		persistence.KV{Key: persistence.IndexFormatKey(), Value: []byte("lemo-memory-2")})
	if err := e.st.UpdateIndex(old); err != nil {
		t.Fatal(err)
	}
	e.restart()
	e.loaded()
	if h := e.search(Query{Owner: "o", Text: "quarantine cage"}); len(h) != 1 || h[0].PassageTo == 0 {
		t.Fatalf("after the re-index: %+v, want the catalog's passage", h)
	}
}

// The passages of one long record that matches well do not take every
// place of recall's first hop: a short record that answers is still found.
func TestPassagesOfOneRecordLeaveRoomForOthers(t *testing.T) {
	e := newEnv(t, Options{})
	a := e.task("o", t0)
	var b strings.Builder
	for i := 0; b.Len() < 100_000; i++ {
		fmt.Fprintf(&b, "ingest pipeline stall on shard %d, ingest pipeline stall logged again\n", i)
	}
	e.add("o", a, t0, result("c1", fmt.Sprintf("%q", b.String())))
	c := e.task("o", t0.Add(time.Hour))
	e.add("o", c, t0.Add(time.Hour), assistant("Fixed: the ingest pipeline stall ended once the shard coordinator restarted."))
	for i := 0; i < 30; i++ { // records of ordinary length
		e.add("o", c, t0.Add(2*time.Hour), assistant(fmt.Sprintf("Note %d: the warehouse dashboards were reviewed and nothing else happened today at all.", i)))
	}
	q := e.task("o", t0.Add(3*time.Hour))
	ev := e.recall("o", q, history(q, user("Why did the ingest pipeline stall on the shard?")))
	if !strings.Contains(strings.Join(describe(ev), "\n"), "shard coordinator restarted") {
		t.Fatalf("recalled %q, want the short answer too", describe(ev))
	}
}
