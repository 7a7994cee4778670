package console

import (
	"fmt"
	"strings"
	"time"

	"github.com/charmbracelet/lipgloss"
	"github.com/charmbracelet/x/ansi"

	"lemo/api"
	"lemo/client"
)

// styles are the console's looks, from one lipgloss renderer (the
// terminal's, or a plain one in tests).
type styles struct {
	header, selected, faint, bold, err, ok, warn lipgloss.Style
}

func newStyles(r *lipgloss.Renderer) styles {
	return styles{
		header:   r.NewStyle().Reverse(true).Bold(true),
		selected: r.NewStyle().Reverse(true),
		faint:    r.NewStyle().Faint(true),
		bold:     r.NewStyle().Bold(true),
		err:      r.NewStyle().Foreground(lipgloss.Color("9")),
		ok:       r.NewStyle().Foreground(lipgloss.Color("10")),
		warn:     r.NewStyle().Foreground(lipgloss.Color("11")).Bold(true),
	}
}

// Fixed lines: the header, the status line and the help line.
const chromeLines = 3

// View renders the screen. Between changes it returns the frame already
// rendered, so a frame tick with nothing new costs nothing.
func (m *Model) View() string {
	if !m.dirty && m.frame != "" {
		return m.frame
	}
	m.dirty = false
	m.renders++
	m.frame = m.render()
	return m.frame
}

func (m *Model) render() string {
	w, h := max(m.width, 20), max(m.height, chromeLines+4)
	body := h - chromeLines
	lines := make([]string, 0, h)
	lines = append(lines, m.st.header.Render(pad(m.headerText(), w)))
	var b []string
	switch {
	case m.help:
		b = m.helpLines()
	case m.pane == paneTask:
		b = m.taskLines(w, body)
	case m.pane == paneSessions:
		b = m.sessionsLines(w, body)
	default:
		b = m.treeLines(w, body)
	}
	for i := 0; i < body; i++ {
		if i < len(b) {
			lines = append(lines, fit(b[i], w))
		} else {
			lines = append(lines, "")
		}
	}
	lines = append(lines, fit(m.statusLine(), w), m.st.faint.Render(fit(m.helpLine(), w)))
	return strings.Join(lines, "\n")
}

// fit cuts a (possibly styled) line to w cells.
func fit(s string, w int) string {
	if ansi.StringWidth(s) <= w {
		return s
	}
	return ansi.Truncate(s, w, "…")
}

// pad fills a plain line to w cells (cut when longer).
func pad(s string, w int) string {
	s = fit(s, w)
	if n := ansi.StringWidth(s); n < w {
		s += strings.Repeat(" ", w-n)
	}
	return s
}

func (m *Model) headerText() string {
	who := m.welcome.GetOwner()
	if m.welcome.GetOperator() {
		who = "operator " + who
	}
	actors := "-"
	if m.tree != nil {
		actors = fmt.Sprint(len(m.tree.GetActors()))
	}
	return fmt.Sprintf(" lemo console │ %s │ %s │ %d tasks │ %s actors ", m.b.Addr(), who, len(m.taskIDs()), actors)
}

func (m *Model) statusLine() string {
	switch {
	case m.confirm != nil:
		return m.st.warn.Render(capFirst(m.confirm.prompt) + "? [y/N]")
	case m.filtering:
		return m.st.warn.Render("/" + m.filter + "▏ (Enter keeps it, Esc drops it)")
	case m.status != "" && m.isErr:
		return m.st.err.Render(m.status)
	case m.status != "":
		return m.st.ok.Render(m.status)
	case m.notice != "":
		return m.st.warn.Render("reconnecting: " + m.notice)
	case m.filter != "" && m.pane == paneTree:
		return m.st.ok.Render(fmt.Sprintf("filter %q: %d rows (/ changes it, Esc clears it)", m.filter, len(m.rows)))
	}
	return ""
}

