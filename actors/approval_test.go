package actors_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"lemo/actors"
	"lemo/actors/taskstate"
	"lemo/api"
	"lemo/providers"
	"lemo/providers/fake"
	"lemo/tools"
)

// guardedTool needs approval before it runs; a "hurry" text asks for a
// short deadline.
type guardedTool struct{ echoTool }

func (guardedTool) Name() string { return "test.guarded" }
func (guardedTool) Approval(in json.RawMessage) tools.Approval {
	a := tools.Approval{Required: true, Reason: "guarded: " + string(in)}
	if strings.Contains(string(in), "hurry") {
		a.Deadline = 200 * time.Millisecond
	}
	if strings.Contains(string(in), "within the hour") {
		a.Deadline = time.Hour
	}
	return a
}

// askTool asks for approval while it runs and returns the decision.
type askTool struct{ echoTool }

func (askTool) Name() string { return "test.ask" }
func (askTool) ResultSchema() json.RawMessage {
	return json.RawMessage(`{"type":"object","required":["outcome"]}`)
}
func (askTool) Execute(ctx context.Context, c tools.Call, emit tools.Emit) (json.RawMessage, error) {
	d, err := c.Approvals.Ask(ctx, "may I delete the branch?", 0)
	if err != nil {
		return nil, err
	}
	return json.Marshal(map[string]any{"outcome": d.Outcome, "approved": d.Approved, "by": d.By})
}

// steerTool runs until it is steered with "stop", and returns what it got.
type steerTool struct{ echoTool }

