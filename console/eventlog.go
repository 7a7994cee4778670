package console

import (
	"fmt"
	"strings"

	"google.golang.org/protobuf/encoding/protojson"

	"lemo/api"
)

// maxLogEvents bounds the events the log pane shows: the most recent.
const maxLogEvents = 1000

// logLines returns the open Task's recent events as screen lines, one an
// event (the l key), rendered again only when the history or the width
// changed.
func (m *Model) logLines(t *taskState, w int) []string {
	key := fmt.Sprintf("log/%s/%d/%d/%v", m.open, t.version, w, t.loaded)
	if key == m.tcKey {
		return m.tcLines
	}
	m.tcKey = key
	m.tcLines = m.renderEventLog(t)
	return m.tcLines
}

func (m *Model) renderEventLog(t *taskState) []string {
	evs := t.events
	var out []string
	if !t.loaded {
		out = append(out, m.st.faint.Render("reading the history…"))
	}
	if n := len(evs); n > maxLogEvents {
		out = append(out, m.st.faint.Render(fmt.Sprintf("… %d earlier events (lemo attach %s --from 1 --json shows them all)", n-maxLogEvents, t.meta.GetTaskId())))
		evs = evs[n-maxLogEvents:]
	}
	out = append(out, m.st.faint.Render(fmt.Sprintf("%6s %-12s %-22s %s", "SEQ", "TIME (UTC)", "EVENT", "WHAT")))
	for _, ev := range evs {
		line := fmt.Sprintf("%6d %-12s %-22s %s", ev.GetSeq(), ev.GetTime().AsTime().UTC().Format("15:04:05.000"), api.Kind(ev), eventSummary(t, ev))
		switch ev.GetBody().(type) {
		case *api.Event_ToolFailed, *api.Event_Failure:
			line = m.st.err.Render(line)
		case *api.Event_ApprovalRequested:
			line = m.st.warn.Render(line)
		}
		out = append(out, line)
	}
	return out
}

// eventSummary says on one line what an event records: the main fields
// of the kinds people read most, the body as compact JSON for the others.
func eventSummary(t *taskState, ev *api.Event) string {
	switch b := ev.GetBody().(type) {
	case *api.Event_TaskCreated:
		c := b.TaskCreated
		return fmt.Sprintf("by %s with %s in %s", c.GetOwner(), c.GetModel(), c.GetWorkspace())
	case *api.Event_UserMessage:
		return oneLine(b.UserMessage.GetText())
	case *api.Event_CycleStarted:
		return fmt.Sprintf("cycle %d · %s", b.CycleStarted.GetCycle(), b.CycleStarted.GetModel())
	case *api.Event_CycleFinished:
		c := b.CycleFinished
		return fmt.Sprintf("cycle %d %s · tokens in %d out %d", c.GetCycle(), lower(c.GetOutcome().String(), "CYCLE_OUTCOME_"), c.GetUsage().GetPromptTokens(), c.GetUsage().GetCompletionTokens())
	case *api.Event_AssistantMessage:
		return oneLine(b.AssistantMessage.GetText())
	case *api.Event_ToolCallRecorded:
		c := b.ToolCallRecorded
		return fmt.Sprintf("%s %s %s", c.GetCallId(), toolName(c), oneLine(string(c.GetArguments())))
	case *api.Event_ToolExecutionStarted:
		id := b.ToolExecutionStarted.GetCallId()
		return id + " " + t.calls[id]
	case *api.Event_ToolState:
		id := b.ToolState.GetCallId()
		return fmt.Sprintf("%s %s %s", id, t.calls[id], oneLine(string(b.ToolState.GetState())))
	case *api.Event_ToolResult:
		r := b.ToolResult
		return fmt.Sprintf("%s %s: %d bytes", r.GetCallId(), t.calls[r.GetCallId()], r.GetOutputBytes())
	case *api.Event_ToolFailed:
		f := b.ToolFailed
		return fmt.Sprintf("%s %s (%s): %s", f.GetCallId(), t.calls[f.GetCallId()], lower(f.GetKind().String(), "TOOL_FAILURE_KIND_"), oneLine(f.GetMessage()))
	case *api.Event_ApprovalRequested:
		a := b.ApprovalRequested
		return fmt.Sprintf("%s for %s: %s", a.GetApprovalId(), orText(a.GetTool(), t.calls[a.GetCallId()]), oneLine(a.GetReason()))
	case *api.Event_ApprovalResolved:
		a := b.ApprovalResolved
		s := a.GetApprovalId() + " " + lower(a.GetOutcome().String(), "APPROVAL_OUTCOME_")
		if a.GetBy() != "" {
			s += " by " + a.GetBy()
		}
		return s
	case *api.Event_StatusChanged:
		return strings.TrimSpace(statusName(b.StatusChanged.GetStatus()) + " " + oneLine(b.StatusChanged.GetDetail()))
	}
	return bodyJSON(ev)
}

// bodyJSON is the event's body as compact JSON ("" without a body).
func bodyJSON(ev *api.Event) string {
	r := ev.ProtoReflect()
	od := r.Descriptor().Oneofs().ByName("body")
	fd := r.WhichOneof(od)
	if fd == nil || fd.Message() == nil {
		return ""
	}
	b, err := protojson.MarshalOptions{UseProtoNames: true}.Marshal(r.Get(fd).Message().Interface())
	if err != nil {
		return err.Error()
	}
	return oneLine(string(b))
}
