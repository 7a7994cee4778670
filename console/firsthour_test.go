package console

import (
	"strings"
	"testing"
	"time"
)

// / filters the tree to the rows that match (and those above them); Esc
// clears it.
func TestTreeFilter(t *testing.T) {
	tm := newTestModel(t, fixture(), 80, 24)
	all := len(tm.rows)
	screen := tm.keys("/", "C", "C", "C", "C", "C", "C")
	if !strings.Contains(screen, "/CCCCCC") {
		t.Fatalf("the filter being typed is not shown:\n%s", screen)
	}
	if len(tm.rows) == 0 || len(tm.rows) >= all {
		t.Fatalf("%d rows of %d after filtering", len(tm.rows), all)
	}
	for _, r := range tm.rows {
		if !strings.Contains(r.key+r.taskID, taskC) && !strings.HasPrefix(tasksPath, r.key) && r.key != "daemon" {
			t.Errorf("row %q (task %q) does not match the filter", r.key, r.taskID)
		}
	}
	screen = tm.keys("enter")
	if !strings.Contains(screen, `filter "CCCCCC"`) {
		t.Fatalf("the kept filter is not said:\n%s", screen)
	}
	tm.keys("esc")
	if len(tm.rows) != all {
		t.Fatalf("esc left %d rows of %d", len(tm.rows), all)
	}
}

// A status message goes away after a while (errors after longer).
func TestStatusExpires(t *testing.T) {
	tm := newTestModel(t, fixture(), 80, 24)
	screen := tm.keys("enter")
	if !strings.Contains(screen, "select a Task first") {
		t.Fatalf("no status:\n%s", screen)
	}
	if screen = tm.frame(epoch.Add(statusTTL)); !strings.Contains(screen, "select a Task first") {
		t.Fatalf("an error went away as soon as a plain status:\n%s", screen)
	}
	if screen = tm.frame(epoch.Add(2*statusTTL + time.Millisecond)); strings.Contains(screen, "select a Task first") {
		t.Fatalf("the status stayed:\n%s", screen)
	}
}

// o sorts the live Tasks by the next column; a full turn comes back to
// newest first.
func TestSortByColumn(t *testing.T) {
	tm := newTestModel(t, fixture(), 80, 24)
	order := func() []string {
		var ids []string
		for _, r := range tm.rows {
			if r.kind == "task" && r.actor != nil {
				ids = append(ids, r.taskID)
			}
		}
		return ids
	}
	// taskA's id sorts after taskB's: it is the newer.
	if got := order(); len(got) != 2 || got[0] != taskA {
		t.Fatalf("default order %v, want newest (%s) first", got, taskA)
	}
	screen := tm.keys("o")
	if got := order(); tm.sortBy != "STATE" || got[0] != taskB || !strings.Contains(screen, "sorted by STATE") {
		t.Fatalf("sorted by %q: %v, want %s (awaiting_approval) first:\n%s", tm.sortBy, got, taskB, screen)
	}
	tm.keys("o", "o", "o", "o", "o")
	if got := order(); tm.sortBy != "" || got[0] != taskA {
		t.Fatalf("after a full turn: %q %v", tm.sortBy, got)
	}
}
