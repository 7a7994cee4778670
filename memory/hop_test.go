package memory

import (
	"reflect"
	"strings"
	"testing"
)

func compoundStrings(cs []compound) []string {
	var out []string
	for _, c := range cs {
		s := strings.Join(c.terms, "+") + "@" + itoa(uint64(c.clause))
		switch {
		case c.heading:
			s += " heading of " + itoa(uint64(c.section))
		case c.section >= 0:
			s += " under " + itoa(uint64(c.section))
		}
		out = append(out, s)
	}
	return out
}

func TestCompounds(t *testing.T) {
	cases := []struct {
		name, text string
		json       bool
		want       []string
	}{{
		name: "parts joined by '-', '.' or '_' make one name; a comma and a space end a clause",
		text: "bil-app-02 runs ledger-api, trk-03 runs parcel-tracker at 10.4.3.21.",
		want: []string{"bil+app+02@0", "run@0", "ledg+api@0", "trk+03@1", "run@1", "parcel+track@1", "10+21@1"},
	}, {
		name: "a comma within data does not end a clause; a line break does",
		text: "depot,trucks\nAntwerp,54",
		want: []string{"depot@0", "truck@0", "antwerp@1", "54@1"},
	}, {
		name: "JSON escapes: \\n ends a clause, \\t separates, quotes end clauses, field names are left out",
		text: `{"path":"ops/hosts.md","content":"trk-03\tparcel-tracker\nrp-01\trouteplanner"}`,
		json: true,
		want: []string{"op@4", "host+md@4", "trk+03@9", "parcel+track@9", "rp+01@10", "routeplann@10"},
	}, {
		name: "a semicolon, a bracket and a sentence's end end clauses; stop words and one-letter parts are no names",
		text: "It is on pg-main-1 (the primary); see the runbook. Call Ana.",
		want: []string{"pg+main@0", "primari@1", "see@3", "runbook@3", "call@4", "ana@4"},
	}, {
		name: "a listing's line numbers are no names; a line that starts with '#' is a heading, and its section follows",
		text: `{"content":"    30\t\n    31\t## inventory-sync\n    32\tPurpose: pulls stock levels\n"}`,
		json: true,
		want: []string{"inventori+sync@6 heading of 6", "purpos@7 under 6", "pull@7 under 6", "stock@7 under 6", "level@7 under 6"},
	}}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := compoundStrings(compounds(c.text, c.json)); !reflect.DeepEqual(got, c.want) {
				t.Fatalf("compounds = %q\nwant        %q", got, c.want)
			}
		})
	}
}

func entityKeys(es []hopEntity) []string {
	var out []string
	for _, e := range es {
		out = append(out, strings.Join(e.terms, " "))
	}
	return out
}

func TestNearEntities(t *testing.T) {
	anchors := map[string]float64{"trk": 4, "03": 4, "run": 1, "own": 2}
	// The names in the clause of trk-03, near it; those in other clauses
	// (ledger-api stands beside "runs", but in the clause before) are
	// left out.
	es := nearEntities("Seven hosts: bil-app-02 runs ledger-api, trk-03 runs parcel-tracker, cg-edge-1 runs customs-gateway.", false, anchors)
	var strong []string
	for _, e := range es {
		if e.weight == 1 {
			strong = append(strong, strings.Join(e.terms, " "))
		}
	}
	if want := []string{"parcel track"}; !reflect.DeepEqual(strong, want) {
		t.Fatalf("entities beside trk-03 = %q, want %q (all: %+v)", strong, want, es)
	}
	for _, e := range es {
		if k := strings.Join(e.terms, " "); k == "ledger api" && e.weight != 0.25 {
			t.Fatalf("ledger-api stands beside \"runs\" only: weight %g, want 0.25", e.weight)
		}
	}
	// A heading names what the lines of its section speak of.
	es = nearEntities("# routeplanner\nPurpose: computes delivery routes every night.\n# osrm\nA road graph.", false, map[string]float64{"deliveri": 3, "rout": 2})
	if got := entityKeys(es); !reflect.DeepEqual(got, []string{"routeplann", "purpos", "comput", "everi", "night"}) {
		t.Fatalf("entities of a section = %q", got)
	}
	// The heading is the section's subject: nearest of all, so it is
	// looked up before the ordinary words beside the query's ("Purpose",
	// "every" weigh as much).
	if es[0].dist != 0 {
		t.Fatalf("the heading's distance = %d, want 0", es[0].dist)
	}
	if got := chooseEntities([][]hopEntity{es}, []float64{1}, 2); len(got) != 2 || strings.Join(got[0].terms, " ") != "routeplann" {
		t.Fatalf("chosen first = %+v, want the heading", got)
	}
	// No anchor with an idf: nothing to stand beside.
	if es := nearEntities("trk-03 runs parcel-tracker", false, map[string]float64{"trk": 0}); es != nil {
		t.Fatalf("entities without a weighed anchor = %+v", es)
	}
}

func TestChooseEntities(t *testing.T) {
	found := [][]hopEntity{
		{{terms: []string{"becaus"}, weight: 1, dist: 1}, {terms: []string{"parcel", "tracker"}, weight: 0.5, dist: 2}},
		{{terms: []string{"parcel", "tracker"}, weight: 1, dist: 1}, {terms: []string{"disk"}, weight: 1, dist: 3}},
	}
	// Source 1 ranks above source 0: its entities can reach further; a
	// name two sources share keeps its best reach.
	got := entityKeys(chooseEntities(found, []float64{0.2, 0.4}, 100))
	want := []string{"parcel tracker", "disk", "becaus"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("chooseEntities = %q, want %q", got, want)
	}
	// The terms' bound leaves out what does not fit.
	if got := entityKeys(chooseEntities(found, []float64{0.2, 0.4}, 2)); !reflect.DeepEqual(got, []string{"parcel tracker"}) {
		t.Fatalf("chooseEntities within 2 terms = %q", got)
	}
}

func TestSameQuestion(t *testing.T) {
	q := map[string]bool{}
	for _, t := range Terms("Who owns the service that runs on trk-03?") {
		q[t] = true
	}
	if got := sameQuestion("Who owns the ledger-api service?", q, nil); got != 0.5 {
		t.Fatalf("a request about another service: sameness %g, want 0.5", got)
	}
	if got := sameQuestion("Which service runs on trk-03?", q, nil); got != 1 {
		t.Fatalf("the same question reworded: sameness %g, want 1", got)
	}
	if got := sameQuestion("Who owns parcel-tracker?", q, Terms("parcel-tracker")); got != 1 {
		t.Fatalf("a request a hop found through parcel-tracker: sameness %g, want 1", got)
	}
}

func TestLinkNeed(t *testing.T) {
	n := linkNeed{links: []uint32{0b0011, 0, 0b0100}, rest: 0b1000}
	for _, c := range []struct {
		matched uint32
		want    bool
	}{
		{0b1011, true},  // the first entity and an open term
		{0b0011, false}, // the entity without an open term
		{0b1001, false}, // part of the entity
		{0b1100, true},  // the third entity
		{0b1000, false}, // an open term alone
	} {
		if got := n.ok(c.matched); got != c.want {
			t.Errorf("ok(%04b) = %v, want %v", c.matched, got, c.want)
		}
	}
}
