package main

import (
	"fmt"
	"io"
	"strings"

	"lemo/actors/taskstate"
	"lemo/api"
	"lemo/client"
)

// renderer prints a Task's progress for people: streamed model text, tool
// calls through their Views, approvals, statuses and failures.
type renderer struct {
	w         io.Writer
	views     *client.Views
	calls     map[string]string // call id → tool
	streamed  map[uint32]bool   // cycles whose text was streamed
	midLine   bool
	reasoning bool
	// spend is the Task's budget folded from the events shown (a Task
	// with limits shows it at each status change).
	spend spendFold
	// below is the progress of the Tasks below the followed one; asks are
	// the approvals of theirs shown and not yet resolved.
	below treeProgress
	asks  map[string]bool
}

func newRenderer(w io.Writer, views *client.Views) *renderer {
	return &renderer{w: w, views: views, calls: make(map[string]string), streamed: make(map[uint32]bool)}
}

func (r *renderer) line(format string, args ...any) {
	if r.midLine {
		fmt.Fprintln(r.w)
		r.midLine = false
	}
	fmt.Fprintf(r.w, format+"\n", args...)
}

func (r *renderer) update(u *api.Update) {
	switch b := u.GetBody().(type) {
	case *api.Update_Delta:
		r.delta(b.Delta)
	case *api.Update_Event:
		r.event(b.Event)
	case *api.Update_TreeEvent:
		r.tree(b.TreeEvent)
	case *api.Update_TreeState:
		for _, l := range r.below.state(b.TreeState) {
			r.line("%s", l)
		}
	}
}

// tree shows a descendant's event: its approvals (once each, labelled
// with its path) and its status line.
func (r *renderer) tree(te *api.TreeEvent) {
	path := strings.Join(te.GetPath(), "/")
	switch b := te.GetEvent().GetBody().(type) {
	case *api.Event_ApprovalRequested:
		a := b.ApprovalRequested
		if r.asks[a.GetApprovalId()] {
			return // told again on a resubscription
		}
		if r.asks == nil {
			r.asks = make(map[string]bool)
		}
		r.asks[a.GetApprovalId()] = true
		r.line("? approval needed in task %s for %s: %s\n  approve: lemo approve %s   deny: lemo deny %s", path, a.GetTool(), a.GetReason(), a.GetApprovalId(), a.GetApprovalId())
	case *api.Event_ApprovalResolved:
		a := b.ApprovalResolved
		delete(r.asks, a.GetApprovalId())
		r.line("  approval %s in task %s: %s", a.GetApprovalId(), path, strings.ToLower(strings.TrimPrefix(a.GetOutcome().String(), "APPROVAL_OUTCOME_")))
	default:
		for _, l := range r.below.event(te) {
			r.line("%s", l)
		}
	}
}

func (r *renderer) delta(d *api.Delta) {
	switch d.GetKind() {
	case api.DeltaKind_DELTA_KIND_TEXT:
		fmt.Fprint(r.w, d.GetText())
		r.midLine = !strings.HasSuffix(d.GetText(), "\n")
		r.streamed[d.GetCycle()] = true
	case api.DeltaKind_DELTA_KIND_REASONING:
		if r.reasoning {
			fmt.Fprint(r.w, d.GetText())
			r.midLine = !strings.HasSuffix(d.GetText(), "\n")
		}
	case api.DeltaKind_DELTA_KIND_NOTICE:
		r.line("  … %s", d.GetText())
	case api.DeltaKind_DELTA_KIND_TOOL_STATE:
		if tool := r.calls[d.GetCallId()]; tool != "" {
			r.line("  … %s", r.views.For(tool).State(tool, d.GetData()))
		}
	}
}

