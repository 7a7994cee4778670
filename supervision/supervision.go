package supervision

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"strings"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"lemo/api"
	"lemo/persistence"
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

// Level is where in the tree an actor that failed sits; it names the
// supervisor that decides.
type Level int

// Levels.
const (
	// LevelCycle: a Cycle actor (one model call), supervised by its Task.
	LevelCycle Level = iota + 1
	// LevelTool: a Tool actor (one tool call), supervised by its Task.
	LevelTool
	// LevelSession: a session actor of a running tool call (the
	// delegate's), supervised by its Tool actor.
	LevelSession
	// LevelTask: the actor of a Task without a parent, supervised by the
	// task manager.
	LevelTask
	// LevelChildTask: the actor of a Task started by another Task. It is
	// supervised like a Task; when it is stopped its parent is told.
	LevelChildTask
)

func (l Level) String() string {
	switch l {
	case LevelCycle:
		return "cycle"
	case LevelTool:
		return "tool"
	case LevelSession:
		return "session"
	case LevelTask:
		return "task"
	case LevelChildTask:
		return "child_task"
	}
	return "unknown"
}

// Record is what a decision records in the Task's history.
type Record int

// Records.
const (
	// RecordNothing: nothing is recorded (a session's crash; a Task
	// stopped because the store closed, which the next start recovers).
	RecordNothing Record = iota
	// RecordCycleFailure: the Cycle is recorded as failed with its kind;
	// the Task fails and a continue retries it.
	RecordCycleFailure
	// RecordToolFailure: the call is recorded as failed with its kind;
	// the Task goes on and the model sees the failure.
	RecordToolFailure
	// RecordTaskRestart: the restarted Task records the failure and the
	// decision before it recovers from its history.
	RecordTaskRestart
	// RecordTaskFailed: the Task is recorded as failed (its failure, with
	// the decision, and the failed status).
	RecordTaskFailed
)

// Failure is what a supervisor knows about a child that failed.
type Failure struct {
	Level Level
	// Reason is the panic value: a *PanicError for a panic recovered on
	// a goroutine and routed into its actor, else what Receive panicked
	// with (an error, a string, ...).
	Reason any
	// Recent is the number of failures of this child within the budget's
	// window, this one included (Task levels only).
	Recent int
}

// Decision is what a supervisor does about a failed child.
type Decision struct {
	Directive Directive
	Record    Record
	// Kind is the failure's class as recorded: a Cycle's ("panic", a
	// provider class, ...), "panic" for a tool or a Task that panicked,
	// "store" for a Task whose store failed.
	Kind string
	// TellParent: the Task's parent Task is told that it failed (its
	// failure record is what the parent reads).
	TellParent bool
}

// Decide is the supervision policy of every level, a pure function of the
// failure and the budget:
//   - a Cycle or a Tool that fails is stopped, never restarted (a model
//     call or a tool call may have had effects; its Task records the
//     failure and decides what comes next);
//   - a session of a tool call is stopped; the call goes on;
//   - a Task restarts from its durable history while its recent failures
//     stay within the budget, and is then stopped and recorded as failed
//     (a child Task's parent is told);
//   - a Task whose store is closed (the daemon stops) is stopped without a
//     record: nothing could be written, and the next start recovers it.
func Decide(b Budget, f Failure) Decision {
	err, _ := f.Reason.(error)
	switch f.Level {
	case LevelCycle:
		kind := KindPanic
		if err != nil {
			kind = CycleFailureKind(err)
		}
		return Decision{Directive: Stop, Record: RecordCycleFailure, Kind: kind}
	case LevelTool:
		kind := "panic"
		if err != nil {
			kind = toolKindName(ToolFailureKind(err))
		}
		return Decision{Directive: Stop, Record: RecordToolFailure, Kind: kind}
	case LevelSession:
		return Decision{Directive: Stop, Record: RecordNothing, Kind: KindPanic}
	case LevelTask, LevelChildTask:
		kind := TaskFailureKind(f.Reason)
		if errors.Is(err, persistence.ErrClosed) {
			return Decision{Directive: Stop, Record: RecordNothing, Kind: kind}
		}
		if b.Decide(f.Recent) == Restart {
			return Decision{Directive: Restart, Record: RecordTaskRestart, Kind: kind}
		}
		return Decision{Directive: Stop, Record: RecordTaskFailed, Kind: kind, TellParent: f.Level == LevelChildTask}
	}
	return Decision{Directive: Stop, Record: RecordNothing, Kind: KindInternal}
}

// KindStore is the kind of a Task that failed because its store did.
const KindStore = "store"

// StoreError is what a Task actor fails with when its store did: a read
// of its history or an append that failed, after which its memory no
// longer matches its log.
type StoreError struct {
	TaskID string
	Op     string // "load" or "append"
	Err    error
}

func (e *StoreError) Error() string { return fmt.Sprintf("task %s: %s: %v", e.TaskID, e.Op, e.Err) }
func (e *StoreError) Unwrap() error { return e.Err }

// TaskFailureKind classifies what a Task actor failed with: "store" for a
// *StoreError, else "panic".
func TaskFailureKind(reason any) string {
	var se *StoreError
	if err, ok := reason.(error); ok && errors.As(err, &se) {
		return KindStore
	}
	return KindPanic
}

// toolKindName is a tool failure kind as a label: "panic", "error", ...
func toolKindName(k api.ToolFailureKind) string {
	return strings.ToLower(strings.TrimPrefix(k.String(), "TOOL_FAILURE_KIND_"))
}

// Strategy is a protoactor supervisor strategy for Task actors: it counts
// each child's failures within the Budget's window, decides with Decide and
// carries the directive out. OnFailure (on the supervisor's goroutine) is
// told every decision first, so that it can prepare what the decision
// records.
type Strategy struct {
	Budget Budget
	// Level says whether the child is a Task or a child Task; nil: a Task.
	Level func(child *actor.PID) Level
	// OnFailure is called for every failure with the decision taken; the
	// message is the one being processed when the child failed (for a
	// request, its envelope); recent counts the child's failures within
	// the window.
	OnFailure func(child *actor.PID, reason any, message any, recent int, d Decision)
}

var _ actor.SupervisorStrategy = (*Strategy)(nil)

// HandleFailure implements actor.SupervisorStrategy.
func (s *Strategy) HandleFailure(system *actor.ActorSystem, supervisor actor.Supervisor, child *actor.PID, rs *actor.RestartStatistics, reason interface{}, message interface{}) {
	rs.Fail()
	level := LevelTask
	if s.Level != nil {
		level = s.Level(child)
	}
	recent := rs.NumberOfFailures(s.Budget.Within)
	d := Decide(s.Budget, Failure{Level: level, Reason: reason, Recent: recent})
	if s.OnFailure != nil {
		s.OnFailure(child, reason, message, recent, d)
	}
	if d.Directive == Restart {
		supervisor.RestartChildren(child)
		return
	}
	rs.Reset()
	supervisor.StopChildren(child)
}
