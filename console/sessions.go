package console

import (
	"context"
	"fmt"
	"strings"
	"time"

	tea "github.com/charmbracelet/bubbletea"

	"lemo/api"
)

// The sessions pane lists the delegate agent's sessions (S): for an
// operator every session, those in the agent's own folders too, with the
// file each is stored in; for another token the sessions its Tasks
// created. It is read when the pane opens, again every Options.Refresh
// while it is open, and on r; Enter opens the selected session's Task.

// sessionsState is what the sessions pane shows.
type sessionsState struct {
	list    *api.DelegateSessionList
	err     error
	loading bool
	readAt  time.Time // the frame time of the last read begun
	cursor  int
	top     int
}

// sessionsMsg carries a listing.
type sessionsMsg struct {
	list *api.DelegateSessionList
	err  error
}

func (m *Model) openSessions() tea.Cmd {
	if m.pane != paneSessions {
		m.status = ""
	}
	m.pane = paneSessions
	return m.loadSessions()
}

func (m *Model) loadSessions() tea.Cmd {
	if m.sessions.loading {
		return nil
	}
	m.sessions.loading, m.sessions.readAt = true, m.frameAt
	ctx, b, timeout := m.ctx, m.b, m.o.ActionTimeout
	return func() tea.Msg {
		ctx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		l, err := b.DelegateSessions(ctx, "")
		return sessionsMsg{list: l, err: err}
	}
}

func (m *Model) onSessions(msg sessionsMsg) {
	m.dirty = true
	s := &m.sessions
	s.loading = false
	if msg.err != nil {
		s.err = msg.err
		return
	}
	// Keep the selection on the same session when it is still listed.
	sel := ""
	if r := m.selectedSession(); r != nil {
		sel = r.GetSessionId()
	}
	s.list, s.err = msg.list, nil
	s.cursor = 0
	for i, x := range s.list.GetSessions() {
		if x.GetSessionId() == sel {
			s.cursor = i
		}
	}
}

func (m *Model) selectedSession() *api.DelegateSession {
	l := m.sessions.list.GetSessions()
	if m.sessions.cursor < len(l) {
		return l[m.sessions.cursor]
	}
	return nil
}

func (m *Model) sessionsKey(k string) tea.Cmd {
	if k == "r" {
		return m.loadSessions()
	}
	s := &m.sessions
	c, ok := moveCursor(s.cursor, len(s.list.GetSessions()), max(m.treeRows()-1, 1), k)
	if !ok {
		m.dirty = false
		return nil
	}
	s.cursor = c
	return nil
}

// openSessionTask opens the Task that created the selected session.
func (m *Model) openSessionTask() tea.Cmd {
	x := m.selectedSession()
	switch {
	case x == nil:
		m.setStatus(true, "no session selected")
		return nil
	case x.GetTaskId() == "":
		m.setStatus(true, "session %s was not started by a Task", x.GetSessionId())
		return nil
	case m.tasks[x.GetTaskId()] == nil || m.tasks[x.GetTaskId()].meta == nil:
		m.setStatus(true, "task %s is not listed here", x.GetTaskId())
		return nil
	}
	return m.openTask(x.GetTaskId())
}

// Column widths of the sessions pane.
const (
	colSession  = 13
	colKind     = 4
	colSource   = 6
	colTask     = 8
	colModified = 17
)

func (m *Model) sessionsLines(w, body int) []string {
	s := &m.sessions
	promptW := max(w-(colSession+colKind+colSource+colTask+colModified+6), 10)
	cols := func(id, kind, source, task, modified, prompt string) string {
		return fmt.Sprintf(" %s %s %s %s %s %s", pad(id, colSession), pad(kind, colKind), pad(source, colSource), pad(task, colTask), pad(modified, colModified), fit(prompt, promptW))
	}
	out := []string{m.st.faint.Render(cols("SESSION", "KIND", "SOURCE", "TASK", "MODIFIED (UTC)", "FIRST PROMPT"))}
	list := s.list.GetSessions()
	n := max(body-2, 1)
	switch {
	case s.list == nil && s.err == nil:
		out = append(out, m.st.faint.Render(" reading the delegate sessions…"))
	case s.list != nil && len(list) == 0:
		out = append(out, m.st.faint.Render(" no delegate sessions"))
	}
	if s.cursor < s.top {
		s.top = s.cursor
	}
	if s.cursor >= s.top+n {
		s.top = s.cursor - n + 1
	}
	s.top = max(min(s.top, len(list)-n), 0)
	for i := s.top; i < len(list) && i < s.top+n; i++ {
		x := list[i]
		task := "-"
		if x.GetTaskId() != "" {
			task = shortID(x.GetTaskId())
		}
		modified := "-"
		if x.GetModified() != nil {
			modified = x.GetModified().AsTime().UTC().Format("2006-01-02 15:04")
		}
		line := cols(shortSession(x.GetSessionId()), x.GetKind(), x.GetSource(), task, modified, oneLine(x.GetFirstPrompt()))
		if i == s.cursor {
			line = m.st.selected.Render(pad("›"+line[1:], w))
		}
		out = append(out, line)
	}
	for len(out) < body-1 {
		out = append(out, "")
	}
	return append(out, m.sessionDetail())
}

// sessionDetail describes the selected session in full (its file, to
// operators), or why the list is not there.
func (m *Model) sessionDetail() string {
	s := &m.sessions
	var parts []string
	if x := m.selectedSession(); x != nil {
		parts = append(parts, "session "+x.GetSessionId())
		if x.GetTaskId() != "" {
			parts = append(parts, "task "+x.GetTaskId(), x.GetOwner())
		}
		if x.GetCwd() != "" {
			parts = append(parts, "in "+x.GetCwd())
		}
		parts = append(parts, fmt.Sprintf("%d bytes", x.GetBytes()))
		if x.GetPath() != "" {
			parts = append(parts, x.GetPath())
		}
	}
	parts = append(parts, s.list.GetWarnings()...)
	if s.err != nil {
		parts = append(parts, "not read: "+s.err.Error())
	}
	return m.st.faint.Render(oneLine(strings.Join(parts, " · ")))
}

// shortSession shows the start of a session id (the agents use UUIDs).
func shortSession(id string) string {
	if len(id) <= colSession {
		return id
	}
	return id[:colSession-1] + "…"
}
