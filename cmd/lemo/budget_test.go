package main

import (
	"errors"
	"flag"
	"io"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"lemo/api"
	"lemo/client"
)

type protoMessage = proto.Message

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

// The renderer shows what a Task spent when it stops, and what a budget
// has left after each status change and raise.
func TestRenderSpend(t *testing.T) {
	t0 := time.Date(2026, 12, 6, 1, 0, 0, 0, time.UTC)
	at := func(s int) *timestamppb.Timestamp { return timestamppb.New(t0.Add(time.Duration(s) * time.Second)) }
	price := &api.Price{Known: true, InputNanoUsd: 1_000_000_000, OutputNanoUsd: 2_000_000_000}
	for _, tc := range []struct {
		name   string
		budget *api.BudgetAmounts
		want   []string
	}{
		{"no budget", nil, []string{"[finished: answered]\n  spent: tokens 130 · cost $0.00014 · time 4s\n"}},
		{"a budget", &api.BudgetAmounts{Tokens: 1000}, []string{
			"[running: created]\n  budget: tokens 0 of 1000 (1000 left) · cost $0.00 · time 0s\n",
			"  budget raised by bob: tokens 130 of 1500 (1370 left)",
			"[finished: answered]\n  budget: tokens 130 of 1500 (1370 left) · cost $0.00014 · time 4s\n"}},
	} {
		var b strings.Builder
		r := newRenderer(&b, client.NewViews(nil))
		for i, body := range []protoMessage{
			&api.TaskCreated{Model: "p/m", Budget: tc.budget, Price: price},
			&api.StatusChanged{Status: api.TaskStatus_TASK_STATUS_RUNNING, Detail: "created"},
			&api.CycleStarted{Cycle: 1, Reservation: &api.BudgetReservation{InputTokens: 100, OutputTokens: 100, Price: price}},
			&api.CycleFinished{Cycle: 1, Usage: &api.Usage{PromptTokens: 120, CompletionTokens: 10}},
			&api.BudgetRaised{Add: &api.BudgetAmounts{Tokens: 500}, By: "bob"},
			&api.StatusChanged{Status: api.TaskStatus_TASK_STATUS_FINISHED, Detail: "answered"},
		} {
			r.event(api.NewEvent("T", uint64(i+1), at(i), body))
		}
		for _, w := range tc.want {
			if !strings.Contains(b.String(), w) {
				t.Errorf("%s: output lacks %q:\n%s", tc.name, w, b.String())
			}
		}
	}
}
