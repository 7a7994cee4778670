package api

import (
	"errors"
	"fmt"
	"math"
	"math/bits"
	"strconv"
	"strings"
	"time"
)

// NanoUSD is one US dollar in the unit of BudgetAmounts.cost_nano_usd.
const NanoUSD = 1_000_000_000

// Cost returns the price of a model call in nano-USD, rounded up: in
// prompt tokens (of which cached were read from the provider's cache) and
// out completion tokens. An unknown price costs 0. It saturates instead of
// overflowing.
func Cost(p *Price, in, cached, out uint64) uint64 {
	if !p.GetKnown() {
		return 0
	}
	cached = min(cached, in)
	return addSat(addSat(perMillion(in-cached, p.GetInputNanoUsd()), perMillion(cached, p.GetCachedInputNanoUsd())), perMillion(out, p.GetOutputNanoUsd()))
}

// perMillion is ceil(tokens*pricePerMillion/1e6) in 128 bits.
func perMillion(tokens, price uint64) uint64 {
	hi, lo := bits.Mul64(tokens, price)
	if hi >= 1_000_000 {
		return math.MaxUint64
	}
	q, r := bits.Div64(hi, lo, 1_000_000)
	if r > 0 {
		q = addSat(q, 1)
	}
	return q
}

func addSat(a, b uint64) uint64 {
	if s := a + b; s >= a {
		return s
	}
	return math.MaxUint64
}

func subSat(a, b uint64) uint64 {
	if a > b {
		return a - b
	}
	return 0
}

// ReservedTokens is the tokens a reservation holds: input and output.
func ReservedTokens(r *BudgetReservation) uint64 {
	return addSat(r.GetInputTokens(), r.GetOutputTokens())
}

// FoldBudget folds ev into the spend summary b (in place). prev is the
// time of the event before ev (zero for the first). It is the one
// definition of a Task's spend: the store's TaskMeta, the Task actor and
// clients all use it.
//
//   - A Cycle's reservation (CycleStarted.reservation) counts as spent from
//     the moment it is recorded; the Cycle's CycleFinished replaces it with
//     the provider's usage priced with the reservation's price, or, when no
//     usage was reported (a failed, cancelled or interrupted Cycle, or a
//     provider that reports none), leaves it as spent and counts an
//     estimated charge. An open reservation after a crash therefore counts
//     as spent (fail closed) until the recovery closes its Cycle, and then
//     stays an estimate.
//   - Working time runs while the status is running. The pause that a
//     recovery after a crash records ends it at its worked_until (the last
//     event before the crash), so the time the daemon was down is not
//     counted.
func FoldBudget(b *BudgetSummary, ev *Event) {
	if b.Spent == nil {
		b.Spent = &BudgetAmounts{}
	}
	s := b.Spent
	switch x := ev.Body.(type) {
	case *Event_TaskCreated:
		if l := x.TaskCreated.GetBudget(); l != nil {
			b.Limits = &BudgetAmounts{Tokens: l.GetTokens(), CostNanoUsd: l.GetCostNanoUsd(), TimeMs: l.GetTimeMs()}
		}
		b.Price = x.TaskCreated.GetPrice()
	case *Event_BudgetRaised:
		a := x.BudgetRaised.GetAdd()
		if b.Limits == nil {
			return
		}
		l := b.Limits
		if l.Tokens > 0 {
			l.Tokens = addSat(l.Tokens, a.GetTokens())
		}
		if l.CostNanoUsd > 0 {
			l.CostNanoUsd = addSat(l.CostNanoUsd, a.GetCostNanoUsd())
		}
		if l.TimeMs > 0 {
			l.TimeMs = addSat(l.TimeMs, a.GetTimeMs())
		}
	case *Event_BudgetCharged:
		c := x.BudgetCharged
		s.Tokens = addSat(s.Tokens, c.GetTokens())
		s.CostNanoUsd = addSat(s.CostNanoUsd, c.GetCostNanoUsd())
		if c.GetEstimated() {
			b.EstimatedCharges++
		}
	case *Event_CycleStarted:
		r := x.CycleStarted.GetReservation()
		if r == nil {
			return
		}
		b.Open, b.OpenCycle, b.OpenSince = r, x.CycleStarted.GetCycle(), ev.GetTime()
		s.Tokens = addSat(s.Tokens, ReservedTokens(r))
		s.CostNanoUsd = addSat(s.CostNanoUsd, r.GetCostNanoUsd())
	case *Event_CycleFinished:
		cf := x.CycleFinished
		u := cf.GetUsage()
		used := addSat(u.GetPromptTokens(), u.GetCompletionTokens())
		if b.Open == nil || cf.GetCycle() != b.OpenCycle {
			// A Cycle recorded without a reservation (an older history).
			s.Tokens = addSat(s.Tokens, used)
			s.CostNanoUsd = addSat(s.CostNanoUsd, Cost(b.Price, u.GetPromptTokens(), u.GetCachedPromptTokens(), u.GetCompletionTokens()))
			return
		}
		r := b.Open
		b.Open, b.OpenCycle, b.OpenSince = nil, 0, nil
		if used == 0 {
			b.EstimatedCharges++
			return
		}
		s.Tokens = addSat(subSat(s.Tokens, ReservedTokens(r)), used)
		s.CostNanoUsd = addSat(subSat(s.CostNanoUsd, r.GetCostNanoUsd()), Cost(r.GetPrice(), u.GetPromptTokens(), u.GetCachedPromptTokens(), u.GetCompletionTokens()))
	case *Event_StatusChanged:
		sc := x.StatusChanged
		if sc.GetModel() != "" {
			b.Price = sc.GetPrice()
		}
		at := ev.GetTime().AsTime()
		running := sc.GetStatus() == TaskStatus_TASK_STATUS_RUNNING
		switch {
		case running && b.RunningSince == nil:
			b.RunningSince = ev.GetTime()
		case !running && b.RunningSince != nil:
			end := at
			if wu := sc.GetWorkedUntil(); wu != nil && wu.AsTime().Before(end) {
				end = wu.AsTime()
			}
			if d := end.Sub(b.RunningSince.AsTime()); d > 0 {
				s.TimeMs = addSat(s.TimeMs, uint64(d.Milliseconds()))
			}
			b.RunningSince = nil
		}
	}
}

