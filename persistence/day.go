package persistence

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/dgraph-io/badger/v4"
	"google.golang.org/protobuf/types/known/timestamppb"

	"lemo/api"
)

// Owners' daily spend (the owner's daily budget):
//
//	d/<owner>/<YYYYMMDD>               spend of the owner's Tasks on that UTC day (tokens, cost)
//	q/<owner>/<YYYYMMDD>/<raise id>    an operator's raise of the owner's daily budget that day
//
// The writer keeps d/ in the commit of the events that change a Task's
// spend (a Cycle's reservation, its usage replacing it, a tool's charge),
// so it is derived from the Tasks' durable histories and never disagrees
// with them: after kill -9 an open reservation counts as spent, as in the
// Task's own ledger. A Cycle's spend counts on the UTC day the Cycle
// started (its usage corrects that day's record even when it ends the
// next day); a tool's charge on the day it is recorded. Raises are records
// of their own, one per raise.
const (
	prefixDay      = 'd'
	prefixDayRaise = 'q'
)

// DayFormat is the layout of a day in the daily records' keys.
const DayFormat = "20060102"

// Day is the UTC day of t, as the daily records name it.
func Day(t time.Time) string { return t.UTC().Format(DayFormat) }

func dayKey(owner, day string) []byte {
	k := make([]byte, 0, len(owner)+len(day)+3)
	k = append(k, prefixDay, '/')
	k = append(k, owner...)
	k = append(k, '/')
	return append(k, day...)
}

func dayRaisePrefix(owner, day string) []byte {
	k := make([]byte, 0, len(owner)+len(day)+4)
	k = append(k, prefixDayRaise, '/')
	k = append(k, owner...)
	k = append(k, '/')
	k = append(k, day...)
	return append(k, '/')
}

// dayValue is a day's spend (or a raise): tokens and cost.
type dayValue struct{ tokens, cost uint64 }

func (v dayValue) encode() []byte {
	b := binary.BigEndian.AppendUint64(make([]byte, 0, 16), v.tokens)
	return binary.BigEndian.AppendUint64(b, v.cost)
}

func decodeDayValue(b []byte) (dayValue, error) {
	if len(b) != 16 {
		return dayValue{}, fmt.Errorf("%w: a daily record of %d bytes, want 16", ErrInvalid, len(b))
	}
	return dayValue{tokens: binary.BigEndian.Uint64(b), cost: binary.BigEndian.Uint64(b[8:])}, nil
}

func (v dayValue) amounts() *api.BudgetAmounts {
	return &api.BudgetAmounts{Tokens: v.tokens, CostNanoUsd: v.cost}
}

// add applies a signed change, never below zero nor past the maximum.
func (v dayValue) add(d dayDelta) dayValue {
	apply := func(x uint64, dx int64) uint64 {
		if dx < 0 {
			if uint64(-dx) > x {
				return 0
			}
			return x - uint64(-dx)
		}
		if s := x + uint64(dx); s >= x {
			return s
		}
		return ^uint64(0)
	}
	return dayValue{tokens: apply(v.tokens, d.tokens), cost: apply(v.cost, d.cost)}
}

// dayDelta is what an append changes of an owner's spend on a day.
type dayDelta struct {
	key          string // dayKey
	day          string
	tokens, cost int64
}

// spendMark is a Task's spend before an event is folded into its
// metadata (which the fold changes in place).
type spendMark struct {
	tokens, cost uint64
	open         *api.BudgetReservation
	openSince    *timestamppb.Timestamp
}

func markSpend(b *api.BudgetSummary) spendMark {
	return spendMark{tokens: b.GetSpent().GetTokens(), cost: b.GetSpent().GetCostNanoUsd(), open: b.GetOpen(), openSince: b.GetOpenSince()}
}

