package taskstate

import (
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"google.golang.org/protobuf/proto"

	"lemo/api"
)

// The rules of agent trees: who may spawn what, who may address whom, what
// a child's end and an inbox entry record, and what a cascade does to each
// Task of a tree. The actor shell carries them out.

// ErrLimit: a tree limit refused a spawn; the message names the limit and
// its config key.
var ErrLimit = errors.New("limit")

// TreeLimits bound a tree.
type TreeLimits struct {
	// MaxDepth is the deepest a child may be (a root is depth 0);
	// MaxChildren bounds the children one Task spawns over its life.
	MaxDepth, MaxChildren int
}

// SpawnInput is a tasks.spawn call as the parent's shell read it.
type SpawnInput struct {
	CallID, Request, Model, Instructions string
	// Tools the child may use; empty: the parent's own set.
	Tools []string
	// Workspace is the child's workspace (the parent's unless the call asked
	// for a fresh one).
	Workspace string
	// Earlier counts the children spawned in the same record before this
	// one (spawns that arrive together commit together).
	Earlier int
	// Budget is what the call asked for (nil or zero amounts: everything
	// the parent has left); ChildBudget caps it.
	Budget *api.BudgetAmounts
	// DescendantsSpent is what the parent's descendants have spent (read
	// from the store: TreeSpent), charged to the parent; Now is the time
	// the parent's working time is counted to.
	DescendantsSpent *api.BudgetAmounts
	Now              time.Time
	// Price is the child's model's price when it is not the parent's
	// model (the shell resolved it); the parent's model copies its price.
	Price *api.Price
	// DailyCost: owners have a daily cost budget, so the child's model
	// needs a known price too.
	DailyCost bool
}

// Spawned is what a spawn records: the parent's ChildSpawned and the
// child's creation events.
type Spawned struct {
	ChildID string
	Parent  []proto.Message
	Child   []proto.Message
}

// ExistingChild returns the child a call already spawned: a spawn
// re-executed after a restart finds its child and never spawns a second.
func (s *State) ExistingChild(callID string) (string, bool) {
	for _, id := range s.ChildOrder {
		if s.Children[id].CallID == callID {
			return id, true
		}
	}
	return "", false
}

// Spawn checks a spawn against the tree's limits and the parent's tools
// and returns what to record: the parent's ChildSpawned and the child's
// creation (TaskCreated with the parent link, its request, running). The
// child's tools are a subset of the parent's: never more. childID is the
// new Task's id.
func (s *State) Spawn(childID string, in SpawnInput, lim TreeLimits) (Spawned, error) {
	if strings.TrimSpace(in.Request) == "" {
		return Spawned{}, fmt.Errorf("%w: tasks.spawn needs a request: the child's task, in words", ErrInvalid)
	}
	if lim.MaxDepth > 0 && int(s.Depth)+1 > lim.MaxDepth {
		return Spawned{}, fmt.Errorf("%w: this task is at depth %d and a child would be at depth %d, deeper than the limit of %d (tasks.max_depth); do the work in this task or let a shallower task spawn", ErrLimit, s.Depth, s.Depth+1, lim.MaxDepth)
	}
	if n := len(s.Children) + in.Earlier; lim.MaxChildren > 0 && n >= lim.MaxChildren {
		return Spawned{}, fmt.Errorf("%w: this task already spawned %d child tasks, the limit (tasks.max_children); wait for them and reuse their answers", ErrLimit, n)
	}
	// The parent's set now (its creation's tools and what it loaded): a
	// child without its own list inherits it, discovery included; a list
	// must lie within it and is the child's fixed set.
	parent := s.ToolSet()
	in0 := CreateInput{Owner: s.Owner}
	parent.Inherit(&in0)
	if len(in.Tools) > 0 {
		var extra []string
		for _, t := range in.Tools {
			if !parent.Has(t) {
				extra = append(extra, t)
			}
		}
		if len(extra) > 0 {
			return Spawned{}, fmt.Errorf("%w: tools %s are not among this task's tools (%s); a child gets a subset of its parent's tools", ErrInvalid, strings.Join(extra, ", "), strings.Join(parent.Names, ", "))
		}
		in0.Tools, in0.ToolsRestricted, in0.Discovery = append([]string(nil), in.Tools...), true, false
	}
	model := in.Model
	if model == "" {
		model = s.Model
	}
	request := in.Request
	if in.Instructions != "" {
		request = "Instructions: " + in.Instructions + "\n\n" + in.Request
	}
	ws := in.Workspace
	if ws == "" {
		ws = s.Workspace
	}
	budget, price, err := s.childBudget(model, in)
	if err != nil {
		return Spawned{}, err
	}
	create := Create(CreateInput{Owner: s.Owner, Model: model, Request: request, Workspace: ws, Tools: in0.Tools, ToolsRestricted: in0.ToolsRestricted, Discovery: in0.Discovery, Approvals: s.Rules, Budget: budget, Price: price})
	tc := create[0].(*api.TaskCreated)
	tc.ParentId, tc.ParentCallId, tc.Depth = s.TaskID, in.CallID, s.Depth+1
	return Spawned{
		ChildID: childID,
		Parent:  []proto.Message{&api.ChildSpawned{ChildId: childID, CallId: in.CallID, Title: tc.GetTitle(), Model: model}},
		// Created, not running: the child's own actor records its start
		// (Start), so a child found created after a crash was never
		// started rather than interrupted.
		Child: create[:2],
	}, nil
}

