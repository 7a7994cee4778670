package persistence

import (
	"google.golang.org/protobuf/proto"

	"lemo/api"
)

// FoldMeta returns the metadata of a Task after ev, given its metadata
// before (nil before the first event). It is the one definition of how the
// log's events change the stored summary; it never modifies meta.
func FoldMeta(meta *api.TaskMeta, ev *api.Event) *api.TaskMeta {
	var m *api.TaskMeta
	if meta == nil {
		m = &api.TaskMeta{TaskId: ev.GetTaskId(), Status: api.TaskStatus_TASK_STATUS_CREATED, Created: ev.GetTime()}
	} else {
		m = proto.Clone(meta).(*api.TaskMeta)
	}
	m.LastSeq = ev.GetSeq()
	m.Updated = ev.GetTime()
	switch b := ev.Body.(type) {
	case *api.Event_TaskCreated:
		m.Owner = b.TaskCreated.GetOwner()
		m.Model = b.TaskCreated.GetModel()
		m.Title = b.TaskCreated.GetTitle()
		m.Workspace = b.TaskCreated.GetWorkspace()
		m.Created = ev.GetTime()
	case *api.Event_StatusChanged:
		sc := b.StatusChanged
		m.Status = sc.GetStatus()
		m.PauseReason = sc.GetPauseReason()
		m.StatusDetail = sc.GetDetail()
		if sc.GetModel() != "" {
			m.Model = sc.GetModel()
		}
	case *api.Event_CycleStarted:
		if c := b.CycleStarted.GetCycle(); c > m.Cycles {
			m.Cycles = c
		}
	}
	return m
}
