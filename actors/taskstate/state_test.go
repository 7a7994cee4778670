package taskstate

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"lemo/api"
)

var now = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

// build returns a State after applying bodies (a created Task first).
func build(t *testing.T, bodies ...proto.Message) *State {
	t.Helper()
	s := New()
	s.TaskID = "T1"
	apply(s, Create(CreateInput{Owner: "alice", Model: "fake/m", Request: "do it"}))
	apply(s, bodies)
	return s
}

func apply(s *State, bodies []proto.Message) {
	for _, ev := range s.Stamp(bodies, now) {
		s.Apply(ev)
	}
}

func kindsOf(bodies []proto.Message) []string {
	out := make([]string, len(bodies))
	for i, b := range bodies {
		out[i] = string(b.ProtoReflect().Descriptor().Name())
	}
	return out
}

func eq(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func cycleWithCalls(n uint32, calls ...string) []proto.Message {
	out := []proto.Message{&api.CycleStarted{Cycle: n}}
	am := &api.AssistantMessage{Cycle: n, ToolCallIds: calls}
	out = append(out, am)
	for _, c := range calls {
		out = append(out, &api.ToolCallRecorded{CallId: c, Cycle: n, Tool: "t"})
	}
	return append(out, &api.CycleFinished{Cycle: n, Outcome: api.CycleOutcome_CYCLE_OUTCOME_COMPLETED})
}

func TestNext(t *testing.T) {
	cases := []struct {
		name  string
		state *State
		opt   NextOptions
		want  StepKind
		body  string
	}{
		{"new task starts a cycle", build(t), NextOptions{}, StepStartCycle, "CycleStarted"},
		{"open cycle waits", build(t, &api.CycleStarted{Cycle: 1}), NextOptions{}, StepWait, ""},
		{"answer without calls finishes", build(t, &api.CycleStarted{Cycle: 1}, &api.AssistantMessage{Cycle: 1}, &api.CycleFinished{Cycle: 1, Outcome: api.CycleOutcome_CYCLE_OUTCOME_COMPLETED}), NextOptions{}, StepFinish, "StatusChanged"},
		{"recorded call starts", build(t, cycleWithCalls(1, "c1")...), NextOptions{}, StepStartTool, "ToolExecutionStarted"},
		{"running call waits at the parallel limit", build(t, append(cycleWithCalls(1, "c1", "c2"), &api.ToolExecutionStarted{CallId: "c1"})...), NextOptions{MaxParallelTools: 1}, StepWait, ""},
		{"second call starts under the limit", build(t, append(cycleWithCalls(1, "c1", "c2"), &api.ToolExecutionStarted{CallId: "c1"})...), NextOptions{MaxParallelTools: 2}, StepStartTool, "ToolExecutionStarted"},
		{"results complete: next cycle", build(t, append(cycleWithCalls(1, "c1"), &api.ToolExecutionStarted{CallId: "c1"}, &api.ToolResult{CallId: "c1"})...), NextOptions{}, StepStartCycle, "CycleStarted"},
		{"message during a cycle: another cycle", build(t, &api.CycleStarted{Cycle: 1}, &api.UserMessage{Text: "also"}, &api.AssistantMessage{Cycle: 1}, &api.CycleFinished{Cycle: 1, Outcome: api.CycleOutcome_CYCLE_OUTCOME_COMPLETED}), NextOptions{}, StepStartCycle, "CycleStarted"},
		{"cycle limit pauses", build(t, &api.CycleStarted{Cycle: 1}, &api.AssistantMessage{Cycle: 1, ToolCallIds: []string{"c"}}, &api.ToolCallRecorded{CallId: "c", Tool: "t"}, &api.CycleFinished{Cycle: 1, Outcome: api.CycleOutcome_CYCLE_OUTCOME_COMPLETED}, &api.ToolFailed{CallId: "c"}), NextOptions{MaxCycles: 1}, StepLimit, "StatusChanged"},
		{"approval required", build(t, cycleWithCalls(1, "c1")...), NextOptions{Approval: func(*Call) ApprovalNeed { return ApprovalNeed{Required: true, Reason: "r", Deadline: time.Minute} }}, StepRequestApproval, "ApprovalRequested"},
		{"policy deny rejects", build(t, cycleWithCalls(1, "c1")...), NextOptions{Approval: func(*Call) ApprovalNeed { return ApprovalNeed{Deny: true, Required: true} }}, StepReject, "ToolFailed"},
		{"paused waits", build(t, &api.StatusChanged{Status: api.TaskStatus_TASK_STATUS_PAUSED}), NextOptions{}, StepWait, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			c.opt.Now = now
			step := c.state.Next(c.opt)
			if step.Kind != c.want {
				t.Fatalf("Next() = %v, want %v", step.Kind, c.want)
			}
			if c.body != "" && (len(step.Bodies) == 0 || kindsOf(step.Bodies)[0] != c.body) {
				t.Fatalf("Next() bodies = %v, want first %s", kindsOf(step.Bodies), c.body)
			}
		})
	}
}