func (r *renderer) event(ev *api.Event) {
	if line := r.spend.event(ev); line != "" {
		defer r.line("  %s", line)
	}
	switch b := ev.GetBody().(type) {
	case *api.Event_TaskCreated:
		r.line("task %s (%s)", ev.GetTaskId(), b.TaskCreated.GetModel())
		if ws := b.TaskCreated.GetWorkspace(); ws != "" {
			r.line("works in %s", ws)
		}
	case *api.Event_UserMessage:
		r.line("> %s", b.UserMessage.GetText())
	case *api.Event_AssistantMessage:
		m := b.AssistantMessage
		if r.streamed[m.GetCycle()] {
			if r.midLine {
				fmt.Fprintln(r.w)
				r.midLine = false
			}
		} else if m.GetText() != "" {
			r.line("%s", m.GetText())
		}
	case *api.Event_ToolCallRecorded:
		c := b.ToolCallRecorded
		tool := c.GetTool()
		if tool == "" {
			// A call refused before it was resolved to a tool.
			tool = c.GetModelName()
		}
		r.calls[c.GetCallId()] = tool
		r.line("→ %s", r.views.For(tool).Call(tool, c.GetArguments()))
	case *api.Event_ToolResult:
		res := b.ToolResult
		tool := r.calls[res.GetCallId()]
		switch {
		case !res.GetRetained():
			r.line("← %s: done (%d bytes, not retained)", tool, res.GetOutputBytes())
		default:
			mark := ""
			if res.GetUntrusted() {
				mark = " [untrusted]"
			}
			r.line("← %s%s", r.views.For(tool).Result(tool, res.GetRetainedOutput()), mark)
		}
	case *api.Event_ToolFailed:
		f := b.ToolFailed
		r.line("✗ %s failed (%s): %s", r.calls[f.GetCallId()], strings.ToLower(strings.TrimPrefix(f.GetKind().String(), "TOOL_FAILURE_KIND_")), f.GetMessage())
	case *api.Event_ApprovalRequested:
		a := b.ApprovalRequested
		r.line("? approval needed for %s: %s\n  approve: lemo approve %s   deny: lemo deny %s", r.calls[a.GetCallId()], a.GetReason(), a.GetApprovalId(), a.GetApprovalId())
	case *api.Event_ApprovalResolved:
		a := b.ApprovalResolved
		by := ""
		if a.GetBy() != "" {
			by = " by " + a.GetBy()
		}
		always := ""
		if rule := a.GetAllowRule(); rule != nil {
			always = " (always allowed for this task: " + rule.GetTool()
			if sc := rule.GetScope(); sc != "" {
				always += " " + sc
			}
			always += ")"
		}
		r.line("  approval %s: %s%s%s", a.GetApprovalId(), strings.ToLower(strings.TrimPrefix(a.GetOutcome().String(), "APPROVAL_OUTCOME_")), by, always)
	case *api.Event_StatusChanged:
		s := b.StatusChanged
		r.line("[%s: %s]", taskstate.StatusName(s.GetStatus()), s.GetDetail())
	case *api.Event_Failure:
		f := b.Failure
		if n := f.SupervisionNote(); n != "" {
			r.line("! %s failure: %s [supervision: %s]", f.GetKind(), f.GetMessage(), n)
			break
		}
		r.line("! %s failure: %s", f.GetKind(), f.GetMessage())
	case *api.Event_ToolsLoaded:
		r.line("+ tools loaded for the next model calls: %s", strings.Join(b.ToolsLoaded.GetTools(), ", "))
	case *api.Event_ChildSpawned:
		c := b.ChildSpawned
		r.line("  ↳ child task %s started: %s", c.GetChildId(), c.GetTitle())
	case *api.Event_ChildEnded:
		c := b.ChildEnded
		r.line("  ↳ child task %s %s: %s", c.GetChildId(), taskstate.StatusName(c.GetStatus()), oneLine(firstNonEmpty(c.GetAnswer(), c.GetDetail()), 120))
	case *api.Event_ChildReopened:
		c := b.ChildReopened
		r.line("  ↳ child task %s runs again: %s", c.GetChildId(), c.GetDetail())
	case *api.Event_MessageSent:
		m := b.MessageSent
		r.line("✉ to %s: %s", m.GetTo(), oneLine(m.GetText(), 120))
	case *api.Event_MessageReceived:
		m := b.MessageReceived
		r.line("✉ from %s: %s", m.GetFrom(), oneLine(m.GetText(), 120))
	}
}

// oneLine folds s onto one line of at most n runes.
func oneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > n {
		s = string(r[:n-1]) + "…"
	}
	return s
}

func firstNonEmpty(a, b string) string {
	if a != "" {
		return a
	}
	return b
}
