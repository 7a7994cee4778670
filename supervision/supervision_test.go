package supervision

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"lemo/api"
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
