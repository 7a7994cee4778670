package taskstate

import (
	"maps"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"lemo/api"
)

// Call is an open tool call: recorded, not yet closed by a result or a
// failure.
type Call struct {
	ID    string
	Tool  string
	Args  []byte
	Cycle uint32
	// Seq is the seq of its ToolCallRecorded event.
	Seq uint64
	// Started: its execution-started record is durable.
	Started bool
	// Approval is the id of its pending approval request before it runs,
	// "" when none.
	Approval string
	// Approved: a person approved it (it may start).
	Approved bool
	// AfterSeq is the seq of the CycleStarted of its Cycle: what was
	// recorded after it is news to the model.
	AfterSeq uint64
	// Asked counts the approvals requested for the call so far.
	Asked int
}

// Approval is a pending approval request.
type Approval struct {
	ID     string
	CallID string
	Tool   string
	// Deadline ends it; zero means none.
	Deadline time.Time
	// DuringRun: asked by the running call; the decision goes back to it.
	DuringRun bool
}

// State is a Task folded from its history.
type State struct {
	TaskID    string
	Owner     string
	Model     string
	Workspace string
	Title     string
	// Tools and ToolsRestricted are the Task's tool allow-list from its
	// creation; with Discovery, Tools is its initial set and Loaded the
	// tools that tools.load added since, in history order (see ToolSet).
	Tools           []string
	ToolsRestricted bool
	Discovery       bool
	Loaded          []string
	// Rules are the Task's own approval rules, from its creation: a
	// matching call needs approval (ask) or never runs (deny).
	Rules []*api.ToolApproval
	// Allows are the "always allow" rules people added at this Task's
	// approvals (ApprovalResolved.allow_rule), oldest first.
	Allows []*api.ToolApproval

	Status      api.TaskStatus
	PauseReason api.PauseReason
	Detail      string
	LastSeq     uint64
	Created     time.Time

	// Cycle is the number of the last Cycle started; CycleOpen reports that
	// it has not finished.
	Cycle     uint32
	CycleOpen bool
	// HasResponse reports that the model has answered at least once: the
	// 70% budget applies.
	HasResponse bool
	// NeedCycle reports that the model has something to answer: a user
	// message, or tool results, since the last Cycle started.
	NeedCycle bool
	// CyclesSinceInput counts Cycles since the last user message or
	// continue, for the cycle limit.
	CyclesSinceInput int

	// Calls are the open tool calls; Order keeps their record order.
	Calls map[string]*Call
	Order []string
	// Approvals are the pending approval requests by id.
	Approvals map[string]*Approval

	// Tree: the parent link (ParentID "" for a root), the depth (root 0),
	// the children in spawn order, the messages received, the messages
	// sent by call, the last answer and the usage so far.
	ParentID, ParentCall string
	Depth                uint32
	Children             map[string]*Child
	ChildOrder           []string
	Received             []Received
	Sent                 map[string]uint64
	LastAnswer           string
	Usage                Tokens
	// Budget is the Task's spend and input estimate (budget.go).
	Budget Ledger
	// cycleSeq is the seq of the last CycleStarted.
	cycleSeq uint64
}

// Tokens is the token usage a Task's Cycles reported, summed.
type Tokens struct {
	PromptTokens, CompletionTokens uint64
}

// Child is a child Task as its parent recorded it.
type Child struct {
	ID, CallID, Title string
	// Ended is its recorded end (nil while it has not ended).
	Ended *api.ChildEnded
}

// Received is a message taken from the inbox.
type Received struct {
	Seq     uint64
	From    string
	FromSeq uint64
	Text    string
}

// New returns the state of a Task with no history.
func New() *State {
	return &State{Calls: make(map[string]*Call), Approvals: make(map[string]*Approval), Children: make(map[string]*Child), Sent: make(map[string]uint64)}
}

// Exists reports whether the Task has been created.
func (s *State) Exists() bool { return s.LastSeq > 0 }

// Terminal reports whether the Task is finished, failed or cancelled.
func (s *State) Terminal() bool { return api.StatusEnded(s.Status) }

// Running reports whether the Task is working (running or waiting for an
// approval).
func (s *State) Running() bool {
	return s.Status == api.TaskStatus_TASK_STATUS_RUNNING || s.Status == api.TaskStatus_TASK_STATUS_AWAITING_APPROVAL
}