// childBudget is the budget and price of a child on model: ChildBudget
// of what the parent has left once its own and its descendants' spend are
// counted, priced with the parent's price on the parent's model. A cost
// limit on a model without a known price is refused.
func (s *State) childBudget(model string, in SpawnInput) (*api.BudgetAmounts, *api.Price, error) {
	sum := s.Budget.Sum
	left, _, _, _ := TreeLeft(sum, in.DescendantsSpent, in.Now)
	b, err := ChildBudget(sum.GetLimits(), left, in.Budget)
	if err != nil {
		return nil, nil, err
	}
	price := in.Price
	if model == s.Model {
		price = sum.GetPrice()
	}
	if b.GetCostNanoUsd() > 0 && !price.GetKnown() {
		return nil, nil, fmt.Errorf("%w: this task has a cost limit and model %s has no known price: spawn the child on your own model (%s) or on a priced one", ErrInvalid, model, s.Model)
	}
	if in.DailyCost && !price.GetKnown() {
		return nil, nil, fmt.Errorf("%w: owners have a daily cost budget (budgets.per_owner_day.cost) and model %s has no known price: spawn the child on a priced model", ErrInvalid, model)
	}
	if !api.HasBudget(b) {
		b = nil
	}
	if price != nil {
		price = proto.Clone(price).(*api.Price)
	}
	return b, price, nil
}

func sat(a, b uint64) uint64 {
	if a > b {
		return a - b
	}
	return 0
}

// Peer is what the sender's shell read of a Task it addresses.
type Peer struct {
	ID       string
	Exists   bool
	Owner    string
	ParentID string
}

// Start starts a spawned child that is still created: nil otherwise.
func (s *State) Start(detail string) []proto.Message {
	if s.Status != api.TaskStatus_TASK_STATUS_CREATED || !s.Exists() {
		return nil
	}
	return []proto.Message{&api.StatusChanged{Status: api.TaskStatus_TASK_STATUS_RUNNING, Detail: detail}}
}

// Relation names how peer relates to s: "parent", "child" or "sibling".
// Another owner's Task, and one that does not exist, is not found; a Task
// of the same owner outside the family is refused.
func (s *State) Relation(p Peer) (string, error) {
	if !p.Exists || p.Owner != s.Owner {
		return "", fmt.Errorf("%w: task %s", ErrNotFound, p.ID)
	}
	switch {
	case p.ID == s.TaskID:
		return "", fmt.Errorf("%w: a task cannot address itself", ErrInvalid)
	case p.ID == s.ParentID:
		return "parent", nil
	case s.Children[p.ID] != nil:
		return "child", nil
	case s.ParentID != "" && p.ParentID == s.ParentID:
		return "sibling", nil
	}
	return "", fmt.Errorf("%w: task %s is not this task's parent, child or sibling; a task addresses only those", ErrInvalid, p.ID)
}

