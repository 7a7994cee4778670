package actors

import (
	"fmt"
	"slices"
	"testing"

	"lemo/actors/taskstate"
	"lemo/api"
)

// A subscription gets its own Task's events as events, a descendant's
// approvals and progress as TreeEvents labelled from the root, and nothing
// of a Task whose owner its caller may not see.
func TestSubscriberUpdate(t *testing.T) {
	ask := &api.Event{TaskId: "C", Seq: 4, Body: &api.Event_ApprovalRequested{ApprovalRequested: &api.ApprovalRequested{ApprovalId: "C.call-1"}}}
	text := &api.Event{TaskId: "C", Seq: 5, Body: &api.Event_AssistantMessage{AssistantMessage: &api.AssistantMessage{Text: "x"}}}
	alice, bob := Caller{Owner: "alice"}, Caller{Owner: "bob"}
	for _, tc := range []struct {
		name      string
		sub       *subscriber
		ev        *api.Event
		owner     string
		ancestors []string
		wantEvent bool
		wantPath  []string
	}{
		{"own Task: the event", &subscriber{taskID: "C", caller: alice}, ask, "alice", []string{"R"}, true, nil},
		{"every Task: the event", &subscriber{caller: alice}, ask, "alice", []string{"R"}, true, nil},
		{"ancestor: a TreeEvent", &subscriber{taskID: "R", caller: alice}, ask, "alice", []string{"R"}, false, []string{"R", "C"}},
		{"ancestor's operator: a TreeEvent", &subscriber{taskID: "R", caller: Operator}, ask, "alice", []string{"R"}, false, []string{"R", "C"}},
		{"another owner following the same id: nothing", &subscriber{taskID: "R", caller: bob}, ask, "alice", []string{"R"}, false, nil},
		{"ancestor, text: nothing", &subscriber{taskID: "R", caller: alice}, text, "alice", []string{"R"}, false, nil},
		{"unrelated Task: nothing", &subscriber{taskID: "X", caller: alice}, ask, "alice", []string{"R"}, false, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			u, ok := tc.sub.update(tc.ev, tc.owner, tc.ancestors)
			if got := u.Event != nil; got != tc.wantEvent {
				t.Fatalf("event delivered = %v, want %v", got, tc.wantEvent)
			}
			if got := u.Tree.GetPath(); !slices.Equal(got, tc.wantPath) {
				t.Fatalf("tree path = %v, want %v", got, tc.wantPath)
			}
			if ok != (tc.wantEvent || tc.wantPath != nil) {
				t.Fatalf("ok = %v with %+v", ok, u)
			}
		})
	}
}

