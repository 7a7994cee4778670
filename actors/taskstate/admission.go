package taskstate

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"google.golang.org/protobuf/proto"

	"lemo/api"
)

// Admission of child Tasks: at most a limit of them run at once
// daemon-wide (tasks.max_running_children); the others wait, first
// created first started. The state is derived from the Tasks' recorded
// statuses, so a restart rebuilds it from the store:
//   - a child that was created and never started (status created) is
//     queued: it waits for a place, and its history says so (Queue);
//   - a child that started and has not ended (running, awaiting approval
//     or paused) holds a place until it ends: a pause, an interruption
//     and a restart keep it;
//   - a child that ended frees its place, and the oldest queued child
//     that asked for one takes it.
// A child asks for a place when it is spawned, and again when a continue
// of its parent reaches it: after a restart the queued children keep
// their order but wait for that continue, as every interrupted Task does.

// QueuedDetail is the detail of the status a queued child records.
const QueuedDetail = "queued: it starts when one of the child tasks running daemon-wide ends (tasks.max_running_children)"

// HoldsPlace reports whether a child Task in status st holds one of the
// places among the running children.
func HoldsPlace(st api.TaskStatus) bool {
	switch st {
	case api.TaskStatus_TASK_STATUS_RUNNING, api.TaskStatus_TASK_STATUS_AWAITING_APPROVAL, api.TaskStatus_TASK_STATUS_PAUSED:
		return true
	}
	return false
}

// IsQueued reports whether a Task is a child waiting for a place (created,
// never started).
func IsQueued(m *api.TaskMeta) bool {
	return m.GetParentId() != "" && m.GetStatus() == api.TaskStatus_TASK_STATUS_CREATED
}

// StatusWord is a Task's status as people read it: "queued" for a child
// that waits for a place, else the status's name.
func StatusWord(m *api.TaskMeta) string {
	if IsQueued(m) {
		return "queued"
	}
	return StatusName(m.GetStatus())
}

// StatusWord is the Task's status as people read it (see StatusWord).
func (s *State) StatusWord() string {
	if s.Queued() {
		return "queued"
	}
	return StatusName(s.Status)
}

// Queued reports whether this Task is a child waiting for a place.
func (s *State) Queued() bool {
	return s.Exists() && s.ParentID != "" && s.Status == api.TaskStatus_TASK_STATUS_CREATED
}

// Queue returns what a child that must wait for a place records: its
// status with QueuedDetail, once (nil when it is not waiting or already
// said so). running and limit say why.
func (s *State) Queue(running, limit int) []proto.Message {
	if !s.Queued() || strings.HasPrefix(s.Detail, "queued") {
		return nil
	}
	return []proto.Message{&api.StatusChanged{Status: api.TaskStatus_TASK_STATUS_CREATED,
		Detail: fmt.Sprintf("%s; %d of %d places were taken", QueuedDetail, running, limit)}}
}

// Waiting is a child Task that waits for a place.
type Waiting struct {
	ID, Parent string
	Created    time.Time
	// asked: it asked for a place since the daemon started.
	asked bool
}

// Admission decides which child Tasks run: at most Limit hold a place;
// the others wait in creation order (ids break ties: spawns recorded in
// one commit share their time).
type Admission struct {
	Limit   int
	holding map[string]bool
	queue   []Waiting
}

// NewAdmission derives the admission from the children's recorded
// statuses (the metadata of the Tasks; roots are left out).
func NewAdmission(limit int, metas []*api.TaskMeta) *Admission {
	a := &Admission{Limit: limit, holding: make(map[string]bool)}
	for _, m := range metas {
		switch {
		case m.GetParentId() == "":
		case IsQueued(m):
			a.insert(Waiting{ID: m.GetTaskId(), Parent: m.GetParentId(), Created: m.GetCreated().AsTime()})
		case HoldsPlace(m.GetStatus()):
			a.holding[m.GetTaskId()] = true
		}
	}
	return a
}

// Ask asks a place for a child that has not started: it starts now (the
// result holds it, with older children that asked) or waits (queued). A
// child asks only while it has not started, so one that holds a place
// already lost the command that started it (its parent's actor restarted
// as it was sent): it is started again, in the place it holds. One
// waiting is not queued twice.
func (a *Admission) Ask(w Waiting) (start []Waiting, queued bool) {
	if a.holding[w.ID] {
		return []Waiting{w}, false
	}
	found := false
	for i := range a.queue {
		if a.queue[i].ID == w.ID {
			a.queue[i].asked, found = true, true
		}
	}
	if !found {
		w.asked = true
		a.insert(w)
	}
	start = a.next()
	for _, s := range start {
		if s.ID == w.ID {
			return start, false
		}
	}
	return start, true
}

// Ended frees the place of a child that ended (or takes one that ended
// while it waited out of the queue) and returns the children that start
// in its place.
func (a *Admission) Ended(id string) []Waiting {
	delete(a.holding, id)
	for i, q := range a.queue {
		if q.ID == id {
			a.queue = append(a.queue[:i], a.queue[i+1:]...)
			break
		}
	}
	return a.next()
}

// Reopened takes a place for a child that had ended and runs again (a
// message or a continue reopened it): it was started before, so it does
// not queue, even beyond the limit; a later child waits until enough of
// them end.
func (a *Admission) Reopened(id string) {
	a.holding[id] = true
}

// Holding is the number of places taken.
func (a *Admission) Holding() int { return len(a.holding) }

// Queue returns the children that wait, in creation order.
func (a *Admission) Queue() []Waiting { return append([]Waiting(nil), a.queue...) }

func (a *Admission) insert(w Waiting) {
	i := sort.Search(len(a.queue), func(i int) bool {
		q := a.queue[i]
		if !q.Created.Equal(w.Created) {
			return q.Created.After(w.Created)
		}
		return q.ID > w.ID
	})
	a.queue = append(a.queue, Waiting{})
	copy(a.queue[i+1:], a.queue[i:])
	a.queue[i] = w
}

// next starts the oldest children that asked while places are free.
func (a *Admission) next() []Waiting {
	var out []Waiting
	kept := a.queue[:0]
	for _, w := range a.queue {
		if w.asked && (a.Limit <= 0 || len(a.holding) < a.Limit) {
			a.holding[w.ID] = true
			out = append(out, w)
			continue
		}
		kept = append(kept, w)
	}
	clear(a.queue[len(kept):])
	a.queue = kept
	return out
}
