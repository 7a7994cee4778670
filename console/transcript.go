package console

import (
	"fmt"
	"sort"
	"strings"

	"github.com/charmbracelet/x/ansi"

	"lemo/api"
	"lemo/prompt"
)

func sortStrings(s []string) { sort.Strings(s) }

// transcript returns the open Task's history as screen lines, rendered
// again only when the history, the width or the detail toggle changed.
func (m *Model) transcript(t *taskState, w int) []string {
	key := fmt.Sprintf("%s/%d/%d/%v/%v/%d", m.open, t.version, w, m.details, t.loaded, len(t.toolOutput))
	if key == m.tcKey {
		return m.tcLines
	}
	m.tcKey = key
	m.tcLines = m.renderTranscript(t, w)
	return m.tcLines
}

func (m *Model) renderTranscript(t *taskState, w int) []string {
	var out []string
	add := func(style func(...string) string, indent, text string) {
		for _, para := range strings.Split(strings.TrimRight(text, "\n"), "\n") {
			wrapped := ansi.Wrap(para, max(w-len(indent), 10), "")
			for _, l := range strings.Split(wrapped, "\n") {
				l = indent + l
				if style != nil {
					l = style(l)
				}
				out = append(out, l)
			}
		}
	}
	if !t.loaded {
		add(m.st.faint.Render, "", "reading the history…")
	}
	st := m.st
	for _, ev := range t.events {
		switch b := ev.GetBody().(type) {
		case *api.Event_TaskCreated:
			c := b.TaskCreated
			add(st.faint.Render, "", fmt.Sprintf("created by %s with %s in %s", c.GetOwner(), c.GetModel(), c.GetWorkspace()))
		case *api.Event_UserMessage:
			add(st.bold.Render, "", "> "+b.UserMessage.GetText())
		case *api.Event_CycleStarted:
			add(st.faint.Render, "", fmt.Sprintf("── cycle %d · %s", b.CycleStarted.GetCycle(), b.CycleStarted.GetModel()))
		case *api.Event_AssistantMessage:
			a := b.AssistantMessage
			if m.details && a.GetReasoning() != "" {
				add(st.faint.Render, "  ", "thinking: "+a.GetReasoning())
			}
			if a.GetText() != "" {
				add(nil, "", a.GetText())
			}
		case *api.Event_ToolCallRecorded:
			c := b.ToolCallRecorded
			tool := toolName(c)
			add(nil, "", fmt.Sprintf("→ %s %s", c.GetCallId(), m.views.For(tool).Call(tool, c.GetArguments())))
		case *api.Event_ToolState:
			tool := t.calls[b.ToolState.GetCallId()]
			add(st.faint.Render, "  ", "… "+m.views.For(tool).State(tool, b.ToolState.GetState()))
		case *api.Event_ToolResult:
			r := b.ToolResult
			tool := t.calls[r.GetCallId()]
			mark := ""
			if r.GetUntrusted() {
				mark = " [untrusted]"
			}
			switch live := t.toolOutput[r.GetCallId()]; {
			case r.GetRetained():
				add(nil, "  ", fmt.Sprintf("← %s %s%s", r.GetCallId(), m.views.For(tool).Result(tool, r.GetRetainedOutput()), mark))
			case live != nil:
				add(nil, "  ", fmt.Sprintf("← %s %s%s (live, not retained)", r.GetCallId(), m.views.For(tool).Result(tool, live), mark))
			default:
				add(st.faint.Render, "  ", fmt.Sprintf("← %s done: %d bytes, not retained%s", r.GetCallId(), r.GetOutputBytes(), mark))
			}
		case *api.Event_ToolFailed:
			f := b.ToolFailed
			add(st.err.Render, "  ", fmt.Sprintf("✗ %s %s failed (%s): %s", f.GetCallId(), t.calls[f.GetCallId()], lower(f.GetKind().String(), "TOOL_FAILURE_KIND_"), f.GetMessage()))
		case *api.Event_ApprovalRequested:
			a := b.ApprovalRequested
			add(st.warn.Render, "", fmt.Sprintf("? approval %s for %s: %s", a.GetApprovalId(), orText(a.GetTool(), t.calls[a.GetCallId()]), a.GetReason()))
		case *api.Event_ApprovalResolved:
			a := b.ApprovalResolved
			by := ""
			if a.GetBy() != "" {
				by = " by " + a.GetBy()
			}
			add(nil, "  ", fmt.Sprintf("approval %s: %s%s", a.GetApprovalId(), lower(a.GetOutcome().String(), "APPROVAL_OUTCOME_"), by))
		case *api.Event_StatusChanged:
			s := b.StatusChanged
			add(st.faint.Render, "", fmt.Sprintf("[%s: %s]", statusName(s.GetStatus()), s.GetDetail()))
		case *api.Event_ToolsLoaded:
			add(st.faint.Render, "  ", "+ tools loaded for the next model calls: "+strings.Join(b.ToolsLoaded.GetTools(), ", "))
		case *api.Event_Failure:
			f := b.Failure
			line := fmt.Sprintf("! %s failure: %s", f.GetKind(), f.GetMessage())
			if n := f.SupervisionNote(); n != "" {
				line += " [supervision: " + n + "]"
			}
			add(st.err.Render, "", line)
		case *api.Event_CycleFinished:
			out = append(out, m.cycleLines(b.CycleFinished, w)...)
		}
	}
	return out
}

