package api

// FoldMeta returns the metadata of a Task after ev, given its metadata
// before (nil before the first event). It is the one definition of how the
// log's events change the Task's summary: the store keeps its TaskMeta by
// it and clients rebuild theirs with it. It never modifies meta.
func FoldMeta(meta *TaskMeta, ev *Event) *TaskMeta {
	var m *TaskMeta
	if meta == nil {
		m = &TaskMeta{TaskId: ev.GetTaskId(), Status: TaskStatus_TASK_STATUS_CREATED, Created: ev.GetTime()}
	} else {
		m = foldCopy(meta)
	}
	FoldMetaInto(m, ev)
	return m
}

// foldCopy returns a copy of m that FoldMetaInto may change without
// changing m, made field by field (proto.Clone's reflection was most of
// what the store's writer spent folding an append). The sub-messages a fold
// replaces but never changes (timestamps, the open reservation, the price:
// the events' own) are shared, as they are with the events they came from.
func foldCopy(m *TaskMeta) *TaskMeta {
	return &TaskMeta{
		TaskId: m.TaskId, Owner: m.Owner, Status: m.Status, PauseReason: m.PauseReason, StatusDetail: m.StatusDetail,
		Model: m.Model, Title: m.Title, Created: m.Created, Updated: m.Updated, LastSeq: m.LastSeq, Cycles: m.Cycles,
		Workspace: m.Workspace, ParentId: m.ParentId, Depth: m.Depth, Budget: FoldCopyBudget(m.Budget), Children: m.Children,
	}
}

// FoldCopyBudget returns a copy of b that FoldBudget may change without
// changing b (nil for nil): the amounts it adds to are copied, the
// sub-messages it only replaces are shared.
func FoldCopyBudget(b *BudgetSummary) *BudgetSummary {
	if b == nil {
		return nil
	}
	return &BudgetSummary{
		Limits: copyAmounts(b.Limits), Spent: copyAmounts(b.Spent), Open: b.Open, OpenCycle: b.OpenCycle,
		EstimatedCharges: b.EstimatedCharges, RunningSince: b.RunningSince, Price: b.Price, OpenSince: b.OpenSince,
	}
}

func copyAmounts(a *BudgetAmounts) *BudgetAmounts {
	if a == nil {
		return nil
	}
	return &BudgetAmounts{Tokens: a.Tokens, CostNanoUsd: a.CostNanoUsd, TimeMs: a.TimeMs}
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
