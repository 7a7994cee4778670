package actors

import (
	"slices"
	"testing"

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
