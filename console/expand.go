package console

import (
	"context"
	"fmt"
	"strings"

	tea "github.com/charmbracelet/bubbletea"

	"lemo/api"
)

// maxRecentEvents bounds the events an expanded Task row shows under it:
// its most recent ones.
const maxRecentEvents = 8

// recentMsg carries the tail of an expanded Task's history.
type recentMsg struct {
	taskID string
	events []*api.Event
	err    error
}

// Expansion directions of expandKey.
const (
	expandToggle = iota
	expandOpen
	expandClose
)

// expandKey expands the selected Task's row (its recent events show under
// it, kept current as they happen) or collapses it again: e toggles,
// → expands, ← collapses. On one of the event rows it acts on their Task.
func (m *Model) expandKey(how int) tea.Cmd {
	r := m.selectedRow()
	if r == nil || r.taskID == "" || m.tasks[r.taskID] == nil {
		if how == expandToggle {
			m.setStatus(true, "select a Task first")
		} else {
			m.dirty = false // (an arrow on another row does nothing)
		}
		return nil
	}
	id := r.taskID
	open := m.expanded[id]
	if (how == expandOpen && open) || (how == expandClose && !open) {
		return nil
	}
	t := m.task(id)
	if open {
		delete(m.expanded, id)
		t.recent, t.recentLoaded = nil, false
		if r.kind == "event" {
			m.selKey = m.taskRowKey(id) // the selection goes back to its Task
		}
		m.rebuild()
		return nil
	}
	if m.expanded == nil {
		m.expanded = map[string]bool{}
	}
	m.expanded[id] = true
	m.rebuild()
	return m.loadRecent(id)
}

// taskRowKey is the key of Task id's row ("" when it has none).
func (m *Model) taskRowKey(id string) string {
	for _, r := range m.rows {
		if r.taskID == id && r.kind == "task" && r.callID == "" {
			return r.key
		}
	}
	return ""
}

// loadRecent reads the tail of an expanded Task's history.
func (m *Model) loadRecent(id string) tea.Cmd {
	from := uint64(1)
	if last := m.task(id).meta.GetLastSeq(); last > maxRecentEvents {
		from = last - maxRecentEvents + 1
	}
	ctx, b, timeout := m.ctx, m.b, m.o.ActionTimeout
	return func() tea.Msg {
		ctx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		evs, err := b.ReadHistory(ctx, id, from)
		return recentMsg{taskID: id, events: evs, err: err}
	}
}

func (m *Model) onRecent(msg recentMsg) {
	if !m.expanded[msg.taskID] {
		return // collapsed meanwhile
	}
	m.dirty = true
	t := m.task(msg.taskID)
	if msg.err != nil {
		delete(m.expanded, msg.taskID)
		m.setStatus(true, "read the recent events of %s: %v", shortID(msg.taskID), msg.err)
		m.rebuild()
		return
	}
	t.addRecent(msg.events...)
	t.recentLoaded = true
	m.rebuild()
}

// addRecent keeps evs among the Task's recent events: in seq order, each
// once, the newest maxRecentEvents.
func (t *taskState) addRecent(evs ...*api.Event) {
	for _, ev := range evs {
		if c := ev.GetToolCallRecorded(); c != nil {
			t.calls[c.GetCallId()] = toolName(c) // (what its results name)
		}
		i := len(t.recent)
		for i > 0 && t.recent[i-1].GetSeq() >= ev.GetSeq() {
			i--
		}
		if i < len(t.recent) && t.recent[i].GetSeq() == ev.GetSeq() {
			continue
		}
		t.recent = append(t.recent, nil)
		copy(t.recent[i+1:], t.recent[i:])
		t.recent[i] = ev
	}
	if n := len(t.recent); n > maxRecentEvents {
		t.recent = append(t.recent[:0], t.recent[n-maxRecentEvents:]...)
	}
}

// withRecent puts the recent events of each expanded Task under its row.
func withRecent(rows []row, expanded map[string]bool, tasks map[string]*taskState) []row {
	if len(expanded) == 0 {
		return rows
	}
	out := make([]row, 0, len(rows))
	for _, r := range rows {
		out = append(out, r)
		if r.kind != "task" || r.callID != "" || !expanded[r.taskID] {
			continue
		}
		t := tasks[r.taskID]
		lead := childLead(r.prefix) + "· "
		if t == nil || (!t.recentLoaded && len(t.recent) == 0) {
			out = append(out, row{key: "events/" + r.taskID + "/reading", prefix: lead, kind: "event", taskID: r.taskID})
			continue
		}
		for _, ev := range t.recent {
			out = append(out, row{key: fmt.Sprintf("events/%s/%d", r.taskID, ev.GetSeq()), prefix: lead, kind: "event", taskID: r.taskID, event: ev})
		}
	}
	return out
}

// childLead is the tree drawing before the rows under a row drawn after
// prefix.
func childLead(prefix string) string {
	switch {
	case strings.HasSuffix(prefix, "├ "):
		return strings.TrimSuffix(prefix, "├ ") + "│ "
	case strings.HasSuffix(prefix, "└ "):
		return strings.TrimSuffix(prefix, "└ ") + "  "
	}
	return prefix
}

// eventRowText is an event row's text: seq, kind and what it records.
func (m *Model) eventRowText(r row) string {
	if r.event == nil {
		return r.prefix + "reading its recent events…"
	}
	ev := r.event
	return fmt.Sprintf("%s%d %s %s", r.prefix, ev.GetSeq(), api.Kind(ev), eventSummary(m.task(r.taskID), ev))
}

// expandMark is drawn before a Task row's label: ▾ when expanded, ▸ on
// a child Task's row that can be.
func (m *Model) expandMark(r row) string {
	switch {
	case r.kind != "task" || r.callID != "" || r.taskID == "":
		return ""
	case m.expanded[r.taskID]:
		return "▾ "
	case m.tasks[r.taskID].parentID() != "":
		return "▸ "
	}
	return ""
}
