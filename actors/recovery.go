package actors

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"google.golang.org/protobuf/proto"

	"lemo/actors/taskstate"
	"lemo/api"
	"lemo/persistence"
)

// loadState folds a Task's whole history. A Task with no events is
// ErrNotFound.
func loadState(st *persistence.Store, taskID string) (*taskstate.State, error) {
	s := taskstate.New()
	err := st.Events(taskID, 1, 0, func(ev *api.Event) error {
		s.Apply(ev)
		return nil
	})
	if err != nil {
		return nil, err
	}
	if !s.Exists() {
		return nil, fmt.Errorf("%w: task %s", ErrNotFound, taskID)
	}
	return s, nil
}

// loadActivation reads what a Task's actor starts from: its folded state
// and, for a Task that exists, its metadata. A Task not created yet gets a
// fresh state and no metadata.
func loadActivation(st *persistence.Store, taskID string) (*taskstate.State, *api.TaskMeta, error) {
	s, err := loadState(st, taskID)
	if errors.Is(err, ErrNotFound) {
		s = taskstate.New()
		s.TaskID = taskID
		return s, nil, nil
	}
	if err != nil {
		return nil, nil, err
	}
	meta, err := st.Meta(taskID)
	if err != nil {
		return nil, nil, fmt.Errorf("read the metadata of task %s: %w", taskID, err)
	}
	return s, meta, nil
}

// readAncestry returns the ids from the root of a tree down to parent
// (nil when parent is ""), read from the Tasks' metadata; it stops at an
// unreadable Task or after taskstate.MaxAncestry of them, so a damaged
// link shortens the path rather than failing the Task.
func readAncestry(st *persistence.Store, parent string) []string {
	var rev []string
	for cur := parent; cur != "" && len(rev) < taskstate.MaxAncestry; {
		rev = append(rev, cur)
		m, err := st.Meta(cur)
		if err != nil {
			break
		}
		cur = m.GetParentId()
	}
	slices.Reverse(rev)
	return rev
}

// appendBodies stamps bodies after s's last seq and appends them, then
// applies them to s. They are recovery records (pausing a Task, recording
// its failure): they may use the store's reserve when the disk is full.
func appendBodies(ctx context.Context, st *persistence.Store, s *taskstate.State, bodies []proto.Message, now time.Time) ([]*api.Event, error) {
	if len(bodies) == 0 {
		return nil, nil
	}
	evs := s.Stamp(bodies, now)
	a := persistence.Append{TaskID: s.TaskID, Events: evs, Reserve: true}
	if e := s.EndEntry(evs); e != nil {
		// A child that ends here (recorded failed) tells its parent in
		// the same commit.
		kv, err := persistence.InboxPut(s.ParentID, e)
		if err != nil {
			return nil, err
		}
		a.Extra = []persistence.KV{kv}
	}
	if _, err := st.Append(ctx, a); err != nil {
		return nil, err
	}
	for _, ev := range evs {
		s.Apply(ev)
	}
	return evs, nil
}

// recoverStore runs before the daemon accepts work: every Task found running
// or awaiting approval is recovered (open Cycle and calls closed, running
// paused as interrupted), and so is every Task (a paused one too) with an
// approval whose deadline passed while the daemon was down: it is recorded
// as timed out. notes[task][call] is added to the outcome-unknown record of
// that call (see stoppedNotes). It returns how many Tasks it changed.
func recoverStore(ctx context.Context, st *persistence.Store, now time.Time, notes map[string]map[string]string, rerun func(tool string) bool, charge func(*taskstate.State, []proto.Message) []proto.Message) (int, error) {
	var ids []string
	seen := make(map[string]bool)
	for _, status := range []api.TaskStatus{api.TaskStatus_TASK_STATUS_RUNNING, api.TaskStatus_TASK_STATUS_AWAITING_APPROVAL} {
		metas, err := st.TasksWithStatus(status)
		if err != nil {
			return 0, err
		}
		for _, m := range metas {
			if !seen[m.GetTaskId()] {
				seen[m.GetTaskId()] = true
				ids = append(ids, m.GetTaskId())
			}
		}
	}
	pending, err := st.PendingApprovals("")
	if err != nil {
		return 0, err
	}
	for _, ev := range pending {
		a := ev.GetApprovalRequested()
		if a.GetDeadline() != nil && !now.Before(a.GetDeadline().AsTime()) && !seen[ev.GetTaskId()] {
			seen[ev.GetTaskId()] = true
			ids = append(ids, ev.GetTaskId())
		}
	}
	n := 0
	for _, id := range ids {
		s, err := loadState(st, id)
		if err != nil {
			return n, fmt.Errorf("task %s: %w", id, err)
		}
		s.Rerun(rerun)
		bodies := charge(s, s.RecoverNoting(now, notes[id]))
		if len(bodies) == 0 {
			continue
		}
		if _, err := appendBodies(ctx, st, s, bodies, now); err != nil {
			return n, fmt.Errorf("task %s: %w", id, err)
		}
		n++
	}
	return n, nil
}

// stoppedNotes says, per Task and call, which processes of the call were
// stopped at the daemon's start: "processes still running at the restart
// were stopped: pid 12 (sh), pid 13 (sleep)".
func stoppedNotes(ps []StoppedProcess) map[string]map[string]string {
	notes := make(map[string]map[string]string)
	for _, p := range ps {
		if p.TaskID == "" || p.CallID == "" {
			continue
		}
		if notes[p.TaskID] == nil {
			notes[p.TaskID] = make(map[string]string)
		}
		n := notes[p.TaskID][p.CallID]
		if n == "" {
			n = "processes still running at the restart were stopped:"
		} else {
			n += ","
		}
		notes[p.TaskID][p.CallID] = n + fmt.Sprintf(" pid %d (%s)", p.Pid, p.Command)
	}
	return notes
}

// markFailed records that a Task was stopped after crashing too often: what
// it left open is closed, f (its crash, decision "stop") is recorded and it
// is failed; a child's parent gets the news in its inbox in the same
// commit. It returns the Task's owner and parent and the events it
// appended.
func markFailed(st *persistence.Store, taskID string, f *api.Failure, now time.Time) (owner, parent string, evs []*api.Event, err error) {
	s, err := loadState(st, taskID)
	if errors.Is(err, ErrNotFound) {
		return "", "", nil, nil
	}
	if err != nil {
		return "", "", nil, err
	}
	var bodies []proto.Message
	for _, b := range s.Recover(now) {
		if sc, ok := b.(*api.StatusChanged); ok && sc.GetStatus() == api.TaskStatus_TASK_STATUS_PAUSED {
			continue
		}
		bodies = append(bodies, b)
	}
	bodies = append(bodies, f,
		&api.StatusChanged{Status: api.TaskStatus_TASK_STATUS_FAILED, Detail: "stopped after repeated crashes: " + f.GetMessage()})
	evs, err = appendBodies(context.Background(), st, s, bodies, now)
	if err != nil {
		return "", "", nil, err
	}
	return s.Owner, s.ParentID, evs, nil
}
