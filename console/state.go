package console

import (
	"sort"
	"strings"

	"lemo/api"
	"lemo/excerpt"
)

// liveTextMax bounds the streamed text kept per Task: the tail is what a
// screen shows.
const liveTextMax = 16 << 10

// taskState is the console's picture of one Task: its metadata always;
// its history once it was opened (held), with the live deltas.
type taskState struct {
	meta *api.TaskMeta
	// held: events are kept (from the moment the Task was opened, and the
	// history read since); loaded: that history arrived, so events are
	// the whole history.
	held, loaded bool
	events       []*api.Event
	// version changes whenever events change (for the transcript cache).
	version uint64
	// seen is the last seq folded into the live state.
	seen uint64

	// In flight: the current Cycle's streamed text and reasoning, the live
	// state of running calls, the live outputs of finished calls and the
	// input summaries Cycles announced.
	cycle      uint32
	text       []byte
	reasoning  []byte
	toolState  map[string][]byte
	toolOutput map[string][]byte
	inputs     map[uint32]*api.InputSummary

	// Pending approvals: what the last poll said, corrected by the events
	// seen since (requested live, resolved live).
	polled   map[string]*api.ApprovalRequested
	asked    map[string]*api.ApprovalRequested
	resolved map[string]bool
	// calls maps call ids to their tool, from the events seen.
	calls map[string]string
	// recent are the newest events of a Task whose row is expanded (at
	// most maxRecentEvents); recentLoaded: the tail of its history
	// arrived.
	recent       []*api.Event
	recentLoaded bool
}

func newTaskState() *taskState {
	return &taskState{toolState: map[string][]byte{}, toolOutput: map[string][]byte{}, inputs: map[uint32]*api.InputSummary{},
		polled: map[string]*api.ApprovalRequested{}, asked: map[string]*api.ApprovalRequested{}, resolved: map[string]bool{}, calls: map[string]string{}}
}

// lastHeld is the seq of the last event held (0: none).
func (t *taskState) lastHeld() uint64 {
	if n := len(t.events); n > 0 {
		return t.events[n-1].GetSeq()
	}
	return 0
}

// event folds one committed event. Events already folded are ignored.
func (t *taskState) event(ev *api.Event) {
	if t.held && ev.GetSeq() > t.lastHeld() {
		t.events = append(t.events, ev)
		t.version++
	}
	if t.meta == nil || ev.GetSeq() > t.meta.GetLastSeq() {
		t.meta = api.FoldMeta(t.meta, ev)
	}
	if ev.GetSeq() > t.seen {
		t.seen = ev.GetSeq()
		t.observe(ev)
	}
}

// observe updates the live state after an event.
func (t *taskState) observe(ev *api.Event) {
	switch b := ev.GetBody().(type) {
	case *api.Event_AssistantMessage:
		if b.AssistantMessage.GetCycle() == t.cycle {
			t.text, t.reasoning = t.text[:0], t.reasoning[:0]
		}
	case *api.Event_CycleFinished:
		if b.CycleFinished.GetCycle() == t.cycle {
			t.text, t.reasoning = t.text[:0], t.reasoning[:0]
		}
		delete(t.inputs, b.CycleFinished.GetCycle())
	case *api.Event_ToolCallRecorded:
		t.calls[b.ToolCallRecorded.GetCallId()] = toolName(b.ToolCallRecorded)
	case *api.Event_ToolResult:
		delete(t.toolState, b.ToolResult.GetCallId())
	case *api.Event_ToolFailed:
		delete(t.toolState, b.ToolFailed.GetCallId())
	case *api.Event_ApprovalRequested:
		a := b.ApprovalRequested
		if !t.resolved[a.GetApprovalId()] {
			t.asked[a.GetApprovalId()] = a
		}
	case *api.Event_ApprovalResolved:
		t.resolved[b.ApprovalResolved.GetApprovalId()] = true
		delete(t.asked, b.ApprovalResolved.GetApprovalId())
		delete(t.polled, b.ApprovalResolved.GetApprovalId())
	case *api.Event_StatusChanged:
		switch b.StatusChanged.GetStatus() {
		case api.TaskStatus_TASK_STATUS_FINISHED, api.TaskStatus_TASK_STATUS_CANCELLED:
			clear(t.toolOutput)
			clear(t.toolState)
			clear(t.inputs)
			t.text, t.reasoning = t.text[:0], t.reasoning[:0]
		}
	}
}

