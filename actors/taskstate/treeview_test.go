package taskstate

import (
	"slices"
	"testing"

	"lemo/api"
)

func TestForward(t *testing.T) {
	approval := &api.Event{TaskId: "C", Body: &api.Event_ApprovalRequested{ApprovalRequested: &api.ApprovalRequested{ApprovalId: "C.call-1"}}}
	resolved := &api.Event{TaskId: "C", Body: &api.Event_ApprovalResolved{ApprovalResolved: &api.ApprovalResolved{ApprovalId: "C.call-1"}}}
	cycle := &api.Event{TaskId: "C", Body: &api.Event_CycleStarted{CycleStarted: &api.CycleStarted{Cycle: 2}}}
	status := &api.Event{TaskId: "C", Body: &api.Event_StatusChanged{StatusChanged: &api.StatusChanged{}}}
	text := &api.Event{TaskId: "C", Body: &api.Event_AssistantMessage{AssistantMessage: &api.AssistantMessage{Text: "hi"}}}
	user := &api.Event{TaskId: "C", Body: &api.Event_UserMessage{UserMessage: &api.UserMessage{Text: "hi"}}}
	for _, tc := range []struct {
		name       string
		subscribed string
		ancestors  []string
		ev         *api.Event
		want       []string
	}{
		{"the root gets its child's approval", "R", []string{"R"}, approval, []string{"R", "C"}},
		{"the root gets its grandchild's, labelled from the root", "R", []string{"R", "P"}, approval, []string{"R", "P", "C"}},
		{"a middle node gets it, labelled from the root", "P", []string{"R", "P"}, approval, []string{"R", "P", "C"}},
		{"the resolution too", "R", []string{"R"}, resolved, []string{"R", "C"}},
		{"progress: a Cycle", "R", []string{"R"}, cycle, []string{"R", "C"}},
		{"progress: a status", "R", []string{"R"}, status, []string{"R", "C"}},
		{"not the text", "R", []string{"R"}, text, nil},
		{"not a user message", "R", []string{"R"}, user, nil},
		{"not a sibling's subscription", "S", []string{"R"}, approval, nil},
		{"not a root's own event (no ancestors)", "R", nil, approval, nil},
		{"not to every-Task subscriptions (they get the event)", "", []string{"R"}, approval, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Forward(tc.subscribed, tc.ancestors, tc.ev); !slices.Equal(got, tc.want) {
				t.Fatalf("Forward(%q, %v) = %v, want %v", tc.subscribed, tc.ancestors, got, tc.want)
			}
		})
	}
}

// Forward's path is its own: changing it leaves the Task's ancestors as
// they were (the hub hands the same slice to every subscription).
func TestForwardCopiesAncestors(t *testing.T) {
	anc := make([]string, 1, 4)
	anc[0] = "R"
	ev := &api.Event{TaskId: "C", Body: &api.Event_CycleStarted{CycleStarted: &api.CycleStarted{}}}
	a := Forward("R", anc, ev)
	b := Forward("R", anc, &api.Event{TaskId: "D", Body: ev.Body})
	if a[1] != "C" || b[1] != "D" {
		t.Fatalf("paths share storage: %v %v", a, b)
	}
}
