package tools

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"time"
)

// Tool is a discoverable capability the model can call.
//
// Execute runs on its own goroutine and must return promptly once ctx is
// cancelled. Everything it returns is validated against ResultSchema; every
// state update passed to emit against StateSchema.
type Tool interface {
	// Name is unique, made of [a-z0-9_.-], at most 64 characters, and still
	// unique after "." is mapped to "_".
	Name() string
	// Description tells the model what the tool does and when to use it.
	Description() string
	// InputSchema is the JSON Schema of the arguments (an object schema).
	InputSchema() json.RawMessage
	// StateSchema is the JSON Schema of live state updates; nil when the
	// tool emits none.
	StateSchema() json.RawMessage
	// ResultSchema is the JSON Schema of the output.
	ResultSchema() json.RawMessage
	// Execute performs the call.
	Execute(ctx context.Context, call Call, emit Emit) (json.RawMessage, error)
	// Retain selects what of a successful output is persisted in the Task's
	// history; nil retains nothing. It must be a pure function of its
	// inputs. What is not retained reads as unavailable after a restart.
	Retain(output, input json.RawMessage) json.RawMessage
	// View is the id of the client View that renders this tool's input,
	// state and result; "" means the generic JSON view.
	View() string
}

// Emit publishes a state update of a running call. It returns an error when
// the update does not match the tool's StateSchema; the call then fails.
type Emit func(state json.RawMessage) error

// Call is everything a tool knows about one invocation.
type Call struct {
	// TaskID and CallID identify the call; Owner is the Task's owner.
	TaskID string
	CallID string
	Owner  string
	// Workspace is the Task's workspace folder, for tools that say they
	// use it (WorkspaceUser); "" for the others.
	Workspace string
	// Input is the validated JSON arguments.
	Input json.RawMessage
	// Memory records explicit facts with this call as their source; nil
	// when the daemon runs without memory.
	Memory MemoryRecorder
	// Approvals asks a person to approve something the running call is about
	// to do; nil when the daemon cannot ask.
	Approvals Approvals
	// Steer delivers steering input that clients send to this running call,
	// for tools that implement Steerable; nil otherwise. The tool answers
	// each Steering once.
	Steer <-chan Steering
	// Live keeps the call's whole output as its live result, for tools
	// whose result shows only part of it (a shell run's head and tail):
	// in memory up to the daemon's bounds, in a private spill file beyond
	// them, readable with tasks.read_block while the Task holds it. nil
	// when the daemon keeps none.
	Live LiveOutput
	// Sessions hosts long-lived sessions of this call (a delegate agent's
	// process) as child actors of the call: visible in the actor tree,
	// never restarted, and stopped when the call ends.
	Sessions SessionHost
	// Toolset is the Task's tool set, for the discovery tools
	// (tools.search, tools.load); nil when the Task's tools are fixed.
	Toolset Toolset
	// Tree acts on the Task's agent tree (child Tasks, messages); nil when
	// the daemon offers none.
	Tree Tree
}

// Toolset is a Task's tool set as a running call sees it.
type Toolset interface {
	// Offered returns the tools the Task may use or load, sorted by name,
	// as they were when the call started.
	Offered() []OfferedTool
	// Load adds the named tools to the Task from its next model call on.
	// The load is durable in the Task's history before Load returns; an
	// error (an unknown name, a tool not offered) loads nothing and says
	// why.
	Load(ctx context.Context, names []string) (LoadResult, error)
}

// PendingSource says which sources of tools have not listed them yet (an
// MCP server not up): the Registry does, and a Task's Toolset as they
// were when its call started, so that tools.search and lemo tools can say
// why a tool may be missing.
type PendingSource interface {
	Pending() []Pending
}

// OfferedTool is a tool a Task may use or load.
type OfferedTool struct {
	Name        string
	Description string
	// Loaded: the Task offers it to the model already.
	Loaded bool
}

// LoadResult says what a load did: the tools it added, and those the Task
// had already.
type LoadResult struct {
	Loaded, Already []string
}

// LiveOutput receives the whole output of a running call.
type LiveOutput interface {
	// Stream returns the writer of one named part of the output
	// ("stdout"); its writes never fail: what the bounds do not let the
	// daemon keep is counted as dropped. One stream is written by one
	// goroutine at a time.
	Stream(name string) io.Writer
	// Stats says where the bytes written so far are.
	Stats() LiveStats
	// Discard drops what was written when the result holds all of it.
	Discard()
}

// LiveStats says where the bytes of a live output are: Bytes in all,
// HeapBytes in memory, SpilledBytes in the spill file, DroppedBytes not
// kept (beyond the spill bounds); SpillError says why spilling stopped
// early.
type LiveStats struct {
	Bytes, HeapBytes, SpilledBytes, DroppedBytes int64
	SpillError                                   string
}

// SessionHost starts sessions under a running call.
type SessionHost interface {
	// Start runs s as a child of the call named name ([a-z0-9_.-]).
	Start(name string, s Session) (SessionHandle, error)
}

