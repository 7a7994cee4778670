package taskstate

import (
	"fmt"
	"slices"
	"testing"

	"google.golang.org/protobuf/proto"

	"lemo/api"
)

func progEv(seq uint64, body any) *api.Event {
	if st, ok := body.(api.TaskStatus); ok {
		body = &api.StatusChanged{Status: st}
	}
	return api.NewEvent("C", seq, nil, body.(proto.Message))
}

func TestProgress(t *testing.T) {
	running := api.TaskStatus_TASK_STATUS_RUNNING
	for _, tc := range []struct {
		name     string
		in       []*api.Event
		want     []uint64 // seqs of Events()
		live     bool
		lastSeq  uint64
		wantNone bool
	}{
		{"status, cycle and an open call", []*api.Event{
			progEv(1, running), progEv(2, &api.CycleStarted{Cycle: 1}), progEv(3, &api.ToolCallRecorded{CallId: "a"}),
		}, []uint64{1, 2, 3}, true, 3, false},
		{"an ended call is dropped", []*api.Event{
			progEv(1, running), progEv(2, &api.CycleStarted{Cycle: 1}), progEv(3, &api.ToolCallRecorded{CallId: "a"}),
			progEv(4, &api.ToolCallRecorded{CallId: "b"}), progEv(5, &api.ToolResult{CallId: "a"}), progEv(6, &api.ToolFailed{CallId: "b"}),
		}, []uint64{1, 2}, true, 6, false},
		{"the latest status and cycle only, in seq order", []*api.Event{
			progEv(1, running), progEv(2, &api.CycleStarted{Cycle: 1}), progEv(3, &api.ToolCallRecorded{CallId: "a"}),
			progEv(4, api.TaskStatus_TASK_STATUS_AWAITING_APPROVAL), progEv(5, running), progEv(6, &api.CycleStarted{Cycle: 2}),
		}, []uint64{3, 5, 6}, true, 6, false},
		{"other events change nothing", []*api.Event{
			progEv(1, running), progEv(2, &api.AssistantMessage{Text: "hi"}),
		}, []uint64{1}, true, 2, false},
		{"finished: forgotten", []*api.Event{
			progEv(1, running), progEv(2, &api.CycleStarted{Cycle: 1}), progEv(3, api.TaskStatus_TASK_STATUS_FINISHED),
		}, nil, false, 0, true},
		{"paused: its pause and Cycle kept, its calls ended", []*api.Event{
			progEv(1, running), progEv(2, &api.CycleStarted{Cycle: 1}), progEv(3, &api.ToolCallRecorded{CallId: "a"}),
			progEv(4, api.TaskStatus_TASK_STATUS_PAUSED),
		}, []uint64{2, 4}, true, 4, false},
		{"paused, then continued", []*api.Event{
			progEv(1, running), progEv(2, api.TaskStatus_TASK_STATUS_PAUSED), progEv(3, running),
		}, []uint64{3}, true, 3, false},
		{"paused, then cancelled: forgotten", []*api.Event{
			progEv(1, running), progEv(2, api.TaskStatus_TASK_STATUS_PAUSED), progEv(3, api.TaskStatus_TASK_STATUS_CANCELLED),
		}, nil, false, 0, true},
		{"cancelled: forgotten", []*api.Event{progEv(1, running), progEv(2, api.TaskStatus_TASK_STATUS_CANCELLED)}, nil, false, 0, true},
		{"failed: forgotten", []*api.Event{progEv(1, running), progEv(2, api.TaskStatus_TASK_STATUS_FAILED)}, nil, false, 0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var p Progress
			live := true
			for _, ev := range tc.in {
				live = p.Apply(ev)
			}
			var got []uint64
			for _, ev := range p.Events() {
				got = append(got, ev.GetSeq())
			}
			if live != tc.live || !slices.Equal(got, tc.want) || p.LastSeq() != tc.lastSeq || p.Empty() != tc.wantNone {
				t.Fatalf("live %v, events %v, last seq %d, empty %v; want %v, %v, %d, %v", live, got, p.LastSeq(), p.Empty(), tc.live, tc.want, tc.lastSeq, tc.wantNone)
			}
		})
	}
}

// A Task with many calls open keeps the newest MaxProgressCalls.
func TestProgressBoundsCalls(t *testing.T) {
	var p Progress
	for i := range 3 * MaxProgressCalls {
		p.Apply(progEv(uint64(i+1), &api.ToolCallRecorded{CallId: fmt.Sprint(i)}))
	}
	evs := p.Events()
	if len(evs) != MaxProgressCalls || evs[0].GetSeq() != uint64(2*MaxProgressCalls+1) {
		t.Fatalf("keeps %d calls from seq %d, want %d from %d", len(evs), evs[0].GetSeq(), MaxProgressCalls, 2*MaxProgressCalls+1)
	}
}

func TestIsProgress(t *testing.T) {
	for _, tc := range []struct {
		body any
		want bool
	}{
		{api.TaskStatus_TASK_STATUS_RUNNING, true},
		{&api.CycleStarted{}, true},
		{&api.ToolCallRecorded{}, true},
		{&api.ToolResult{}, true},
		{&api.ToolFailed{}, true},
		{&api.AssistantMessage{}, false},
	} {
		if got := IsProgress(progEv(1, tc.body)); got != tc.want {
			t.Errorf("IsProgress(%T) = %v, want %v", tc.body, got, tc.want)
		}
	}
	approval := &api.Event{Body: &api.Event_ApprovalResolved{ApprovalResolved: &api.ApprovalResolved{}}}
	if IsProgress(approval) {
		t.Error("an approval's resolution is progress")
	}
}