// spendChange is what folding ev changed of a Task's spend (before, and
// after it), and the day it counts on: the day the closed reservation's
// Cycle started for the event that closes it, else the event's own.
func spendChange(before spendMark, after *api.BudgetSummary, ev *api.Event) (day string, tokens, cost int64) {
	diff := func(a, b uint64) int64 { return int64(b - a) } // wraps to the signed change
	tokens = diff(before.tokens, after.GetSpent().GetTokens())
	cost = diff(before.cost, after.GetSpent().GetCostNanoUsd())
	if tokens == 0 && cost == 0 {
		return "", 0, 0
	}
	at := ev.GetTime().AsTime()
	if ev.GetCycleFinished() != nil && before.open != nil {
		if before.openSince != nil {
			at = before.openSince.AsTime()
		} else {
			// A reservation recorded before daily records existed was in
			// no day's record: the day gets the Cycle's whole spend, not
			// its correction.
			tokens += int64(api.ReservedTokens(before.open))
			cost += int64(before.open.GetCostNanoUsd())
		}
	}
	return Day(at), tokens, cost
}

// DayCheck decides whether an append may add charge to its owner's spend
// on day (UTC midnight), given the spend recorded that day and what
// operators raised the day's budget by; an error refuses the append. It
// runs on the store's writer goroutine: it must be quick and must not
// call the store.
type DayCheck func(day time.Time, spent, raised, charge *api.BudgetAmounts) error

// DaySpend returns owner's spend recorded on the UTC day of t and what
// operators raised that day's budget by.
func (s *Store) DaySpend(owner string, t time.Time) (spent, raised *api.BudgetAmounts, err error) {
	if err := ValidOwner(owner); err != nil {
		return nil, nil, err
	}
	day := Day(t)
	var sp, r dayValue
	err = s.db.View(func(txn *badger.Txn) error {
		var err error
		if sp, err = readDay(txn, dayKey(owner, day)); err != nil {
			return err
		}
		r, err = readRaises(txn, owner, day)
		return err
	})
	if err != nil {
		return nil, nil, err
	}
	return sp.amounts(), r.amounts(), nil
}

// RaiseDay records an operator's raise of owner's daily budget on the UTC
// day of t by add (tokens and cost; no working time), under id (unique:
// each raise is a record of its own).
func (s *Store) RaiseDay(owner string, t time.Time, id string, add *api.BudgetAmounts) error {
	if s.w == nil {
		return fmt.Errorf("%w: store is read-only", ErrClosed)
	}
	if err := ValidOwner(owner); err != nil {
		return err
	}
	if err := ValidTaskID(id); err != nil {
		return fmt.Errorf("raise id: %w", err)
	}
	if add.GetTokens() == 0 && add.GetCostNanoUsd() == 0 {
		return fmt.Errorf("%w: a raise of an owner's daily budget adds tokens or cost", ErrInvalid)
	}
	if err := s.space.admit(false).normal; err != nil {
		return err
	}
	k := append(dayRaisePrefix(owner, Day(t)), id...)
	err := s.db.Update(func(txn *badger.Txn) error {
		return txn.Set(k, dayValue{tokens: add.GetTokens(), cost: add.GetCostNanoUsd()}.encode())
	})
	if err == nil {
		s.w.raised.Add(1) // after the commit: the writer reads raises again (dayRaises)
	}
	return err
}

func readDay(txn *badger.Txn, key []byte) (dayValue, error) {
	it, err := txn.Get(key)
	if errors.Is(err, badger.ErrKeyNotFound) {
		return dayValue{}, nil
	}
	if err != nil {
		return dayValue{}, err
	}
	var v dayValue
	err = it.Value(func(b []byte) error {
		var err error
		v, err = decodeDayValue(b)
		return err
	})
	if err != nil {
		return dayValue{}, fmt.Errorf("daily record %q: %w", key, err)
	}
	return v, nil
}

