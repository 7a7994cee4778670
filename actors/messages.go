package actors

import (
	"encoding/json"
	"sync/atomic"
	"time"

	"lemo/actors/taskstate"
	"lemo/api"
	"lemo/providers"
	"lemo/tools"
)

// reply answers a command.
type reply struct {
	meta *api.TaskMeta
	err  error
}

// replyTo sends r to ch without blocking (ch is buffered by its creator and
// answered once).
func replyTo(ch chan reply, r reply) {
	if ch == nil {
		return
	}
	select {
	case ch <- r:
	default:
	}
}

// Commands routed by the manager to a Task.

type cmdCreate struct {
	in taskstate.CreateInput
}

type cmdMessage struct{ text string }

type cmdPause struct{}

type cmdContinue struct {
	model string
	// price is the new model's price (budget.go).
	price *api.Price
}

type cmdCancel struct{}

type cmdResolve struct {
	approvalID string
	outcome    api.ApprovalOutcome
	by, reason string
	// always: approve and allow the Task's later calls of the same kind.
	always bool
}

// taskCommand is a command for one Task.
type taskCommand struct {
	taskID string
	caller Caller
	cmd    any
	reply  chan reply
}

// Manager bookkeeping.

// taskIdle is sent by an idle Task to the manager with the number of
// commands it had received when it found itself idle; the manager
// passivates it only if it has forwarded no command since.
type taskIdle struct {
	taskID   string
	received uint64
}

// liveEvicted tells a Task (through the manager, which never activates a
// Task for it) that one of its live results was evicted.
type liveEvicted struct {
	taskID, callID string
}

// shutdown asks the manager (and it each Task) to pause running work
// durably and stop.
type shutdown struct{ done chan struct{} }

// taskShutdownDone is a Task's answer to shutdown.
type taskShutdownDone struct{ taskID string }

// Task internals.

// loaded carries a Task's folded history from its load goroutine.
type loaded struct {
	incarnation uint64
	state       *taskstate.State
	meta        *api.TaskMeta // nil for a Task not created yet
	// ancestors are the Task's ancestors from its root down to its
	// parent (nil for a root), for labelling what it publishes.
	ancestors []string
	err       error
}

// appended carries an append's outcome from its goroutine.
type appended struct {
	incarnation uint64
	meta        *api.TaskMeta
	err         error
}

// cycleResult is a Cycle's outcome, sent by the Cycle actor to its Task.
type cycleResult struct {
	cycle uint32
	took  time.Duration
	// history is the history the Cycle read from the store (nil when the
	// Task gave it one).
	history []*api.Event
	resp    *providers.Response
	summary *api.InputSummary
	err     error
	// decision is the supervision's decision when the Cycle's actor
	// failed ("stop"), "" otherwise.
	decision string
}

// toolResult is a tool call's outcome, sent by the Tool actor to its Task.
type toolResult struct {
	callID string
	output json.RawMessage
	// presented is what the model sees of output (the output itself unless
	// the tool is a tools.Presenter).
	presented json.RawMessage
	retained  json.RawMessage
	untrusted bool
	err       error
	took      time.Duration
	// decision is the supervision's decision when the Tool's actor
	// failed ("stop"), "" otherwise.
	decision string
}

// diskFullNotice tells a Task that the data folder's disk is full: a
// running Task stops its model call and tools and pauses.
type diskFullNotice struct{}

// diskRetry asks a Task to try again to record its pause for a full disk.
type diskRetry struct{}

// resumeDiskFull asks a Task the full disk paused to continue: space is
// back.
type resumeDiskFull struct{}

// cancelTool asks a Tool actor to cancel its call.
type cancelTool struct{}

// approvalTimeout fires when an approval's deadline passes.
type approvalTimeout struct{ approvalID string }

type cmdSteer struct {
	callID string
	input  json.RawMessage
}

// cmdStopCall cancels one running tool call, the way Cancel cancels every
// call of a Task; the Task goes on.
type cmdStopCall struct {
	callID string
	by     string
}

// askApproval is sent by a running call's approval bridge to its Task.
type askApproval struct {
	callID   string
	reason   string
	deadline time.Duration
	// requested receives the approval id once the request is durable (or
	// an error); decided receives the decision.
	requested chan askAck
	decided   chan tools.Decision
	// abandoned is set when the call stopped waiting before the request
	// was acknowledged.
	abandoned atomic.Bool
}

type askAck struct {
	id  string
	err error
}

// abandonApproval cancels a request its call no longer waits for.
type abandonApproval struct{ approvalID string }

// steerCall forwards steering input to a Tool actor.
type steerCall struct {
	input json.RawMessage
	reply chan reply
}