func TestCommandsByStatus(t *testing.T) {
	running := func() *State { return build(t) }
	finished := func() *State {
		return build(t, &api.StatusChanged{Status: api.TaskStatus_TASK_STATUS_FINISHED})
	}
	paused := func() *State {
		return build(t, &api.StatusChanged{Status: api.TaskStatus_TASK_STATUS_PAUSED, PauseReason: api.PauseReason_PAUSE_REASON_USER})
	}
	type op func(*State) ([]proto.Message, error)
	pause := func(s *State) ([]proto.Message, error) { return s.Pause() }
	cont := func(s *State) ([]proto.Message, error) { return s.Continue("") }
	cancel := func(s *State) ([]proto.Message, error) { return s.Cancel() }
	msg := func(s *State) ([]proto.Message, error) { return s.Message("more") }
	cases := []struct {
		name  string
		state func() *State
		op    op
		ok    bool
		kinds []string
	}{
		{"pause running", running, pause, true, []string{"StatusChanged"}},
		{"pause finished", finished, pause, false, nil},
		{"continue paused", paused, cont, true, []string{"StatusChanged"}},
		{"continue running", running, cont, false, nil},
		{"continue finished", finished, cont, false, nil},
		{"cancel running", running, cancel, true, []string{"StatusChanged"}},
		{"message reopens finished", finished, msg, true, []string{"UserMessage", "StatusChanged"}},
		{"message to paused stays paused", paused, msg, true, []string{"UserMessage"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			bodies, err := c.op(c.state())
			if (err == nil) != c.ok {
				t.Fatalf("err = %v, want ok=%v", err, c.ok)
			}
			var se *StateError
			if err != nil && !errors.As(err, &se) {
				t.Fatalf("err = %T, want *StateError", err)
			}
			if c.ok && !eq(kindsOf(bodies), c.kinds) {
				t.Fatalf("bodies = %v, want %v", kindsOf(bodies), c.kinds)
			}
		})
	}
}

func TestPauseAndCancelCloseWhatIsOpen(t *testing.T) {
	s := build(t, append(cycleWithCalls(1, "c1", "c2", "c3"),
		&api.ToolExecutionStarted{CallId: "c1"},
		&api.ApprovalRequested{ApprovalId: "T1.c2", CallId: "c2"},
		&api.CycleStarted{Cycle: 2})...)
	bodies, err := s.Pause()
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"CycleFinished", "ApprovalResolved", "ToolFailed", "StatusChanged"}
	if !eq(kindsOf(bodies), want) {
		t.Fatalf("Pause() = %v, want %v", kindsOf(bodies), want)
	}
	bodies, _ = s.Cancel()
	// c1 runs (closed when it reports), c2's approval is cancelled, c3 never ran.
	want = []string{"StatusChanged", "CycleFinished", "ApprovalResolved", "ToolFailed", "ToolFailed"}
	if !eq(kindsOf(bodies), want) {
		t.Fatalf("Cancel() = %v, want %v", kindsOf(bodies), want)
	}
	if f := bodies[4].(*api.ToolFailed); f.GetCallId() != "c3" || f.GetKind() != api.ToolFailureKind_TOOL_FAILURE_KIND_CANCELLED {
		t.Fatalf("last = %v", f)
	}
}

func TestRecover(t *testing.T) {
	s := build(t, append(cycleWithCalls(1, "c1", "c2", "c3"),
		&api.ToolExecutionStarted{CallId: "c1"},
		&api.ApprovalRequested{ApprovalId: "T1.c2", CallId: "c2", Deadline: nil},
		&api.CycleStarted{Cycle: 2})...)
	bodies := s.Recover(now)
	want := []string{"CycleFinished", "ToolFailed", "StatusChanged"}
	if !eq(kindsOf(bodies), want) {
		t.Fatalf("Recover() = %v, want %v", kindsOf(bodies), want)
	}
	if f := bodies[1].(*api.ToolFailed); f.GetCallId() != "c1" || f.GetKind() != api.ToolFailureKind_TOOL_FAILURE_KIND_OUTCOME_UNKNOWN {
		t.Fatalf("ToolFailed = %v", f)
	}
	if sc := bodies[2].(*api.StatusChanged); sc.GetPauseReason() != api.PauseReason_PAUSE_REASON_INTERRUPTED {
		t.Fatalf("StatusChanged = %v", sc)
	}
	apply(s, bodies)
	if len(s.Approvals) != 1 {
		t.Fatalf("the interrupted pause cancelled approvals: %v", s.Approvals)
	}
	if again := s.Recover(now); len(again) != 0 {
		t.Fatalf("Recover is not idempotent: %v", kindsOf(again))
	}
}

