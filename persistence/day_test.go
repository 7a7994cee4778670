package persistence

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dgraph-io/badger/v4"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"lemo/api"
)

func evAt(task string, seq uint64, at time.Time, body proto.Message) *api.Event {
	return api.NewEvent(task, seq, timestamppb.New(at), body)
}

func daySpend(t *testing.T, st *testStore, owner string, at time.Time) (tokens, cost uint64) {
	t.Helper()
	sp, _, err := st.DaySpend(owner, at)
	if err != nil {
		t.Fatalf("DaySpend: %v", err)
	}
	return sp.GetTokens(), sp.GetCostNanoUsd()
}

// The owner's daily record follows the Tasks' spend in the same commits:
// a reservation counts at once, the usage replaces it on the day the
// Cycle started (even when it ends the next day), a tool's charge counts
// on its own day; another owner's spend is elsewhere.
func TestDaySpendFollowsTheLedger(t *testing.T) {
	dir := t.TempDir()
	st := openTest(t, dir)
	day1 := time.Date(2026, 12, 1, 23, 59, 0, 0, time.UTC)
	day2 := day1.Add(2 * time.Minute)
	a, b := NewTaskID(day1), NewTaskID(day1.Add(time.Second))
	res := &api.BudgetReservation{InputTokens: 1000, OutputTokens: 500, CostNanoUsd: 3000}
	mustAppend(t, st, a, evAt(a, 1, day1, &api.TaskCreated{Owner: "alice"}), evAt(a, 2, day1, &api.CycleStarted{Cycle: 1, Reservation: res}))
	mustAppend(t, st, b, evAt(b, 1, day1, &api.TaskCreated{Owner: "bob"}), evAt(b, 2, day1, &api.CycleStarted{Cycle: 1, Reservation: res}))
	if tok, cost := daySpend(t, st, "alice", day1); tok != 1500 || cost != 3000 {
		t.Fatalf("alice's day 1 = %d tokens, %d nano-USD; want the reservation 1500, 3000", tok, cost)
	}
	// The Cycle ends the next day with usage of 300 tokens: day 1 is
	// corrected; day 2 gets the tool's charge only.
	mustAppend(t, st, a, evAt(a, 3, day2, &api.CycleFinished{Cycle: 1, Usage: &api.Usage{PromptTokens: 200, CompletionTokens: 100}}),
		evAt(a, 4, day2, &api.BudgetCharged{Tokens: 40, CostNanoUsd: 7}))
	if tok, _ := daySpend(t, st, "alice", day1); tok != 300 {
		t.Fatalf("alice's day 1 after the usage = %d tokens, want 300", tok)
	}
	if tok, cost := daySpend(t, st, "alice", day2); tok != 40 || cost != 7 {
		t.Fatalf("alice's day 2 = %d tokens, %d; want the charge 40, 7", tok, cost)
	}
	// bob's Cycle is closed by a recovery after kill -9, without usage:
	// its reservation stands (fail closed).
	mustAppend(t, st, b, evAt(b, 3, day2, &api.CycleFinished{Cycle: 1, Error: "interrupted"}))
	if tok, _ := daySpend(t, st, "bob", day1); tok != 1500 {
		t.Fatalf("bob's day 1 = %d tokens, want 1500", tok)
	}
	// A reservation recorded before daily records existed (no open_since)
	// was in no day's record: the day gets the Cycle's usage.
	c := NewTaskID(day2)
	_, err := st.Append(context.Background(), Append{TaskID: c, Events: []*api.Event{evAt(c, 1, day2, &api.TaskCreated{Owner: "carol"}), evAt(c, 2, day2, &api.CycleStarted{Cycle: 1, Reservation: res})}})
	if err != nil {
		t.Fatal(err)
	}
	m, _ := st.Meta(c)
	m.Budget.OpenSince = nil
	mb, _ := proto.Marshal(m)
	if err := st.db.Update(func(txn *badger.Txn) error { // as an older daemon recorded it
		if err := txn.Set(metaKey(c), mb); err != nil {
			return err
		}
		return txn.Delete(dayKey("carol", Day(day2)))
	}); err != nil {
		t.Fatal(err)
	}
	closeTest(t, st)
	st = openTest(t, dir)
	mustAppend(t, st, c, evAt(c, 3, day2, &api.CycleFinished{Cycle: 1, Usage: &api.Usage{PromptTokens: 200, CompletionTokens: 100}}))
	if tok, _ := daySpend(t, st, "carol", day2); tok != 300 {
		t.Fatalf("carol's day after a reservation older than daily records = %d tokens, want the usage 300", tok)
	}
	if tok, _ := daySpend(t, st, "alice", day1); tok != 300 {
		t.Fatalf("alice's day 1 after a reopen = %d tokens, want 300", tok)
	}
}

