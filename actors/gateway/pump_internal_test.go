package gateway

import (
	"strings"
	"testing"

	"lemo/actors"
	"lemo/api"
)

// TreeEvents held while a subscription replayed are dropped when the
// TreeState sent at its end already covers them (their seq is at most
// their Task's newest in it); newer ones, and those of Tasks it does not
// name, go out.
func TestPumpDropsTreeEventsTheStateCovers(t *testing.T) {
	st := &pumpState{seen: map[string]uint64{}, belowSeen: map[string]uint64{"C": 5}}
	te := func(task string, seq uint64) actors.Update {
		return actors.Update{Tree: &api.TreeEvent{Path: []string{"R", task}, Event: &api.Event{TaskId: task, Seq: seq, Body: &api.Event_CycleStarted{CycleStarted: &api.CycleStarted{}}}}}
	}
	// An approval's resolution goes out even when the state covers its
	// seq: the state does not hold approvals.
	resolved := actors.Update{Tree: &api.TreeEvent{Path: []string{"R", "C"}, Event: &api.Event{TaskId: "C", Seq: 3, Body: &api.Event_ApprovalResolved{ApprovalResolved: &api.ApprovalResolved{}}}}}
	st.snapDone = true
	for _, u := range []actors.Update{te("C", 4), resolved, te("C", 5), te("C", 6), te("D", 1)} {
		st.receive(u, true)
	}
	var got []string
	for _, it := range st.out {
		ev := it.u.GetTreeEvent().GetEvent()
		got = append(got, ev.GetTaskId()+":"+string(rune('0'+ev.GetSeq())))
	}
	if want := "C:3 C:6 D:1"; strings.Join(got, " ") != want {
		t.Fatalf("sent %v, want %s", got, want)
	}
}
