package client

import (
	"context"
	"encoding/json"
	"sort"
	"strings"
	"sync"

	"lemo/api"
)

// TaskView is the projection of one Task.
type TaskView struct {
	// Meta is the Task's summary, folded from its events.
	Meta *api.TaskMeta
	// Events is the Task's history as far as the projection holds it, in
	// seq order, without gaps from the first one held.
	Events []*api.Event
	// In flight (never history): the current Cycle's streamed text and
	// reasoning, cleared when its answer is recorded.
	Cycle     uint32
	Text      string
	Reasoning string
	// text and reasoning accumulate the deltas; Text and Reasoning are set
	// from them in a copy. A builder appends in amortised constant time and
	// never changes bytes it has handed out, so a long stream costs linear
	// time and a copy shares its bytes.
	text, reasoning strings.Builder
	// ToolState is the latest live state of each running call;
	// ToolOutput the live (full) output of finished calls.
	ToolState  map[string]json.RawMessage
	ToolOutput map[string]json.RawMessage
}

// Projection is a client's live picture of the Tasks it may see: their
// metadata, ordered histories, in-flight deltas and statuses. Apply folds
// updates into it; Run keeps it current from a daemon, resuming from the
// last seq it holds after any interruption. It is safe for concurrent use.
type Projection struct {
	mu      sync.Mutex
	tasks   map[string]*TaskView
	changed chan struct{}
}

// NewProjection returns an empty projection.
func NewProjection() *Projection {
	return &Projection{tasks: make(map[string]*TaskView), changed: make(chan struct{}, 1)}
}

// Changed is signalled (coalesced) after every change.
func (p *Projection) Changed() <-chan struct{} { return p.changed }

func (p *Projection) notify() {
	select {
	case p.changed <- struct{}{}:
	default:
	}
}

func (p *Projection) view(id string) *TaskView {
	v := p.tasks[id]
	if v == nil {
		v = &TaskView{ToolState: make(map[string]json.RawMessage), ToolOutput: make(map[string]json.RawMessage)}
		p.tasks[id] = v
	}
	return v
}

// SetMeta records a Task's metadata (from a listing) without history.
func (p *Projection) SetMeta(m *api.TaskMeta) {
	p.mu.Lock()
	defer p.mu.Unlock()
	v := p.view(m.GetTaskId())
	if v.Meta == nil || v.Meta.GetLastSeq() < m.GetLastSeq() {
		v.Meta = m
	}
	p.notify()
}

// Apply folds one update. Events already held are ignored.
func (p *Projection) Apply(u *api.Update) {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch b := u.GetBody().(type) {
	case *api.Update_Event:
		ev := b.Event
		v := p.view(ev.GetTaskId())
		if n := len(v.Events); n > 0 && ev.GetSeq() <= v.Events[n-1].GetSeq() {
			return
		}
		v.Events = append(v.Events, ev)
		v.Meta = api.FoldMeta(v.Meta, ev)
		switch e := ev.GetBody().(type) {
		case *api.Event_AssistantMessage:
			if e.AssistantMessage.GetCycle() == v.Cycle {
				v.clearInFlight()
			}
		case *api.Event_CycleFinished:
			if e.CycleFinished.GetCycle() == v.Cycle {
				v.clearInFlight()
			}
		case *api.Event_ToolResult:
			delete(v.ToolState, e.ToolResult.GetCallId())
		case *api.Event_ToolFailed:
			delete(v.ToolState, e.ToolFailed.GetCallId())
		case *api.Event_StatusChanged:
			switch e.StatusChanged.GetStatus() {
			case api.TaskStatus_TASK_STATUS_FINISHED, api.TaskStatus_TASK_STATUS_CANCELLED:
				v.ToolOutput = make(map[string]json.RawMessage)
			}
		}
	case *api.Update_Delta:
		d := b.Delta
		v := p.view(d.GetTaskId())
		if d.GetCycle() != v.Cycle && d.GetCycle() != 0 {
			v.Cycle = d.GetCycle()
			v.clearInFlight()
		}
		switch d.GetKind() {
		case api.DeltaKind_DELTA_KIND_TEXT:
			v.text.WriteString(d.GetText())
		case api.DeltaKind_DELTA_KIND_REASONING:
			v.reasoning.WriteString(d.GetText())
		case api.DeltaKind_DELTA_KIND_TOOL_STATE:
			v.ToolState[d.GetCallId()] = d.GetData()
		case api.DeltaKind_DELTA_KIND_TOOL_OUTPUT:
			v.ToolOutput[d.GetCallId()] = d.GetData()
		default:
			return
		}
	default:
		return
	}
	p.notify()
}

// Task returns a copy of one Task's view.
func (p *Projection) Task(id string) (TaskView, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	v := p.tasks[id]
	if v == nil {
		return TaskView{}, false
	}
	return v.copy(), true
}

func (v *TaskView) clearInFlight() {
	v.text, v.reasoning = strings.Builder{}, strings.Builder{}
}

// copy returns a snapshot of v that shares no mutable state with it.
func (v *TaskView) copy() TaskView {
	c := TaskView{Meta: v.Meta, Cycle: v.Cycle, Text: v.text.String(), Reasoning: v.reasoning.String()}
	c.Events = append([]*api.Event(nil), v.Events...)
	c.ToolState = make(map[string]json.RawMessage, len(v.ToolState))
	for k, s := range v.ToolState {
		c.ToolState[k] = s
	}
	c.ToolOutput = make(map[string]json.RawMessage, len(v.ToolOutput))
	for k, s := range v.ToolOutput {
		c.ToolOutput[k] = s
	}
	return c
}

// Tasks returns a copy of every Task's view, newest first.
func (p *Projection) Tasks() []TaskView {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]TaskView, 0, len(p.tasks))
	for _, v := range p.tasks {
		out = append(out, v.copy())
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Meta.GetTaskId() > out[j].Meta.GetTaskId() })
	return out
}

// LastSeqs returns, per Task, the last seq held.
func (p *Projection) LastSeqs() map[string]uint64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make(map[string]uint64, len(p.tasks))
	for id, v := range p.tasks {
		if n := len(v.Events); n > 0 {
			out[id] = v.Events[n-1].GetSeq()
		}
	}
	return out
}

// Run keeps the projection current until ctx ends. For one Task
// (o.TaskID) it loads the history from seq 1 (or from o.FromSeq) and
// follows it; for every Task it lists them first (their metadata) and
// follows what happens from then on. After any interruption it resumes
// from the last seq it holds.
func (p *Projection) Run(ctx context.Context, c *Conn, o FollowOptions) error {
	if o.TaskID == "" {
		before := ""
		for {
			list, next, err := c.ListTasks(ctx, before, 500)
			if err != nil {
				return err
			}
			for _, m := range list {
				p.SetMeta(m)
			}
			if next == "" {
				break
			}
			before = next
		}
		o.Resume = p.LastSeqs()
	} else {
		if l, ok := p.LastSeqs()[o.TaskID]; ok {
			o.FromSeq = l + 1
		} else if o.FromSeq == 0 {
			o.FromSeq = 1
		}
	}
	return c.Follow(ctx, o, func(u *api.Update) error {
		p.Apply(u)
		return nil
	})
}