// A note for a call is added to its outcome-unknown record, and only to
// that call's.
func TestRecoverNoting(t *testing.T) {
	const plain = "outcome unknown: execution started but no result was recorded (the daemon or the task stopped while it ran); it was not re-executed"
	for _, tc := range []struct {
		name  string
		notes map[string]string
		want  map[string]string // call id -> message
	}{
		{"none", nil, map[string]string{"c1": plain, "c2": plain}},
		{"one call", map[string]string{"c2": "stopped at the restart: pid 7 (sleep)"}, map[string]string{"c1": plain, "c2": plain + "; stopped at the restart: pid 7 (sleep)"}},
		{"a call not open", map[string]string{"c9": "x"}, map[string]string{"c1": plain, "c2": plain}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := build(t, append(cycleWithCalls(1, "c1", "c2"), &api.ToolExecutionStarted{CallId: "c1"}, &api.ToolExecutionStarted{CallId: "c2"})...)
			got := map[string]string{}
			for _, b := range s.RecoverNoting(now, tc.notes) {
				if f, ok := b.(*api.ToolFailed); ok {
					got[f.GetCallId()] = f.GetMessage()
				}
			}
			if len(got) != len(tc.want) {
				t.Fatalf("records %v, want %v", got, tc.want)
			}
			for id, w := range tc.want {
				if got[id] != w {
					t.Errorf("call %s: message %q, want %q", id, got[id], w)
				}
			}
		})
	}
}

func TestRecoverTimesOutExpiredApprovals(t *testing.T) {
	s := build(t, cycleWithCalls(1, "c1")...)
	step := s.Next(NextOptions{Now: now.Add(-time.Hour), Approval: func(*Call) ApprovalNeed { return ApprovalNeed{Required: true, Deadline: time.Minute} }})
	apply(s, step.Bodies)
	bodies := s.Recover(now)
	want := []string{"ApprovalResolved", "ToolFailed", "StatusChanged"}
	if !eq(kindsOf(bodies), want) {
		t.Fatalf("Recover() = %v, want %v", kindsOf(bodies), want)
	}
	if ar := bodies[0].(*api.ApprovalResolved); ar.GetOutcome() != api.ApprovalOutcome_APPROVAL_OUTCOME_TIMED_OUT {
		t.Fatalf("outcome = %v, want timed out", ar.GetOutcome())
	}
}

func TestCycleResultsForClosedCyclesAreDropped(t *testing.T) {
	s := build(t, &api.CycleStarted{Cycle: 1}, &api.CycleFinished{Cycle: 1, Outcome: api.CycleOutcome_CYCLE_OUTCOME_CANCELLED})
	if b := s.CycleDone(CycleOutput{Cycle: 1, Text: "late"}); b != nil {
		t.Fatalf("late result recorded: %v", kindsOf(b))
	}
	if b := s.CycleFailed(CycleFailure{Cycle: 1, Kind: "transient"}); b != nil {
		t.Fatalf("late failure recorded: %v", kindsOf(b))
	}
	if b := s.ToolDone(ToolOutcome{CallID: "nope"}); b != nil {
		t.Fatalf("result of an unknown call recorded: %v", kindsOf(b))
	}
}

func TestCycleDoneAssignsIDsAndRejects(t *testing.T) {
	s := build(t, &api.CycleStarted{Cycle: 3})
	bodies := s.CycleDone(CycleOutput{Cycle: 3, Calls: []ResolvedCall{
		{ModelName: "a", Tool: "a"},
		{ModelName: "zz", Reject: &api.ToolFailed{Kind: api.ToolFailureKind_TOOL_FAILURE_KIND_UNKNOWN_TOOL}},
	}})
	want := []string{"AssistantMessage", "ToolCallRecorded", "ToolCallRecorded", "ToolFailed", "CycleFinished"}
	if !eq(kindsOf(bodies), want) {
		t.Fatalf("CycleDone() = %v, want %v", kindsOf(bodies), want)
	}
	if got := bodies[0].(*api.AssistantMessage).GetToolCallIds(); !eq(got, []string{"call-3-1", "call-3-2"}) {
		t.Fatalf("call ids = %v", got)
	}
	if f := bodies[3].(*api.ToolFailed); f.GetCallId() != "call-3-2" {
		t.Fatalf("reject names %q", f.GetCallId())
	}
}

func TestTitle(t *testing.T) {
	long := ""
	for i := 0; i < 30; i++ {
		long += "word "
	}
	if got := Title("  fix\n the   bug  "); got != "fix the bug" {
		t.Fatalf("Title = %q", got)
	}
	if got := []rune(Title(long)); len(got) != titleMax || got[len(got)-1] != '…' {
		t.Fatalf("Title(long) = %q", string(got))
	}
}

func TestApprovalNeedAdd(t *testing.T) {
	ask := func(reason string, d time.Duration) ApprovalNeed {
		return ApprovalNeed{Required: true, Reason: reason, Deadline: d}
	}
	deny := func(reason string) ApprovalNeed { return ApprovalNeed{Deny: true, Reason: reason} }
	cases := []struct {
		name string
		in   []ApprovalNeed
		want ApprovalNeed
	}{
		{"nothing", []ApprovalNeed{{}, {}}, ApprovalNeed{}},
		{"ask", []ApprovalNeed{{}, ask("a", 0)}, ask("a", 0)},
		{"asks join reasons, shortest deadline", []ApprovalNeed{ask("a", time.Minute), ask("b", 0), ask("c", time.Second), ask("a", 0)}, ask("a; b; c", time.Second)},
		{"deny after ask wins", []ApprovalNeed{ask("a", time.Minute), deny("d")}, deny("d")},
		{"ask after deny changes nothing", []ApprovalNeed{deny("d"), ask("a", time.Minute)}, deny("d")},
		{"first deny's reason", []ApprovalNeed{deny("d1"), deny("d2")}, deny("d1")},
	}
	for _, c := range cases {
		var got ApprovalNeed
		for _, n := range c.in {
			got.Add(n)
		}
		if got != c.want {
			t.Errorf("%s: got %+v, want %+v", c.name, got, c.want)
		}
	}
}