// BudgetSpent returns what b has spent by now: the working time includes
// the running period in progress.
func BudgetSpent(b *BudgetSummary, now time.Time) *BudgetAmounts {
	s := &BudgetAmounts{Tokens: b.GetSpent().GetTokens(), CostNanoUsd: b.GetSpent().GetCostNanoUsd(), TimeMs: b.GetSpent().GetTimeMs()}
	if rs := b.GetRunningSince(); rs != nil {
		if d := now.Sub(rs.AsTime()); d > 0 {
			s.TimeMs = addSat(s.TimeMs, uint64(d.Milliseconds()))
		}
	}
	return s
}

// BudgetLeft returns what is left of each limit by now, and which limits
// are set (a dimension without a limit reports ok false).
func BudgetLeft(b *BudgetSummary, now time.Time) (left *BudgetAmounts, tokens, cost, working bool) {
	l, s := b.GetLimits(), BudgetSpent(b, now)
	left = &BudgetAmounts{Tokens: subSat(l.GetTokens(), s.Tokens), CostNanoUsd: subSat(l.GetCostNanoUsd(), s.CostNanoUsd), TimeMs: subSat(l.GetTimeMs(), s.TimeMs)}
	return left, l.GetTokens() > 0, l.GetCostNanoUsd() > 0, l.GetTimeMs() > 0
}

// HasBudget reports whether a limit is set in any dimension.
func HasBudget(l *BudgetAmounts) bool {
	return l.GetTokens() > 0 || l.GetCostNanoUsd() > 0 || l.GetTimeMs() > 0
}

// FormatUSD formats nano-USD as dollars with as many decimals as needed
// (at least two): "$0.50", "$0.000123".
func FormatUSD(nano uint64) string {
	whole, frac := nano/NanoUSD, nano%NanoUSD
	f := strings.TrimRight(fmt.Sprintf("%09d", frac), "0")
	for len(f) < 2 {
		f += "0"
	}
	return "$" + strconv.FormatUint(whole, 10) + "." + f
}

// ErrUSD: a dollar amount that ParseUSD does not accept.
var ErrUSD = errors.New("want a dollar amount such as 0.50 or 12 (at most 9 decimals, no sign)")

// ParseUSD parses a non-negative dollar amount ("0.5", "$12.25") into
// nano-USD, exactly (no floating point).
func ParseUSD(s string) (uint64, error) {
	t := strings.TrimPrefix(strings.TrimSpace(s), "$")
	whole, frac, _ := strings.Cut(t, ".")
	if (whole == "" && frac == "") || len(frac) > 9 || strings.ContainsAny(whole+frac, "+-_ ") {
		return 0, fmt.Errorf("%q: %w", s, ErrUSD)
	}
	var w uint64
	if whole != "" {
		var err error
		if w, err = strconv.ParseUint(whole, 10, 64); err != nil || w > math.MaxUint64/NanoUSD-1 {
			return 0, fmt.Errorf("%q: %w", s, ErrUSD)
		}
	}
	var f uint64
	if frac != "" {
		var err error
		if f, err = strconv.ParseUint(frac+strings.Repeat("0", 9-len(frac)), 10, 64); err != nil {
			return 0, fmt.Errorf("%q: %w", s, ErrUSD)
		}
	}
	return w*NanoUSD + f, nil
}

// PerMillion converts a price in dollars per million tokens (as a config
// table or a provider states it) to nano-USD per million tokens, rounded
// to the nearest; a negative or non-finite price is 0.
func PerMillion(usd float64) uint64 {
	if !(usd > 0) || math.IsInf(usd, 0) {
		return 0
	}
	v := math.Round(usd * NanoUSD)
	if v >= math.MaxUint64 {
		return math.MaxUint64
	}
	return uint64(v)
}