// cycleLines show a finished Cycle's token usage and what its model saw:
// section sizes, excerpted records and recalled evidence (in detail with
// the i key).
func (m *Model) cycleLines(c *api.CycleFinished, w int) []string {
	u := c.GetUsage()
	s := fmt.Sprintf("cycle %d %s · tokens in %d (est %d) out %d", c.GetCycle(), lower(c.GetOutcome().String(), "CYCLE_OUTCOME_"),
		u.GetPromptTokens(), u.GetEstimatedPromptTokens(), u.GetCompletionTokens())
	if in := c.GetInput(); in != nil {
		s += " · saw " + inputText(in)
	}
	if c.GetError() != "" {
		s += " · " + c.GetError()
	}
	var out []string
	for i, l := range strings.Split(ansi.Wrap(s, max(w-4, 10), ""), "\n") {
		l = "  " + l
		if i > 0 {
			l = "  " + l
		}
		out = append(out, m.st.faint.Render(l))
	}
	if !m.details {
		return out
	}
	in := c.GetInput()
	for _, e := range in.GetExcerpts() {
		out = append(out, m.st.faint.Render(fmt.Sprintf("    excerpt: seq %d %s %s, %d of %d tokens kept", e.GetSeq(), e.GetCallId(), e.GetPart(), e.GetKeptTokens(), e.GetOriginalTokens())))
	}
	for _, r := range in.GetRecalled() {
		out = append(out, m.st.faint.Render(fmt.Sprintf("    recalled: task %s seq %d (%s), %d tokens, score %.2f", r.GetTaskId(), r.GetSeq(), r.GetKind(), r.GetTokens(), r.GetScore())))
	}
	return out
}

// ceilingWhy says which share of the window the ceiling is, so that its
// jump after the Task's first response is no surprise.
func ceilingWhy(afterFirstResponse bool) string {
	if afterFirstResponse {
		return fmt.Sprintf("%d%% of the window after the first response", prompt.AfterResponsePercent)
	}
	return fmt.Sprintf("%d%% of the window until the first response, then %d%%", prompt.FirstResponsePercent, prompt.AfterResponsePercent)
}

// inputText summarises a Cycle's assembled input.
func inputText(in *api.InputSummary) string {
	var parts []string
	for _, s := range in.GetSections() {
		parts = append(parts, fmt.Sprintf("%s %d", s.GetSection(), s.GetTokens()))
	}
	window := fmt.Sprint(in.GetWindowTokens())
	if !in.GetWindowKnown() {
		window = "unknown"
	}
	s := fmt.Sprintf("%d tok", in.GetEstimatedTokens())
	if len(parts) > 0 {
		s += " (" + strings.Join(parts, ", ") + ")"
	}
	s += fmt.Sprintf(" of ceiling %d (%s), window %s", in.GetCeilingTokens(), ceilingWhy(in.GetAfterFirstResponse()), window)
	if n := len(in.GetExcerpts()); n > 0 {
		s += fmt.Sprintf(" · %d excerpted", n)
	}
	if rs := in.GetRecalled(); len(rs) > 0 {
		from := map[string]bool{}
		var tasks []string
		for _, r := range rs {
			if !from[r.GetTaskId()] {
				from[r.GetTaskId()] = true
				tasks = append(tasks, shortID(r.GetTaskId()))
			}
		}
		s += fmt.Sprintf(" · %d recalled from %s", len(rs), strings.Join(tasks, ", "))
	}
	return s
}

func lower(s, prefix string) string { return strings.ToLower(strings.TrimPrefix(s, prefix)) }