// A Task's rules come from its creation and survive a rebuild from history.
func TestRuleNeed(t *testing.T) {
	rules := []*api.ToolApproval{
		{Tool: "shell.*", Rule: api.ApprovalRule_APPROVAL_RULE_ASK},
		{Tool: "shell.run", Rule: api.ApprovalRule_APPROVAL_RULE_DENY},
		{Tool: "files.write", Rule: api.ApprovalRule_APPROVAL_RULE_ASK},
	}
	s := New()
	s.TaskID = "T1"
	evs := s.Stamp(Create(CreateInput{Owner: "alice", Model: "fake/m", Request: "do it", Approvals: rules}), now)
	rebuilt := New()
	for _, ev := range evs {
		rebuilt.Apply(ev)
	}
	exact := func(p, n string) bool { return p == n || (p == "shell.*" && len(n) > 6 && n[:6] == "shell.") }
	if n := rebuilt.RuleNeed("shell.run", time.Minute, exact); !n.Deny || n.Required {
		t.Errorf("shell.run (ask and deny match): %+v, want deny", n)
	}
	if n := rebuilt.RuleNeed("shell.kill", time.Minute, exact); n.Deny || !n.Required || n.Deadline != time.Minute {
		t.Errorf("shell.kill: %+v, want ask with the deadline", n)
	}
	if n := rebuilt.RuleNeed("files.read", time.Minute, exact); n.Deny || n.Required {
		t.Errorf("files.read: %+v, want nothing", n)
	}
}

func TestExpired(t *testing.T) {
	deadline := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	s := New()
	s.Approvals = map[string]*Approval{
		"with": {ID: "with", Deadline: deadline},
		"none": {ID: "none"},
	}
	for _, tc := range []struct {
		id   string
		now  time.Time
		want bool
	}{
		{"with", deadline.Add(-time.Second), false},
		{"with", deadline, true},
		{"with", deadline.Add(time.Hour), true},
		{"none", deadline.Add(time.Hour), false},
		{"unknown", deadline.Add(time.Hour), false},
	} {
		if got := s.Expired(tc.id, tc.now); got != tc.want {
			t.Errorf("Expired(%q, %v) = %v, want %v", tc.id, tc.now, got, tc.want)
		}
	}
}

func TestDiskFull(t *testing.T) {
	started := append(cycleWithCalls(1, "c1", "c2"), &api.ToolExecutionStarted{CallId: "c1"})
	cases := []struct {
		name  string
		state *State
		want  []string
		// closed are the calls the pause closes.
		closed []string
	}{
		{"running with a model call", build(t, &api.CycleStarted{Cycle: 1}), []string{"CycleFinished", "StatusChanged"}, nil},
		{"running tool: closed, the call not started waits", build(t, started...), []string{"ToolFailed", "StatusChanged"}, []string{"c1"}},
		{"running tool that asked for an approval", build(t, append(started, &api.ApprovalRequested{ApprovalId: "a1", CallId: "c1", DuringRun: true})...),
			[]string{"ApprovalResolved", "ToolFailed", "StatusChanged"}, []string{"c1"}},
		{"awaiting approval to start: kept", build(t, append(cycleWithCalls(1, "c1"), &api.ApprovalRequested{ApprovalId: "a1", CallId: "c1"},
			&api.StatusChanged{Status: api.TaskStatus_TASK_STATUS_AWAITING_APPROVAL})...), []string{"StatusChanged"}, nil},
		{"paused by the user: nothing", build(t, &api.StatusChanged{Status: api.TaskStatus_TASK_STATUS_PAUSED, PauseReason: api.PauseReason_PAUSE_REASON_USER}), nil, nil},
		{"finished: nothing", build(t, &api.StatusChanged{Status: api.TaskStatus_TASK_STATUS_FINISHED}), nil, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			approvals := len(c.state.Approvals)
			got := c.state.DiskFull("disk full")
			if !eq(kindsOf(got), c.want) {
				t.Fatalf("DiskFull() = %v, want %v", kindsOf(got), c.want)
			}
			if got == nil {
				return
			}
			apply(c.state, got)
			if c.state.Status != api.TaskStatus_TASK_STATUS_PAUSED || c.state.PauseReason != api.PauseReason_PAUSE_REASON_DISK_FULL {
				t.Fatalf("after DiskFull: %v/%v, want paused/disk_full", c.state.Status, c.state.PauseReason)
			}
			if c.state.CycleOpen {
				t.Fatal("after DiskFull the cycle is still open")
			}
			for _, id := range c.closed {
				if c.state.Calls[id] != nil {
					t.Fatalf("call %s still open after DiskFull", id)
				}
			}
			for _, call := range c.state.Calls {
				if call.Started {
					t.Fatalf("started call %s still open after DiskFull", call.ID)
				}
			}
			if strings.Contains(c.name, "kept") && len(c.state.Approvals) != approvals {
				t.Fatalf("approvals to start: %d after DiskFull, want %d kept", len(c.state.Approvals), approvals)
			}
		})
	}
}

