package gateway

import (
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
		return actors.Update{Tree: &api.TreeEvent{Path: []string{"R", task}, Event: &api.Event{TaskId: task, Seq: seq}}}
	}
	st.snapDone = true
	for _, u := range []actors.Update{te("C", 4), te("C", 5), te("C", 6), te("D", 1)} {
		st.receive(u, true)
	}
	var got []string
	for _, it := range st.out {
		ev := it.u.GetTreeEvent().GetEvent()
		got = append(got, ev.GetTaskId()+":"+string(rune('0'+ev.GetSeq())))
	}
	if want := "C:6 D:1"; len(got) != 2 || got[0]+" "+got[1] != want {
		t.Fatalf("sent %v, want %s", got, want)
	}
}
