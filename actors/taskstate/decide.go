package taskstate

import (
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"lemo/api"
)

// ErrNotFound: no such Task (or one the caller may not see).
var ErrNotFound = errors.New("task: not found")

// ErrInvalid: a command's input is malformed; the message says what is
// accepted.
var ErrInvalid = errors.New("invalid")

// ErrExpired: a decision came after its approval's deadline; the approval
// was recorded as timed out instead.
var ErrExpired = errors.New("approval: its deadline passed before the decision")

// Expired reports whether the pending approval id has a deadline that now
// has reached: a decision then is too late (the timer that records the
// timeout may not have fired yet, or the daemon was down).
func (s *State) Expired(id string, now time.Time) bool {
	a, ok := s.Approvals[id]
	return ok && !a.Deadline.IsZero() && !now.Before(a.Deadline)
}

// StateError refuses a command the Task's status does not allow.
type StateError struct {
	Op     string
	Status api.TaskStatus
	Hint   string
}

func (e *StateError) Error() string {
	s := fmt.Sprintf("task: cannot %s: task is %s", e.Op, StatusName(e.Status))
	if e.Hint != "" {
		s += " (" + e.Hint + ")"
	}
	return s
}

// StatusName returns a status as users read it ("running", "paused").
func StatusName(st api.TaskStatus) string {
	if n, ok := statusNames[st]; ok {
		return n
	}
	return statusName(st)
}

func statusName(st api.TaskStatus) string {
	return strings.ToLower(strings.TrimPrefix(st.String(), "TASK_STATUS_"))
}

// statusNames are the known statuses' names, made once: a Task names its
// status at every append it applies.
var statusNames = func() map[api.TaskStatus]string {
	m := make(map[api.TaskStatus]string, len(api.TaskStatus_name))
	for v := range api.TaskStatus_name {
		m[api.TaskStatus(v)] = statusName(api.TaskStatus(v))
	}
	return m
}()

// CreateInput describes a new Task.
type CreateInput struct {
	Owner, Model, Request, Workspace string
	Tools                            []string
	ToolsRestricted                  bool
	// Discovery: Tools is the initial set, tools.load adds to it
	// (ToolsRestricted is then recorded as set too).
	Discovery bool
	// Approvals are the Task's own approval rules (ask, deny); they only
	// tighten what the tools and the daemon require.
	Approvals []*api.ToolApproval
	// Budget and Price: see TaskCreated (budget.go).
	Budget *api.BudgetAmounts
	Price  *api.Price
}

// titleMax bounds a Task's title, derived from its request.
const titleMax = 80

// Create returns the events that create a Task: created, the request, running.
func Create(in CreateInput) []proto.Message {
	return []proto.Message{
		&api.TaskCreated{Owner: in.Owner, Model: in.Model, Tools: in.Tools, ToolsRestricted: in.ToolsRestricted || in.Discovery, ToolsDiscovery: in.Discovery, Workspace: in.Workspace, Title: Title(in.Request), Approvals: in.Approvals, Budget: in.Budget, Price: in.Price},
		&api.UserMessage{Text: in.Request},
		&api.StatusChanged{Status: api.TaskStatus_TASK_STATUS_RUNNING, Detail: "created"},
	}
}

// Title derives a one-line title from a request.
func Title(request string) string {
	t := strings.Join(strings.Fields(request), " ")
	if r := []rune(t); len(r) > titleMax {
		t = string(r[:titleMax-1]) + "…"
	}
	return t
}

// Message records a follow-up message. It reopens a finished, failed or
// cancelled Task; a paused Task stays paused until continued.
func (s *State) Message(text string) ([]proto.Message, error) {
	out := []proto.Message{&api.UserMessage{Text: text}}
	if s.Terminal() {
		out = append(out, &api.StatusChanged{Status: api.TaskStatus_TASK_STATUS_RUNNING, Detail: "reopened by a follow-up message"})
	}
	return out, nil
}

// Pause stops a running Task after its running tool calls: the model call in
// flight is cancelled, pending approvals are cancelled, calls not yet
// started wait for continue.
func (s *State) Pause() ([]proto.Message, error) {
	if !s.Running() {
		return nil, &StateError{Op: "pause", Status: s.Status, Hint: hintFor(s.Status)}
	}
	var out []proto.Message
	out = append(out, s.closeCycle("cancelled: task paused")...)
	out = append(out, s.cancelApprovals("task paused")...)
	out = append(out, &api.StatusChanged{Status: api.TaskStatus_TASK_STATUS_PAUSED, PauseReason: api.PauseReason_PAUSE_REASON_USER, Detail: "paused by user"})
	return out, nil
}

