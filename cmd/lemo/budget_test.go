package main

import (
	"errors"
	"flag"
	"io"
	"strings"
	"testing"

	"lemo/api"
)

func TestBudgetFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want *api.BudgetAmounts
		err  string
	}{
		{nil, nil, ""},
		{[]string{"--max-tokens", "5000", "--max-cost", "0.50", "--max-time", "10m"}, &api.BudgetAmounts{Tokens: 5000, CostNanoUsd: 500_000_000, TimeMs: 600_000}, ""},
		{[]string{"--max-cost", "$2"}, &api.BudgetAmounts{CostNanoUsd: 2_000_000_000}, ""},
		{[]string{"--max-cost", "-1"}, nil, "want a dollar amount"},
		{[]string{"--max-time", "-5s"}, nil, "must not be negative"},
		{[]string{"--max-time", "1us"}, nil, "below a millisecond"},
	} {
		var b budgetFlags
		fs := flag.NewFlagSet("run", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		b.add(fs, false)
		err := fs.Parse(tc.args)
		var got *api.BudgetAmounts
		if err == nil {
			got, err = b.amounts()
		}
		switch {
		case tc.err != "":
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%v: err = %v, want %q", tc.args, err, tc.err)
			}
		case err != nil:
			t.Errorf("%v: %v", tc.args, err)
		case (got == nil) != (tc.want == nil) || got.GetTokens() != tc.want.GetTokens() || got.GetCostNanoUsd() != tc.want.GetCostNanoUsd() || got.GetTimeMs() != tc.want.GetTimeMs():
			t.Errorf("%v: amounts = %v, want %v", tc.args, got, tc.want)
		}
	}
}

// lemo budget with nothing to add is a usage error, before any connection.
func TestBudgetNeedsAnAmount(t *testing.T) {
	err := run(t.Context(), []string{"budget", "T1", "--data", t.TempDir()}, io.Discard, io.Discard)
	var ee *exitError
	if !errors.As(err, &ee) || ee.code != 2 || !strings.Contains(err.Error(), "nothing to raise") {
		t.Fatalf("lemo budget T1 = %v, want a usage error saying nothing to raise", err)
	}
}
