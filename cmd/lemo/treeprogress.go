package main

import (
	"fmt"
	"strings"

	"lemo/actors/taskstate"
	"lemo/api"
)

// maxChildLines bounds how many descendants a follower tracks at once;
// beyond it a descendant's progress is counted, not shown (ended ones are
// forgotten, so the bound is on descendants running at the same time).
const maxChildLines = taskstate.MaxProgressBelow

// childState is what a follower knows of one running descendant.
type childState struct {
	status api.TaskStatus
	cycles uint32
	tool   string
	shown  string // the line last printed
}

// treeProgress folds the TreeEvents of a followed Task's descendants into
// one status line per descendant (status, Cycles, current tool), printed
// under the spawning call whenever it changes.
type treeProgress struct {
	kids map[string]*childState
	// untracked are the running descendants left out past maxChildLines
	// (until they end); told is whether that was said.
	untracked map[string]bool
	told      bool
}

// state takes in what a (re)subscription tells of the Tasks below that
// have not ended (api.TreeState): it replaces what the follower knew of
// them (a Task not in it has ended), and returns the line of each whose line is not
// the one last printed for it, then how many were left out.
func (p *treeProgress) state(ts *api.TreeState) []string {
	before := p.kids
	p.kids, p.untracked, p.told = make(map[string]*childState), make(map[string]bool), false
	var order []string
	paths := make(map[string][]string)
	for _, te := range ts.GetEvents() {
		id := te.GetEvent().GetTaskId()
		if p.kids[id] == nil && len(p.kids) < maxChildLines {
			order = append(order, id)
			paths[id] = te.GetPath()
		}
		if p.kids[id] == nil && len(p.kids) >= maxChildLines {
			p.untracked[id] = true
			continue
		}
		p.fold(te)
	}
	var lines []string
	for _, id := range order {
		k := p.kids[id]
		if k == nil {
			continue // (not running: it said so)
		}
		if old := before[id]; old != nil {
			k.shown = old.shown
		}
		if line := childLine(paths[id], k); line != k.shown {
			k.shown = line
			lines = append(lines, line)
		}
	}
	if n := int(ts.GetOmitted()) + len(p.untracked); n > 0 {
		p.told = true
		lines = append(lines, fmt.Sprintf("  ↳ %d more tasks run below: their progress is not shown (lemo tasks --tree lists them)", n))
	}
	return lines
}

// fold applies te to its descendant's state (tracked, or made so) and
// reports whether the line may have changed.
func (p *treeProgress) fold(te *api.TreeEvent) (*childState, bool) {
	ev := te.GetEvent()
	k := p.kids[ev.GetTaskId()]
	if k == nil {
		k = &childState{status: api.TaskStatus_TASK_STATUS_RUNNING}
		p.kids[ev.GetTaskId()] = k
	}
	switch b := ev.GetBody().(type) {
	case *api.Event_CycleStarted:
		k.cycles = max(k.cycles, b.CycleStarted.GetCycle())
		k.tool = ""
	case *api.Event_ToolCallRecorded:
		k.tool = firstNonEmpty(b.ToolCallRecorded.GetTool(), b.ToolCallRecorded.GetModelName())
	case *api.Event_ToolResult, *api.Event_ToolFailed, *api.Event_CycleFinished:
		k.tool = ""
		return k, false // the next call or status says more
	case *api.Event_StatusChanged:
		k.status = b.StatusChanged.GetStatus()
		k.tool = ""
	default:
		return k, false
	}
	return k, true
}

// event returns the lines to print for te (none when nothing shown
// changed).
func (p *treeProgress) event(te *api.TreeEvent) []string {
	ev := te.GetEvent()
	id := ev.GetTaskId()
	if p.kids == nil {
		p.kids, p.untracked = make(map[string]*childState), make(map[string]bool)
	}
	k := p.kids[id]
	if k == nil {
		if p.untracked[id] {
			if api.StatusEnded(ev.GetStatusChanged().GetStatus()) {
				delete(p.untracked, id) // ended: nothing left to remember
			}
			return nil
		}
		if len(p.kids) >= maxChildLines {
			p.untracked[id] = true
			if !p.told {
				p.told = true
				return []string{fmt.Sprintf("  ↳ more than %d tasks below run at once: the progress of the others is not shown (lemo tasks --tree lists them)", maxChildLines)}
			}
			return nil
		}
	}
	k, changed := p.fold(te)
	if !changed {
		return nil
	}
	line := childLine(te.GetPath(), k)
	if api.StatusEnded(k.status) {
		delete(p.kids, id)
	}
	if line == k.shown {
		return nil
	}
	k.shown = line
	return []string{line}
}

// childLine is a descendant's status line, indented by its depth below
// the root: "  ↳ root/child: running · cycle 2 · shell.run".
func childLine(path []string, k *childState) string {
	var b strings.Builder
	b.WriteString(strings.Repeat("  ", max(len(path)-1, 1)))
	b.WriteString("↳ ")
	b.WriteString(strings.Join(path, "/"))
	b.WriteString(": ")
	b.WriteString(taskstate.StatusName(k.status))
	if k.cycles > 0 {
		fmt.Fprintf(&b, " · cycle %d", k.cycles)
	}
	if k.tool != "" {
		b.WriteString(" · " + k.tool)
	}
	return b.String()
}