// Send records a message of call callID to a peer: MessageSent (the shell
// commits the recipient's inbox entry with it). A call that already sent
// its message (re-executed after a restart) sends nothing again: nil.
func (s *State) Send(to, text, callID string) ([]proto.Message, error) {
	if strings.TrimSpace(text) == "" {
		return nil, fmt.Errorf("%w: tasks.send needs a text", ErrInvalid)
	}
	if _, done := s.Sent[callID]; done && callID != "" {
		return nil, nil
	}
	return []proto.Message{&api.MessageSent{To: to, Text: text, CallId: callID}}, nil
}

// SentSeq is the seq of the MessageSent a call recorded.
func (s *State) SentSeq(callID string) (uint64, bool) {
	seq, ok := s.Sent[callID]
	return seq, ok
}

// answerMax bounds the answer a child's end carries to its parent.
const answerMax = 16 << 10

// EndEntry is the inbox entry that tells a child's parent how it ended,
// when evs (stamped after s, not yet applied) end the child: nil for a
// root, or when evs end nothing. The shell commits it with evs.
func (s *State) EndEntry(evs []*api.Event) *api.InboxEntry {
	if s.ParentID == "" {
		return nil
	}
	answer, usage := s.LastAnswer, &api.Usage{PromptTokens: s.Usage.PromptTokens, CompletionTokens: s.Usage.CompletionTokens}
	var end *api.ChildEnded
	for _, ev := range evs {
		switch b := ev.Body.(type) {
		case *api.Event_AssistantMessage:
			if t := b.AssistantMessage.GetText(); t != "" {
				answer = t
			}
		case *api.Event_CycleFinished:
			if u := b.CycleFinished.GetUsage(); u != nil {
				usage.PromptTokens += u.GetPromptTokens()
				usage.CompletionTokens += u.GetCompletionTokens()
			}
		case *api.Event_StatusChanged:
			end = nil
			if st := b.StatusChanged.GetStatus(); api.StatusEnded(st) {
				end = &api.ChildEnded{ChildId: s.TaskID, Status: st, Detail: b.StatusChanged.GetDetail(), ChildSeq: ev.GetSeq()}
			}
		}
	}
	if end == nil {
		return nil
	}
	end.Answer = clip(answer, answerMax)
	end.Usage = usage
	return &api.InboxEntry{From: s.TaskID, FromSeq: end.ChildSeq, ChildEnded: end}
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !isRuneStart(s[n]) {
		n--
	}
	return s[:n] + "… (clipped)"
}

func isRuneStart(b byte) bool { return b&0xC0 != 0x80 }

// Take records inbox entries in the Task's history: a child's end as
// ChildEnded and its reopening as ChildReopened (only from a child of this
// Task), a message as MessageReceived; a message reopens a finished Task
// (MessageDelivery). An entry the Task cannot take (a child's end from a
// Task that is not its child) is dropped with its key all the same.
func (s *State) Take(entries []*api.InboxEntry) []proto.Message {
	var out []proto.Message
	for _, e := range entries {
		if cr := e.GetChildReopened(); cr != nil {
			if s.Children[e.GetFrom()] == nil {
				continue
			}
			cr = proto.Clone(cr).(*api.ChildReopened)
			cr.ChildId = e.GetFrom()
			out = append(out, cr)
			continue
		}
		if ce := e.GetChildEnded(); ce != nil {
			if s.Children[e.GetFrom()] == nil {
				continue
			}
			ce = proto.Clone(ce).(*api.ChildEnded)
			ce.ChildId = e.GetFrom()
			out = append(out, ce)
			continue
		}
		out = append(out, &api.MessageReceived{From: e.GetFrom(), FromSeq: e.GetFromSeq(), Text: e.GetText()})
	}
	return append(out, s.reopen(out)...)
}

