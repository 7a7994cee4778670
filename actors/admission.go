package actors

import (
	"fmt"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"lemo/actors/taskstate"
	"lemo/api"
	"lemo/persistence"
)

// The admission of child Tasks (taskstate.Admission): the manager owns it
// and carries out its decisions. It is derived from the recorded statuses
// at the daemon's start (loadAdmission, after recovery), so the children
// queued before a restart keep their order and the limit holds after it.

// childStart asks the manager for a place for a spawned child (created,
// never started): it starts now or is queued; reply learns which (nil: no
// one asks).
type childStart struct {
	id, parent string
	created    time.Time
	reply      func(queued bool)
}

// childEnded tells the manager that a child Task ended: its place frees.
type childEnded struct{ id string }

// childRunning tells the manager that a child Task that had ended runs
// again (reopened by a message, a person's message or continue): it holds
// a place until it ends again. It does not queue: it was started before,
// and what reopened it expects it to run.
type childRunning struct{ id string }

// cmdQueued tells a child that it waits for a place: it records so.
type cmdQueued struct{ holding, limit int }

// loadAdmission derives the admission of child Tasks from the store: the
// children that started and have not ended hold places, the ones never
// started wait (for their parent's continue, then for a place). It also
// returns the metadata it read: every Task that has not ended.
func loadAdmission(st *persistence.Store, limit int) (*taskstate.Admission, []*api.TaskMeta, error) {
	var metas []*api.TaskMeta
	for _, s := range []api.TaskStatus{api.TaskStatus_TASK_STATUS_CREATED, api.TaskStatus_TASK_STATUS_RUNNING,
		api.TaskStatus_TASK_STATUS_AWAITING_APPROVAL, api.TaskStatus_TASK_STATUS_PAUSED} {
		ms, err := st.TasksWithStatus(s)
		if err != nil {
			return nil, nil, fmt.Errorf("read the tasks %s: %w", taskstate.StatusName(s), err)
		}
		metas = append(metas, ms...)
	}
	return taskstate.NewAdmission(limit, metas), metas, nil
}

// onChildStart starts a child or queues it; a queued one records it.
func (m *manager) onChildStart(ctx actor.Context, s *childStart) {
	start, queued := m.admission.Ask(taskstate.Waiting{ID: s.id, Parent: s.parent, Created: s.created})
	m.startChildren(ctx, start)
	if queued {
		m.routeUnder(ctx, &taskCommand{taskID: s.id, caller: Operator, cmd: &cmdQueued{holding: m.admission.Holding(), limit: m.admission.Limit}}, s.parent)
	}
	if s.reply != nil {
		s.reply(queued)
	}
}

// startChildren starts the children the admission let in.
func (m *manager) startChildren(ctx actor.Context, ws []taskstate.Waiting) {
	for _, w := range ws {
		m.routeUnder(ctx, &taskCommand{taskID: w.ID, caller: Operator, cmd: &cmdStart{}}, w.Parent)
	}
}

// askPlace asks the manager for a place for this Task, a child never
// started (continued with its parent).
func (t *task) askPlace(ctx actor.Context) {
	if !t.st.Queued() {
		return
	}
	ctx.Send(t.env.tasks, &childStart{id: t.id, parent: t.st.ParentID, created: t.meta.GetCreated().AsTime()})
}
