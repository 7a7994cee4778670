package main

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"lemo/api"
	"lemo/client"
)

func treeEv(path []string, body proto.Message) *api.TreeEvent {
	return &api.TreeEvent{Path: path, Event: api.NewEvent(path[len(path)-1], 0, nil, body)}
}

func TestTreeProgressLines(t *testing.T) {
	rc, rcg := []string{"R", "C"}, []string{"R", "C", "G"}
	running := &api.StatusChanged{Status: api.TaskStatus_TASK_STATUS_RUNNING}
	for _, tc := range []struct {
		name string
		in   []*api.TreeEvent
		want []string
	}{
		{"a child's start, cycle and call", []*api.TreeEvent{
			treeEv(rc, running),
			treeEv(rc, &api.CycleStarted{Cycle: 1}),
			treeEv(rc, &api.ToolCallRecorded{CallId: "c1", Tool: "shell.run"}),
			treeEv(rc, &api.ToolResult{CallId: "c1"}),
			treeEv(rc, &api.CycleStarted{Cycle: 2}),
		}, []string{
			"  ↳ R/C: running",
			"  ↳ R/C: running · cycle 1",
			"  ↳ R/C: running · cycle 1 · shell.run",
			"  ↳ R/C: running · cycle 2",
		}},
		{"a grandchild is indented deeper", []*api.TreeEvent{
			treeEv(rcg, &api.CycleStarted{Cycle: 1}),
		}, []string{"    ↳ R/C/G: running · cycle 1"}},
		{"an unchanged line is not repeated", []*api.TreeEvent{
			treeEv(rc, running),
			treeEv(rc, running),
		}, []string{"  ↳ R/C: running"}},
		{"the end, then the child is forgotten", []*api.TreeEvent{
			treeEv(rc, &api.CycleStarted{Cycle: 1}),
			treeEv(rc, &api.StatusChanged{Status: api.TaskStatus_TASK_STATUS_FINISHED}),
		}, []string{"  ↳ R/C: running · cycle 1", "  ↳ R/C: finished · cycle 1"}},
		{"approvals are the prompter's", []*api.TreeEvent{
			treeEv(rc, &api.ApprovalRequested{ApprovalId: "C.c1"}),
		}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var p treeProgress
			var got []string
			for _, te := range tc.in {
				got = append(got, p.event(te)...)
			}
			if !slices.Equal(got, tc.want) {
				t.Fatalf("lines\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(tc.want, "\n"))
			}
			if len(p.kids) > 1 {
				t.Fatalf("tracks %d children", len(p.kids))
			}
		})
	}
}

// Many children at once: the follower tracks a bounded number, says once
// that it leaves the others out, and makes room as children end.
func TestTreeProgressIsBounded(t *testing.T) {
	var p treeProgress
	notes := 0
	for i := range 3 * maxChildLines {
		for _, l := range p.event(treeEv([]string{"R", fmt.Sprint("C", i)}, &api.CycleStarted{Cycle: 1})) {
			if strings.Contains(l, "not shown") {
				notes++
			}
		}
	}
	if len(p.kids) != maxChildLines || notes != 1 {
		t.Fatalf("tracks %d children (want %d), said %d times that it left some out (want 1)", len(p.kids), maxChildLines, notes)
	}
	// One ends: a child not seen before is shown again.
	p.event(treeEv([]string{"R", "C0"}, &api.StatusChanged{Status: api.TaskStatus_TASK_STATUS_FINISHED}))
	if got := p.event(treeEv([]string{"R", "new"}, &api.CycleStarted{Cycle: 1})); len(got) != 1 {
		t.Fatalf("after an end, a new child shows %v", got)
	}
	if len(p.untracked) != 2*maxChildLines {
		t.Fatalf("remembers %d untracked children, want %d", len(p.untracked), 2*maxChildLines)
	}
	// Untracked children that end are forgotten too.
	for i := maxChildLines; i < 3*maxChildLines; i++ {
		p.event(treeEv([]string{"R", fmt.Sprint("C", i)}, &api.StatusChanged{Status: api.TaskStatus_TASK_STATUS_CANCELLED}))
	}
	if len(p.untracked) != 0 {
		t.Fatalf("remembers %d ended children", len(p.untracked))
	}
}

// The prompter asks for a descendant's approval with its Task path, asks
// once for one told twice (a resubscription), and drops the prompt when
// the approval is decided elsewhere.
func TestPrompterAsksBelow(t *testing.T) {
	var b strings.Builder
	p := &prompter{out: &promptWriter{w: &b}, workspace: "/w"}
	path := []string{"R", "C"}
	p.tree(treeEv(path, &api.ToolCallRecorded{CallId: "call-1", Tool: "shell.run", Arguments: []byte(`{"command":"echo hi"}`)}))
	ask := &api.ApprovalRequested{ApprovalId: "C.call-1", CallId: "call-1", Tool: "shell.run"}
	p.tree(treeEv(path, ask))
	p.tree(treeEv(path, ask))
	p.ask()
	want := "  in the task's folder\n  $ echo hi\napprove C.call-1 in task R/C? [y/N/a=always/s=skip] (a approves and allows this exact command for this task, n REASON denies with a reason) "
	if b.String() != want {
		t.Fatalf("screen %q, want %q", b.String(), want)
	}
	if len(p.pending) != 1 {
		t.Fatalf("%d pending, want 1", len(p.pending))
	}
	p.tree(treeEv(path, &api.ApprovalResolved{ApprovalId: "C.call-1"}))
	if len(p.pending) != 0 || p.asked != "" || p.out.open || len(p.paths) != 0 {
		t.Fatalf("after the decision elsewhere: pending %d, asked %q, prompt open %v, paths %v", len(p.pending), p.asked, p.out.open, p.paths)
	}
}

