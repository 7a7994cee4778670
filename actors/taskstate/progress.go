package taskstate

import (
	"cmp"
	"slices"

	"lemo/api"
)

// MaxProgressBelow bounds how many descendants' progress a subscription to
// a Task is told of when it starts (TreeState): as many as a client shows
// lines for; the others are counted, not sent.
const MaxProgressBelow = 64

// MaxProgressCalls bounds the open calls a Progress keeps (the newest): a
// progress line names the current one, a prompt the one its approval is
// for.
const MaxProgressCalls = 4

// Progress is what a subscription to an ancestor of a running or paused
// Task is told of it when the subscription starts, so that a client
// attaching mid-run shows the same progress line as one that followed from
// the start: the latest of the Task's events that a client folds into that
// line (its status, the Cycle it is in, the calls it has not ended). It is folded
// from the Task's events as they are published (Apply) and holds nothing
// else.
type Progress struct {
	status *api.Event
	cycle  *api.Event
	calls  []*api.Event
	last   uint64 // the newest seq folded
}

// IsProgress reports whether ev is one of the events a Progress folds (a
// status, a Cycle's start or end, a call's record or end).
func IsProgress(ev *api.Event) bool {
	switch ev.GetBody().(type) {
	case *api.Event_StatusChanged, *api.Event_CycleStarted, *api.Event_CycleFinished,
		*api.Event_ToolCallRecorded, *api.Event_ToolResult, *api.Event_ToolFailed:
		return true
	}
	return false
}

// Apply folds ev, an event of the Task, and reports whether the Task is
// still one to tell of: false once it ended (finished, failed or
// cancelled); its Progress is then dropped. A paused Task is told of with
// its pause (why, in the status) and the Cycle it reached, so a client
// attaching later shows the line of a child that waits for a person as
// one attached before shows it; its open calls ended with the pause.
// Events that are not progress change nothing.
func (p *Progress) Apply(ev *api.Event) bool {
	p.last = max(p.last, ev.GetSeq())
	switch b := ev.GetBody().(type) {
	case *api.Event_StatusChanged:
		switch b.StatusChanged.GetStatus() {
		case api.TaskStatus_TASK_STATUS_RUNNING, api.TaskStatus_TASK_STATUS_AWAITING_APPROVAL, api.TaskStatus_TASK_STATUS_CREATED:
			p.status = ev
		case api.TaskStatus_TASK_STATUS_PAUSED:
			p.status, p.calls = ev, nil
		default:
			*p = Progress{}
			return false
		}
	case *api.Event_CycleStarted:
		p.cycle = ev
	case *api.Event_ToolCallRecorded:
		if len(p.calls) == MaxProgressCalls {
			p.calls = slices.Delete(p.calls, 0, 1)
		}
		p.calls = append(p.calls, ev)
	case *api.Event_ToolResult:
		p.endCall(b.ToolResult.GetCallId())
	case *api.Event_ToolFailed:
		p.endCall(b.ToolFailed.GetCallId())
	}
	return true
}

func (p *Progress) endCall(id string) {
	p.calls = slices.DeleteFunc(p.calls, func(ev *api.Event) bool { return ev.GetToolCallRecorded().GetCallId() == id })
}

// Empty reports whether nothing was folded that a client would show.
func (p *Progress) Empty() bool { return p.status == nil && p.cycle == nil && len(p.calls) == 0 }

// Events returns the events kept, in seq order: folded by a client in
// that order they give the line it would show had it seen them all.
func (p *Progress) Events() []*api.Event {
	out := make([]*api.Event, 0, 2+len(p.calls))
	if p.status != nil {
		out = append(out, p.status)
	}
	if p.cycle != nil {
		out = append(out, p.cycle)
	}
	out = append(out, p.calls...)
	slices.SortStableFunc(out, func(a, b *api.Event) int { return cmp.Compare(a.GetSeq(), b.GetSeq()) })
	return out
}

// LastSeq is the seq of the newest event folded (0: none): a client told
// of the Progress needs none of the Task's events up to it.
func (p *Progress) LastSeq() uint64 { return p.last }
