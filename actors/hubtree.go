package actors

import (
	"context"
	"fmt"
	"slices"

	"lemo/actors/taskstate"
	"lemo/api"
	"lemo/persistence"
)

// maxBelowTracked bounds the child Tasks whose progress the hub keeps (the
// running and paused ones, which hold places among the running children).
// The running-children limit (tasks.max_running_children) keeps their
// number far below it; the bound holds if that limit is set very
// high (the Tasks past it are then not told of at subscription).
const maxBelowTracked = 4096

// belowTask is the hub's record of a child Task that has not ended: what a
// new subscription to one of its ancestors is told of it (TreeState).
type belowTask struct {
	owner     string
	ancestors []string
	p         taskstate.Progress
}

// belowTracker folds the published events of child Tasks into their
// progress, for as long as they run.
type belowTracker struct {
	tasks map[string]*belowTask
}

// events folds one hubEvents batch.
func (b *belowTracker) events(m *hubEvents) {
	if len(m.ancestors) == 0 {
		return // a root: its subscriptions replay its own history
	}
	for _, ev := range m.events {
		if !taskstate.ForwardedUp(ev) {
			continue
		}
		id := ev.GetTaskId()
		t := b.tasks[id]
		if t == nil {
			if len(b.tasks) >= maxBelowTracked {
				continue
			}
			t = &belowTask{owner: m.owner, ancestors: m.ancestors}
		}
		if !t.p.Apply(ev) || t.p.Empty() {
			delete(b.tasks, id)
			continue
		}
		if b.tasks == nil {
			b.tasks = make(map[string]*belowTask)
		}
		b.tasks[id] = t
	}
}

// state is what a subscription to taskID by c is told of the Tasks below
// it that have not ended: the progress of at most taskstate.MaxProgressBelow of them
// (oldest first), the others counted.
func (b *belowTracker) state(c Caller, taskID string) *api.TreeState {
	type found struct {
		id   string
		path []string
		t    *belowTask
	}
	var all []found
	for id, t := range b.tasks {
		if c.CanSee(t.owner) && taskstate.IsBelow(taskID, t.ancestors) {
			all = append(all, found{id: id, path: append(slices.Clone(t.ancestors), id), t: t})
		}
	}
	// Task ids grow with time: a path's order is the tree's, older first.
	slices.SortFunc(all, func(a, b found) int { return slices.Compare(a.path, b.path) })
	st := &api.TreeState{}
	if len(all) > taskstate.MaxProgressBelow {
		st.Omitted = uint32(len(all) - taskstate.MaxProgressBelow)
		all = all[:taskstate.MaxProgressBelow]
	}
	for _, f := range all {
		for _, ev := range f.t.p.Events() {
			st.Events = append(st.Events, &api.TreeEvent{Path: f.path, Event: ev})
		}
	}
	return st
}

// hubBelow asks the hub for a TreeState.
type hubBelow struct {
	caller Caller
	taskID string
	reply  chan *api.TreeState
}

// ProgressBelow returns the progress of the Tasks below taskID that have
// not ended (its descendants the caller may see), as a subscription to it is told
// when it starts: TreeEvents from the root, the latest of each Task's
// events that make its progress, so that a client attaching mid-run shows
// what one attached from the start shows. Events published after it are
// newer than what it holds (an event already folded into it has a seq at
// most its Task's latest in it).
func (d *Daemon) ProgressBelow(ctx context.Context, c Caller, taskID string) (*api.TreeState, error) {
	if _, err := d.Task(ctx, c, taskID); err != nil {
		return nil, err
	}
	if err := d.usable(); err != nil {
		return nil, err
	}
	m := &hubBelow{caller: c, taskID: taskID, reply: make(chan *api.TreeState, 1)}
	d.env.system.Root.Send(d.env.hub, m)
	select {
	case st := <-m.reply:
		return st, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// progressTail is how many of a Task's last events progressBelow reads:
// its latest status, Cycle and open calls are among them but for a Cycle
// of very many calls (whose line then shows no Cycle until the next).
const progressTail = 256

// progressBelow returns, for each child Task among metas (the Tasks that
// had not ended when the daemon started), its progress as hub events
// labelled with its ancestors: what the hub would have folded had it seen
// them, so that a subscription to an ancestor is told of a child paused
// before this start as of one paused since. At most maxBelowTracked.
func progressBelow(st *persistence.Store, metas []*api.TaskMeta) ([]*hubEvents, error) {
	var out []*hubEvents
	ancestry := make(map[string][]string) // by parent: siblings share it
	for _, m := range metas {
		if m.GetParentId() == "" || len(out) == maxBelowTracked {
			continue
		}
		var p taskstate.Progress
		from := uint64(1)
		if last := m.GetLastSeq(); last > progressTail {
			from = last - progressTail + 1
		}
		err := st.Events(m.GetTaskId(), from, 0, func(ev *api.Event) error {
			if taskstate.ForwardedUp(ev) {
				p.Apply(ev)
			}
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("task %s: %w", m.GetTaskId(), err)
		}
		if p.Empty() {
			continue
		}
		anc, ok := ancestry[m.GetParentId()]
		if !ok {
			anc = readAncestry(st, m.GetParentId())
			ancestry[m.GetParentId()] = anc
		}
		out = append(out, &hubEvents{owner: m.GetOwner(), ancestors: anc, events: p.Events()})
	}
	return out, nil
}