// WaitMode is tasks.wait's mode.
type WaitMode int

// Wait modes.
const (
	WaitAll WaitMode = iota
	WaitAny
)

// WaitState says whether a wait on ids is over: every child ended (all),
// or one did (any). An id that is not a child of this Task is not found
// (another owner's Task, or one outside this Task's children, reads the
// same).
func (s *State) WaitState(ids []string, mode WaitMode) (done bool, ended []*Child, err error) {
	if len(ids) == 0 {
		return false, nil, fmt.Errorf("%w: tasks.wait needs the ids of this task's children", ErrInvalid)
	}
	for _, id := range ids {
		c := s.Children[id]
		if c == nil {
			return false, nil, fmt.Errorf("%w: task %s (not a child of this task)", ErrNotFound, id)
		}
		if c.Ended != nil {
			ended = append(ended, c)
		}
	}
	if mode == WaitAny {
		return len(ended) > 0, ended, nil
	}
	return len(ended) == len(ids), ended, nil
}

// MessagesAfter returns the messages received after seq (for
// tasks.wait_message: those recorded after its Cycle started, which the
// model has not seen).
func (s *State) MessagesAfter(seq uint64) []Received {
	i := sort.Search(len(s.Received), func(i int) bool { return s.Received[i].Seq > seq })
	return s.Received[i:]
}

// LiveChildren are the children that have not ended, in spawn order: the
// ones a cascade reaches.
func (s *State) LiveChildren() []string {
	var out []string
	for _, id := range s.ChildOrder {
		if s.Children[id].Ended == nil {
			out = append(out, id)
		}
	}
	return out
}

// Cascade is what a parent's pause, continue or cancel does to a
// descendant.
type Cascade int

// Cascades.
const (
	CascadePause Cascade = iota + 1
	CascadeContinue
	CascadeCancel
)

// FromParent returns what a cascade from the parent records in this Task:
// a pause pauses it when it runs (reason parent, so a continue of the
// parent continues it); a continue continues it when the parent's pause or
// an interruption paused it (never a pause of its own person; a child
// never started is left to the admission of running children); a cancel
// cancels it unless it already ended. nil: nothing to record. A cascade
// always goes on to the Task's own children.
func (s *State) FromParent(c Cascade) []proto.Message {
	switch c {
	case CascadePause:
		if !s.Running() {
			return nil
		}
		out, _ := s.Pause()
		sc := out[len(out)-1].(*api.StatusChanged)
		sc.PauseReason, sc.Detail = api.PauseReason_PAUSE_REASON_PARENT, "paused with its parent"
		return out
	case CascadeContinue:
		// A child never started waits for a place (Admission): the
		// shell asks for one rather than starting it here.
		if s.Status != api.TaskStatus_TASK_STATUS_PAUSED {
			return nil
		}
		switch s.PauseReason {
		case api.PauseReason_PAUSE_REASON_PARENT, api.PauseReason_PAUSE_REASON_INTERRUPTED:
		default:
			return nil
		}
		out, _ := s.Continue("")
		out[0].(*api.StatusChanged).Detail = "continued with its parent"
		return out
	case CascadeCancel:
		if s.Terminal() {
			return nil
		}
		out, _ := s.Cancel()
		out[0].(*api.StatusChanged).Detail = "cancelled with its parent"
		return out
	}
	return nil
}

// Rerun marks the calls of resumable tools (the tree's tools: a spawn finds
// the child it spawned, a wait reads what ended meanwhile) whose execution
// started in an earlier incarnation as not started, so Next starts them
// again instead of Recover closing them as outcome unknown. It changes only
// s in memory: the history keeps their first start, and every load marks
// them again. It returns the calls it marked.
func (s *State) Rerun(resumable func(tool string) bool) []string {
	var out []string
	for _, c := range s.OpenCalls() {
		if c.Started && resumable != nil && resumable(c.Tool) {
			c.Started, c.Approved = false, true
			out = append(out, c.ID)
		}
	}
	return out
}