// history merges the Task's history, read after its events began to be
// held: together they are the whole history.
func (t *taskState) history(evs []*api.Event) {
	live := t.events
	t.events = append([]*api.Event(nil), evs...)
	last := t.lastHeld()
	for _, ev := range live {
		if ev.GetSeq() > last {
			t.events = append(t.events, ev)
			last = ev.GetSeq()
		}
	}
	t.loaded = true
	t.version++
	for _, ev := range t.events {
		switch b := ev.GetBody().(type) {
		case *api.Event_ToolCallRecorded:
			t.calls[b.ToolCallRecorded.GetCallId()] = toolName(b.ToolCallRecorded)
		case *api.Event_ApprovalResolved:
			t.resolved[b.ApprovalResolved.GetApprovalId()] = true
		}
		if t.meta == nil || ev.GetSeq() > t.meta.GetLastSeq() {
			t.meta = api.FoldMeta(t.meta, ev)
		}
	}
}

// delta folds live progress.
func (t *taskState) delta(d *api.Delta) {
	if c := d.GetCycle(); c != 0 && c != t.cycle {
		t.cycle, t.text, t.reasoning = c, t.text[:0], t.reasoning[:0]
	}
	switch d.GetKind() {
	case api.DeltaKind_DELTA_KIND_TEXT:
		t.text = appendTail(t.text, d.GetText())
	case api.DeltaKind_DELTA_KIND_REASONING:
		t.reasoning = appendTail(t.reasoning, d.GetText())
	case api.DeltaKind_DELTA_KIND_TOOL_STATE:
		t.toolState[d.GetCallId()] = d.GetData()
	case api.DeltaKind_DELTA_KIND_TOOL_OUTPUT:
		t.toolOutput[d.GetCallId()] = d.GetData()
	case api.DeltaKind_DELTA_KIND_INPUT:
		if d.GetInput() != nil {
			t.inputs[d.GetCycle()] = d.GetInput()
		}
	}
}

// appendTail appends s to b, keeping at most the last liveTextMax bytes
// (amortised: it trims to half when it overflows).
func appendTail(b []byte, s string) []byte {
	b = append(b, s...)
	if len(b) > liveTextMax {
		b = append(b[:0], excerpt.Tail(b, liveTextMax/2)...)
	}
	return b
}

// setPolled replaces the approvals the last poll reported for the Task.
func (t *taskState) setPolled(list []*api.ApprovalRequested) {
	clear(t.polled)
	for _, a := range list {
		if !t.resolved[a.GetApprovalId()] {
			t.polled[a.GetApprovalId()] = a
		}
	}
}

// pending returns the Task's pending approvals, oldest call first.
func (t *taskState) pending() []*api.ApprovalRequested {
	seen := map[string]bool{}
	var out []*api.ApprovalRequested
	for _, m := range []map[string]*api.ApprovalRequested{t.polled, t.asked} {
		for id, a := range m {
			if !seen[id] && !t.resolved[id] {
				seen[id] = true
				out = append(out, a)
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].GetApprovalId() < out[j].GetApprovalId() })
	return out
}

// running returns the calls that started and have not ended, as far as
// the held events say, in call order.
func (t *taskState) running() []string {
	open := map[string]bool{}
	var order []string
	for _, ev := range t.events {
		switch b := ev.GetBody().(type) {
		case *api.Event_ToolExecutionStarted:
			id := b.ToolExecutionStarted.GetCallId()
			if !open[id] {
				open[id] = true
				order = append(order, id)
			}
		case *api.Event_ToolResult:
			delete(open, b.ToolResult.GetCallId())
		case *api.Event_ToolFailed:
			delete(open, b.ToolFailed.GetCallId())
		}
	}
	out := order[:0]
	for _, id := range order {
		if open[id] {
			out = append(out, id)
		}
	}
	return out
}

func toolName(c *api.ToolCallRecorded) string {
	if c.GetTool() != "" {
		return c.GetTool()
	}
	return c.GetModelName()
}

// statusName returns a status as people read it ("awaiting_approval").
func statusName(st api.TaskStatus) string {
	return strings.ToLower(strings.TrimPrefix(st.String(), "TASK_STATUS_"))
}

// metaStatus is a Task's status as people read it: "queued" for a child
// Task that waits for a place among the running children (created, never
// started: see actors/taskstate.StatusWord).
func metaStatus(mt *api.TaskMeta) string {
	if mt.GetParentId() != "" && mt.GetStatus() == api.TaskStatus_TASK_STATUS_CREATED {
		return "queued"
	}
	return statusName(mt.GetStatus())
}