func TestResumeDiskFull(t *testing.T) {
	diskPaused := &api.StatusChanged{Status: api.TaskStatus_TASK_STATUS_PAUSED, PauseReason: api.PauseReason_PAUSE_REASON_DISK_FULL}
	cases := []struct {
		name  string
		state *State
		want  api.TaskStatus // UNSPECIFIED: nothing
	}{
		{"paused for the disk: runs", build(t, diskPaused), api.TaskStatus_TASK_STATUS_RUNNING},
		{"paused for the disk with an approval pending: awaits it", build(t, append(cycleWithCalls(1, "c1"), &api.ApprovalRequested{ApprovalId: "a1", CallId: "c1"}, diskPaused)...), api.TaskStatus_TASK_STATUS_AWAITING_APPROVAL},
		{"paused by the user", build(t, &api.StatusChanged{Status: api.TaskStatus_TASK_STATUS_PAUSED, PauseReason: api.PauseReason_PAUSE_REASON_USER}), api.TaskStatus_TASK_STATUS_UNSPECIFIED},
		{"interrupted", build(t, &api.StatusChanged{Status: api.TaskStatus_TASK_STATUS_PAUSED, PauseReason: api.PauseReason_PAUSE_REASON_INTERRUPTED}), api.TaskStatus_TASK_STATUS_UNSPECIFIED},
		{"continued by a person since", build(t, diskPaused, &api.StatusChanged{Status: api.TaskStatus_TASK_STATUS_RUNNING}), api.TaskStatus_TASK_STATUS_UNSPECIFIED},
		{"cancelled since", build(t, diskPaused, &api.StatusChanged{Status: api.TaskStatus_TASK_STATUS_CANCELLED}), api.TaskStatus_TASK_STATUS_UNSPECIFIED},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := c.state.ResumeDiskFull()
			if c.want == api.TaskStatus_TASK_STATUS_UNSPECIFIED {
				if got != nil {
					t.Fatalf("ResumeDiskFull() = %v, want nothing", kindsOf(got))
				}
				return
			}
			if len(got) != 1 || got[0].(*api.StatusChanged).GetStatus() != c.want {
				t.Fatalf("ResumeDiskFull() = %v, want one status change to %v", got, c.want)
			}
		})
	}
}

func TestResolveAllow(t *testing.T) {
	ask := func(*Call) ApprovalNeed { return ApprovalNeed{Required: true, Reason: "asks"} }
	// pending returns a Task whose call c1 (tool "t") waits for approval.
	pending := func(t *testing.T) *State {
		s := build(t, cycleWithCalls(1, "c1")...)
		step := s.Next(NextOptions{Now: now, Approval: ask})
		if step.Kind != StepRequestApproval {
			t.Fatalf("step = %v, want an approval request", step.Kind)
		}
		apply(s, step.Bodies)
		return s
	}
	id := ApprovalID("T1", "c1")
	cases := []struct {
		name    string
		scope   string
		during  bool
		id      string
		wantErr error
		// allowed and refused are (tool, scope) pairs after the decision.
		allowed, refused [][2]string
	}{
		{name: "whole tool", allowed: [][2]string{{"t", ""}}, refused: [][2]string{{"u", ""}, {"t", "command: ls"}}},
		{name: "scoped to one command", scope: "command: ls -la", allowed: [][2]string{{"t", "command: ls -la"}}, refused: [][2]string{{"t", ""}, {"t", "command: ls"}, {"t", "command: rm -rf x"}}},
		{name: "unknown approval", id: "T1.nope", wantErr: ErrNotFound, refused: [][2]string{{"t", ""}}},
		{name: "asked by a running call", during: true, wantErr: ErrInvalid, refused: [][2]string{{"t", ""}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := pending(t)
			aid := id
			if c.during {
				aid = id + ".1"
				apply(s, []proto.Message{&api.ApprovalRequested{ApprovalId: aid, CallId: "c1", DuringRun: true}})
			}
			if c.id != "" {
				aid = c.id
			}
			bodies, err := s.ResolveAllow(aid, "alice", "", c.scope)
			if c.wantErr != nil {
				if !errors.Is(err, c.wantErr) {
					t.Fatalf("ResolveAllow() err = %v, want %v", err, c.wantErr)
				}
			} else {
				if err != nil {
					t.Fatalf("ResolveAllow(): %v", err)
				}
				ar := bodies[0].(*api.ApprovalResolved)
				if ar.GetOutcome() != api.ApprovalOutcome_APPROVAL_OUTCOME_APPROVED || ar.GetBy() != "alice" {
					t.Fatalf("resolution = %v", ar)
				}
				want := &api.ToolApproval{Tool: "t", Rule: api.ApprovalRule_APPROVAL_RULE_ALLOW, Scope: c.scope}
				if !proto.Equal(ar.GetAllowRule(), want) {
					t.Fatalf("allow rule = %v, want %v", ar.GetAllowRule(), want)
				}
				apply(s, bodies)
				if !s.Calls["c1"].Approved {
					t.Fatal("the call itself is not approved")
				}
			}
			for _, a := range c.allowed {
				if !s.Allowed(a[0], a[1]) {
					t.Errorf("Allowed(%q, %q) = false, want true", a[0], a[1])
				}
			}
			for _, r := range c.refused {
				if s.Allowed(r[0], r[1]) {
					t.Errorf("Allowed(%q, %q) = true, want false", r[0], r[1])
				}
			}
		})
	}
}

