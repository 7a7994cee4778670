package api

import (
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"
)

func TestFoldMeta(t *testing.T) {
	t1 := timestamppb.Now()
	evs := []*Event{
		NewEvent("T1", 1, t1, &TaskCreated{Owner: "alice", Model: "fake/a", Title: "t", Workspace: "/w"}),
		NewEvent("T1", 2, t1, &UserMessage{Text: "hi"}),
		NewEvent("T1", 3, t1, &StatusChanged{Status: TaskStatus_TASK_STATUS_RUNNING}),
		NewEvent("T1", 4, t1, &CycleStarted{Cycle: 1}),
		NewEvent("T1", 5, t1, &StatusChanged{Status: TaskStatus_TASK_STATUS_PAUSED, PauseReason: PauseReason_PAUSE_REASON_USER, Detail: "paused"}),
		NewEvent("T1", 6, t1, &StatusChanged{Status: TaskStatus_TASK_STATUS_RUNNING, Model: "fake/b"}),
		NewEvent("T1", 7, t1, &CycleStarted{Cycle: 2}),
	}
	var m *TaskMeta
	var prev *TaskMeta
	for _, e := range evs {
		prev = m
		before := proto.Clone(prev)
		m = FoldMeta(prev, e)
		if prev != nil && !proto.Equal(prev, before) {
			t.Fatalf("FoldMeta modified its input at seq %d", e.GetSeq())
		}
	}
	want := &TaskMeta{TaskId: "T1", Owner: "alice", Status: TaskStatus_TASK_STATUS_RUNNING, Model: "fake/b", Title: "t",
		Created: t1, Updated: t1, LastSeq: 7, Cycles: 2, Workspace: "/w", StatusDetail: "",
		// Running again since seq 6; no reservation was recorded.
		Budget: &BudgetSummary{Spent: &BudgetAmounts{}, RunningSince: t1}}
	if !proto.Equal(m, want) {
		t.Fatalf("FoldMeta = %v\nwant %v", m, want)
	}
	// FoldMetaInto over the rest of the events (as the store folds an
	// append into one copy) folds the same, and FoldMeta leaves its input
	// alone.
	mid := FoldMeta(nil, evs[0])
	for _, ev := range evs[1:3] {
		FoldMetaInto(mid, ev)
	}
	before := proto.Clone(mid)
	got := FoldMeta(mid, evs[3])
	for _, ev := range evs[4:] {
		FoldMetaInto(got, ev)
	}
	if !proto.Equal(got, want) {
		t.Fatalf("FoldMeta then FoldMetaInto = %v\nwant %v", got, want)
	}
	if !proto.Equal(mid, before) {
		t.Fatal("FoldMeta modified its input")
	}
}

func TestKindAndNewEvent(t *testing.T) {
	if k := Kind(NewEvent("T", 1, nil, &ToolResult{})); k != "tool_result" {
		t.Fatalf("Kind = %q", k)
	}
	if k := Kind(&Event{}); k != "" {
		t.Fatalf("Kind(empty) = %q", k)
	}
	defer func() {
		if recover() == nil {
			t.Fatal("NewEvent accepted a non-body message")
		}
	}()
	NewEvent("T", 1, nil, &TaskMeta{})
}

func TestStatusEnded(t *testing.T) {
	for st := range TaskStatus_name {
		s := TaskStatus(st)
		want := s == TaskStatus_TASK_STATUS_FINISHED || s == TaskStatus_TASK_STATUS_FAILED || s == TaskStatus_TASK_STATUS_CANCELLED
		if got := StatusEnded(s); got != want {
			t.Errorf("StatusEnded(%v) = %v, want %v", s, got, want)
		}
	}
}
