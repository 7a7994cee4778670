package taskstate

import (
	"fmt"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"lemo/api"
)

// budgetHistory is a budgeted Task after n Cycles, each with a tool call
// and a 1 KB result.
func budgetHistory(b *testing.B, n int) *State {
	b.Helper()
	s := New()
	s.TaskID = "T1"
	apply(s, Create(CreateInput{Owner: "a", Model: "fake/m", Request: "do it", Budget: &api.BudgetAmounts{Tokens: 1 << 40, CostNanoUsd: 1 << 50, TimeMs: 1 << 40}, Price: priced}))
	out := []byte(`{"text":"` + strings.Repeat("x", 1024) + `"}`)
	for c := uint32(1); c <= uint32(n); c++ {
		id := fmt.Sprintf("call-%d-1", c)
		apply(s, []proto.Message{
			&api.CycleStarted{Cycle: c, Reservation: &api.BudgetReservation{InputTokens: 1000, OutputTokens: 4096, CostNanoUsd: 9_000_000, Price: priced}},
			&api.AssistantMessage{Cycle: c, Text: "calling the tool", ToolCallIds: []string{id}},
			&api.ToolCallRecorded{CallId: id, Cycle: c, Tool: "t", Arguments: []byte(`{"path":"a/b"}`), ModelName: "t"},
			&api.CycleFinished{Cycle: c, Outcome: api.CycleOutcome_CYCLE_OUTCOME_COMPLETED, Usage: &api.Usage{PromptTokens: 1200, CompletionTokens: 40},
				Input: &api.InputSummary{EstimatedTokens: 1100, WindowTokens: 131072}},
			&api.ToolExecutionStarted{CallId: id},
			&api.ToolResult{CallId: id, Retained: true, RetainedOutput: out, OutputBytes: uint64(len(out))},
		})
	}
	return s
}

// BenchmarkReserveCycle is what the budget adds to the start of a Cycle:
// the input estimate, the check against every limit and the reservation
// carried by the CycleStarted (after 500 Cycles: the estimate does not
// grow with the history).
func BenchmarkReserveCycle(b *testing.B) {
	s := budgetHistory(b, 500)
	step := s.Next(NextOptions{})
	if step.Kind != StepStartCycle {
		b.Fatalf("Next = %v", step.Kind)
	}
	o := ReserveOptions{Now: now, OutputTokens: 4096}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if got := s.Reserve(step, o); got.Kind != StepStartCycle {
			b.Fatalf("Reserve = %v", got.Kind)
		}
	}
}

// BenchmarkLedgerCycleEvents is what the budget adds to folding one
// Cycle's events (its start with the reservation, its answer, the tool
// call and its 1 KB result, its end with the usage that replaces the
// reservation): the ledger and the content estimate.
func BenchmarkLedgerCycleEvents(b *testing.B) {
	s := budgetHistory(b, 1)
	out := []byte(`{"text":"` + strings.Repeat("x", 1024) + `"}`)
	evs := s.Stamp([]proto.Message{
		&api.CycleStarted{Cycle: 2, Reservation: &api.BudgetReservation{InputTokens: 1000, OutputTokens: 4096, CostNanoUsd: 9_000_000, Price: priced}},
		&api.AssistantMessage{Cycle: 2, Text: "calling the tool", ToolCallIds: []string{"c"}},
		&api.ToolCallRecorded{CallId: "c", Cycle: 2, Tool: "t", Arguments: []byte(`{"path":"a/b"}`), ModelName: "t"},
		&api.CycleFinished{Cycle: 2, Outcome: api.CycleOutcome_CYCLE_OUTCOME_COMPLETED, Usage: &api.Usage{PromptTokens: 1200, CompletionTokens: 40}, Input: &api.InputSummary{EstimatedTokens: 1100}},
		&api.ToolResult{CallId: "c", Retained: true, RetainedOutput: out, OutputBytes: uint64(len(out))},
	}, now)
	l := &s.Budget
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		for _, ev := range evs {
			l.apply(ev)
		}
	}
}
