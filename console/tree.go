package console

import (
	"sort"
	"strings"

	"lemo/api"
)

// row is one line of the tree pane: a live actor, or a dormant Task (one
// with no actor now: it costs storage, not memory).
type row struct {
	// key identifies the row across refreshes: the actor's path, or
	// "dormant/<task id>".
	key    string
	prefix string // tree drawing before the label
	label  string
	kind   string
	actor  *api.ActorInfo // nil for a dormant Task
	taskID string         // the Task the row belongs to ("" for daemon, hub, tasks)
	callID string         // a tool row's call
	tool   string         // a tool row's tool, from its state
	// event is, on a row under an expanded Task (kind "event"), one of its
	// recent events (nil while they are read).
	event *api.Event
}

// Well-known actor paths (actors package doc).
const (
	tasksPath  = "daemon/tasks"
	tasksDepth = 2 // segments of tasksPath
)

// rowPath splits an actor path into the Task and call it belongs to:
// daemon/tasks/<task>/tool-<call>/session-<name>, where a running child
// Task's actor sits under its parent's: daemon/tasks/<root>/<child>/cycle-1
// belongs to <child>.
func rowPath(id string) (taskID, callID string) {
	parts := strings.Split(id, "/")
	if len(parts) <= tasksDepth || strings.Join(parts[:tasksDepth], "/") != tasksPath {
		return "", ""
	}
	for _, p := range parts[tasksDepth:] {
		if strings.HasPrefix(p, "cycle-") || strings.HasPrefix(p, "session-") {
			break
		}
		if c, ok := strings.CutPrefix(p, "tool-"); ok {
			callID = c
			break
		}
		taskID = p
	}
	return taskID, callID
}

// buildRows lays out the tree: the live actors as the daemon reported
// them (parents first), with the dormant Tasks under the task manager
// after the live ones, newest first. Without a tree (a token that may not
// inspect) the rows are the Tasks alone.
//
// order, when given, is a column's sort (sortOrder): of the live Tasks
// by their actors, and of the dormant ones by their status when the
// column is STATE (the one column a dormant row fills).
func buildRows(tree *api.ActorTree, tasks map[string]*taskState, order ...rowOrder) []row {
	type node struct {
		row
		children []*node
	}
	less := func(a, b *api.ActorInfo) bool { return false }
	lessDormant := func(a, b *taskState) bool { return false }
	if len(order) > 0 {
		if order[0].live != nil {
			less = order[0].live
		}
		if order[0].dormant != nil {
			lessDormant = order[0].dormant
		}
	}
	byID := map[string]*node{}
	var roots []*node
	live := map[string]bool{}
	for _, a := range tree.GetActors() {
		n := &node{row: row{key: a.GetId(), kind: a.GetKind(), actor: a}}
		n.taskID, n.callID = rowPath(a.GetId())
		n.label = a.GetId()[strings.LastIndex(a.GetId(), "/")+1:]
		if a.GetKind() == "tool" {
			n.tool, _ = strings.CutPrefix(a.GetState(), "running ")
		}
		if a.GetKind() == "task" && n.taskID != "" {
			live[n.taskID] = true
			n.label = taskLabel(n.taskID, tasks[n.taskID])
		}
		byID[a.GetId()] = n
		if i := strings.LastIndex(a.GetId(), "/"); i > 0 && byID[a.GetId()[:i]] != nil {
			p := byID[a.GetId()[:i]]
			p.children = append(p.children, n)
		} else {
			roots = append(roots, n)
		}
	}
	if p := byID[tasksPath]; p != nil {
		// Newest Task first, as everywhere else, unless sorted by a
		// column (sortTasks).
		sort.SliceStable(p.children, func(i, j int) bool { return p.children[i].taskID > p.children[j].taskID })
		sort.SliceStable(p.children, func(i, j int) bool { return less(p.children[i].actor, p.children[j].actor) })
	}
	var dormant []string
	for id := range tasks {
		if !live[id] {
			dormant = append(dormant, id)
		}
	}
	sort.Sort(sort.Reverse(sort.StringSlice(dormant)))
	sort.SliceStable(dormant, func(i, j int) bool { return lessDormant(tasks[dormant[i]], tasks[dormant[j]]) })
	parent := byID[tasksPath]
	for _, id := range dormant {
		n := &node{row: row{key: "dormant/" + id, kind: "task", taskID: id, label: taskLabel(id, tasks[id])}}
		if parent != nil {
			parent.children = append(parent.children, n)
		} else {
			roots = append(roots, n)
		}
	}
	// A child Task (spawned by another) sits under its parent's row, live
	// or dormant, when the parent is shown: the tree of Tasks, with each
	// running child's actors under it.
	taskNodes := map[string]*node{}
	for _, n := range byID {
		if n.kind == "task" && n.taskID != "" && n.callID == "" {
			taskNodes[n.taskID] = n
		}
	}
	if parent != nil {
		for _, n := range parent.children {
			taskNodes[n.taskID] = n
		}
		kept := parent.children[:0:0]
		var moved []*node
		for _, n := range parent.children {
			if p := taskNodes[tasks[n.taskID].parentID()]; p != nil && p != n && !descends(tasks, p.taskID, n.taskID) {
				moved = append(moved, n)
				continue
			}
			kept = append(kept, n)
		}
		parent.children = kept
		// Children oldest first under their parent, in spawn order.
		sort.SliceStable(moved, func(i, j int) bool { return moved[i].taskID < moved[j].taskID })
		for _, n := range moved {
			p := taskNodes[tasks[n.taskID].parentID()]
			p.children = append(p.children, n)
		}
	}
	// Under a Task: its own actors (Cycles, tools), then its children,
	// running (their actors are its actor's) or not, in spawn order.
	for _, n := range taskNodes {
		sort.SliceStable(n.children, func(i, j int) bool {
			a, b := n.children[i], n.children[j]
			ka, kb := a.kind == "task" && a.callID == "", b.kind == "task" && b.callID == ""
			if ka != kb {
				return !ka
			}
			return ka && a.taskID < b.taskID
		})
	}
	var out []row
	var walk func(n *node, lead string, last, root bool)
	walk = func(n *node, lead string, last, root bool) {
		r := n.row
		next := lead
		switch {
		case root:
		case last:
			r.prefix, next = lead+"└ ", lead+"  "
		default:
			r.prefix, next = lead+"├ ", lead+"│ "
		}
		out = append(out, r)
		for i, c := range n.children {
			walk(c, next, i == len(n.children)-1, false)
		}
	}
	for _, r := range roots {
		walk(r, "", true, true)
	}
	return out
}