// limitCheck refuses an append whose charge would take the day's spend
// above limit tokens plus the raises.
func limitCheck(limit uint64) DayCheck {
	return func(day time.Time, spent, raised, charge *api.BudgetAmounts) error {
		if spent.GetTokens()+charge.GetTokens() > limit+raised.GetTokens() {
			return fmt.Errorf("over the day %s: %d spent, %d asked", day.Format(time.DateOnly), spent.GetTokens(), charge.GetTokens())
		}
		return nil
	}
}

// A DayCheck that refuses leaves nothing written; concurrent appends of
// one owner never pass the limit together; a raise lets more through.
func TestDayCheck(t *testing.T) {
	st := openTest(t, t.TempDir())
	at := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	const tasks = 16
	ids := make([]string, tasks)
	for i := range ids {
		ids[i] = NewTaskID(at.Add(time.Duration(i) * time.Millisecond))
		mustAppend(t, st, ids[i], evAt(ids[i], 1, at, &api.TaskCreated{Owner: "alice"}))
	}
	res := &api.BudgetReservation{InputTokens: 900, OutputTokens: 100}
	var wg sync.WaitGroup
	var ok, refused atomic.Int32
	for _, id := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := st.Append(context.Background(), Append{TaskID: id, Events: []*api.Event{evAt(id, 2, at, &api.CycleStarted{Cycle: 1, Reservation: res})}, DayCheck: limitCheck(5500)})
			switch {
			case err == nil:
				ok.Add(1)
			case errors.Is(err, ErrSeqConflict):
				t.Error(err)
			default:
				refused.Add(1)
			}
		}()
	}
	wg.Wait()
	if ok.Load() != 5 || refused.Load() != tasks-5 {
		t.Fatalf("%d appends passed and %d were refused; the limit covers 5", ok.Load(), refused.Load())
	}
	if tok, _ := daySpend(t, st, "alice", at); tok != 5000 {
		t.Fatalf("day spend = %d tokens, want 5000", tok)
	}
	started := 0
	for _, id := range ids {
		if m, _ := st.Meta(id); m.GetLastSeq() == 2 {
			started++
		}
	}
	if started != 5 {
		t.Fatalf("%d Tasks recorded their Cycle, want 5 (a refused append writes nothing)", started)
	}
	if err := st.RaiseDay("alice", at, NewTaskID(at), &api.BudgetAmounts{Tokens: 1000}); err != nil {
		t.Fatal(err)
	}
	if _, raised, _ := st.DaySpend("alice", at); raised.GetTokens() != 1000 {
		t.Fatalf("raised = %v, want 1000 tokens", raised)
	}
	var more int
	for _, id := range ids {
		if m, _ := st.Meta(id); m.GetLastSeq() == 1 {
			if _, err := st.Append(context.Background(), Append{TaskID: id, Events: []*api.Event{evAt(id, 2, at, &api.CycleStarted{Cycle: 1, Reservation: res})}, DayCheck: limitCheck(5500)}); err == nil {
				more++
			}
		}
	}
	if more != 1 {
		t.Fatalf("%d more Cycles after a raise of 1000 tokens, want 1", more)
	}
	if err := st.RaiseDay("alice", at, NewTaskID(at), &api.BudgetAmounts{}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("a raise of nothing: %v, want ErrInvalid", err)
	}
}

// BenchmarkDayCheck is what the owner's daily budget adds to the writer
// for one Cycle's start: the day's record and its two raises (both cached
// after the first read) and the check.
func BenchmarkDayCheck(b *testing.B) {
	st := openTest(b, b.TempDir())
	at := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	id := NewTaskID(at)
	mustAppend(b, st, id, evAt(id, 1, at, &api.TaskCreated{Owner: "alice"}))
	for i := range 2 {
		if err := st.RaiseDay("alice", at, NewTaskID(at.Add(time.Duration(i))), &api.BudgetAmounts{Tokens: 1000}); err != nil {
			b.Fatal(err)
		}
	}
	w := &writer{db: st.db, days: map[string]dayValue{}, raises: map[string]dayValue{}} // planning only: no goroutine
	ev := evAt(id, 2, at, &api.CycleStarted{Cycle: 1, Reservation: &api.BudgetReservation{InputTokens: 900, OutputTokens: 100}})
	req := &request{task: id, events: []*api.Event{ev}, dayCheck: limitCheck(1 << 40)}
	deltas := []dayDelta{{key: string(dayKey("alice", Day(at))), day: Day(at), tokens: 1000}}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		days, err := w.planDays(req, "alice", deltas, nil)
		if err != nil || len(days) != 1 {
			b.Fatalf("planDays = %v, %v", days, err)
		}
		w.days[days[0].key] = dayValue{} // as a commit would cache it
	}
}