// Continue resumes a paused or failed Task, optionally with another model.
func (s *State) Continue(model string) ([]proto.Message, error) {
	switch s.Status {
	case api.TaskStatus_TASK_STATUS_PAUSED, api.TaskStatus_TASK_STATUS_FAILED:
	default:
		return nil, &StateError{Op: "continue", Status: s.Status, Hint: hintFor(s.Status)}
	}
	st := api.TaskStatus_TASK_STATUS_RUNNING
	if len(s.Approvals) > 0 {
		st = api.TaskStatus_TASK_STATUS_AWAITING_APPROVAL
	}
	detail := "continued"
	if model != "" && model != s.Model {
		detail = "continued with model " + model
	} else {
		model = ""
	}
	return []proto.Message{&api.StatusChanged{Status: st, Detail: detail, Model: model}}, nil
}

// Cancel ends a Task: the model call in flight is cancelled, pending
// approvals are cancelled and calls not yet started are closed as not
// executed. Running calls are closed when they report back.
func (s *State) Cancel() ([]proto.Message, error) {
	if s.Status == api.TaskStatus_TASK_STATUS_CANCELLED {
		return nil, &StateError{Op: "cancel", Status: s.Status}
	}
	var out []proto.Message
	out = append(out, &api.StatusChanged{Status: api.TaskStatus_TASK_STATUS_CANCELLED, Detail: "cancelled by user"})
	out = append(out, s.closeCycle("cancelled: task cancelled")...)
	out = append(out, s.cancelApprovals("task cancelled")...)
	for _, c := range s.OpenCalls() {
		if !c.Started && c.Approval == "" {
			out = append(out, &api.ToolFailed{CallId: c.ID, Kind: api.ToolFailureKind_TOOL_FAILURE_KIND_CANCELLED, Message: "not executed: the task was cancelled"})
		}
	}
	return out, nil
}

func hintFor(st api.TaskStatus) string {
	switch st {
	case api.TaskStatus_TASK_STATUS_FINISHED, api.TaskStatus_TASK_STATUS_CANCELLED:
		return "send a message to reopen it"
	case api.TaskStatus_TASK_STATUS_RUNNING, api.TaskStatus_TASK_STATUS_AWAITING_APPROVAL:
		return "it is already running"
	case api.TaskStatus_TASK_STATUS_PAUSED:
		return "continue it first"
	case api.TaskStatus_TASK_STATUS_FAILED:
		return "continue it to retry"
	case api.TaskStatus_TASK_STATUS_CREATED:
		return "it is a queued child task: it starts when a place among the running child tasks is free (tasks.max_running_children); after a restart, continue its parent"
	}
	return ""
}

func (s *State) closeCycle(why string) []proto.Message {
	if !s.CycleOpen {
		return nil
	}
	return []proto.Message{&api.CycleFinished{Cycle: s.Cycle, Outcome: api.CycleOutcome_CYCLE_OUTCOME_CANCELLED, Error: why}}
}

// cancelApprovals resolves every pending approval as cancelled; a call that
// waited for one to start is closed as not approved (a running call gets the
// cancellation as its decision).
func (s *State) cancelApprovals(why string) []proto.Message {
	var out []proto.Message
	for _, id := range s.sortedApprovals() {
		a := s.Approvals[id]
		out = append(out, &api.ApprovalResolved{ApprovalId: id, CallId: a.CallID, Outcome: api.ApprovalOutcome_APPROVAL_OUTCOME_CANCELLED, Reason: why})
		if !a.DuringRun {
			out = append(out, &api.ToolFailed{CallId: a.CallID, Kind: api.ToolFailureKind_TOOL_FAILURE_KIND_NOT_APPROVED, Message: "not executed: approval cancelled (" + why + ")"})
		}
	}
	return out
}

// cancelRunApprovals cancels the pending approvals a running call asked for.
func (s *State) cancelRunApprovals(callID, why string) []proto.Message {
	var out []proto.Message
	for _, id := range s.sortedApprovals() {
		if a := s.Approvals[id]; a.CallID == callID && a.DuringRun {
			out = append(out, &api.ApprovalResolved{ApprovalId: id, CallId: callID, Outcome: api.ApprovalOutcome_APPROVAL_OUTCOME_CANCELLED, Reason: why})
		}
	}
	return out
}

// afterApprovals returns the Task to running once the last pending approval
// is resolved by bodies that resolve n approvals.
func (s *State) afterApprovals(n int) []proto.Message {
	if n > 0 && n == len(s.Approvals) && s.Status == api.TaskStatus_TASK_STATUS_AWAITING_APPROVAL {
		return []proto.Message{&api.StatusChanged{Status: api.TaskStatus_TASK_STATUS_RUNNING, Detail: "approvals answered"}}
	}
	return nil
}