// lemo attach shows a descendant's approval with its path, once, and its
// resolution.
func TestRenderTreeApproval(t *testing.T) {
	var b strings.Builder
	r := newRenderer(&b, client.NewViews(nil))
	ask := &api.ApprovalRequested{ApprovalId: "C.call-1", CallId: "call-1", Tool: "shell.run", Reason: "ask"}
	for range 2 {
		r.update(&api.Update{Body: &api.Update_TreeEvent{TreeEvent: treeEv([]string{"R", "C"}, ask)}})
	}
	r.update(&api.Update{Body: &api.Update_TreeEvent{TreeEvent: treeEv([]string{"R", "C"}, &api.ApprovalResolved{ApprovalId: "C.call-1", Outcome: api.ApprovalOutcome_APPROVAL_OUTCOME_APPROVED})}})
	want := "? approval needed in task R/C for shell.run: ask\n  approve: lemo approve C.call-1   deny: lemo deny C.call-1\n  approval C.call-1 in task R/C: approved\n"
	if b.String() != want {
		t.Fatalf("rendered %q, want %q", b.String(), want)
	}
}

// A follower told the TreeState at its (re)subscription shows each running
// descendant's line as one following from the start last showed it,
// prints a line again only when it changed, and forgets those no longer
// running.
func TestTreeProgressState(t *testing.T) {
	rc, rd := []string{"R", "C"}, []string{"R", "D"}
	live := []*api.TreeEvent{
		treeEv(rc, &api.StatusChanged{Status: api.TaskStatus_TASK_STATUS_RUNNING}),
		treeEv(rc, &api.CycleStarted{Cycle: 2}),
		treeEv(rc, &api.ToolCallRecorded{CallId: "c1", Tool: "shell.run"}),
	}
	var from treeProgress
	var last string
	for _, te := range live {
		for _, l := range from.event(te) {
			last = l
		}
	}
	state := &api.TreeState{Events: append(live, treeEv(rd, &api.StatusChanged{Status: api.TaskStatus_TASK_STATUS_AWAITING_APPROVAL}))}
	var p treeProgress
	got := p.state(state)
	want := []string{last, "  ↳ R/D: awaiting_approval"}
	if !slices.Equal(got, want) {
		t.Fatalf("attached mid-run: %q, want %q", got, want)
	}
	// Again after a reconnect: C unchanged, D ended meanwhile (not told).
	if got := p.state(&api.TreeState{Events: live}); len(got) != 0 {
		t.Fatalf("told again the same: printed %q", got)
	}
	if p.kids["D"] != nil || p.kids["C"] == nil {
		t.Fatalf("tracks %v after the second state, want C only", p.kids)
	}
	// C's Cycle moved on meanwhile; others were left out.
	got = p.state(&api.TreeState{Events: []*api.TreeEvent{treeEv(rc, &api.CycleStarted{Cycle: 3})}, Omitted: 5})
	want = []string{"  ↳ R/C: running · cycle 3", "  ↳ 5 more tasks run below: their progress is not shown (lemo tasks --tree lists them)"}
	if !slices.Equal(got, want) {
		t.Fatalf("after a change: %q, want %q", got, want)
	}
	// The live events that follow fold on the state told.
	if got := p.event(treeEv(rc, &api.ToolCallRecorded{CallId: "c2", Tool: "files.read"})); !slices.Equal(got, []string{"  ↳ R/C: running · cycle 3 · files.read"}) {
		t.Fatalf("live after the state: %q", got)
	}
}

// After a reconnect the prompter forgets the approvals below it knew (the
// resubscription tells again those still pending) and learns the calls
// open below, which their prompts show.
func TestPrompterTreeState(t *testing.T) {
	var b strings.Builder
	p := &prompter{out: &promptWriter{w: &b}, workspace: "/w"}
	path := []string{"R", "C"}
	p.tree(treeEv(path, &api.ApprovalRequested{ApprovalId: "C.call-1", CallId: "call-1", Tool: "shell.run"}))
	p.event(&api.Event{TaskId: "R", Body: &api.Event_ApprovalRequested{ApprovalRequested: &api.ApprovalRequested{ApprovalId: "R.call-9", CallId: "call-9"}}})
	p.treeState(&api.TreeState{Events: []*api.TreeEvent{treeEv(path, &api.ToolCallRecorded{CallId: "call-2", Tool: "shell.run", Arguments: []byte(`{"command":"echo again"}`)})}})
	if len(p.pending) != 1 || p.pending[0].GetApprovalId() != "R.call-9" {
		t.Fatalf("pending after the state: %v, want the followed Task's own only", p.pending)
	}
	p.tree(treeEv(path, &api.ApprovalRequested{ApprovalId: "C.call-2", CallId: "call-2", Tool: "shell.run"}))
	p.pending = p.pending[1:] // (the root's own, asked elsewhere)
	p.ask()
	if !strings.Contains(b.String(), "$ echo again") || !strings.Contains(b.String(), "approve C.call-2 in task R/C?") {
		t.Fatalf("the prompt for the call the state told of: %q", b.String())
	}
}