// parentID is the Task's parent ("" for a root or an unknown Task).
func (t *taskState) parentID() string {
	if t == nil {
		return ""
	}
	return t.meta.GetParentId()
}

// descends reports whether Task id has anc among its ancestors (a bounded
// walk: records that loop are not trusted).
func descends(tasks map[string]*taskState, id, anc string) bool {
	for i := 0; i < 64 && id != ""; i++ {
		if id == anc {
			return true
		}
		id = tasks[id].parentID()
	}
	return false
}

// taskLabel names a Task in the tree: the end of its id (ids are
// time-ordered, so their starts look alike) and its title.
func taskLabel(id string, t *taskState) string {
	s := shortID(id)
	if t != nil && t.meta.GetTitle() != "" {
		s += " " + t.meta.GetTitle()
	}
	return s
}

// shortID is the distinctive end of a Task id.
func shortID(id string) string {
	if len(id) <= 8 {
		return id
	}
	return "…" + id[len(id)-6:]
}

// filterRows keeps the rows whose label, Task id, kind or tool contains f
// (ignoring case), and the rows above them in the tree so that each stays
// in place; "" keeps every row.
func filterRows(rows []row, f string) []row {
	f = strings.ToLower(strings.TrimSpace(f))
	if f == "" {
		return rows
	}
	hit := make([]bool, len(rows))
	for i, r := range rows {
		hit[i] = strings.Contains(strings.ToLower(r.label+" "+r.taskID+" "+r.kind+" "+r.tool), f)
	}
	var kept []row
	for i, r := range rows {
		match := hit[i]
		if !match {
			// An ancestor of a later match stays.
			for j := i + 1; j < len(rows); j++ {
				if hit[j] && strings.HasPrefix(rows[j].key, r.key+"/") {
					match = true
					break
				}
			}
		}
		if match {
			kept = append(kept, r)
		}
	}
	return kept
}

// sortColumns are the tree's columns the Tasks can be sorted by (o cycles
// through them; "" is the default, newest first).
var sortColumns = []string{"", "STATE", "FOR", "MBOX", "MSGS", "RST"}

// rowOrder orders the Tasks' rows: live ones by their actors, dormant ones
// by their state; nil keeps them newest first.
type rowOrder struct {
	live    func(a, b *api.ActorInfo) bool
	dormant func(a, b *taskState) bool
}

// sortOrder returns the order of a column: largest (longest in state)
// first, states by name. Dormant Tasks show only STATE: they are sorted by
// it, and stay newest first (after the live ones) for the other columns.
func sortOrder(column string) rowOrder {
	return rowOrder{live: liveOrder(column), dormant: dormantOrder(column)}
}

func dormantOrder(column string) func(a, b *taskState) bool {
	if column != "STATE" {
		return nil
	}
	return func(a, b *taskState) bool { return dormantStatus(a) < dormantStatus(b) }
}

// dormantStatus is a dormant Task's STATE: its recorded status, or
// "dormant" before its metadata is known.
func dormantStatus(t *taskState) string {
	if t == nil || t.meta == nil {
		return "dormant"
	}
	return metaStatus(t.meta)
}

func liveOrder(column string) func(a, b *api.ActorInfo) bool {
	switch column {
	case "STATE":
		return func(a, b *api.ActorInfo) bool { return a.GetState() < b.GetState() }
	case "FOR":
		return func(a, b *api.ActorInfo) bool {
			return a.GetStateSince().AsTime().Before(b.GetStateSince().AsTime())
		}
	case "MBOX":
		return func(a, b *api.ActorInfo) bool { return a.GetMailbox() > b.GetMailbox() }
	case "MSGS":
		return func(a, b *api.ActorInfo) bool { return a.GetProcessed() > b.GetProcessed() }
	case "RST":
		return func(a, b *api.ActorInfo) bool {
			return a.GetRestarts()+a.GetStoppedChildren() > b.GetRestarts()+b.GetStoppedChildren()
		}
	}
	return nil
}
