package actors_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"lemo/actors"
	"lemo/api"
	"lemo/providers"
	"lemo/providers/fake"
	"lemo/tools"
)

// rawTool returns the input it was given, and retains the input Retain was
// given: what the tool saw, byte for byte.
type rawTool struct{ echoTool }

func (rawTool) Name() string { return "test.raw" }
func (rawTool) ResultSchema() json.RawMessage {
	return json.RawMessage(`{"type":"object","required":["input"]}`)
}
func (rawTool) Execute(ctx context.Context, c tools.Call, emit tools.Emit) (json.RawMessage, error) {
	return json.Marshal(map[string]json.RawMessage{"input": c.Input})
}
func (rawTool) Retain(out, in json.RawMessage) json.RawMessage {
	b, _ := json.Marshal(map[string]json.RawMessage{"input": in})
	return b
}

// callEachMessage calls tool (with text) for every user message and
// answers once the call reported.
func callEachMessage(tool string) fake.Plan {
	return func(n int, req *providers.Request) fake.Turn {
		if last := req.Messages[len(req.Messages)-1]; last.Role == providers.RoleUser {
			return fake.Turn{ToolCalls: []providers.ToolCall{call("p", tool, last.Content)}}
		}
		return fake.Turn{Text: "done"}
	}
}

func createWith(t *testing.T, h *harness, request string, rules ...*api.ToolApproval) string {
	t.Helper()
	m, err := h.d.CreateTask(context.Background(), actors.Operator, actors.CreateTask{Request: request, Model: "fake/m", Approvals: rules})
	if err != nil {
		t.Fatalf("CreateTask: %v", err)
	}
	return m.GetTaskId()
}

func rule(tool string, r api.ApprovalRule) *api.ToolApproval {
	return &api.ToolApproval{Tool: tool, Rule: r}
}

const (
	ask  = api.ApprovalRule_APPROVAL_RULE_ASK
	deny = api.ApprovalRule_APPROVAL_RULE_DENY
)

func started(evs []*api.Event) bool {
	return has(evs, func(e *api.Event) bool { return e.GetToolExecutionStarted() != nil })
}

// A Task's ask rule holds a call the tool itself would run unasked, also
// after a daemon restart; another Task without the rule runs it at once.
func TestTaskAskRuleSurvivesRestart(t *testing.T) {
	h := newHarness(t, callEachMessage("test_echo"))
	free := h.create("free")
	id := createWith(t, h, "ruled", rule("test.*", ask))
	h.waitStatus(free, api.TaskStatus_TASK_STATUS_FINISHED)
	h.waitStatus(id, api.TaskStatus_TASK_STATUS_AWAITING_APPROVAL)
	ps := pending(t, h, 1)
	if r := ps[0].GetApprovalRequested().GetReason(); !strings.Contains(r, "task's rule") || !strings.Contains(r, "test.*") {
		t.Fatalf("reason = %q, want the Task's rule named", r)
	}
	if _, err := h.d.ResolveApproval(context.Background(), actors.Operator, id+".call-1-1", true, ""); err != nil {
		t.Fatal(err)
	}
	h.waitStatus(id, api.TaskStatus_TASK_STATUS_FINISHED)

	h.restart()
	if _, err := h.d.SendMessage(context.Background(), actors.Operator, id, "again"); err != nil {
		t.Fatal(err)
	}
	evs := h.waitStatus(id, api.TaskStatus_TASK_STATUS_AWAITING_APPROVAL)
	if !has(evs, func(e *api.Event) bool { return e.GetApprovalRequested().GetCallId() == "call-3-1" }) {
		t.Fatalf("after the restart the rule did not hold the new call:\n%s", dump(evs))
	}
	if _, err := h.d.ResolveApproval(context.Background(), actors.Operator, id+".call-3-1", false, "no"); err != nil {
		t.Fatal(err)
	}
	evs = h.waitStatus(id, api.TaskStatus_TASK_STATUS_FINISHED)
	if has(evs, func(e *api.Event) bool { return e.GetToolExecutionStarted().GetCallId() == "call-3-1" }) {
		t.Fatalf("the denied call ran:\n%s", dump(evs))
	}
}

// A Task's deny rule refuses the call without asking, whatever else asks.
func TestTaskDenyRuleWinsOverAsk(t *testing.T) {
	h := newHarness(t, callEachMessage("test_guarded"), extraTools()...)
	id := createWith(t, h, "ruled", rule("test.guarded", ask), rule("test.g*", deny))
	evs := h.waitStatus(id, api.TaskStatus_TASK_STATUS_FINISHED)
	if !has(evs, func(e *api.Event) bool {
		f := e.GetToolFailed()
		return f.GetKind() == api.ToolFailureKind_TOOL_FAILURE_KIND_NOT_APPROVED && strings.Contains(f.GetMessage(), "task's rule denies") && strings.Contains(f.GetMessage(), "test.g*")
	}) || started(evs) || has(evs, func(e *api.Event) bool { return e.GetApprovalRequested() != nil }) {
		t.Fatalf("deny rule:\n%s", dump(evs))
	}
	if created := evs[0].GetTaskCreated(); len(created.GetApprovals()) != 2 || created.GetApprovals()[1].GetTool() != "test.g*" {
		t.Fatalf("TaskCreated.approvals = %v", created.GetApprovals())
	}
}

