package supervision

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"lemo/api"
	"lemo/prompt"
	"lemo/providers"
	"lemo/tools"
)

// PanicError is a recovered panic.
type PanicError struct {
	Value any
	Stack string
}

func (e *PanicError) Error() string { return fmt.Sprintf("panic: %v", e.Value) }

// Recovered wraps a value returned by recover() with the current stack.
func Recovered(v any) *PanicError {
	return &PanicError{Value: v, Stack: string(debug.Stack())}
}

// ErrOutcomeUnknown is wrapped by errors after which a call's effects are
// unknown (it did not stop when cancelled, or never reported).
var ErrOutcomeUnknown = errors.New("outcome unknown")

// ToolFailureKind classifies the error a tool call ended with.
func ToolFailureKind(err error) api.ToolFailureKind {
	var pe *PanicError
	var ve *tools.ValidationError
	switch {
	case errors.Is(err, ErrOutcomeUnknown):
		return api.ToolFailureKind_TOOL_FAILURE_KIND_OUTCOME_UNKNOWN
	case errors.As(err, &pe):
		return api.ToolFailureKind_TOOL_FAILURE_KIND_PANIC
	case errors.As(err, &ve) && ve.What != "input":
		return api.ToolFailureKind_TOOL_FAILURE_KIND_INVALID_OUTPUT
	case errors.As(err, &ve):
		return api.ToolFailureKind_TOOL_FAILURE_KIND_INVALID_INPUT
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return api.ToolFailureKind_TOOL_FAILURE_KIND_CANCELLED
	default:
		return api.ToolFailureKind_TOOL_FAILURE_KIND_ERROR
	}
}

// Cycle failure kinds beyond the provider classes.
const (
	KindPanic    = "panic"
	KindOverflow = "overflow"
	KindInternal = "internal"
)

// CycleFailureKind classifies the error a Cycle ended with: a provider class
// ("transient", "auth", ..., "cancelled"), "overflow" or "panic".
func CycleFailureKind(err error) string {
	var pe *PanicError
	var oe *prompt.OverflowError
	var perr *providers.Error
	switch {
	case errors.As(err, &pe):
		return KindPanic
	case errors.As(err, &oe):
		return KindOverflow
	case errors.As(err, &perr):
		return perr.Class.String()
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return providers.ClassCancelled.String()
	default:
		return KindInternal
	}
}

// Budget bounds restarts: at most Max failures within Within.
type Budget struct {
	Max    int
	Within time.Duration
}

// DefaultTaskBudget restarts a crashing Task at most 3 times in 30 seconds.
var DefaultTaskBudget = Budget{Max: 3, Within: 30 * time.Second}

// Directive is a supervision decision.
type Directive int

// Directives.
const (
	Restart Directive = iota + 1
	Stop
)

func (d Directive) String() string {
	switch d {
	case Restart:
		return "restart"
	case Stop:
		return "stop"
	}
	return "unknown"
}

// Decide returns Restart while the number of failures within the window
// (including the current one) does not exceed Max, else Stop.
func (b Budget) Decide(recent int) Directive {
	if recent > b.Max {
		return Stop
	}
	return Restart
}

// Strategy is a protoactor supervisor strategy that applies a Budget per
// child and calls OnStop (on the supervisor's goroutine) for a child it stops.
type Strategy struct {
	Budget Budget
	// OnFailure is called for every failure with the decision taken; the
	// message is the one being processed when the child failed (for a
	// request, its envelope).
	OnFailure func(child *actor.PID, reason any, message any, d Directive)
}

var _ actor.SupervisorStrategy = (*Strategy)(nil)

// HandleFailure implements actor.SupervisorStrategy.
func (s *Strategy) HandleFailure(system *actor.ActorSystem, supervisor actor.Supervisor, child *actor.PID, rs *actor.RestartStatistics, reason interface{}, message interface{}) {
	rs.Fail()
	d := s.Budget.Decide(rs.NumberOfFailures(s.Budget.Within))
	if s.OnFailure != nil {
		s.OnFailure(child, reason, message, d)
	}
	if d == Restart {
		supervisor.RestartChildren(child)
		return
	}
	rs.Reset()
	supervisor.StopChildren(child)
}