// The rule is history: a State folded again from the recorded events (a
// restart) keeps it, and the next call of that kind is not asked about.
func TestAllowRuleFoldsFromHistory(t *testing.T) {
	s := New()
	s.TaskID = "T1"
	var history []*api.Event
	record := func(bodies []proto.Message) {
		for _, ev := range s.Stamp(bodies, now) {
			s.Apply(ev)
			history = append(history, ev)
		}
	}
	record(Create(CreateInput{Owner: "alice", Model: "fake/m", Request: "do it"}))
	record(cycleWithCalls(1, "c1"))
	judged := ApprovalNeed{Required: true, Reason: "asks"}
	need := func(st *State) func(*Call) ApprovalNeed {
		return func(c *Call) ApprovalNeed { return Combine(judged, st.Allowed(c.Tool, ""), ApprovalNeed{}) }
	}
	record(s.Next(NextOptions{Now: now, Approval: need(s)}).Bodies)
	bodies, err := s.ResolveAllow(ApprovalID("T1", "c1"), "alice", "", "")
	if err != nil {
		t.Fatal(err)
	}
	record(bodies)
	// A denied resolution that carries a rule (never written, but read
	// from history all the same) adds nothing.
	bad := &api.ApprovalResolved{ApprovalId: "x", Outcome: api.ApprovalOutcome_APPROVAL_OUTCOME_DENIED, AllowRule: &api.ToolApproval{Tool: "u", Rule: api.ApprovalRule_APPROVAL_RULE_ALLOW}}
	record([]proto.Message{bad})

	again := New()
	for _, ev := range history {
		again.Apply(ev)
	}
	if !again.Allowed("t", "") || again.Allowed("u", "") {
		t.Fatalf("refolded allows = %v, want only t", again.Allows)
	}
	// Go on from the refolded State: c1 runs (approved), then a second
	// Cycle's call of the same tool.
	s = again
	record(s.Next(NextOptions{Now: now, Approval: need(s)}).Bodies)
	record([]proto.Message{&api.ToolResult{CallId: "c1"}})
	record(cycleWithCalls(2, "c2"))
	if step := s.Next(NextOptions{Now: now, Approval: need(s)}); step.Kind != StepStartTool || step.Call.ID != "c2" {
		t.Fatalf("second call: step %v for %v (%v), want c2 started without asking", step.Kind, step.Call, kindsOf(step.Bodies))
	}
}

func TestCombine(t *testing.T) {
	ask := ApprovalNeed{Required: true, Reason: "the tool asks", Deadline: time.Minute}
	deny := ApprovalNeed{Deny: true, Reason: "approvals.deny names it"}
	model := ApprovalNeed{Required: true, Reason: "the model asked: sure?"}
	cases := []struct {
		name    string
		judged  ApprovalNeed
		allowed bool
		asked   ApprovalNeed
		want    ApprovalNeed
	}{
		{"ask, not allowed", ask, false, ApprovalNeed{}, ask},
		{"ask, allowed for the task", ask, true, ApprovalNeed{}, ApprovalNeed{}},
		{"nothing asked, allowed", ApprovalNeed{}, true, ApprovalNeed{}, ApprovalNeed{}},
		{"a deny wins over the allow", deny, true, ApprovalNeed{}, deny},
		{"the model's request is still asked", ask, true, model, model},
		{"the model's request with nothing else", ApprovalNeed{}, true, model, model},
		{"a deny wins over the model's request too", deny, true, model, deny},
		{"not allowed: ask and model join", ask, false, model, ApprovalNeed{Required: true, Reason: "the tool asks; the model asked: sure?", Deadline: time.Minute}},
	}
	for _, c := range cases {
		if got := Combine(c.judged, c.allowed, c.asked); got != c.want {
			t.Errorf("%s: got %+v, want %+v", c.name, got, c.want)
		}
	}
}

