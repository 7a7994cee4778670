package client

import (
	"fmt"
	"strings"
	"time"

	"lemo/api"
)

// SpendLine says what a Task spent and has left by now, for people:
// "tokens 1200 of 5000 (3800 left) · cost $0.01 · time 3s". Dimensions
// without a limit show what was spent; a cost without a known price says
// so; estimated charges are counted.
func SpendLine(b *api.BudgetSummary, now time.Time) string {
	spent := api.BudgetSpent(b, now)
	left, hasTok, hasCost, hasTime := api.BudgetLeft(b, now)
	var parts []string
	tok := fmt.Sprintf("tokens %d", spent.GetTokens())
	if hasTok {
		tok = fmt.Sprintf("tokens %d of %d (%d left)", spent.GetTokens(), b.GetLimits().GetTokens(), left.GetTokens())
	}
	parts = append(parts, tok)
	switch {
	case hasCost:
		parts = append(parts, fmt.Sprintf("cost %s of %s (%s left)", api.FormatUSD(spent.GetCostNanoUsd()), api.FormatUSD(b.GetLimits().GetCostNanoUsd()), api.FormatUSD(left.GetCostNanoUsd())))
	case b.GetPrice().GetKnown():
		parts = append(parts, "cost "+api.FormatUSD(spent.GetCostNanoUsd()))
	default:
		parts = append(parts, "cost unknown (no price)")
	}
	ms := func(v uint64) string { return (time.Duration(v) * time.Millisecond).Round(time.Second / 10).String() }
	if hasTime {
		parts = append(parts, fmt.Sprintf("time %s of %s (%s left)", ms(spent.GetTimeMs()), ms(b.GetLimits().GetTimeMs()), ms(left.GetTimeMs())))
	} else {
		parts = append(parts, "time "+ms(spent.GetTimeMs()))
	}
	s := strings.Join(parts, " · ")
	if n := b.GetEstimatedCharges(); n > 0 {
		s += fmt.Sprintf(" (%d charge(s) estimated: no usage reported)", n)
	}
	return s
}