func TestTaskApprovalRulesAreValidated(t *testing.T) {
	h := newHarness(t, fake.Echo())
	many := make([]*api.ToolApproval, actors.MaxTaskApprovals+1)
	for i := range many {
		many[i] = rule("*", ask)
	}
	cases := []struct {
		name  string
		rules []*api.ToolApproval
		want  string
	}{
		{"unknown tool", []*api.ToolApproval{rule("test.echo", ask), rule("shell.run", deny)}, `no tool is named "shell.run"`},
		{"bad pattern", []*api.ToolApproval{rule("Shell run", ask)}, "want a tool name"},
		{"no rule", []*api.ToolApproval{rule("test.echo", api.ApprovalRule_APPROVAL_RULE_UNSPECIFIED)}, "want ask or deny"},
		{"too many", many, "at most 64"},
	}
	for _, c := range cases {
		_, err := h.d.CreateTask(context.Background(), actors.Operator, actors.CreateTask{Request: "x", Model: "fake/m", Approvals: c.rules})
		if !errors.Is(err, actors.ErrInvalid) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err = %v, want ErrInvalid mentioning %q", c.name, err, c.want)
		}
	}
	// A pattern need not name a registered tool.
	if _, err := h.d.CreateTask(context.Background(), actors.Operator, actors.CreateTask{Request: "x", Model: "fake/m", Approvals: []*api.ToolApproval{rule("nothing.*", deny)}}); err != nil {
		t.Fatalf("pattern: %v", err)
	}
}

// The daemon's rules: deny beats ask beats allow, whatever their order;
// SetApproval replaces them for calls not yet judged.
func TestDaemonRulePolicy(t *testing.T) {
	h := newHarnessWith(t, callEachMessage("test_echo"), func(o *actors.Options) {
		o.Approval = actors.RulePolicy([]actors.PolicyRule{{Tool: "test.echo", Rule: "allow"}, {Tool: "test.*", Rule: "ask"}}, time.Hour)
	})
	id := h.create("asked")
	evs := h.waitStatus(id, api.TaskStatus_TASK_STATUS_AWAITING_APPROVAL)
	var ar *api.ApprovalRequested
	for _, e := range evs {
		if e.GetApprovalRequested() != nil {
			ar = e.GetApprovalRequested()
		}
	}
	if !strings.Contains(ar.GetReason(), "daemon's approvals rule") || ar.GetDeadline() == nil {
		t.Fatalf("policy approval = %v, want the daemon's rule and a deadline", ar)
	}
	if _, err := h.d.ResolveApproval(context.Background(), actors.Operator, id+".call-1-1", true, ""); err != nil {
		t.Fatal(err)
	}
	h.waitStatus(id, api.TaskStatus_TASK_STATUS_FINISHED)

	h.d.SetApproval(actors.RulePolicy([]actors.PolicyRule{{Tool: "*", Rule: "deny"}, {Tool: "test.echo", Rule: "allow"}}, 0), 0)
	id = h.create("denied")
	evs = h.waitStatus(id, api.TaskStatus_TASK_STATUS_FINISHED)
	if !has(evs, func(e *api.Event) bool {
		return strings.Contains(e.GetToolFailed().GetMessage(), "denied by policy: the daemon's approvals rule denies")
	}) || started(evs) {
		t.Fatalf("deny over allow:\n%s", dump(evs))
	}

	h.d.SetApproval(actors.RulePolicy([]actors.PolicyRule{{Tool: "test.echo", Rule: "allow"}}, 0), 0)
	id = h.create("allowed")
	evs = h.waitStatus(id, api.TaskStatus_TASK_STATUS_FINISHED)
	if !has(evs, func(e *api.Event) bool { return e.GetToolResult() != nil }) {
		t.Fatalf("allowed call did not run:\n%s", dump(evs))
	}
}

