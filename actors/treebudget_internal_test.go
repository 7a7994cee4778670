package actors

import (
	"testing"
	"time"

	"lemo/actors/taskstate"
	"lemo/api"
)

// The root answers from the grants pending when its read of the tree
// started: a grant reported recorded while the read ran counts once,
// whether the read saw its record (in the Task's spend) or not (then as
// the grant); B, whose Cycle fits only without A's, is refused either way,
// and granted once A's Cycle is really not there.
func TestTreeAnswerCountsGrantsPendingAtTheRead(t *testing.T) {
	now := time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)
	sum := &api.BudgetSummary{Limits: &api.BudgetAmounts{Tokens: 25_000}, Spent: &api.BudgetAmounts{Tokens: 0}}
	r := &api.BudgetReservation{InputTokens: 9000, OutputTokens: 1000}
	node := func(id string, cycles uint32, spent uint64) api.TreeNode {
		return api.TreeNode{ID: id, Parent: "R", Cycles: cycles, Limits: &api.BudgetAmounts{}, Spent: &api.BudgetAmounts{Tokens: spent}}
	}
	for _, tc := range []struct {
		name      string
		aGranted  bool   // A's grant was pending when the read started
		aSeen     bool   // the read saw A's Cycle started
		remaining uint64 // 0: B granted
	}{
		{"A's grant pending, its record not read", true, false, 5000},
		{"A's grant pending and its record read: counted once", true, true, 5000},
		{"A recorded before the read began", false, true, 5000},
		{"no Cycle of A", false, false, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var grants taskstate.Grants
			grants.Give("C", 1, taskstate.Need(r)) // another child's Cycle, pending throughout
			if tc.aGranted {
				grants.Give("A", 1, taskstate.Need(r))
			}
			snap := grants.Snapshot() // the read starts
			grants.Done("A", 1)       // A's start is reported recorded during the read
			a := node("A", 0, 0)
			if tc.aSeen {
				a = node("A", 1, 10_000)
			}
			m := &budgetRead{ask: &cmdBudgetAsk{from: "B", cycle: 1, r: r}, pending: snap, nodes: []api.TreeNode{a, node("B", 0, 0), node("C", 0, 0)}}
			ans := treeAnswer("R", sum, 0, m, &grants, now)
			switch {
			case tc.remaining == 0 && ans.ex != nil:
				t.Fatalf("answer = %v; want B granted", ans.ex)
			case tc.remaining > 0 && (ans.ex == nil || ans.ex.GetRemaining() != tc.remaining):
				t.Fatalf("answer = %+v; want B refused with %d tokens remaining", ans, tc.remaining)
			}
		})
	}
}

// A root's book outlives its actor's incarnations: the next incarnation
// takes up the grants pending and the asks queued, and asks again the one
// the crashed incarnation was reading (whose read it then ignores); the
// daemon forgets a book only once it holds nothing.
func TestRootBookOutlivesIncarnations(t *testing.T) {
	e := &env{}
	r := &api.BudgetReservation{InputTokens: 9000, OutputTokens: 1000}
	first := &task{env: e, id: "R", incarnation: 1}
	first.adoptBook() // a fresh root: no book yet
	if first.tb.book != nil {
		t.Fatal("a root without asks has a book")
	}
	first.tb.book = e.books.get("R", true)
	b := first.tb.book
	b.grants.Give("X", 1, taskstate.Need(r))
	reading, queued := &cmdBudgetAsk{from: "Y", cycle: 1, r: r}, &cmdBudgetAsk{from: "Z", cycle: 1, r: r}
	b.reading, b.asks = reading, []*cmdBudgetAsk{queued}
	first.dropBook() // the crashed incarnation stops: the book stays

	next := &task{env: e, id: "R", incarnation: 2}
	next.adoptBook()
	nb := next.tb.book
	if nb == nil || nb.grants.Len() != 1 || nb.reading != nil || len(nb.asks) != 2 || nb.asks[0] != reading || nb.asks[1] != queued {
		t.Fatalf("next incarnation's book = %+v; want X's grant and the asks of Y (read again) and Z", nb)
	}
	if !next.tb.serving() {
		t.Fatal("a root with asks queued is not serving (it could be passivated)")
	}
	// X's grant still counts for Y.
	sum := &api.BudgetSummary{Limits: &api.BudgetAmounts{Tokens: 15_000}}
	ans := treeAnswer("R", sum, 0, &budgetRead{ask: reading, pending: nb.grants.Snapshot()}, &nb.grants, time.Now())
	if ans.ex == nil {
		t.Fatal("Y granted beside X's grant from the crashed incarnation")
	}
	// Emptied, the book is forgotten when the actor stops.
	nb.asks = nil
	nb.grants.Done("X", 1)
	next.dropBook()
	if e.books.get("R", false) != nil {
		t.Fatal("an empty book is kept")
	}
}