// AskDuringRun records an approval requested by a running call and returns
// its id.
func (s *State) AskDuringRun(callID, reason string, deadline time.Duration, now time.Time) ([]proto.Message, string, error) {
	c, ok := s.Calls[callID]
	if !ok || !c.Started {
		return nil, "", fmt.Errorf("%w: running call %q", ErrNotFound, callID)
	}
	id := fmt.Sprintf("%s.%d", ApprovalID(s.TaskID, c.ID), c.Asked+1)
	ar := &api.ApprovalRequested{ApprovalId: id, CallId: c.ID, Reason: reason, DuringRun: true, Tool: c.Tool}
	if deadline > 0 {
		ar.Deadline = timestamppb.New(now.Add(deadline))
	}
	out := []proto.Message{ar}
	if s.Status == api.TaskStatus_TASK_STATUS_RUNNING {
		out = append(out, &api.StatusChanged{Status: api.TaskStatus_TASK_STATUS_AWAITING_APPROVAL, Detail: "waiting for approval in " + c.Tool})
	}
	return out, id, nil
}

// CancelApproval cancels one pending approval a running call abandoned.
func (s *State) CancelApproval(id, why string) []proto.Message {
	a, ok := s.Approvals[id]
	if !ok || !a.DuringRun {
		return nil
	}
	out := []proto.Message{&api.ApprovalResolved{ApprovalId: id, CallId: a.CallID, Outcome: api.ApprovalOutcome_APPROVAL_OUTCOME_CANCELLED, Reason: why}}
	return append(out, s.afterApprovals(1)...)
}