// The model asks for approval with request_approval: approved, the call
// runs without the property in its input (Execute and Retain); denied, it
// never runs. The recorded call keeps the arguments as the model sent them.
func TestModelRequestsApproval(t *testing.T) {
	args := json.RawMessage(`{"text":"x","request_approval":"it deletes\nthe branch"}`)
	h := newHarness(t, func(n int, req *providers.Request) fake.Turn {
		if !hasTool(req) {
			return fake.Turn{ToolCalls: []providers.ToolCall{{ID: "p", Name: "test_raw", Arguments: args}}}
		}
		return fake.Turn{Text: "done"}
	}, rawTool{})
	yes, no := h.create("yes"), h.create("no")
	h.waitStatus(yes, api.TaskStatus_TASK_STATUS_AWAITING_APPROVAL)
	h.waitStatus(no, api.TaskStatus_TASK_STATUS_AWAITING_APPROVAL)
	for _, p := range pending(t, h, 2) {
		if r := p.GetApprovalRequested().GetReason(); r != "the model asked: it deletes the branch" {
			t.Fatalf("reason = %q", r)
		}
	}
	if _, err := h.d.ResolveApproval(context.Background(), actors.Operator, yes+".call-1-1", true, ""); err != nil {
		t.Fatal(err)
	}
	if _, err := h.d.ResolveApproval(context.Background(), actors.Operator, no+".call-1-1", false, "no"); err != nil {
		t.Fatal(err)
	}
	evs := h.waitStatus(yes, api.TaskStatus_TASK_STATUS_FINISHED)
	if !has(evs, func(e *api.Event) bool {
		return string(e.GetToolResult().GetRetainedOutput()) == `{"input":{"text":"x"}}`
	}) {
		t.Fatalf("the tool saw request_approval, or did not run:\n%s", dump(evs))
	}
	if !has(evs, func(e *api.Event) bool { return string(e.GetToolCallRecorded().GetArguments()) == string(args) }) {
		t.Fatalf("the recorded call lost the model's arguments:\n%s", dump(evs))
	}
	evs = h.waitStatus(no, api.TaskStatus_TASK_STATUS_FINISHED)
	if started(evs) {
		t.Fatalf("the denied call ran:\n%s", dump(evs))
	}
}

// request_approval that is not a string is invalid input, never a silent
// run without approval.
func TestModelRequestApprovalMustBeText(t *testing.T) {
	h := newHarness(t, fake.Sequence(
		fake.Turn{ToolCalls: []providers.ToolCall{{ID: "p", Name: "test_raw", Arguments: json.RawMessage(`{"text":"x","request_approval":true}`)}}},
		fake.Turn{Text: "ok"},
	), rawTool{})
	id := h.create("bad")
	evs := h.waitStatus(id, api.TaskStatus_TASK_STATUS_FINISHED)
	if !has(evs, func(e *api.Event) bool {
		return e.GetToolFailed().GetKind() == api.ToolFailureKind_TOOL_FAILURE_KIND_INVALID_INPUT && strings.Contains(e.GetToolFailed().GetMessage(), "request_approval")
	}) || started(evs) {
		t.Fatalf("non-string request_approval:\n%s", dump(evs))
	}
}

// Approvals that calls wait for before they start are cancelled when the
// Task is cancelled (the calls never run), and none is left pending when a
// Task finishes.
func TestPendingApprovalsEndWithTheTask(t *testing.T) {
	h := newHarness(t, func(n int, req *providers.Request) fake.Turn {
		if !hasTool(req) {
			return fake.Turn{ToolCalls: []providers.ToolCall{call("p", "test_guarded", "a"), call("q", "test_echo", "b")}}
		}
		return fake.Turn{Text: "done"}
	}, extraTools()...)
	cancelled := createWith(t, h, "cancel", rule("test.echo", ask))
	finished := createWith(t, h, "finish", rule("test.echo", ask))
	pending(t, h, 4) // two calls of each Task
	if _, err := h.d.Cancel(context.Background(), actors.Operator, cancelled); err != nil {
		t.Fatal(err)
	}
	evs := h.waitStatus(cancelled, api.TaskStatus_TASK_STATUS_CANCELLED)
	for _, c := range []string{"call-1-1", "call-1-2"} {
		if !has(evs, func(e *api.Event) bool {
			r := e.GetApprovalResolved()
			return r.GetCallId() == c && r.GetOutcome() == api.ApprovalOutcome_APPROVAL_OUTCOME_CANCELLED
		}) || !has(evs, func(e *api.Event) bool {
			return e.GetToolFailed().GetCallId() == c && e.GetToolFailed().GetKind() == api.ToolFailureKind_TOOL_FAILURE_KIND_NOT_APPROVED
		}) {
			t.Fatalf("%s: approval not cancelled:\n%s", c, dump(evs))
		}
	}
	if started(evs) {
		t.Fatalf("a call of the cancelled Task ran:\n%s", dump(evs))
	}
	pending(t, h, 2)
	if _, err := h.d.ResolveApproval(context.Background(), actors.Operator, finished+".call-1-1", true, ""); err != nil {
		t.Fatal(err)
	}
	if _, err := h.d.ResolveApproval(context.Background(), actors.Operator, finished+".call-1-2", false, "no"); err != nil {
		t.Fatal(err)
	}
	evs = h.waitStatus(finished, api.TaskStatus_TASK_STATUS_FINISHED)
	requested, resolved := 0, 0
	for _, e := range evs {
		if e.GetApprovalRequested() != nil {
			requested++
		}
		if e.GetApprovalResolved() != nil {
			resolved++
		}
	}
	if requested != 2 || resolved != 2 {
		t.Fatalf("finished with %d approvals requested, %d resolved:\n%s", requested, resolved, dump(evs))
	}
	pending(t, h, 0)
}
