package memory

import (
	"testing"

	"lemo/prompt"
)

// When a cached recall is reused: always while the owner's other Tasks
// added nothing; else at most maxLag times in a row.
func TestRecallEntryReuse(t *testing.T) {
	// Computed at generation 10, when the owner had 10 records; the Task
	// has added 2 of its own since.
	base := recallEntry{owner: "o", query: "q", other: 10, own: 2}
	tests := []struct {
		name     string
		owner    string
		query    string
		gen      uint64
		lagged   int
		maxLag   int
		ok, lags bool
	}{
		{"only own records since", "o", "q", 12, 0, 0, true, false},
		{"only own records, lag used up", "o", "q", 12, 4, 4, true, false},
		{"another Task's record, exact", "o", "q", 13, 0, 0, false, true},
		{"another Task's record, lag left", "o", "q", 13, 0, 4, true, true},
		{"another Task's record, last lag", "o", "q", 20, 3, 4, true, true},
		{"another Task's record, lag used up", "o", "q", 20, 4, 4, false, true},
		{"changed query", "o", "q2", 12, 0, 4, false, false},
		{"other owner", "p", "q", 12, 0, 4, false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := base
			e.lagged = tt.lagged
			ok, lags := e.reuse(tt.owner, tt.query, tt.gen, tt.maxLag)
			if ok != tt.ok || (ok && lags != tt.lags) {
				t.Fatalf("reuse = %v (lags %v), want %v (lags %v)", ok, lags, tt.ok, tt.lags)
			}
		})
	}
	var none *recallEntry
	if ok, _ := none.reuse("o", "q", 0, 4); ok {
		t.Fatal("no entry reused")
	}
}

// get counts the lagging reuses, and a put starts the count again.
func TestRecallCacheLagCount(t *testing.T) {
	c := newRecallCache()
	out := []prompt.Evidence{{Text: "x"}}
	c.put("o", "t", "q", c.generation("o"), out)
	c.added("o", "other", 1)
	for i := range 2 {
		if _, ok := c.get("o", "t", "q", 2); !ok {
			t.Fatalf("reuse %d of 2 refused", i+1)
		}
	}
	if _, ok := c.get("o", "t", "q", 2); ok {
		t.Fatal("a third lagging reuse of 2 allowed")
	}
	c.put("o", "t", "q", c.generation("o"), out)
	if _, ok := c.get("o", "t", "q", 0); !ok {
		t.Fatal("a fresh result refused")
	}
}