// OpenCalls returns the open calls in record order.
func (s *State) OpenCalls() []*Call {
	out := make([]*Call, 0, len(s.Order))
	for _, id := range s.Order {
		if c, ok := s.Calls[id]; ok {
			out = append(out, c)
		}
	}
	return out
}

// Apply folds one event into the state. Events must be applied in seq order.
func (s *State) Apply(ev *api.Event) {
	s.Budget.apply(ev)
	s.LastSeq = ev.GetSeq()
	switch b := ev.Body.(type) {
	case *api.Event_TaskCreated:
		tc := b.TaskCreated
		s.TaskID = ev.GetTaskId()
		s.Owner = tc.GetOwner()
		s.Model = tc.GetModel()
		s.Workspace = tc.GetWorkspace()
		s.Title = tc.GetTitle()
		s.Tools = tc.GetTools()
		s.ToolsRestricted = tc.GetToolsRestricted()
		s.Discovery = tc.GetToolsDiscovery()
		s.Rules = tc.GetApprovals()
		s.Status = api.TaskStatus_TASK_STATUS_CREATED
		s.Created = ev.GetTime().AsTime()
		s.ParentID = tc.GetParentId()
		s.ParentCall = tc.GetParentCallId()
		s.Depth = tc.GetDepth()
	case *api.Event_UserMessage:
		s.NeedCycle = true
		s.CyclesSinceInput = 0
	case *api.Event_CycleStarted:
		s.Cycle = b.CycleStarted.GetCycle()
		s.CycleOpen = true
		s.NeedCycle = false
		s.CyclesSinceInput++
		s.cycleSeq = ev.GetSeq()
	case *api.Event_CycleFinished:
		if u := b.CycleFinished.GetUsage(); u != nil {
			s.Usage.PromptTokens += u.GetPromptTokens()
			s.Usage.CompletionTokens += u.GetCompletionTokens()
		}
		if b.CycleFinished.GetCycle() == s.Cycle {
			s.CycleOpen = false
		}
		if b.CycleFinished.GetOutcome() != api.CycleOutcome_CYCLE_OUTCOME_COMPLETED {
			// The model's work for this turn is still to do.
			s.NeedCycle = true
		}
	case *api.Event_AssistantMessage:
		s.HasResponse = true
		if t := b.AssistantMessage.GetText(); t != "" {
			s.LastAnswer = t
		}
		if len(b.AssistantMessage.GetToolCallIds()) > 0 {
			s.NeedCycle = true
		}
	case *api.Event_ToolCallRecorded:
		tc := b.ToolCallRecorded
		s.Calls[tc.GetCallId()] = &Call{ID: tc.GetCallId(), Tool: tc.GetTool(), Args: tc.GetArguments(), Cycle: tc.GetCycle(), Seq: ev.GetSeq(), AfterSeq: s.cycleSeq}
		s.Order = append(s.Order, tc.GetCallId())
	case *api.Event_ToolExecutionStarted:
		if c, ok := s.Calls[b.ToolExecutionStarted.GetCallId()]; ok {
			c.Started = true
		}
	case *api.Event_ToolResult:
		s.closeCall(b.ToolResult.GetCallId())
	case *api.Event_ToolFailed:
		s.closeCall(b.ToolFailed.GetCallId())
	case *api.Event_ApprovalRequested:
		ar := b.ApprovalRequested
		if c, ok := s.Calls[ar.GetCallId()]; ok {
			a := &Approval{ID: ar.GetApprovalId(), CallID: c.ID, Tool: c.Tool, DuringRun: ar.GetDuringRun()}
			if ar.GetDeadline() != nil {
				a.Deadline = ar.GetDeadline().AsTime()
			}
			s.Approvals[a.ID] = a
			c.Asked++
			if !a.DuringRun {
				c.Approval = a.ID
			}
		}
	case *api.Event_ApprovalResolved:
		ar := b.ApprovalResolved
		delete(s.Approvals, ar.GetApprovalId())
		if c, ok := s.Calls[ar.GetCallId()]; ok && c.Approval == ar.GetApprovalId() {
			c.Approval = ""
			c.Approved = ar.GetOutcome() == api.ApprovalOutcome_APPROVAL_OUTCOME_APPROVED
		}
		if r := ar.GetAllowRule(); r != nil && r.GetRule() == api.ApprovalRule_APPROVAL_RULE_ALLOW && ar.GetOutcome() == api.ApprovalOutcome_APPROVAL_OUTCOME_APPROVED {
			s.Allows = append(s.Allows, r)
		}
	case *api.Event_ToolsLoaded:
		s.Loaded = append(s.Loaded, b.ToolsLoaded.GetTools()...)
	case *api.Event_ChildSpawned:
		c := b.ChildSpawned
		if _, ok := s.Children[c.GetChildId()]; !ok {
			s.ChildOrder = append(s.ChildOrder, c.GetChildId())
		}
		s.Children[c.GetChildId()] = &Child{ID: c.GetChildId(), CallID: c.GetCallId(), Title: c.GetTitle()}
	case *api.Event_ChildEnded:
		if c, ok := s.Children[b.ChildEnded.GetChildId()]; ok {
			c.Ended = b.ChildEnded
		}
	case *api.Event_ChildReopened:
		if c, ok := s.Children[b.ChildReopened.GetChildId()]; ok {
			c.Ended = nil // it runs again: waits and cascades reach it
		}
	case *api.Event_MessageSent:
		if id := b.MessageSent.GetCallId(); id != "" {
			s.Sent[id] = ev.GetSeq()
		}
		if c, ok := s.Children[b.MessageSent.GetTo()]; ok && c.Ended != nil && MessageDelivery(c.Ended.GetStatus()).Reopens {
			// The message reopens the child that had finished: a wait
			// that follows waits for its next end, not the one known.
			c.Ended = nil
		}
	case *api.Event_MessageReceived:
		m := b.MessageReceived
		s.Received = append(s.Received, Received{Seq: ev.GetSeq(), From: m.GetFrom(), FromSeq: m.GetFromSeq(), Text: m.GetText()})
		// The model has not read it: a Task does not finish before it
		// did (one that is not running reads it once it runs again).
		s.NeedCycle = true
	case *api.Event_StatusChanged:
		sc := b.StatusChanged
		s.Status = sc.GetStatus()
		s.PauseReason = sc.GetPauseReason()
		s.Detail = sc.GetDetail()
		if sc.GetModel() != "" {
			s.Model = sc.GetModel()
		}
		switch {
		case sc.GetReopenedBy() != "":
			// Reopened by another Task's message (MessageReceived asked
			// for the Cycle): not a person's input, so the limit of
			// Cycles without it still holds Tasks that message each
			// other back and forth.
		case sc.GetStatus() == api.TaskStatus_TASK_STATUS_RUNNING:
			s.CyclesSinceInput = 0
		}
	}
}

