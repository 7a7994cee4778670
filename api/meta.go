package api

import (
	"google.golang.org/protobuf/proto"
)

// FoldMeta returns the metadata of a Task after ev, given its metadata
// before (nil before the first event). It is the one definition of how the
// log's events change the Task's summary: the store keeps its TaskMeta by
// it and clients rebuild theirs with it. It never modifies meta.
func FoldMeta(meta *TaskMeta, ev *Event) *TaskMeta {
	var m *TaskMeta
	if meta == nil {
		m = &TaskMeta{TaskId: ev.GetTaskId(), Status: TaskStatus_TASK_STATUS_CREATED, Created: ev.GetTime()}
	} else {
		m = proto.Clone(meta).(*TaskMeta)
	}
	FoldMetaInto(m, ev)
	return m
}

// FoldMetaInto applies ev to m in place (m must be a copy its caller
// owns, as FoldMeta returns): the store folds an append's events into one
// copy, looking at the metadata between events (the owners' daily
// records).
func FoldMetaInto(m *TaskMeta, ev *Event) {
	if m.Budget == nil {
		m.Budget = &BudgetSummary{}
	}
	FoldBudget(m.Budget, ev)
	m.LastSeq = ev.GetSeq()
	m.Updated = ev.GetTime()
	switch b := ev.Body.(type) {
	case *Event_TaskCreated:
		m.Owner = b.TaskCreated.GetOwner()
		m.Model = b.TaskCreated.GetModel()
		m.Title = b.TaskCreated.GetTitle()
		m.Workspace = b.TaskCreated.GetWorkspace()
		m.ParentId = b.TaskCreated.GetParentId()
		m.Depth = b.TaskCreated.GetDepth()
		m.Created = ev.GetTime()
	case *Event_StatusChanged:
		sc := b.StatusChanged
		m.Status = sc.GetStatus()
		m.PauseReason = sc.GetPauseReason()
		m.StatusDetail = sc.GetDetail()
		if sc.GetModel() != "" {
			m.Model = sc.GetModel()
		}
	case *Event_CycleStarted:
		if c := b.CycleStarted.GetCycle(); c > m.Cycles {
			m.Cycles = c
		}
	case *Event_ChildSpawned:
		m.Children++
	}
}