func (steerTool) Name() string                 { return "test.steer" }
func (steerTool) SteerSchema() json.RawMessage { return textInput }
func (steerTool) ResultSchema() json.RawMessage {
	return json.RawMessage(`{"type":"object","required":["got"]}`)
}
func (steerTool) Execute(ctx context.Context, c tools.Call, emit tools.Emit) (json.RawMessage, error) {
	var got []string
	for {
		select {
		case s := <-c.Steer:
			var in struct{ Text string }
			_ = json.Unmarshal(s.Input, &in)
			got = append(got, in.Text)
			s.Reply(nil)
			if in.Text == "stop" {
				return json.Marshal(map[string]any{"got": got})
			}
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

func extraTools() []tools.Tool { return []tools.Tool{guardedTool{}, askTool{}, steerTool{}} }

func pending(t *testing.T, h *harness, n int) []*api.Event {
	t.Helper()
	var got []*api.Event
	eventually(t, "pending approvals", func() error {
		var err error
		got, err = h.d.PendingApprovals(context.Background(), actors.Operator)
		if err != nil {
			return err
		}
		if len(got) != n {
			return errNotYet
		}
		return nil
	})
	return got
}

func TestApprovalApprovedAndDenied(t *testing.T) {
	h := newHarness(t, func(n int, req *providers.Request) fake.Turn {
		if !hasTool(req) {
			return fake.Turn{ToolCalls: []providers.ToolCall{call("p", "test_guarded", req.Messages[0].Content)}}
		}
		m, _ := toolMessage(req, "call-1-1")
		return fake.Turn{Text: "saw " + m}
	}, extraTools()...)
	yes, no := h.create("yes"), h.create("no")
	h.waitStatus(yes, api.TaskStatus_TASK_STATUS_AWAITING_APPROVAL)
	h.waitStatus(no, api.TaskStatus_TASK_STATUS_AWAITING_APPROVAL)
	ps := pending(t, h, 2)
	if ar := ps[0].GetApprovalRequested(); ar.GetTool() != "test.guarded" || !strings.Contains(ar.GetReason(), "guarded") {
		t.Fatalf("pending approval = %v", ar)
	}
	if _, err := h.d.ResolveApproval(context.Background(), actors.Operator, yes+".call-1-1", true, ""); err != nil {
		t.Fatal(err)
	}
	if _, err := h.d.ResolveApproval(context.Background(), actors.Operator, no+".call-1-1", false, "too risky"); err != nil {
		t.Fatal(err)
	}
	evs := h.waitStatus(yes, api.TaskStatus_TASK_STATUS_FINISHED)
	if !has(evs, func(e *api.Event) bool { return e.GetToolResult() != nil }) {
		t.Fatalf("approved call did not run:\n%s", dump(evs))
	}
	evs = h.waitStatus(no, api.TaskStatus_TASK_STATUS_FINISHED)
	if !has(evs, func(e *api.Event) bool {
		return e.GetToolFailed().GetKind() == api.ToolFailureKind_TOOL_FAILURE_KIND_NOT_APPROVED && strings.Contains(e.GetToolFailed().GetMessage(), "too risky")
	}) || has(evs, func(e *api.Event) bool { return e.GetToolExecutionStarted() != nil }) {
		t.Fatalf("denied call:\n%s", dump(evs))
	}
	pending(t, h, 0)
	if _, err := h.d.ResolveApproval(context.Background(), actors.Operator, yes+".call-1-1", true, ""); !errors.Is(err, actors.ErrNotFound) {
		t.Fatalf("answering twice: err = %v, want ErrNotFound", err)
	}
	bob := actors.Caller{Owner: "bob"}
	if ps, _ := h.d.PendingApprovals(context.Background(), bob); len(ps) != 0 {
		t.Fatalf("bob sees %d approvals", len(ps))
	}
}

func TestApprovalDeadlineIsATimeoutNotADenial(t *testing.T) {
	h := newHarness(t, fake.Sequence(
		fake.Turn{ToolCalls: []providers.ToolCall{call("p", "test_guarded", "hurry")}},
		fake.Turn{Text: "ok"},
	), extraTools()...)
	id := h.create("hurry")
	evs := h.waitStatus(id, api.TaskStatus_TASK_STATUS_FINISHED)
	if !has(evs, func(e *api.Event) bool {
		return e.GetApprovalResolved().GetOutcome() == api.ApprovalOutcome_APPROVAL_OUTCOME_TIMED_OUT
	}) || has(evs, func(e *api.Event) bool {
		return e.GetApprovalResolved().GetOutcome() == api.ApprovalOutcome_APPROVAL_OUTCOME_DENIED
	}) {
		t.Fatalf("deadline:\n%s", dump(evs))
	}
}

// An approval survives a daemon restart and is then approved.
func TestApprovalSurvivesRestart(t *testing.T) {
	h := newHarness(t, fake.Sequence(
		fake.Turn{ToolCalls: []providers.ToolCall{call("p", "test_guarded", "later")}},
		fake.Turn{Text: "ran after the restart"},
	), extraTools()...)
	id := h.create("survive")
	h.waitStatus(id, api.TaskStatus_TASK_STATUS_AWAITING_APPROVAL)
	h.restart()
	ps := pending(t, h, 1)
	if ps[0].GetTaskId() != id {
		t.Fatalf("pending after restart = %v", ps)
	}
	m, _ := h.d.Task(context.Background(), actors.Operator, id)
	if m.GetStatus() != api.TaskStatus_TASK_STATUS_PAUSED || m.GetPauseReason() != api.PauseReason_PAUSE_REASON_INTERRUPTED {
		t.Fatalf("after restart: %v", m)
	}
	if _, err := h.d.ResolveApproval(context.Background(), actors.Operator, id+".call-1-1", true, ""); err != nil {
		t.Fatal(err)
	}
	if _, err := h.d.Continue(context.Background(), actors.Operator, id, ""); err != nil {
		t.Fatal(err)
	}
	evs := h.waitStatus(id, api.TaskStatus_TASK_STATUS_FINISHED)
	if !has(evs, func(e *api.Event) bool { return e.GetToolResult().GetCallId() == "call-1-1" }) {
		t.Fatalf("approved call did not run:\n%s", dump(evs))
	}
}

// A running call asks for approval; the decision goes back to it. A user
// pause cancels the pending request and the call learns it.
func TestRunningCallAsksForApproval(t *testing.T) {
	h := newHarness(t, func(n int, req *providers.Request) fake.Turn {
		if !hasTool(req) {
			return fake.Turn{ToolCalls: []providers.ToolCall{call("p", "test_ask", "x")}}
		}
		return fake.Turn{Text: "done"}
	}, extraTools()...)
	approve, pause := h.create("approve"), h.create("pause")
	h.waitStatus(approve, api.TaskStatus_TASK_STATUS_AWAITING_APPROVAL)
	h.waitStatus(pause, api.TaskStatus_TASK_STATUS_AWAITING_APPROVAL)
	ps := pending(t, h, 2)
	for _, p := range ps {
		if !p.GetApprovalRequested().GetDuringRun() {
			t.Fatalf("approval not marked as asked by the running call: %v", p)
		}
	}
	if _, err := h.d.ResolveApproval(context.Background(), actors.Operator, approve+".call-1-1.1", true, ""); err != nil {
		t.Fatal(err)
	}
	evs := h.waitStatus(approve, api.TaskStatus_TASK_STATUS_FINISHED)
	if !has(evs, func(e *api.Event) bool {
		return strings.Contains(string(e.GetToolResult().GetRetainedOutput()), `"outcome":"approved"`)
	}) {
		t.Fatalf("the call did not get the approval:\n%s", dump(evs))
	}
	if _, err := h.d.Pause(context.Background(), actors.Operator, pause); err != nil {
		t.Fatal(err)
	}
	evs = h.waitFor(pause, "the call's result", func(evs []*api.Event) bool {
		return has(evs, func(e *api.Event) bool { return e.GetToolResult() != nil })
	})
	if !has(evs, func(e *api.Event) bool {
		return strings.Contains(string(e.GetToolResult().GetRetainedOutput()), `"outcome":"cancelled"`)
	}) {
		t.Fatalf("the call did not learn of the cancellation:\n%s", dump(evs))
	}
	pending(t, h, 0)
}

func TestSteerRunningCall(t *testing.T) {
	h := newHarness(t, fake.Sequence(
		fake.Turn{ToolCalls: []providers.ToolCall{call("p", "test_steer", "x"), call("q", "test_echo", "y")}},
		fake.Turn{Text: "done"},
	), extraTools()...)
	id := h.create("steer")
	h.waitFor(id, "steerable call running", func(evs []*api.Event) bool {
		return has(evs, func(e *api.Event) bool { return e.GetToolExecutionStarted().GetCallId() == "call-1-1" })
	})
	ctx := context.Background()
	if err := h.d.Steer(ctx, actors.Operator, id, "call-1-2", json.RawMessage(`{"text":"x"}`)); err == nil {
		t.Fatal("steering a tool that accepts none succeeded")
	}
	if err := h.d.Steer(ctx, actors.Operator, id, "call-1-1", json.RawMessage(`{"bad":1}`)); !errors.Is(err, actors.ErrInvalid) {
		t.Fatalf("invalid steering input: err = %v, want ErrInvalid", err)
	}
	if err := h.d.Steer(ctx, actors.Caller{Owner: "bob"}, id, "call-1-1", json.RawMessage(`{"text":"x"}`)); !errors.Is(err, actors.ErrNotFound) {
		t.Fatalf("foreign steering: err = %v, want ErrNotFound", err)
	}
	for _, s := range []string{"left", "stop"} {
		if err := h.d.Steer(ctx, actors.Operator, id, "call-1-1", json.RawMessage(`{"text":"`+s+`"}`)); err != nil {
			t.Fatalf("Steer(%s): %v", s, err)
		}
	}
	evs := h.waitStatus(id, api.TaskStatus_TASK_STATUS_FINISHED)
	if !has(evs, func(e *api.Event) bool {
		return string(e.GetToolResult().GetRetainedOutput()) == `{"got":["left","stop"]}`
	}) {
		t.Fatalf("steering not received:\n%s", dump(evs))
	}
	if err := h.d.Steer(ctx, actors.Operator, id, "call-1-1", json.RawMessage(`{"text":"late"}`)); !errors.Is(err, actors.ErrNotFound) {
		t.Fatalf("steering a finished call: err = %v, want ErrNotFound", err)
	}
}

func TestPolicyDenyRefusesTheCall(t *testing.T) {
	h := newHarnessWith(t, fake.Sequence(
		fake.Turn{ToolCalls: []providers.ToolCall{call("p", "test_echo", "rm -rf")}},
		fake.Turn{Text: "ok"},
	), func(o *actors.Options) {
		o.Approval = func(owner string, tool *tools.Registered, in json.RawMessage) tools.Approval {
			if strings.Contains(string(in), "rm -rf") {
				return tools.Approval{Deny: true, Reason: "rm -rf is denied"}
			}
			return tools.Approval{}
		}
	})
	id := h.create("deny")
	evs := h.waitStatus(id, api.TaskStatus_TASK_STATUS_FINISHED)
	if !has(evs, func(e *api.Event) bool {
		return e.GetToolFailed().GetKind() == api.ToolFailureKind_TOOL_FAILURE_KIND_NOT_APPROVED && strings.Contains(e.GetToolFailed().GetMessage(), "denied by policy")
	}) {
		t.Fatalf("policy deny:\n%s", dump(evs))
	}
}

// A decision that comes after the approval's deadline is not taken: the
// approval is recorded as timed out (never as the person's decision), the
// caller is told, and the call never runs. Here the deadline passes on the
// daemon's clock before the timer that would record it fires.
func TestLateDecisionIsATimeout(t *testing.T) {
	h := newHarness(t, fake.Sequence(
		fake.Turn{ToolCalls: []providers.ToolCall{call("p", "test_guarded", "within the hour")}},
		fake.Turn{Text: "went on without it"},
	), extraTools()...)
	id := h.create("late")
	h.waitStatus(id, api.TaskStatus_TASK_STATUS_AWAITING_APPROVAL)
	// The status is published before the Task arms the approval's timer
	// in the same message; a command through its mailbox (a decision on
	// no approval) returns once that is done, so the clock moves on only
	// after the timer was armed for the real deadline.
	if _, err := h.d.ResolveApproval(context.Background(), actors.Operator, id+".call-9-9", true, ""); !errors.Is(err, taskstate.ErrNotFound) {
		t.Fatalf("a decision on no approval: %v, want not found", err)
	}
	h.skew.Store(int64(2 * time.Hour))
	_, err := h.d.ResolveApproval(context.Background(), actors.Operator, id+".call-1-1", true, "")
	if !errors.Is(err, taskstate.ErrExpired) {
		t.Fatalf("a decision after the deadline: %v, want ErrExpired", err)
	}
	evs := h.waitStatus(id, api.TaskStatus_TASK_STATUS_FINISHED)
	if !has(evs, func(e *api.Event) bool {
		return e.GetApprovalResolved().GetOutcome() == api.ApprovalOutcome_APPROVAL_OUTCOME_TIMED_OUT
	}) || has(evs, func(e *api.Event) bool {
		return e.GetApprovalResolved().GetOutcome() == api.ApprovalOutcome_APPROVAL_OUTCOME_APPROVED
	}) || has(evs, func(e *api.Event) bool { return e.GetToolExecutionStarted() != nil }) {
		t.Fatalf("late decision:\n%s", dump(evs))
	}
}

// An approval whose deadline passed while the daemon was down is recorded
// as timed out when the daemon starts, also for a Task its stop had paused
// (not only for Tasks found running), before anyone touches the Task.
func TestApprovalExpiredWhileDownTimesOutAtStartup(t *testing.T) {
	h := newHarness(t, fake.Sequence(
		fake.Turn{ToolCalls: []providers.ToolCall{call("p", "test_guarded", "within the hour")}},
		fake.Turn{Text: "went on without it"},
	), extraTools()...)
	id := h.create("expires while down")
	h.waitStatus(id, api.TaskStatus_TASK_STATUS_AWAITING_APPROVAL)
	h.stop() // a clean stop pauses the Task as interrupted; the approval stays
	h.skew.Store(int64(2 * time.Hour))
	h.start()
	if ps, err := h.d.PendingApprovals(context.Background(), actors.Operator); err != nil || len(ps) != 0 {
		t.Fatalf("pending after a restart past the deadline = %v, %v; want none", ps, err)
	}
	var resolved *api.ApprovalResolved
	err := h.store.Events(id, 1, 0, func(ev *api.Event) error {
		if r := ev.GetApprovalResolved(); r != nil {
			resolved = r
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if resolved.GetOutcome() != api.ApprovalOutcome_APPROVAL_OUTCOME_TIMED_OUT || !strings.Contains(resolved.GetReason(), "while the daemon was down") {
		t.Fatalf("the approval after the restart: %v", resolved)
	}
}