func (s *State) closeCall(id string) {
	if _, ok := s.Calls[id]; !ok {
		return
	}
	for aid, a := range s.Approvals {
		if a.CallID == id {
			delete(s.Approvals, aid)
		}
	}
	delete(s.Calls, id)
	for i, o := range s.Order {
		if o == id {
			s.Order = append(s.Order[:i:i], s.Order[i+1:]...)
			break
		}
	}
}

// Stamp turns bodies (event body messages such as *api.UserMessage) into
// events of this Task with contiguous seqs after LastSeq and time now. It
// does not apply them.
func (s *State) Stamp(bodies []proto.Message, now time.Time) []*api.Event {
	out := make([]*api.Event, len(bodies))
	ts := timestamppb.New(now)
	for i, b := range bodies {
		out[i] = api.NewEvent(s.TaskID, s.LastSeq+uint64(i)+1, ts, b)
	}
	return out
}

// clone returns a copy of s that shares nothing Apply changes.
func (s *State) clone() *State {
	c := *s
	c.Calls = clonePointed(s.Calls)
	c.Order = append([]string(nil), s.Order...)
	c.Approvals = clonePointed(s.Approvals)
	c.Allows = s.Allows[:len(s.Allows):len(s.Allows)]
	c.Loaded = s.Loaded[:len(s.Loaded):len(s.Loaded)]
	c.Children = clonePointed(s.Children)
	c.ChildOrder = s.ChildOrder[:len(s.ChildOrder):len(s.ChildOrder)]
	c.Received = s.Received[:len(s.Received):len(s.Received)]
	c.Sent = make(map[string]uint64, len(s.Sent))
	maps.Copy(c.Sent, s.Sent)
	c.Budget.Sum = api.FoldCopyBudget(s.Budget.Sum) // the copy's events fold into it
	return &c
}

// clonePointed copies m and the values its pointers point to (a map that
// is never nil).
func clonePointed[V any](m map[string]*V) map[string]*V {
	out := make(map[string]*V, len(m))
	for k, v := range m {
		vc := *v
		out[k] = &vc
	}
	return out
}
