package taskstate

import (
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"lemo/api"
)

// A message to a finished Task reopens it (it runs a Cycle to read the
// message, recorded as reopened by its sender); to a running, created or
// paused one it is read in due course; a cancelled or failed Task is not
// reopened, and the sender is told it will not read it.
func TestMessageDelivery(t *testing.T) {
	for _, tc := range []struct {
		status       api.TaskStatus
		reopens      bool
		read         bool
		note         string
		statusAfter  api.TaskStatus
		needCycle    bool
		reopenedFrom string
	}{
		{api.TaskStatus_TASK_STATUS_FINISHED, true, true, "reopens it", api.TaskStatus_TASK_STATUS_RUNNING, true, "S"},
		{api.TaskStatus_TASK_STATUS_RUNNING, false, true, "next model call", api.TaskStatus_TASK_STATUS_RUNNING, true, ""},
		{api.TaskStatus_TASK_STATUS_AWAITING_APPROVAL, false, true, "next model call", api.TaskStatus_TASK_STATUS_AWAITING_APPROVAL, true, ""},
		{api.TaskStatus_TASK_STATUS_CREATED, false, true, "first model call", api.TaskStatus_TASK_STATUS_CREATED, true, ""},
		{api.TaskStatus_TASK_STATUS_PAUSED, false, true, "once continued", api.TaskStatus_TASK_STATUS_PAUSED, true, ""},
		{api.TaskStatus_TASK_STATUS_CANCELLED, false, false, "will not read", api.TaskStatus_TASK_STATUS_CANCELLED, true, ""},
		{api.TaskStatus_TASK_STATUS_FAILED, false, false, "will not read", api.TaskStatus_TASK_STATUS_FAILED, true, ""},
	} {
		t.Run(StatusName(tc.status), func(t *testing.T) {
			d := MessageDelivery(tc.status)
			if d.Reopens != tc.reopens || d.Read != tc.read || !strings.Contains(d.Note, tc.note) {
				t.Fatalf("MessageDelivery = %+v, want reopens %v, read %v, a note with %q", d, tc.reopens, tc.read, tc.note)
			}
			s := childOf(t, "C", "P", 1, nil)
			apply(s, []proto.Message{&api.StatusChanged{Status: tc.status}})
			before := s.CyclesSinceInput
			bodies := s.Take([]*api.InboxEntry{{From: "S", FromSeq: 7, Text: "one more thing"}, {From: "T", FromSeq: 2, Text: "and this"}})
			want := []string{"MessageReceived", "MessageReceived"}
			if tc.reopens {
				want = append(want, "StatusChanged")
			}
			if got := kindsOf(bodies); !eq(got, want) {
				t.Fatalf("Take = %v, want %v", got, want)
			}
			apply(s, bodies)
			if s.Status != tc.statusAfter || s.NeedCycle != tc.needCycle {
				t.Fatalf("after Take: status %v, need a Cycle %v; want %v, %v", s.Status, s.NeedCycle, tc.statusAfter, tc.needCycle)
			}
			if tc.reopenedFrom != "" {
				sc := bodies[len(bodies)-1].(*api.StatusChanged)
				if sc.GetReopenedBy() != tc.reopenedFrom || sc.GetDetail() != "reopened by message from "+tc.reopenedFrom {
					t.Fatalf("reopening = %v, want by %s", sc, tc.reopenedFrom)
				}
				// Not a person's input: the Cycles without one go on
				// counting (Tasks messaging each other stop at the limit).
				if s.CyclesSinceInput != before {
					t.Fatalf("CyclesSinceInput = %d after the reopening, want %d", s.CyclesSinceInput, before)
				}
				if st := s.Next(NextOptions{}); st.Kind != StepStartCycle {
					t.Fatalf("next step after the reopening = %v, want a Cycle", st.Kind)
				}
			}
		})
	}
}

// A running Task whose last Cycle did not see a message (it came during
// the Cycle) runs one more instead of finishing.
func TestMessageDuringTheLastCycle(t *testing.T) {
	s := childOf(t, "C", "P", 1, nil)
	apply(s, []proto.Message{&api.StatusChanged{Status: api.TaskStatus_TASK_STATUS_RUNNING}, &api.CycleStarted{Cycle: 1}})
	apply(s, s.Take([]*api.InboxEntry{{From: "P", FromSeq: 3, Text: "also this"}}))
	apply(s, []proto.Message{&api.AssistantMessage{Cycle: 1, Text: "done"}, &api.CycleFinished{Cycle: 1, Outcome: api.CycleOutcome_CYCLE_OUTCOME_COMPLETED}})
	if st := s.Next(NextOptions{}); st.Kind != StepStartCycle {
		t.Fatalf("next step = %v, want a Cycle that reads the message", st.Kind)
	}
}

