package gateway

import (
	"strings"
	"testing"

	"lemo/api"
)

func createWithRules(rules ...*api.ToolApproval) *api.Request {
	return &api.Request{Command: &api.Request_CreateTask{CreateTask: &api.CreateTaskRequest{Request: "x", Model: "fake/echo", Approvals: rules}}}
}

func TestValidateApprovalRules(t *testing.T) {
	ask, deny := api.ApprovalRule_APPROVAL_RULE_ASK, api.ApprovalRule_APPROVAL_RULE_DENY
	many := make([]*api.ToolApproval, 65)
	for i := range many {
		many[i] = &api.ToolApproval{Tool: "*", Rule: ask}
	}
	cases := []struct {
		name  string
		rules []*api.ToolApproval
		want  string // "": valid
	}{
		{"none", nil, ""},
		{"name and patterns", []*api.ToolApproval{{Tool: "shell.run", Rule: ask}, {Tool: "files.*", Rule: deny}, {Tool: "*", Rule: ask}}, ""},
		{"64 rules", many[:64], ""},
		{"65 rules", many, "65 approval rules: at most 64"},
		{"empty tool", []*api.ToolApproval{{Rule: ask}}, `approval rule 1: tool "": want a tool name`},
		{"bad characters", []*api.ToolApproval{{Tool: "shell.run", Rule: ask}, {Tool: "Shell Run", Rule: ask}}, `approval rule 2: tool "Shell Run"`},
		{"long name", []*api.ToolApproval{{Tool: strings.Repeat("a", 65), Rule: ask}}, "1 to 64 characters"},
		{"no rule", []*api.ToolApproval{{Tool: "shell.run"}}, "rule APPROVAL_RULE_UNSPECIFIED: want ask"},
		{"unknown rule", []*api.ToolApproval{{Tool: "shell.run", Rule: 9}}, "want ask (a person approves each matching call) or deny"},
		{"nil rule", []*api.ToolApproval{nil}, "approval rule 1 is empty"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			req := createWithRules(c.rules...)
			req.Id = 7
			err := validate(req)
			if c.want == "" {
				if err != nil {
					t.Fatalf("validate = %v, want valid", err)
				}
				return
			}
			if err == nil || err.code != api.ErrorCode_ERROR_CODE_INVALID || !strings.Contains(err.msg, c.want) {
				t.Fatalf("validate = %v, want INVALID mentioning %q", err, c.want)
			}
		})
	}
}

// The rules reach the Task; a plain name that is no registered tool is
// refused by name.
func TestCreateTaskWithApprovalRules(t *testing.T) {
	h := newHarness(t, Limits{}, nil)
	c := h.connect(alice)
	r := c.call(createWithRules(&api.ToolApproval{Tool: "shell.run", Rule: api.ApprovalRule_APPROVAL_RULE_DENY}))
	if errCode(r) != api.ErrorCode_ERROR_CODE_INVALID || !strings.Contains(r.GetError().GetMessage(), `no tool is named "shell.run"`) {
		t.Fatalf("unknown tool: %v", r)
	}
	m := mustTask(t, c.call(createWithRules(&api.ToolApproval{Tool: "test.tick", Rule: api.ApprovalRule_APPROVAL_RULE_ASK}, &api.ToolApproval{Tool: "system*", Rule: api.ApprovalRule_APPROVAL_RULE_DENY})))
	hist := c.call(&api.Request{Command: &api.Request_History{History: &api.HistoryRequest{TaskId: m.GetTaskId(), FromSeq: 1, Limit: 1}}})
	var created *api.TaskCreated
	for _, ev := range hist.GetHistory().GetEvents() {
		if ev.GetTaskCreated() != nil {
			created = ev.GetTaskCreated()
		}
	}
	if got := created.GetApprovals(); len(got) != 2 || got[0].GetTool() != "test.tick" || got[1].GetRule() != api.ApprovalRule_APPROVAL_RULE_DENY {
		t.Fatalf("TaskCreated.approvals = %v (history %v)", got, hist)
	}
}