// The hub keeps the progress of running child Tasks only, tells a
// subscription of those below its Task that its caller may see, at most
// taskstate.MaxProgressBelow of them (oldest first, the rest counted).
func TestBelowTrackerState(t *testing.T) {
	ev := func(task string, seq uint64, st api.TaskStatus) *api.Event {
		return &api.Event{TaskId: task, Seq: seq, Body: &api.Event_StatusChanged{StatusChanged: &api.StatusChanged{Status: st}}}
	}
	running := api.TaskStatus_TASK_STATUS_RUNNING
	var b belowTracker
	n := taskstate.MaxProgressBelow + 3
	for i := range n {
		b.events(&hubEvents{owner: "alice", ancestors: []string{"R"}, events: []*api.Event{ev(fmt.Sprintf("C%03d", i), 2, running)}})
	}
	b.events(&hubEvents{owner: "alice", ancestors: []string{"R", "C000"}, events: []*api.Event{ev("G", 2, running)}})
	b.events(&hubEvents{owner: "alice", ancestors: []string{"R"}, events: []*api.Event{ev("E", 2, running), ev("E", 3, api.TaskStatus_TASK_STATUS_FINISHED)}})
	b.events(&hubEvents{owner: "alice", events: []*api.Event{ev("R", 2, running)}})
	b.events(&hubEvents{owner: "bob", ancestors: []string{"S"}, events: []*api.Event{ev("D", 2, running)}})
	if got, want := len(b.tasks), n+2; got != want {
		t.Fatalf("tracks %d Tasks, want %d (no root, no ended one)", got, want)
	}
	st := b.state(Caller{Owner: "alice"}, "R")
	if len(st.GetEvents()) != taskstate.MaxProgressBelow || st.GetOmitted() != uint32(n+1-taskstate.MaxProgressBelow) {
		t.Fatalf("told %d, omitted %d; want %d and %d", len(st.GetEvents()), st.GetOmitted(), taskstate.MaxProgressBelow, n+1-taskstate.MaxProgressBelow)
	}
	if got := st.GetEvents()[1].GetPath(); !slices.Equal(got, []string{"R", "C000", "G"}) {
		t.Fatalf("second told %v, want the grandchild under the first child", got)
	}
	if st := b.state(Caller{Owner: "alice"}, "C000"); len(st.GetEvents()) != 1 || st.GetEvents()[0].GetEvent().GetTaskId() != "G" {
		t.Fatalf("below C000: %v", st)
	}
	if st := b.state(Caller{Owner: "bob"}, "R"); len(st.GetEvents()) != 0 {
		t.Fatalf("bob is told of alice's tree: %v", st)
	}
	if st := b.state(Operator, "S"); len(st.GetEvents()) != 1 {
		t.Fatalf("the operator below S: %v", st)
	}
}

// A subscriber's queue hands updates over in order, drops the subscriber as
// behind when max wait, grows only with what waits (not to max up front),
// keeps its array within twice max while the reader lags behind, and keeps
// no reference to an update taken.
func TestSubscriberQueue(t *testing.T) {
	ev := func(seq uint64) Update { return Update{Event: &api.Event{TaskId: "T", Seq: seq}} }
	s := newSubscriber("T", Caller{Owner: "alice"}, 4)
	if cap(s.queue) != 0 {
		t.Fatalf("a new subscriber's queue has room for %d updates, want none until one waits", cap(s.queue))
	}
	if _, ok := s.take(); ok {
		t.Fatal("took an update from an empty queue")
	}
	next := uint64(1)
	taken := uint64(1)
	// The reader takes one update for every two offered, then catches up:
	// what waits never reaches max, the array never grows past 2 × max.
	for round := 0; round < 50; round++ {
		for range 2 {
			if !s.offer(ev(next)) {
				t.Fatalf("offer %d refused with %d waiting", next, len(s.queue)-s.head)
			}
			next++
		}
		if round%2 == 1 {
			for {
				u, ok := s.take()
				if !ok {
					break
				}
				if got := u.Event.GetSeq(); got != taken {
					t.Fatalf("took seq %d, want %d", got, taken)
				}
				taken++
			}
			continue
		}
		u, _ := s.take()
		if got := u.Event.GetSeq(); got != taken {
			t.Fatalf("took seq %d, want %d", got, taken)
		}
		taken++
		if cap(s.queue) > 2*s.max {
			t.Fatalf("queue array of %d for a max of %d", cap(s.queue), s.max)
		}
		for i := 0; i < s.head; i++ {
			if s.queue[i].Event != nil {
				t.Fatalf("slot %d keeps a taken update", i)
			}
		}
	}
	select {
	case <-s.ended:
		t.Fatal("a subscriber that kept up was dropped")
	default:
	}
	for i := range s.max {
		if !s.offer(ev(next + uint64(i))) {
			t.Fatalf("offer %d of %d refused", i+1, s.max)
		}
	}
	if s.offer(ev(next + uint64(s.max))) {
		t.Fatal("an update beyond max was queued")
	}
	select {
	case <-s.ended:
		if !s.behind {
			t.Fatal("dropped, but not as behind")
		}
	default:
		t.Fatal("a full queue did not drop the subscriber")
	}
}
