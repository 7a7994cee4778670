package supervision

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"lemo/api"
	"lemo/persistence"
	"lemo/prompt"
	"lemo/providers"
	"lemo/tools"
)

func TestToolFailureKind(t *testing.T) {
	cases := []struct {
		err  error
		want api.ToolFailureKind
	}{
		{Recovered("boom"), api.ToolFailureKind_TOOL_FAILURE_KIND_PANIC},
		{&tools.ValidationError{What: "output"}, api.ToolFailureKind_TOOL_FAILURE_KIND_INVALID_OUTPUT},
		{&tools.ValidationError{What: "state"}, api.ToolFailureKind_TOOL_FAILURE_KIND_INVALID_OUTPUT},
		{&tools.ValidationError{What: "input"}, api.ToolFailureKind_TOOL_FAILURE_KIND_INVALID_INPUT},
		{context.Canceled, api.ToolFailureKind_TOOL_FAILURE_KIND_CANCELLED},
		{fmt.Errorf("wrapped: %w", context.DeadlineExceeded), api.ToolFailureKind_TOOL_FAILURE_KIND_CANCELLED},
		{fmt.Errorf("%w: stuck", ErrOutcomeUnknown), api.ToolFailureKind_TOOL_FAILURE_KIND_OUTCOME_UNKNOWN},
		{errors.New("disk full"), api.ToolFailureKind_TOOL_FAILURE_KIND_ERROR},
	}
	for _, c := range cases {
		if got := ToolFailureKind(c.err); got != c.want {
			t.Errorf("ToolFailureKind(%v) = %v, want %v", c.err, got, c.want)
		}
	}
}

func TestCycleFailureKind(t *testing.T) {
	cases := []struct {
		err  error
		want string
	}{
		{Recovered("boom"), "panic"},
		{&prompt.OverflowError{Needed: 10, Available: 5}, "overflow"},
		{&providers.Error{Class: providers.ClassRateLimit}, "rate_limit"},
		{fmt.Errorf("x: %w", &providers.Error{Class: providers.ClassAuth}), "auth"},
		{context.Canceled, "cancelled"},
		{errors.New("?"), "internal"},
	}
	for _, c := range cases {
		if got := CycleFailureKind(c.err); got != c.want {
			t.Errorf("CycleFailureKind(%v) = %q, want %q", c.err, got, c.want)
		}
	}
}

func TestBudgetDecide(t *testing.T) {
	b := Budget{Max: 3}
	for recent, want := range map[int]Directive{1: Restart, 3: Restart, 4: Stop, 10: Stop} {
		if got := b.Decide(recent); got != want {
			t.Errorf("Decide(%d) = %v, want %v", recent, got, want)
		}
	}
}

// Decide is the policy of every level: one row per level and kind of
// reason, and the budget's edge for Tasks.
func TestDecide(t *testing.T) {
	b := Budget{Max: 3}
	storeErr := &StoreError{TaskID: "t", Op: "append", Err: errors.New("commit failed")}
	closed := &StoreError{TaskID: "t", Op: "append", Err: fmt.Errorf("wrapped: %w", persistence.ErrClosed)}
	cases := []struct {
		name string
		f    Failure
		want Decision
	}{
		{"cycle goroutine panic", Failure{Level: LevelCycle, Reason: Recovered("model exploded")}, Decision{Directive: Stop, Record: RecordCycleFailure, Kind: "panic"}},
		{"cycle panic with a plain value", Failure{Level: LevelCycle, Reason: "bug"}, Decision{Directive: Stop, Record: RecordCycleFailure, Kind: "panic"}},
		{"cycle provider error", Failure{Level: LevelCycle, Reason: &providers.Error{Class: providers.ClassAuth}}, Decision{Directive: Stop, Record: RecordCycleFailure, Kind: "auth"}},
		{"cycle never restarts, however rare", Failure{Level: LevelCycle, Reason: Recovered("x"), Recent: 1}, Decision{Directive: Stop, Record: RecordCycleFailure, Kind: "panic"}},
		{"tool goroutine panic", Failure{Level: LevelTool, Reason: Recovered("tool exploded")}, Decision{Directive: Stop, Record: RecordToolFailure, Kind: "panic"}},
		{"tool panic with a plain value", Failure{Level: LevelTool, Reason: 42}, Decision{Directive: Stop, Record: RecordToolFailure, Kind: "panic"}},
		{"tool invalid output", Failure{Level: LevelTool, Reason: &tools.ValidationError{What: "output"}}, Decision{Directive: Stop, Record: RecordToolFailure, Kind: "invalid_output"}},
		{"session", Failure{Level: LevelSession, Reason: "bug"}, Decision{Directive: Stop, Record: RecordNothing, Kind: "panic"}},
		{"task first crash", Failure{Level: LevelTask, Reason: "approval rule bug", Recent: 1}, Decision{Directive: Restart, Record: RecordTaskRestart, Kind: "panic"}},
		{"task at the budget", Failure{Level: LevelTask, Reason: Recovered("x"), Recent: 3}, Decision{Directive: Restart, Record: RecordTaskRestart, Kind: "panic"}},
		{"task over the budget", Failure{Level: LevelTask, Reason: "approval rule bug", Recent: 4}, Decision{Directive: Stop, Record: RecordTaskFailed, Kind: "panic"}},
		{"task store failure", Failure{Level: LevelTask, Reason: storeErr, Recent: 1}, Decision{Directive: Restart, Record: RecordTaskRestart, Kind: "store"}},
		{"task store failure over the budget", Failure{Level: LevelTask, Reason: storeErr, Recent: 4}, Decision{Directive: Stop, Record: RecordTaskFailed, Kind: "store"}},
		{"task whose store closed", Failure{Level: LevelTask, Reason: closed, Recent: 1}, Decision{Directive: Stop, Record: RecordNothing, Kind: "store"}},
		{"child task first crash", Failure{Level: LevelChildTask, Reason: Recovered("x"), Recent: 1}, Decision{Directive: Restart, Record: RecordTaskRestart, Kind: "panic"}},
		{"child task over the budget tells its parent", Failure{Level: LevelChildTask, Reason: Recovered("x"), Recent: 4}, Decision{Directive: Stop, Record: RecordTaskFailed, Kind: "panic", TellParent: true}},
		{"child task whose store closed", Failure{Level: LevelChildTask, Reason: closed, Recent: 4}, Decision{Directive: Stop, Record: RecordNothing, Kind: "store"}},
		{"unknown level", Failure{Reason: "x"}, Decision{Directive: Stop, Record: RecordNothing, Kind: "internal"}},
	}
	for _, c := range cases {
		if got := Decide(b, c.f); got != c.want {
			t.Errorf("%s: Decide(%+v) = %+v, want %+v", c.name, c.f, got, c.want)
		}
	}
}