// A child that runs again after it ended tells its parent (ChildReopened,
// in the commit of its reopening); the parent then counts it as running:
// its waits wait for the next end and its cascades reach it.
func TestReopenEntry(t *testing.T) {
	for _, tc := range []struct {
		name   string
		parent string
		before api.TaskStatus
		bodies []proto.Message
		by     string // "-": no entry
	}{
		{"finished child reopened by a message", "P", api.TaskStatus_TASK_STATUS_FINISHED, []proto.Message{&api.MessageReceived{From: "S"}, &api.StatusChanged{Status: api.TaskStatus_TASK_STATUS_RUNNING, Detail: "reopened by message from S", ReopenedBy: "S"}}, "S"},
		{"finished child reopened by a person", "P", api.TaskStatus_TASK_STATUS_FINISHED, []proto.Message{&api.UserMessage{Text: "more"}, &api.StatusChanged{Status: api.TaskStatus_TASK_STATUS_RUNNING}}, ""},
		{"failed child continued", "P", api.TaskStatus_TASK_STATUS_FAILED, []proto.Message{&api.StatusChanged{Status: api.TaskStatus_TASK_STATUS_RUNNING}}, ""},
		{"running child: nothing", "P", api.TaskStatus_TASK_STATUS_RUNNING, []proto.Message{&api.StatusChanged{Status: api.TaskStatus_TASK_STATUS_AWAITING_APPROVAL}}, "-"},
		{"cancelled child gets a message: nothing", "P", api.TaskStatus_TASK_STATUS_CANCELLED, []proto.Message{&api.MessageReceived{From: "S"}}, "-"},
		{"reopened and ended in one commit: nothing", "P", api.TaskStatus_TASK_STATUS_FINISHED, []proto.Message{&api.StatusChanged{Status: api.TaskStatus_TASK_STATUS_RUNNING}, &api.StatusChanged{Status: api.TaskStatus_TASK_STATUS_CANCELLED}}, "-"},
		{"a root has no parent to tell", "", api.TaskStatus_TASK_STATUS_FINISHED, []proto.Message{&api.StatusChanged{Status: api.TaskStatus_TASK_STATUS_RUNNING}}, "-"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := childOf(t, "C", tc.parent, 1, nil)
			apply(s, []proto.Message{&api.StatusChanged{Status: tc.before}})
			evs := s.Stamp(tc.bodies, now)
			e := s.ReopenEntry(evs)
			if tc.by == "-" {
				if e != nil {
					t.Fatalf("ReopenEntry = %v, want none", e)
				}
				return
			}
			r := e.GetChildReopened()
			last := evs[len(evs)-1].GetSeq()
			if r == nil || e.GetFrom() != "C" || r.GetChildId() != "C" || r.GetBy() != tc.by || e.GetFromSeq() != last || r.GetChildSeq() != last {
				t.Fatalf("ReopenEntry = %v, want from C by %q at seq %d", e, tc.by, last)
			}
			// The parent takes it: its child runs again.
			p := childOf(t, "P", "", 0, nil)
			apply(p, []proto.Message{&api.ChildSpawned{ChildId: "C", CallId: "a"}})
			apply(p, p.Take([]*api.InboxEntry{{From: "C", FromSeq: 3, ChildEnded: &api.ChildEnded{Status: tc.before}}}))
			if done, _, _ := p.WaitState([]string{"C"}, WaitAll); !done {
				t.Fatal("the parent does not know its child ended")
			}
			taken := p.Take([]*api.InboxEntry{e, {From: "X", FromSeq: 1, ChildReopened: &api.ChildReopened{}}})
			if got := kindsOf(taken); !eq(got, []string{"ChildReopened"}) {
				t.Fatalf("the parent takes %v, want its child's ChildReopened only", got)
			}
			apply(p, taken)
			if done, _, _ := p.WaitState([]string{"C"}, WaitAll); done || !eq(p.LiveChildren(), []string{"C"}) {
				t.Fatalf("after ChildReopened: wait over %v, live children %v; want its child running", done, p.LiveChildren())
			}
		})
	}
}

// A parent that sends a follow-up to a child that finished waits for the
// child's next end, not the one it knows; one sent to a cancelled child
// changes nothing.
func TestMessageSentToEndedChild(t *testing.T) {
	for _, tc := range []struct {
		ended api.TaskStatus
		live  bool
	}{
		{api.TaskStatus_TASK_STATUS_FINISHED, true},
		{api.TaskStatus_TASK_STATUS_CANCELLED, false},
		{api.TaskStatus_TASK_STATUS_FAILED, false},
	} {
		t.Run(StatusName(tc.ended), func(t *testing.T) {
			p := childOf(t, "P", "", 0, nil)
			apply(p, []proto.Message{&api.ChildSpawned{ChildId: "C", CallId: "a"}})
			apply(p, p.Take([]*api.InboxEntry{{From: "C", FromSeq: 3, ChildEnded: &api.ChildEnded{Status: tc.ended}}}))
			apply(p, []proto.Message{&api.MessageSent{To: "C", Text: "one more thing", CallId: "s"}})
			if done, _, _ := p.WaitState([]string{"C"}, WaitAll); done == tc.live {
				t.Fatalf("wait over = %v after the message, want %v", done, !tc.live)
			}
		})
	}
}