// Session is a long-lived piece of a call with resources of its own (a
// process and its pipes). Run owns them: it must release them and return
// promptly once ctx ends, which happens when its actor stops for any reason.
type Session interface {
	Run(ctx context.Context, inbox <-chan any) error
}

// SessionHandle controls a started session.
type SessionHandle interface {
	// Send queues msg for the session's inbox; false when the session ended
	// or its inbox is full.
	Send(msg any) bool
	// Done is closed when Run returned; Err then says how.
	Done() <-chan struct{}
	Err() error
	// Stop stops the session's actor (ending Run's context).
	Stop()
}

// Approvals lets a running call ask for a person's decision. The request is
// durable and announced to clients like any approval.
type Approvals interface {
	// Ask blocks until the request is decided, times out (deadline > 0),
	// is cancelled (the Task paused or cancelled), or ctx ends; ending ctx
	// cancels the request (the caller abandoned it).
	Ask(ctx context.Context, reason string, deadline time.Duration) (Decision, error)
}

// Decision is the answer to an approval request.
type Decision struct {
	Approved bool
	// Outcome is "approved", "denied", "timed_out" or "cancelled".
	Outcome string
	By      string
	Reason  string
}

// Steering is one steering input for a running call. The tool calls Reply
// exactly once: nil once the input was taken into account, else why not.
type Steering struct {
	Input json.RawMessage
	Reply func(error)
}

// Steerable is implemented by tools whose running calls accept steering.
type Steerable interface {
	// SteerSchema is the JSON Schema of steering inputs.
	SteerSchema() json.RawMessage
}

// MemoryRecorder records an explicit fact. The daemon fills in the source
// (task and call) and the recording method.
type MemoryRecorder interface {
	RecordFact(ctx context.Context, fact Fact) (id string, err error)
}

// Fact is an explicit memory record made by a tool.
type Fact struct {
	Content string
	// Supersedes names an earlier fact this one replaces, if any.
	Supersedes string
	// Method says how the fact was recorded (for example "memory.record").
	Method string
	// Source says where the fact came from (a command, a document, a
	// person), in the recorder's words; empty when not given.
	Source string
}

// Approval is a tool's answer to whether a call needs a person's approval.
type Approval struct {
	// Required asks for approval before the call runs.
	Required bool
	// Deny refuses the call outright (a policy deny rule).
	Deny bool
	// Reason is shown to the person (and to the model on deny).
	Reason string
	// Deadline bounds the wait; 0 means no deadline.
	Deadline time.Duration
}

// WorkspaceUser is implemented by tools that work in the Task's workspace
// folder (files, the shell, a delegate agent). Only they get it
// (Call.Workspace), each call after the daemon checked that the folder
// still leads where the Task may work; every other tool gets "" and
// costs no such check.
type WorkspaceUser interface {
	// UsesWorkspace reports that the tool's calls need Call.Workspace.
	UsesWorkspace() bool
}

// Reader is implemented by tools some of whose calls only read: such a
// call changes nothing outside its result, so running it again is
// harmless; it records no fact, asks no approval, changes no tool set and
// starts, waits for or messages no Task. The Task may then run it before
// its start is durable and record its start and result in one commit
// (see actors/taskstate.Holds): if the daemon stops in between, the call
// is simply forgotten with the answer that asked for it. A tool that
// emits state (StateSchema) never runs so, whatever it reports here.
type Reader interface {
	// ReadOnly reports whether the call with input (validated) only reads.
	ReadOnly(input json.RawMessage) bool
}

// Approver is implemented by tools whose calls may need approval by input.
type Approver interface {
	Approval(input json.RawMessage) Approval
}

// ApprovalScoper is implemented by Approvers that name what of an input a
// person's "always allow for this Task" covers (the shell: the command).
// An Approver without it is scoped by its whole input.
type ApprovalScoper interface {
	ApprovalScope(input json.RawMessage) string
}

// ApprovalScope is the scope of an "always allow" rule for a call of the
// tool with input: "" for a tool that does not judge its input (the rule
// covers all its calls), else the tool's scope (ApprovalScoper) or the
// input itself, compacted.
func ApprovalScope(t Tool, input json.RawMessage) string {
	if s, ok := t.(ApprovalScoper); ok {
		return s.ApprovalScope(input)
	}
	if _, ok := t.(Approver); !ok {
		return ""
	}
	var b bytes.Buffer
	if err := json.Compact(&b, input); err != nil {
		return string(input)
	}
	return b.String()
}

// Presenter is implemented by tools whose full output holds more than the
// model should see (a shell run's whole output besides its head and tail).
// Present returns the model's view of a live output; the full output stays
// the live result. Without it the model sees the whole output.
type Presenter interface {
	Present(output json.RawMessage) json.RawMessage
}

// Untrusted is implemented by tools whose output comes from outside the
// daemon (a delegate agent, a Program Service). Their results are bounded and
// marked untrusted in what the model sees.
type Untrusted interface {
	Untrusted() bool
}