func readRaises(txn *badger.Txn, owner, day string) (dayValue, error) {
	p := dayRaisePrefix(owner, day)
	opt := badger.DefaultIteratorOptions
	opt.Prefix = p
	it := txn.NewIterator(opt)
	defer it.Close()
	var sum dayValue
	for it.Rewind(); it.ValidForPrefix(p); it.Next() {
		err := it.Item().Value(func(b []byte) error {
			v, err := decodeDayValue(b)
			sum = sum.add(dayDelta{tokens: int64(min(v.tokens, 1<<62)), cost: int64(min(v.cost, 1<<62))})
			return err
		})
		if err != nil {
			return dayValue{}, fmt.Errorf("raise %q: %w", it.Item().Key(), err)
		}
	}
	return sum, nil
}

// dayRaises returns what operators raised owner's daily budget by on day.
// The writer keeps what it read until RaiseDay commits another raise, so a
// Cycle's start reads none in the common case: the count of raises is
// taken before the read and RaiseDay adds to it after its commit, so a
// raise the read may have missed always changes the count the next call
// sees.
func (w *writer) dayRaises(owner, day string) (dayValue, error) {
	if n := w.raised.Load(); n != w.raisesAt {
		clear(w.raises)
		w.raisesAt = n
	}
	key := string(dayRaisePrefix(owner, day))
	if v, ok := w.raises[key]; ok {
		return v, nil
	}
	var v dayValue
	if err := w.db.View(func(txn *badger.Txn) error {
		var err error
		v, err = readRaises(txn, owner, day)
		return err
	}); err != nil {
		return dayValue{}, err
	}
	if len(w.raises) >= maxDayCache {
		clear(w.raises)
	}
	w.raises[key] = v
	return v, nil
}

// dayWrite is a day record a staged append writes.
type dayWrite struct {
	key string
	v   dayValue
}

// planDays computes the day records req changes (deltas) on top of group
// and the committed records, and asks req's DayCheck. It runs on the
// writer goroutine.
func (w *writer) planDays(req *request, owner string, deltas []dayDelta, group []staged) ([]dayWrite, error) {
	if len(deltas) == 0 && req.dayCheck == nil {
		return nil, nil
	}
	// A commit in flight may still fail: plan on its outcome, not on
	// what it staged (only after a split batch).
	for w.inflight > 0 {
		w.complete(<-w.done)
	}
	var out []dayWrite
	current := func(key string) (dayValue, error) {
		for i := len(out) - 1; i >= 0; i-- {
			if out[i].key == key {
				return out[i].v, nil
			}
		}
		for i := len(group) - 1; i >= 0; i-- {
			for j := len(group[i].days) - 1; j >= 0; j-- {
				if d := group[i].days[j]; d.key == key {
					return d.v, nil
				}
			}
		}
		if v, ok := w.days[key]; ok {
			return v, nil
		}
		var v dayValue
		err := w.db.View(func(txn *badger.Txn) error {
			var err error
			v, err = readDay(txn, []byte(key))
			return err
		})
		return v, err
	}
	if req.dayCheck != nil && len(req.events) > 0 {
		at := req.events[len(req.events)-1].GetTime().AsTime().UTC()
		day := Day(at)
		key := string(dayKey(owner, day))
		spent, err := current(key)
		if err != nil {
			return nil, err
		}
		var charge dayValue
		for _, d := range deltas {
			if d.day == day && d.tokens > 0 {
				charge = charge.add(dayDelta{tokens: d.tokens})
			}
			if d.day == day && d.cost > 0 {
				charge = charge.add(dayDelta{cost: d.cost})
			}
		}
		raised, err := w.dayRaises(owner, day)
		if err != nil {
			return nil, err
		}
		midnight := time.Date(at.Year(), at.Month(), at.Day(), 0, 0, 0, 0, time.UTC)
		if err := req.dayCheck(midnight, spent.amounts(), raised.amounts(), charge.amounts()); err != nil {
			return nil, err
		}
	}
	for _, d := range deltas {
		v, err := current(d.key)
		if err != nil {
			return nil, err
		}
		out = append(out, dayWrite{key: d.key, v: v.add(d)})
	}
	return out, nil
}