// Chain puts what is known together into one append: a Cycle's answer
// with the start of its calls, a result with the next Cycle's start, a
// creation with the first Cycle's start, a final answer with the Task's
// end; it stops where the Task waits, and leaves the state as it was.
func TestChain(t *testing.T) {
	answer := func(s *State, calls ...string) []proto.Message {
		o := CycleOutput{Cycle: s.Cycle, Text: "t"}
		for _, c := range calls {
			o.Calls = append(o.Calls, ResolvedCall{ModelName: c, Tool: c, Args: []byte(`{}`)})
		}
		return s.CycleDone(o)
	}
	running := func(t *testing.T) *State { return build(t, &api.CycleStarted{Cycle: 1}) }
	oneCallRunning := func(t *testing.T) *State {
		return build(t, append(cycleWithCalls(1, "c1"), &api.ToolExecutionStarted{CallId: "c1"})...)
	}
	askAll := func(*Call) ApprovalNeed { return ApprovalNeed{Required: true, Reason: "r"} }
	cases := []struct {
		name   string
		state  func(t *testing.T) *State
		bodies func(s *State) []proto.Message
		opt    NextOptions
		want   []string
		steps  []StepKind
	}{
		{"an answer and the start of its call", running, func(s *State) []proto.Message { return answer(s, "t") }, NextOptions{},
			[]string{"AssistantMessage", "ToolCallRecorded", "CycleFinished", "ToolExecutionStarted"}, []StepKind{StepStartTool}},
		{"an answer and the start of both calls under the limit", running, func(s *State) []proto.Message { return answer(s, "t", "u") }, NextOptions{MaxParallelTools: 2},
			[]string{"AssistantMessage", "ToolCallRecorded", "ToolCallRecorded", "CycleFinished", "ToolExecutionStarted", "ToolExecutionStarted"}, []StepKind{StepStartTool}}, // one step starts both
		{"an answer and the start of its first call at the limit", running, func(s *State) []proto.Message { return answer(s, "t", "u") }, NextOptions{MaxParallelTools: 1},
			[]string{"AssistantMessage", "ToolCallRecorded", "ToolCallRecorded", "CycleFinished", "ToolExecutionStarted"}, []StepKind{StepStartTool}},
		{"a result and the next Cycle's start", oneCallRunning, func(s *State) []proto.Message { return s.ToolDone(ToolOutcome{CallID: "c1", Retained: []byte(`1`)}) }, NextOptions{},
			[]string{"ToolResult", "CycleStarted"}, []StepKind{StepStartCycle}},
		{"a result while another call runs", func(t *testing.T) *State {
			return build(t, append(cycleWithCalls(1, "c1", "c2"), &api.ToolExecutionStarted{CallId: "c1"}, &api.ToolExecutionStarted{CallId: "c2"})...)
		}, func(s *State) []proto.Message { return s.ToolDone(ToolOutcome{CallID: "c1"}) }, NextOptions{MaxParallelTools: 2},
			[]string{"ToolResult"}, nil},
		{"a final answer and the Task's end", running, func(s *State) []proto.Message { return answer(s) }, NextOptions{},
			[]string{"AssistantMessage", "CycleFinished", "StatusChanged"}, []StepKind{StepFinish}},
		{"a creation and the first Cycle's start", func(*testing.T) *State { s := New(); s.TaskID = "T1"; return s },
			func(*State) []proto.Message {
				return Create(CreateInput{Owner: "alice", Model: "fake/m", Request: "do it"})
			}, NextOptions{},
			[]string{"TaskCreated", "UserMessage", "StatusChanged", "CycleStarted"}, []StepKind{StepStartCycle}},
		{"an answer and the approval its call waits for", running, func(s *State) []proto.Message { return answer(s, "t") }, NextOptions{Approval: askAll},
			[]string{"AssistantMessage", "ToolCallRecorded", "CycleFinished", "ApprovalRequested", "StatusChanged"}, []StepKind{StepRequestApproval}},
		{"a result and the pause at the cycle limit", oneCallRunning, func(s *State) []proto.Message { return s.ToolDone(ToolOutcome{CallID: "c1"}) }, NextOptions{MaxCycles: 1},
			[]string{"ToolResult", "StatusChanged"}, []StepKind{StepLimit}},
		{"a pause starts nothing", running, func(s *State) []proto.Message { b, _ := s.Pause(); return b }, NextOptions{},
			[]string{"CycleFinished", "StatusChanged"}, nil},
		{"nothing to record", running, func(*State) []proto.Message { return nil }, NextOptions{}, []string{}, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := c.state(t)
			bodies := c.bodies(s)
			before := s.clone()
			c.opt.Now = now
			all, steps, after := s.Chain(bodies, c.opt)
			if got := kindsOf(all); !eq(got, c.want) {
				t.Fatalf("Chain() = %v, want %v", got, c.want)
			}
			if len(steps) != len(c.steps) {
				t.Fatalf("Chain() took %d steps, want %v", len(steps), c.steps)
			}
			for i, st := range steps {
				if st.Kind != c.steps[i] {
					t.Errorf("step %d = %v, want %v", i, st.Kind, c.steps[i])
				}
			}
			if !reflect.DeepEqual(s, before) {
				t.Fatalf("Chain changed the state:\n%+v\nwas\n%+v", s, before)
			}
			// Applied in order, the chained events leave the Task where
			// the last step leaves it: waiting.
			apply(s, all)
			if st := s.Next(c.opt); st.Kind != StepWait {
				t.Fatalf("after the chain Next() = %v, want StepWait", st.Kind)
			}
			// The state Chain returns is that one: a held append goes on
			// chaining from it.
			if len(bodies) > 0 && !reflect.DeepEqual(after, s) {
				t.Fatalf("Chain's state after:\n%+v\nwant\n%+v", after, s)
			}
		})
	}
}