func (s *State) sortedApprovals() []string {
	ids := make([]string, 0, len(s.Approvals))
	for id := range s.Approvals {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids
}

// Resolve answers a pending approval. A denial or timeout of an approval
// that a call waited for to start closes the call as not approved (one asked
// by a running call is only answered); the Task returns to running once
// nothing awaits approval.
func (s *State) Resolve(approvalID string, outcome api.ApprovalOutcome, by, reason string) ([]proto.Message, error) {
	a, ok := s.Approvals[approvalID]
	if !ok {
		return nil, fmt.Errorf("%w: approval %q (it may have been answered, timed out or cancelled)", ErrNotFound, approvalID)
	}
	call := a.CallID
	out := []proto.Message{&api.ApprovalResolved{ApprovalId: approvalID, CallId: call, Outcome: outcome, By: by, Reason: reason}}
	switch {
	case outcome != api.ApprovalOutcome_APPROVAL_OUTCOME_APPROVED && outcome != api.ApprovalOutcome_APPROVAL_OUTCOME_DENIED && outcome != api.ApprovalOutcome_APPROVAL_OUTCOME_TIMED_OUT:
		return nil, fmt.Errorf("task: resolve approval %q: outcome %v is not a decision", approvalID, outcome)
	case a.DuringRun:
		return append(out, s.afterApprovals(1)...), nil
	}
	switch outcome {
	case api.ApprovalOutcome_APPROVAL_OUTCOME_APPROVED:
	case api.ApprovalOutcome_APPROVAL_OUTCOME_DENIED:
		msg := "not executed: denied by " + by
		if reason != "" {
			msg += ": " + reason
		}
		out = append(out, &api.ToolFailed{CallId: call, Kind: api.ToolFailureKind_TOOL_FAILURE_KIND_NOT_APPROVED, Message: msg})
	case api.ApprovalOutcome_APPROVAL_OUTCOME_TIMED_OUT:
		out = append(out, &api.ToolFailed{CallId: call, Kind: api.ToolFailureKind_TOOL_FAILURE_KIND_NOT_APPROVED, Message: "not executed: the approval timed out"})
	}
	return append(out, s.afterApprovals(1)...), nil
}

// MaxAllows bounds the "always allow" rules of one Task.
const MaxAllows = 256

// ResolveAllow approves a pending approval and allows the calls of the
// same kind for the rest of the Task: the calls of the same tool with the
// same scope (for a tool that judges its input, like the shell, the
// caller's key of it: the exact command; "" for the others). The rule never overrides a deny nor the
// model's own request (see Combine). An approval asked by a running call
// (during_run) decides nothing about later calls and is refused.
func (s *State) ResolveAllow(approvalID, by, reason, scope string) ([]proto.Message, error) {
	a, ok := s.Approvals[approvalID]
	if !ok {
		return nil, fmt.Errorf("%w: approval %q (it may have been answered, timed out or cancelled)", ErrNotFound, approvalID)
	}
	if a.DuringRun {
		return nil, fmt.Errorf("%w: approval %q was asked by a running %s call about its own work; it can be approved, but not always allowed for the Task", ErrInvalid, approvalID, a.Tool)
	}
	if a.Tool == "" {
		return nil, fmt.Errorf("%w: approval %q names no tool; it can be approved, but not always allowed for the Task", ErrInvalid, approvalID)
	}
	if len(s.Allows) >= MaxAllows {
		return nil, fmt.Errorf("%w: task %s already has %d always-allow rules, the most it keeps; approve this call alone", ErrInvalid, s.TaskID, len(s.Allows))
	}
	out, err := s.Resolve(approvalID, api.ApprovalOutcome_APPROVAL_OUTCOME_APPROVED, by, reason)
	if err != nil {
		return nil, err
	}
	out[0].(*api.ApprovalResolved).AllowRule = &api.ToolApproval{Tool: a.Tool, Rule: api.ApprovalRule_APPROVAL_RULE_ALLOW, Scope: scope}
	return out, nil
}

// Allowed reports whether a person allowed the Task's calls of tool with
// this scope ("always allow" at one of its approvals).
func (s *State) Allowed(tool, scope string) bool {
	for _, r := range s.Allows {
		if r.GetTool() == tool && r.GetScope() == scope {
			return true
		}
	}
	return false
}

// Combine gives what a call needs: judged is what the tool, the daemon's
// policy and the Task's rules require, allowed whether a person allowed
// such calls for the Task, asked the model's own request_approval. The
// allow only answers what a person would be asked: a deny always wins and
// the model's request is always asked.
func Combine(judged ApprovalNeed, allowed bool, asked ApprovalNeed) ApprovalNeed {
	need := judged
	if allowed && !need.Deny {
		need = ApprovalNeed{}
	}
	need.Add(asked)
	return need
}

// ResolvedCall is one tool call of a model answer, resolved against the
// tool registry by the caller.
type ResolvedCall struct {
	// ModelName is the function name the model used; Tool the registered
	// name ("" when it resolved to no allowed tool).
	ModelName, Tool string
	Args            []byte
	ProviderID      string
	// Reject, when set, closes the call before it runs (unknown tool,
	// invalid input).
	Reject *api.ToolFailed
}

// CycleOutput is a Cycle's successful answer.
type CycleOutput struct {
	Cycle     uint32
	Text      string
	Reasoning string
	Metadata  []byte
	Calls     []ResolvedCall
	Usage     *api.Usage
	Finish    string
	Input     *api.InputSummary
}

// CallID is the id Lemo assigns to the i-th (from 0) tool call of a cycle.
func CallID(cycle uint32, i int) string { return fmt.Sprintf("call-%d-%d", cycle, i+1) }

// CycleDone records a model answer: the message, its calls (in order, those
// rejected closed at once) and the Cycle's end. A result for a Cycle that is
// no longer open (cancelled) is dropped: nil.
func (s *State) CycleDone(o CycleOutput) []proto.Message {
	if !s.CycleOpen || o.Cycle != s.Cycle {
		return nil
	}
	am := &api.AssistantMessage{Cycle: o.Cycle, Text: o.Text, Reasoning: o.Reasoning, ProviderMetadata: o.Metadata}
	out := []proto.Message{am}
	var rejects []proto.Message
	for i, c := range o.Calls {
		id := CallID(o.Cycle, i)
		am.ToolCallIds = append(am.ToolCallIds, id)
		out = append(out, &api.ToolCallRecorded{CallId: id, Cycle: o.Cycle, Tool: c.Tool, Arguments: c.Args, ProviderCallId: c.ProviderID, ModelName: c.ModelName})
		if c.Reject != nil {
			r := proto.Clone(c.Reject).(*api.ToolFailed)
			r.CallId = id
			rejects = append(rejects, r)
		}
	}
	out = append(out, rejects...)
	out = append(out, &api.CycleFinished{Cycle: o.Cycle, Outcome: api.CycleOutcome_CYCLE_OUTCOME_COMPLETED, Usage: o.Usage, FinishReason: o.Finish, Input: o.Input})
	return out
}

// CycleFailure is a Cycle that ended without an answer.
type CycleFailure struct {
	Cycle uint32
	// Kind is the error class ("transient", "auth", "panic", "overflow",
	// "cancelled", ...).
	Kind     string
	Message  string
	Overflow *api.Overflow
	Input    *api.InputSummary
	// Decision is the supervision's decision when the Cycle's actor
	// crashed ("stop"); "" otherwise.
	Decision string
}

// CycleFailed records a failed Cycle and fails the Task (a continue retries
// it). A cancelled Cycle pauses the Task as interrupted instead. A failure of
// a Cycle that is no longer open is dropped: nil.
func (s *State) CycleFailed(f CycleFailure) []proto.Message {
	if !s.CycleOpen || f.Cycle != s.Cycle {
		return nil
	}
	if f.Kind == "cancelled" {
		out := []proto.Message{&api.CycleFinished{Cycle: f.Cycle, Outcome: api.CycleOutcome_CYCLE_OUTCOME_CANCELLED, Error: f.Message, Input: f.Input}}
		if s.Running() {
			out = append(out, &api.StatusChanged{Status: api.TaskStatus_TASK_STATUS_PAUSED, PauseReason: api.PauseReason_PAUSE_REASON_INTERRUPTED, Detail: "model call cancelled: " + f.Message})
		}
		return out
	}
	outcome := api.CycleOutcome_CYCLE_OUTCOME_FAILED
	if f.Overflow != nil {
		outcome = api.CycleOutcome_CYCLE_OUTCOME_OVERFLOW
	}
	out := []proto.Message{
		&api.Failure{Scope: api.FailureScope_FAILURE_SCOPE_CYCLE, Kind: f.Kind, Message: f.Message, Cycle: f.Cycle, Overflow: f.Overflow, Decision: f.Decision},
		&api.CycleFinished{Cycle: f.Cycle, Outcome: outcome, Error: f.Message, Input: f.Input},
	}
	if s.Running() {
		out = append(out, &api.StatusChanged{Status: api.TaskStatus_TASK_STATUS_FAILED, Detail: fmt.Sprintf("model call failed (%s): %s", f.Kind, f.Message)})
	}
	return out
}

// ToolOutcome is how a tool call ended.
type ToolOutcome struct {
	CallID string
	// Failed: the call produced no result; Kind and Message say why.
	Failed  bool
	Kind    api.ToolFailureKind
	Message string
	// Retained is the part persisted (nil: nothing); OutputBytes the size of
	// the full live output.
	Retained    []byte
	OutputBytes int
	Untrusted   bool
	// Decision is the supervision's decision when the call's actor
	// crashed ("stop"); the crash is then also recorded as a Failure of
	// scope tool. "" otherwise.
	Decision string
}

// ToolDone records the end of a call; approvals it still waited for are
// cancelled. A report for a call that is no longer open is dropped: nil.
func (s *State) ToolDone(o ToolOutcome) []proto.Message {
	if _, ok := s.Calls[o.CallID]; !ok {
		return nil
	}
	out := s.cancelRunApprovals(o.CallID, "the call ended")
	n := len(out)
	if o.Failed {
		out = append(out, &api.ToolFailed{CallId: o.CallID, Kind: o.Kind, Message: o.Message})
		if o.Decision != "" {
			out = append(out, &api.Failure{Scope: api.FailureScope_FAILURE_SCOPE_TOOL, Kind: strings.ToLower(strings.TrimPrefix(o.Kind.String(), "TOOL_FAILURE_KIND_")),
				Message: o.Message, CallId: o.CallID, Decision: o.Decision})
		}
	} else {
		out = append(out, &api.ToolResult{CallId: o.CallID, Retained: o.Retained != nil, RetainedOutput: o.Retained, OutputBytes: uint64(o.OutputBytes), Untrusted: o.Untrusted})
	}
	return append(out, s.afterApprovals(n)...)
}

// Recover returns the events that close what a previous incarnation of the
// Task left open: an unfinished Cycle, calls whose execution started but
// never reported (outcome unknown: never re-executed), approvals whose
// deadline passed (timed out), and a running status (paused, interrupted;
// pending approvals survive it).
func (s *State) Recover(now time.Time) []proto.Message { return s.RecoverNoting(now, nil) }

// RecoverNoting is Recover, and adds notes[call id] (what was found of the
// call at the restart, such as the processes that were stopped) to the
// outcome-unknown record of that call.
func (s *State) RecoverNoting(now time.Time, notes map[string]string) []proto.Message {
	var out []proto.Message
	out = append(out, s.closeCycle("interrupted: the daemon or the task stopped during the model call")...)
	for _, c := range s.OpenCalls() {
		if c.Started {
			out = append(out, s.cancelRunApprovals(c.ID, "the call's outcome is unknown")...)
			msg := "outcome unknown: execution started but no result was recorded (the daemon or the task stopped while it ran); it was not re-executed"
			if n := notes[c.ID]; n != "" {
				msg += "; " + n
			}
			out = append(out, &api.ToolFailed{CallId: c.ID, Kind: api.ToolFailureKind_TOOL_FAILURE_KIND_OUTCOME_UNKNOWN, Message: msg})
		}
	}
	for _, id := range s.sortedApprovals() {
		a := s.Approvals[id]
		if !a.DuringRun && !a.Deadline.IsZero() && !now.Before(a.Deadline) {
			out = append(out,
				&api.ApprovalResolved{ApprovalId: id, CallId: a.CallID, Outcome: api.ApprovalOutcome_APPROVAL_OUTCOME_TIMED_OUT, Reason: "deadline passed while the daemon was down"},
				&api.ToolFailed{CallId: a.CallID, Kind: api.ToolFailureKind_TOOL_FAILURE_KIND_NOT_APPROVED, Message: "not executed: the approval timed out"})
		}
	}
	if s.Running() {
		out = append(out, &api.StatusChanged{Status: api.TaskStatus_TASK_STATUS_PAUSED, PauseReason: api.PauseReason_PAUSE_REASON_INTERRUPTED, Detail: "interrupted: the daemon or the task stopped while it ran",
			WorkedUntil: s.Budget.workedUntil()})
	}
	return out
}

// Interrupt returns the events that pause a running Task because the daemon
// stops: the model call in flight is cancelled; pending approvals survive.
func (s *State) Interrupt() []proto.Message {
	out := s.closeCycle("interrupted: the daemon stopped")
	if s.Running() {
		out = append(out, &api.StatusChanged{Status: api.TaskStatus_TASK_STATUS_PAUSED, PauseReason: api.PauseReason_PAUSE_REASON_INTERRUPTED, Detail: "interrupted: the daemon stopped"})
	}
	return out
}

// DiskFull returns the events that pause a running Task because the data
// folder's disk is full: the model call in flight is cancelled, every call
// whose execution started is closed as stopped (its tool was stopped, or its
// result could not be recorded), approvals a running call asked for are
// cancelled; calls not started and their pending approvals wait for the
// Task to continue. detail says why, for the status. nil when the Task is
// not running.
func (s *State) DiskFull(detail string) []proto.Message {
	if !s.Running() {
		return nil
	}
	out := s.closeCycle("cancelled: the disk is full")
	for _, c := range s.OpenCalls() {
		if c.Started {
			out = append(out, s.cancelRunApprovals(c.ID, "the call was stopped: the disk is full")...)
			out = append(out, &api.ToolFailed{CallId: c.ID, Kind: api.ToolFailureKind_TOOL_FAILURE_KIND_CANCELLED,
				Message: "stopped: the data folder's disk is full; the tool may have had partial effects (files it wrote may be what filled the disk)"})
		}
	}
	return append(out, &api.StatusChanged{Status: api.TaskStatus_TASK_STATUS_PAUSED, PauseReason: api.PauseReason_PAUSE_REASON_DISK_FULL, Detail: detail})
}

// ResumeDiskFull returns the events that continue a Task the full disk
// paused, once space is back: a person who sees a Task stop for lack of
// space expects it to go on when space returns, as it would have without
// the interruption. A Task paused for another reason, or continued, paused
// or cancelled by a person since, is left as it is: nil.
func (s *State) ResumeDiskFull() []proto.Message {
	if s.Status != api.TaskStatus_TASK_STATUS_PAUSED || s.PauseReason != api.PauseReason_PAUSE_REASON_DISK_FULL {
		return nil
	}
	st := api.TaskStatus_TASK_STATUS_RUNNING
	if len(s.Approvals) > 0 {
		st = api.TaskStatus_TASK_STATUS_AWAITING_APPROVAL
	}
	return []proto.Message{&api.StatusChanged{Status: st, Detail: "continued: disk space is back"}}
}

// StepKind is what a running Task does next.
type StepKind int

// Steps.
const (
	// StepWait: something is in flight (a Cycle, a tool, an approval), or
	// the Task is not running.
	StepWait StepKind = iota
	// StepStartTool: record the call's execution start, then run it.
	StepStartTool
	// StepRequestApproval: record an approval request for the call.
	StepRequestApproval
	// StepReject: policy denies the call; record it as not approved.
	StepReject
	// StepStartCycle: record a Cycle start, then run it.
	StepStartCycle
	// StepFinish: the model answered; the Task is finished.
	StepFinish
	// StepLimit: the cycle limit was reached; the Task pauses.
	StepLimit
)

// Step is the next step and the events that begin it.
type Step struct {
	Kind  StepKind
	Call  *Call
	Cycle uint32
	// Calls are the calls a StepStartTool starts: Call and the ones after
	// it that may start at once (in one record), in record order.
	Calls  []*Call
	Bodies []proto.Message
	// Reservation is what a StepAskBudget asks the tree's root to grant.
	Reservation *api.BudgetReservation
	// DayChecked: the append that records the step (a Cycle's start) is
	// conditional on the owner's daily budget, which the store may refuse:
	// the Task then records, instead of the step, its pause (DayPause),
	// after whatever that append held before the step.
	DayChecked bool
}

// ApprovalNeed says whether a call needs approval before it runs, or is
// denied outright.
type ApprovalNeed struct {
	Deny     bool
	Required bool
	Reason   string
	Deadline time.Duration
}

// NextOptions are the limits and policies Next applies.
type NextOptions struct {
	Now time.Time
	// MaxCycles bounds Cycles without new input; 0: no limit.
	MaxCycles int
	// MaxParallelTools bounds calls running at once; 0 means 1.
	MaxParallelTools int
	// Approval decides whether a call needs approval; nil: never.
	Approval func(c *Call) ApprovalNeed
	// Budget, when set, makes a Cycle's start carry its reservation, or
	// turns it into a budget pause (Reserve); nil: no reservation.
	Budget *ReserveOptions
}

// ApprovalID is the id of the approval request for a call: unique across
// Tasks, and naming the Task it belongs to.
func ApprovalID(taskID, callID string) string { return taskID + "." + callID }

// SplitApprovalID returns the Task id an approval id names.
func SplitApprovalID(id string) (taskID string, ok bool) {
	taskID, _, ok = strings.Cut(id, ".")
	return taskID, ok && taskID != ""
}

// Next returns the next step of a running Task. It must only be called when
// no append is in flight. With o.Budget a Cycle's start is reserved for
// (Reserve), so a step chained after an answer or a result (Chain) is
// reserved for exactly as one reconcile takes.
func (s *State) Next(o NextOptions) Step {
	step := s.next(o)
	if o.Budget != nil {
		step = s.Reserve(step, *o.Budget)
	}
	return step
}

func (s *State) next(o NextOptions) Step {
	if !s.Running() || s.CycleOpen {
		return Step{Kind: StepWait}
	}
	limit := o.MaxParallelTools
	if limit <= 0 {
		limit = 1
	}
	running := 0
	for _, c := range s.Calls {
		if c.Started {
			running++
		}
	}
	for _, c := range s.OpenCalls() {
		if c.Started || c.Approval != "" {
			continue
		}
		if !c.Approved && o.Approval != nil {
			need := o.Approval(c)
			if need.Deny {
				return Step{Kind: StepReject, Call: c, Bodies: []proto.Message{&api.ToolFailed{CallId: c.ID, Kind: api.ToolFailureKind_TOOL_FAILURE_KIND_NOT_APPROVED, Message: "not executed: denied by policy: " + need.Reason}}}
			}
			if need.Required {
				ar := &api.ApprovalRequested{ApprovalId: ApprovalID(s.TaskID, c.ID), CallId: c.ID, Reason: need.Reason, Tool: c.Tool}
				if need.Deadline > 0 {
					ar.Deadline = timestamppb.New(o.Now.Add(need.Deadline))
				}
				bodies := []proto.Message{ar}
				if s.Status != api.TaskStatus_TASK_STATUS_AWAITING_APPROVAL {
					bodies = append(bodies, &api.StatusChanged{Status: api.TaskStatus_TASK_STATUS_AWAITING_APPROVAL, Detail: "waiting for approval of " + c.Tool})
				}
				return Step{Kind: StepRequestApproval, Call: c, Bodies: bodies}
			}
		}
		if running < limit {
			return s.startBatch(c, running, limit, o)
		}
		return Step{Kind: StepWait}
	}
	if len(s.Calls) > 0 {
		return Step{Kind: StepWait}
	}
	if s.NeedCycle {
		if o.MaxCycles > 0 && s.CyclesSinceInput >= o.MaxCycles {
			return Step{Kind: StepLimit, Bodies: []proto.Message{&api.StatusChanged{Status: api.TaskStatus_TASK_STATUS_PAUSED, PauseReason: api.PauseReason_PAUSE_REASON_CYCLE_LIMIT,
				Detail: fmt.Sprintf("paused after %d model calls without new input; continue to allow more", s.CyclesSinceInput)}}}
		}
		n := s.Cycle + 1
		return Step{Kind: StepStartCycle, Cycle: n, Bodies: []proto.Message{&api.CycleStarted{Cycle: n, Model: s.Model}}}
	}
	return Step{Kind: StepFinish, Bodies: []proto.Message{&api.StatusChanged{Status: api.TaskStatus_TASK_STATUS_FINISHED, Detail: "answered"}}}
}

// startBatch starts c and the open calls after it that may start with it:
// not started, nothing pending, needing no approval, within the limit of
// running calls. It stops at the first call that needs a decision (an
// approval, a denial), which a later step takes.
func (s *State) startBatch(c *Call, running, limit int, o NextOptions) Step {
	st := Step{Kind: StepStartTool, Call: c, Calls: []*Call{c}, Bodies: []proto.Message{&api.ToolExecutionStarted{CallId: c.ID}}}
	after := false
	for _, n := range s.OpenCalls() {
		if n == c {
			after = true
			continue
		}
		if !after || n.Started {
			continue
		}
		if running+len(st.Calls) >= limit || n.Approval != "" {
			break
		}
		if !n.Approved && o.Approval != nil {
			if need := o.Approval(n); need.Deny || need.Required {
				break
			}
		}
		st.Calls = append(st.Calls, n)
		st.Bodies = append(st.Bodies, &api.ToolExecutionStarted{CallId: n.ID})
	}
	return st
}

// Add merges another requirement into n: a deny wins over any ask (its
// reason is the first deny's), asks keep the shortest deadline and every
// distinct reason. Nothing can loosen a requirement already in n.
func (n *ApprovalNeed) Add(o ApprovalNeed) {
	switch {
	case o.Deny:
		if !n.Deny {
			*n = ApprovalNeed{Deny: true, Reason: o.Reason}
		}
	case o.Required && !n.Deny:
		// The shortest deadline of all; 0 (none) only when none has one.
		if !n.Required || (o.Deadline > 0 && (n.Deadline == 0 || o.Deadline < n.Deadline)) {
			n.Deadline = o.Deadline
		}
		n.Required = true
		switch {
		case o.Reason == "" || strings.Contains(n.Reason, o.Reason):
		case n.Reason == "":
			n.Reason = o.Reason
		default:
			n.Reason += "; " + o.Reason
		}
	}
}

// RuleNeed is what the Task's own rules require of a call to tool: a
// matching deny rule refuses it, else a matching ask rule asks for approval
// with deadline (0: none). match reports whether a rule's pattern names the
// tool.
func (s *State) RuleNeed(tool string, deadline time.Duration, match func(pattern, tool string) bool) ApprovalNeed {
	var need ApprovalNeed
	for _, r := range s.Rules {
		if !match(r.GetTool(), tool) {
			continue
		}
		switch r.GetRule() {
		case api.ApprovalRule_APPROVAL_RULE_DENY:
			need.Add(ApprovalNeed{Deny: true, Reason: fmt.Sprintf("the task's rule denies %s calls (deny %s)", tool, r.GetTool())})
		case api.ApprovalRule_APPROVAL_RULE_ASK:
			need.Add(ApprovalNeed{Required: true, Deadline: deadline, Reason: fmt.Sprintf("the task's rule asks for approval of %s calls (ask %s)", tool, r.GetTool())})
		}
	}
	return need
}

// maxChain bounds the steps one append carries (a Cycle's calls started
// at once, each its own step).
const maxChain = 64

// Chain returns bodies followed by the events that begin the steps Next
// takes right after them, and those steps in order, so that events known
// together are one append (one commit): a Cycle's answer with the start of
// the call it asks for, a call's result with the next Cycle's start, a
// Task's creation with its first Cycle's start, a final answer with the
// Task's end. It decides on a copy of the state with bodies applied, as
// Next would once they are; the state itself is not changed. Chaining
// stops at the first step that waits (a model call, a tool or a person).
// o.Approval must judge a call as it would after bodies (bodies that
// change the Task's approval rules must not be chained). after is the copy:
// the state once all of it is applied (nil when bodies is empty).
func (s *State) Chain(bodies []proto.Message, o NextOptions) (all []proto.Message, steps []Step, after *State) {
	if len(bodies) == 0 {
		return bodies, nil, nil
	}
	c := s.clone()
	apply := func(bs []proto.Message) {
		for _, ev := range c.Stamp(bs, o.Now) {
			c.Apply(ev)
		}
	}
	apply(bodies)
	all = bodies[:len(bodies):len(bodies)]
	for len(steps) < maxChain {
		step := c.Next(o)
		if step.Kind == StepWait || len(step.Bodies) == 0 {
			break
		}
		all = append(all, step.Bodies...)
		steps = append(steps, step)
		apply(step.Bodies)
	}
	return all, steps, c
}

// Holds reports whether an append whose chain ends in steps may wait for
// the calls it starts, so that their results (and whatever follows them)
// join it in one commit, while running more calls already waits on it:
// every step starts calls that readOnly accepts or records a refusal, and
// some call runs (running held before, or one the steps start). Such a
// call only reads, so starting it before its start is durable re-runs
// nothing with an effect: if the daemon stops before the append, the
// answer that asked for it is lost with it and its Cycle reads as
// interrupted, as if the daemon had stopped during the model call.
func Holds(steps []Step, running int, readOnly func(c *Call) bool) bool {
	for _, st := range steps {
		switch st.Kind {
		case StepReject:
		case StepStartTool:
			for _, c := range st.Calls {
				if !readOnly(c) {
					return false
				}
			}
			running += len(st.Calls)
		default:
			return false
		}
	}
	return running > 0
}