func capFirst(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

func (m *Model) helpLine() string {
	switch m.pane {
	case paneTask:
		return "↑↓ esc [ ] l log i input p/c/x pause/cont/cancel a/A/d approve/always/deny ? q"
	case paneSessions:
		return "↑↓ move ⏎ open its task r refresh esc tree ? help q quit"
	}
	return "⏎ open l log p/c/x pause/cont/cancel a/A/d approve/always/deny S sessions ? q"
}

func (m *Model) helpLines() []string {
	return []string{
		m.st.bold.Render("Keys"),
		"  ↑/↓ k/j, PgUp/PgDn, g/G   move in the tree, scroll the transcript",
		"  Enter or Tab              open the selected Task (Esc or Tab: back to the tree)",
		"  e (→ ←)                   expand a Task's row to its recent events, live (▸), and collapse it (▾)",
		"  [ and ]                   the newer / older Task (in the Task pane)",
		"  /                         filter the tree (Enter keeps the filter, Esc clears it)",
		"  o                         sort the Tasks by the next column (STATE, FOR, MBOX, MSGS, RST);",
		"                            dormant Tasks show only STATE: sorted by it, else newest first",
		"  i                         show what each Cycle's model saw in detail",
		"  l                         the Task's event log, one event a line (l: back)",
		"  p  c  x                   pause, continue, cancel the Task",
		"  a  A  d                   approve, always allow (in this Task), deny",
		"  s                         stop a running tool call (the selected tool row)",
		"  S                         the delegate agent's sessions (r rereads, Enter opens its Task)",
		"  y                         confirm an action (any other key: do nothing)",
		"  q or Ctrl-C               quit (the daemon and its Tasks go on)",
		"",
		m.st.bold.Render("Tree columns"),
		"  STATE what the actor says it does (?N: N approvals pending)   FOR time in it",
		"  MBOX messages waiting   MSGS messages handled",
		"  RST restarts of the actor; /N: children its supervision stopped after they failed",
		"",
		"Press any key.",
	}
}

// Tree pane.

const (
	colState = 20
	colFor   = 6
	colMbox  = 5
	colMsgs  = 7
	colRst   = 5
)

// treeRows is how many rows of the tree fit (body less the column header
// and the detail line).
func (m *Model) treeRows() int { return max(m.height-chromeLines-2, 1) }

func (m *Model) treeLines(w, body int) []string {
	fixed := colState + colFor + colMbox + colMsgs + colRst + 6
	failW := 0
	if w >= 120 {
		failW = w / 4
		fixed += failW + 1
	}
	nameW := max(w-fixed, 12)
	cols := func(name, state, dur, mbox, msgs, rst, fail string) string {
		s := fmt.Sprintf(" %s %s %*s %*s %*s %*s", pad(name, nameW), pad(state, colState), colFor, dur, colMbox, mbox, colMsgs, msgs, colRst, rst)
		if failW > 0 {
			s += " " + fit(fail, failW)
		}
		return s
	}
	out := []string{m.st.faint.Render(cols("ACTOR", "STATE", "FOR", "MBOX", "MSGS", "RST", "LAST FAILURE"))}
	n := max(body-2, 1)
	if m.cursor < m.rowTop {
		m.rowTop = m.cursor
	}
	if m.cursor >= m.rowTop+n {
		m.rowTop = m.cursor - n + 1
	}
	m.rowTop = max(min(m.rowTop, len(m.rows)-n), 0)
	now := m.tree.GetTime().AsTime()
	for i := m.rowTop; i < len(m.rows) && i < m.rowTop+n; i++ {
		r := m.rows[i]
		var line string
		if r.kind == "event" {
			// A recent event of an expanded Task, the width of the pane.
			line = fit(" "+m.eventRowText(r), w)
			if i == m.cursor {
				line = m.st.selected.Render(pad("›"+line[1:], w))
			} else {
				line = m.st.faint.Render(line)
			}
			out = append(out, line)
			continue
		}
		label := m.expandMark(r) + r.label
		if a := r.actor; a != nil {
			since := a.GetStarted()
			if a.GetStateSince() != nil {
				since = a.GetStateSince()
			}
			state := a.GetState()
			if r.kind == "task" {
				if k := len(m.task(r.taskID).pending()); k > 0 {
					state = fmt.Sprintf("%s ?%d", state, k)
				}
			}
			line = cols(r.prefix+label, state, dur(now.Sub(since.AsTime())), fmt.Sprint(a.GetMailbox()), fmt.Sprint(a.GetProcessed()), rstCell(a), failureCell(a))
		} else {
			t := m.tasks[r.taskID]
			st := dormantStatus(t)
			if t != nil && t.meta != nil {
				if k := len(t.pending()); k > 0 {
					st = fmt.Sprintf("%s ?%d", st, k)
				}
			}
			line = cols(r.prefix+label, st, "", "", "", "", "")
		}
		switch {
		case i == m.cursor:
			line = m.st.selected.Render(pad("›"+line[1:], w))
		case r.actor == nil:
			line = m.st.faint.Render(line)
		case r.actor.GetLastFailure() != "" || r.actor.GetRestarts() > 0 || r.actor.GetStoppedChildren() > 0:
			line = m.st.err.Render(line)
		}
		out = append(out, line)
	}
	for len(out) < body-1 {
		out = append(out, "")
	}
	return append(out, m.detailLine())
}

// rstCell is the RST column: the actor's restarts, and "/N" when its
// supervision stopped N children that failed (a Task's crashed Cycles and
// Tool calls, the manager's Tasks that kept crashing).
func rstCell(a *api.ActorInfo) string {
	if n := a.GetStoppedChildren(); n > 0 {
		return fmt.Sprintf("%d/%d", a.GetRestarts(), n)
	}
	return fmt.Sprint(a.GetRestarts())
}

// failureCell is the LAST FAILURE column: the actor's own last failure,
// else its supervision's last decision about a child.
func failureCell(a *api.ActorInfo) string {
	if f := a.GetLastFailure(); f != "" {
		return f
	}
	return a.GetLastDecision()
}

// detailLine describes the selected row in full.
func (m *Model) detailLine() string {
	if m.treeErr != nil && m.tree == nil {
		return m.st.faint.Render("actor tree: " + m.treeErr.Error())
	}
	r := m.selectedRow()
	if r == nil {
		return m.st.faint.Render("no actors")
	}
	var parts []string
	if r.actor != nil && r.actor.GetLastFailure() != "" {
		parts = append(parts, "last failure: "+oneLine(r.actor.GetLastFailure()))
	}
	if r.actor != nil && r.actor.GetLastDecision() != "" {
		parts = append(parts, "supervision: "+oneLine(r.actor.GetLastDecision()))
	}
	if r.actor != nil && (r.kind != "task" || r.taskID == "") {
		parts = append(parts, r.actor.GetId())
	}
	if r.taskID != "" && r.callID == "" && r.kind == "task" {
		if t := m.tasks[r.taskID]; t != nil && t.meta != nil {
			mt := t.meta
			parts = append(parts, "task "+mt.GetTaskId(), mt.GetOwner(), mt.GetModel(), fmt.Sprintf("%d cycles", mt.GetCycles()))
			if b := mt.GetBudget(); api.HasBudget(b.GetLimits()) {
				parts = append(parts, "budget: "+client.SpendLine(b, m.budgetClock(mt)))
			}
			if d := mt.GetStatusDetail(); d != "" {
				parts = append(parts, d)
			}
		}
	}
	if m.treeErr != nil {
		parts = append(parts, "tree not refreshed: "+m.treeErr.Error())
	}
	return m.st.faint.Render(strings.Join(parts, " · "))
}

// dur formats a time in state compactly.
func dur(d time.Duration) string {
	switch {
	case d < 0:
		return "0s"
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm%02ds", int(d.Minutes()), int(d.Seconds())%60)
	case d < 24*time.Hour:
		return fmt.Sprintf("%dh%02dm", int(d.Hours()), int(d.Minutes())%60)
	}
	return fmt.Sprintf("%dd%02dh", int(d.Hours())/24, int(d.Hours())%24)
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// Task pane.

// Bounds of the Task pane's live and approval sections.
const (
	maxLiveLines     = 4
	maxApprovalLines = 3
)

func (m *Model) transcriptRows() int {
	t := m.tasks[m.open]
	if t == nil {
		return max(m.height-chromeLines-2, 1)
	}
	return max(m.height-chromeLines-2-len(m.liveLines(t, m.width))-len(m.approvalLines(t)), 1)
}

func (m *Model) taskLines(w, body int) []string {
	t := m.tasks[m.open]
	if t == nil || t.meta == nil {
		return []string{"no such task " + m.open}
	}
	mt := t.meta
	in, out := usage(t.events)
	head := []string{
		m.st.bold.Render(fmt.Sprintf("task %s · %s", mt.GetTaskId(), mt.GetTitle())),
		fmt.Sprintf("%s · %s · owner %s · %d cycles · tokens in %d out %d · seq %d", m.statusText(mt), mt.GetModel(), mt.GetOwner(), mt.GetCycles(), in, out, mt.GetLastSeq()),
	}
	if b := mt.GetBudget(); api.HasBudget(b.GetLimits()) {
		head = append(head, m.st.faint.Render(fit("budget: "+client.SpendLine(b, m.budgetClock(mt)), w)))
	}
	live, asks := m.liveLines(t, w), m.approvalLines(t)
	rows := max(body-len(head)-len(live)-len(asks), 1)
	lines := m.transcript(t, w)
	if m.eventLog {
		lines = m.logLines(t, w)
	}
	limit := max(len(lines)-rows, 0)
	if m.follow {
		m.scroll = limit
	}
	m.scroll = max(min(m.scroll, limit), 0)
	view := lines[m.scroll:min(m.scroll+rows, len(lines))]
	outLines := append(head, view...)
	for len(outLines) < len(head)+rows {
		outLines = append(outLines, "")
	}
	outLines = append(outLines, live...)
	return append(outLines, asks...)
}

func (m *Model) statusText(mt *api.TaskMeta) string {
	s := metaStatus(mt)
	switch mt.GetStatus() {
	case api.TaskStatus_TASK_STATUS_FAILED:
		return m.st.err.Render(s)
	case api.TaskStatus_TASK_STATUS_AWAITING_APPROVAL:
		return m.st.warn.Render(s)
	case api.TaskStatus_TASK_STATUS_RUNNING:
		return m.st.ok.Render(s)
	}
	return s
}

// budgetClock is the time a Task's working time is shown at: the daemon's
// time of the last actor tree read, else the Task's last event.
func (m *Model) budgetClock(mt *api.TaskMeta) time.Time {
	if t := m.tree.GetTime(); t != nil && t.AsTime().After(mt.GetUpdated().AsTime()) {
		return t.AsTime()
	}
	return mt.GetUpdated().AsTime()
}

// usage sums the tokens of the finished Cycles.
func usage(evs []*api.Event) (in, out uint64) {
	for _, ev := range evs {
		if u := ev.GetCycleFinished().GetUsage(); u != nil {
			in += u.GetPromptTokens()
			out += u.GetCompletionTokens()
		}
	}
	return in, out
}

// liveLines show what is in flight: the streaming text, running calls'
// state, the current Cycle's input.
func (m *Model) liveLines(t *taskState, w int) []string {
	if t.meta == nil || api.StatusEnded(t.meta.GetStatus()) {
		return nil
	}
	var out []string
	if in := t.inputs[t.cycle]; in != nil {
		out = append(out, m.st.faint.Render(fmt.Sprintf("⋯ cycle %d sees %s", t.cycle, inputText(in))))
	}
	if len(t.text) > 0 {
		text := oneLine(string(t.text))
		room := max(w-20, 10)
		if ansi.StringWidth(text) > room {
			text = "…" + ansi.TruncateLeft(text, ansi.StringWidth(text)-room, "")
		}
		out = append(out, fmt.Sprintf("⋯ cycle %d: %s", t.cycle, text))
	}
	for call, s := range sortedMap(t.toolState) {
		tool := t.calls[call]
		out = append(out, fmt.Sprintf("⋯ %s %s: %s", call, tool, oneLine(m.views.For(tool).State(tool, s))))
	}
	if len(out) > maxLiveLines {
		out = out[len(out)-maxLiveLines:]
	}
	return out
}

func (m *Model) approvalLines(t *taskState) []string {
	var out []string
	for i, a := range t.pending() {
		if i == maxApprovalLines-1 && len(t.pending()) > maxApprovalLines {
			out = append(out, m.st.warn.Render(fmt.Sprintf("? and %d more approvals", len(t.pending())-i)))
			break
		}
		out = append(out, m.st.warn.Render(fmt.Sprintf("? %s %s awaits approval: %s", orText(a.GetTool(), "call"), a.GetCallId(), oneLine(a.GetReason()))))
	}
	return out
}

// sortedMap iterates a map in key order.
func sortedMap[V any](mp map[string]V) func(func(string, V) bool) {
	return func(yield func(string, V) bool) {
		keys := make([]string, 0, len(mp))
		for k := range mp {
			keys = append(keys, k)
		}
		sortStrings(keys)
		for _, k := range keys {
			if !yield(k, mp[k]) {
				return
			}
		}
	}
}