// An append may wait for the calls it starts only when they merely read:
// anything else it starts or records (a Cycle, an approval, the Task's
// end) must be durable first, or its effect could happen twice.
func TestHolds(t *testing.T) {
	read := &Call{ID: "r", Tool: "files.read"}
	write := &Call{ID: "w", Tool: "shell.run"}
	readOnly := func(c *Call) bool { return c.Tool == "files.read" }
	for _, c := range []struct {
		name    string
		steps   []Step
		running int
		want    bool
	}{
		{"a read-only call starts", []Step{{Kind: StepStartTool, Calls: []*Call{read}}}, 0, true},
		{"a batch with a call that acts", []Step{{Kind: StepStartTool, Calls: []*Call{read, write}}}, 0, false},
		{"a refusal, then a read-only call", []Step{{Kind: StepReject}, {Kind: StepStartTool, Calls: []*Call{read}}}, 0, true},
		{"a refusal alone, nothing running", []Step{{Kind: StepReject}}, 0, false},
		{"nothing new while held calls run", nil, 1, true},
		{"nothing new and nothing running", nil, 0, false},
		{"the next Cycle's start", []Step{{Kind: StepStartCycle, Cycle: 2}}, 0, false},
		{"an approval request", []Step{{Kind: StepRequestApproval, Call: read}}, 1, false},
		{"the Task's end", []Step{{Kind: StepFinish}}, 0, false},
		{"a budget pause", []Step{{Kind: StepAskBudget}}, 0, false},
		{"the cycle limit", []Step{{Kind: StepLimit}}, 0, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := Holds(c.steps, c.running, readOnly); got != c.want {
				t.Fatalf("Holds() = %v, want %v", got, c.want)
			}
		})
	}
}

// A clone shares nothing that Apply changes: Chain decides on a clone, and
// the Task's own state must not move until the events are durable.
func TestCloneSharesNothingApplyChanges(t *testing.T) {
	s := New()
	s.TaskID = "P"
	apply(s, Create(CreateInput{Owner: "alice", Model: "fake/m", Request: "r", Tools: []string{"tools.load"}, Discovery: true, Budget: &api.BudgetAmounts{Tokens: 1000}}))
	apply(s, []proto.Message{
		&api.ChildSpawned{ChildId: "C", CallId: "c1"},
		&api.MessageSent{To: "C", Text: "hi", CallId: "c2"},
		&api.MessageReceived{From: "C", FromSeq: 3, Text: "yes"},
		&api.ToolsLoaded{Tools: []string{"files.read"}, CallId: "c3"},
	})
	before := fmt.Sprintf("%+v %+v %v %v %v %v", *s.Children["C"], s.ChildOrder, s.Sent, s.Received, s.Loaded, s.Budget.Sum)
	c := s.clone()
	apply(c, []proto.Message{
		&api.ChildEnded{ChildId: "C", Status: api.TaskStatus_TASK_STATUS_FINISHED},
		&api.ChildSpawned{ChildId: "D", CallId: "c4"},
		&api.MessageSent{To: "D", Text: "go", CallId: "c5"},
		&api.MessageReceived{From: "D", FromSeq: 2, Text: "ok"},
		&api.ToolsLoaded{Tools: []string{"shell.run"}, CallId: "c6"},
		&api.BudgetRaised{Add: &api.BudgetAmounts{Tokens: 500}},
		&api.CycleStarted{Cycle: 1, Reservation: &api.BudgetReservation{InputTokens: 10, OutputTokens: 20}},
	})
	if after := fmt.Sprintf("%+v %+v %v %v %v %v", *s.Children["C"], s.ChildOrder, s.Sent, s.Received, s.Loaded, s.Budget.Sum); after != before || len(s.Children) != 1 {
		t.Fatalf("applying to the clone changed the state:\n%s\nwas\n%s", after, before)
	}
}

// A Cycle chained after a result is reserved for as reconcile's would be:
// it carries its reservation, or the Task pauses for its budget instead.
func TestChainReserves(t *testing.T) {
	withBudget := func(tokens uint64) *State {
		s := New()
		s.TaskID = "T1"
		apply(s, Create(CreateInput{Owner: "alice", Model: "fake/m", Request: "do it", Budget: &api.BudgetAmounts{Tokens: tokens}}))
		apply(s, append(cycleWithCalls(1, "c1"), &api.ToolExecutionStarted{CallId: "c1"}))
		return s
	}
	reserve := &ReserveOptions{Now: now, Overhead: 100, OutputTokens: 50}
	for _, tc := range []struct {
		name   string
		tokens uint64
		want   StepKind
	}{
		{"the budget covers the next Cycle", 10_000, StepStartCycle},
		{"it does not", 120, StepBudget},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := withBudget(tc.tokens)
			all, steps, _ := s.Chain(s.ToolDone(ToolOutcome{CallID: "c1", Retained: []byte(`1`)}), NextOptions{Now: now, Budget: reserve})
			if len(steps) != 1 || steps[0].Kind != tc.want {
				t.Fatalf("Chain steps = %+v, want one %v", steps, tc.want)
			}
			switch last := all[len(all)-1].(type) {
			case *api.CycleStarted:
				if last.GetReservation().GetOutputTokens() != 50 {
					t.Fatalf("chained CycleStarted = %v, want its reservation", last)
				}
			case *api.StatusChanged:
				if last.GetPauseReason() != api.PauseReason_PAUSE_REASON_BUDGET {
					t.Fatalf("chained StatusChanged = %v, want a budget pause", last)
				}
			default:
				t.Fatalf("chained %T, want a CycleStarted or a budget pause", last)
			}
		})
	}
}
