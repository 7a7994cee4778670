package gateway

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"regexp"
	"strings"

	"lemo/actors"
	"lemo/api"
	"lemo/internal/names"
	"lemo/persistence"
	"lemo/tools"
)

// cmdError is a command's failure as the client receives it.
type cmdError struct {
	code api.ErrorCode
	msg  string
}

func (e *cmdError) Error() string { return e.msg }

func invalid(format string, args ...any) *cmdError {
	return &cmdError{code: api.ErrorCode_ERROR_CODE_INVALID, msg: fmt.Sprintf(format, args...)}
}

func tooLarge(format string, args ...any) *cmdError {
	return &cmdError{code: api.ErrorCode_ERROR_CODE_TOO_LARGE, msg: fmt.Sprintf(format, args...)}
}

// Bounds of what a command may carry. The daemon applies its own limits
// (for example the largest user message) after these.
const (
	maxListLimit     = 500
	maxHistoryLimit  = 1000
	maxTextBytes     = 4 << 20
	maxModelBytes    = 256
	maxToolsPerTask  = 256
	maxPathBytes     = 4096
	maxReasonBytes   = 4096
	maxIDBytes       = 256
	maxResume        = 10000
	maxSteerBytes    = 256 << 10
	maxServiceOps    = 64
	maxSchemaBytes   = 64 << 10
	maxDescription   = 4096
	maxServiceResult = 1 << 20
	maxNameLen       = 64
)

var nameRE = regexp.MustCompile(`^[a-z0-9_.-]{1,64}$`)

// validate checks a command's form, without the daemon's state. It is the
// first thing done with anything a client sends.
func validate(r *api.Request) *cmdError {
	if r.GetId() == 0 {
		return invalid("request id must not be 0")
	}
	switch c := r.GetCommand().(type) {
	case nil:
		return invalid("empty or unknown command (is the client newer than the daemon?)")
	case *api.Request_Hello:
		if c.Hello.GetProtocolVersion() == 0 {
			return invalid("hello: protocol_version must be set")
		}
		if n := len(c.Hello.GetCallbackSecret()); n != 0 && (n < 16 || n > 64) {
			return invalid("hello: callback_secret must be 16 to 64 bytes")
		}
		if len(c.Hello.GetClient()) > maxIDBytes {
			return tooLarge("hello: client name longer than %d bytes", maxIDBytes)
		}
		if err := line("hello: client name", c.Hello.GetClient()); err != nil {
			return err
		}
	case *api.Request_CreateTask:
		m := c.CreateTask
		if err := text("request", m.GetRequest()); err != nil {
			return err
		}
		if err := modelID(m.GetModel(), true); err != nil {
			return err
		}
		if len(m.GetTools()) > maxToolsPerTask {
			return invalid("create_task: at most %d tools", maxToolsPerTask)
		}
		for _, t := range m.GetTools() {
			if !nameRE.MatchString(t) {
				return invalid("create_task: tool name %q: want 1 to 64 characters of a-z, 0-9, '_', '.' or '-'", t)
			}
		}
		if len(m.GetTools()) > 0 && !m.GetToolsRestricted() {
			return invalid("create_task: tools are listed but tools_restricted is not set")
		}
		if ws := m.GetWorkspace(); ws != "" {
			if len(ws) > maxPathBytes {
				return tooLarge("create_task: workspace path of %d bytes exceeds %d bytes", len(ws), maxPathBytes)
			}
			if err := line("create_task: workspace", ws); err != nil {
				return err
			}
			if !filepath.IsAbs(ws) {
				return invalid("create_task: workspace %q: want an absolute path", clip(ws))
			}
		}
		return validApprovals(m.GetApprovals())
	case *api.Request_SendMessage:
		if err := taskID(c.SendMessage.GetTaskId()); err != nil {
			return err
		}
		return text("message", c.SendMessage.GetText())
	case *api.Request_Pause:
		return taskID(c.Pause.GetTaskId())
	case *api.Request_Cancel:
		return taskID(c.Cancel.GetTaskId())
	case *api.Request_GetTask:
		return taskID(c.GetTask.GetTaskId())
	case *api.Request_ContinueTask:
		if err := taskID(c.ContinueTask.GetTaskId()); err != nil {
			return err
		}
		return modelID(c.ContinueTask.GetModel(), true)
	case *api.Request_ListTasks:
		if b := c.ListTasks.GetBefore(); b != "" {
			if err := taskID(b); err != nil {
				return invalid("list_tasks: before: %s", err.msg)
			}
		}
		if c.ListTasks.GetLimit() > maxListLimit {
			return invalid("list_tasks: limit %d exceeds %d", c.ListTasks.GetLimit(), maxListLimit)
		}
	case *api.Request_History:
		if err := taskID(c.History.GetTaskId()); err != nil {
			return err
		}
		if c.History.GetLimit() > maxHistoryLimit {
			return invalid("history: limit %d exceeds %d", c.History.GetLimit(), maxHistoryLimit)
		}
	case *api.Request_ListTools, *api.Request_ListModels, *api.Request_ListApprovals, *api.Request_Goodbye, *api.Request_Inspect:
	case *api.Request_Subscribe:
		return validSubscribe(c.Subscribe)
	case *api.Request_Unsubscribe:
		if c.Unsubscribe.GetSubscription() == 0 {
			return invalid("unsubscribe: subscription must not be 0")
		}
	case *api.Request_Ack:
		if c.Ack.GetSubscription() == 0 || c.Ack.GetCount() == 0 {
			return invalid("ack: subscription and count must not be 0")
		}
	case *api.Request_ResolveApproval:
		id := c.ResolveApproval.GetApprovalId()
		task, rest, ok := strings.Cut(id, ".")
		if !ok || rest == "" || len(id) > maxIDBytes || !names.TaskID(task) {
			return invalid("resolve_approval: approval id %q: want <task id>.<call id> as the approval request names it", clip(id))
		}
		if len(c.ResolveApproval.GetReason()) > maxReasonBytes {
			return tooLarge("resolve_approval: reason of %d bytes exceeds %d bytes", len(c.ResolveApproval.GetReason()), maxReasonBytes)
		}
		if err := multiline("resolve_approval: reason", c.ResolveApproval.GetReason()); err != nil {
			return err
		}
		if c.ResolveApproval.GetAlwaysForTask() && !c.ResolveApproval.GetApprove() {
			return invalid("resolve_approval: always_for_task is set with approve false: always_for_task only goes with approve (approve this call and allow the same kind in the Task); to deny, leave it unset")
		}
	case *api.Request_Steer:
		m := c.Steer
		if err := taskID(m.GetTaskId()); err != nil {
			return err
		}
		if m.GetCallId() == "" || len(m.GetCallId()) > maxIDBytes {
			return invalid("steer: call id must be 1 to %d bytes", maxIDBytes)
		}
		if err := line("steer: call id", m.GetCallId()); err != nil {
			return err
		}
		if len(m.GetInput()) > maxSteerBytes {
			return tooLarge("steer: input of %d bytes exceeds %d", len(m.GetInput()), maxSteerBytes)
		}
		if !json.Valid(m.GetInput()) {
			return invalid("steer: input is not JSON")
		}
	case *api.Request_StopCall:
		if err := taskID(c.StopCall.GetTaskId()); err != nil {
			return err
		}
		if id := c.StopCall.GetCallId(); id == "" || len(id) > maxIDBytes {
			return invalid("stop_call: call id must be 1 to %d bytes", maxIDBytes)
		}
		if err := line("stop_call: call id", c.StopCall.GetCallId()); err != nil {
			return err
		}
	case *api.Request_ListDelegateSessions:
		if id := c.ListDelegateSessions.GetTaskId(); id != "" {
			return taskID(id)
		}
	case *api.Request_RegisterService:
		return validService(c.RegisterService.GetService())
	case *api.Request_UnregisterService:
		if !nameRE.MatchString(c.UnregisterService.GetName()) {
			return invalid("unregister_service: name %q: want 1 to 64 characters of a-z, 0-9, '_', '.' or '-'", clip(c.UnregisterService.GetName()))
		}
	case *api.Request_ServiceResult:
		m := c.ServiceResult
		if m.GetCall() == 0 {
			return invalid("service_result: call must not be 0")
		}
		if len(m.GetOutput()) > maxServiceResult {
			return tooLarge("service_result: output of %d bytes exceeds %d", len(m.GetOutput()), maxServiceResult)
		}
		if len(m.GetError()) > maxReasonBytes {
			return tooLarge("service_result: error of %d bytes exceeds %d bytes", len(m.GetError()), maxReasonBytes)
		}
		if err := multiline("service_result: error", m.GetError()); err != nil {
			return err
		}
		if m.GetError() == "" && !json.Valid(m.GetOutput()) {
			return invalid("service_result: output is not JSON")
		}
	case *api.Request_OwnerBudget:
		if err := persistence.ValidOwner(c.OwnerBudget.GetOwner()); err != nil {
			return invalid("owner_budget: owner: %v", err)
		}
	case *api.Request_RaiseBudget:
		if o := c.RaiseBudget.GetOwner(); o != "" {
			if c.RaiseBudget.GetTaskId() != "" {
				return invalid("raise_budget: give task_id (a Task's budget) or owner (an owner's daily budget), not both")
			}
			if err := persistence.ValidOwner(o); err != nil {
				return invalid("raise_budget: owner: %v", err)
			}
		} else if err := taskID(c.RaiseBudget.GetTaskId()); err != nil {
			return err
		}
		if !api.HasBudget(c.RaiseBudget.GetAdd()) {
			return invalid("raise_budget: nothing to add: set add.tokens, add.cost_nano_usd or add.time_ms above zero")
		}
	default:
		return invalid("unknown command %T", c)
	}
	return nil
}

// validApprovals checks the form of a Task's approval rules; the daemon
// checks that a plain tool name names a registered tool.
func validApprovals(rules []*api.ToolApproval) *cmdError {
	if len(rules) > actors.MaxTaskApprovals {
		return invalid("create_task: %d approval rules: at most %d are accepted", len(rules), actors.MaxTaskApprovals)
	}
	for i, r := range rules {
		if r == nil {
			return invalid("create_task: approval rule %d is empty: want a tool and a rule (ask or deny)", i+1)
		}
		if tools.CheckPattern(r.GetTool()) != nil {
			return invalid("create_task: approval rule %d: tool %q: want a tool name (1 to %d characters of a-z, 0-9, '_', '.' or '-') or a pattern with '*' such as \"files.*\" or \"*\"", i+1, clip(r.GetTool()), tools.MaxNameLen)
		}
		switch r.GetRule() {
		case api.ApprovalRule_APPROVAL_RULE_ASK, api.ApprovalRule_APPROVAL_RULE_DENY:
		default:
			return invalid("create_task: approval rule %d (%s): rule %s: want ask (a person approves each matching call) or deny (matching calls never run)", i+1, r.GetTool(), r.GetRule())
		}
	}
	return nil
}

func validSubscribe(m *api.SubscribeRequest) *cmdError {
	if m.GetSubscription() == 0 {
		return invalid("subscribe: subscription must not be 0")
	}
	if m.GetTaskId() != "" {
		if err := taskID(m.GetTaskId()); err != nil {
			return err
		}
		if len(m.GetResume()) > 0 {
			return invalid("subscribe: resume is for subscriptions to every Task; use from_seq for one Task")
		}
		return nil
	}
	if m.GetFromSeq() != 0 {
		return invalid("subscribe: from_seq needs a task_id; to resume every Task, use resume")
	}
	if len(m.GetResume()) > maxResume {
		return invalid("subscribe: at most %d resume points", maxResume)
	}
	seen := make(map[string]bool, len(m.GetResume()))
	for _, ts := range m.GetResume() {
		if err := taskID(ts.GetTaskId()); err != nil {
			return invalid("subscribe: resume: %s", err.msg)
		}
		if seen[ts.GetTaskId()] {
			return invalid("subscribe: resume names task %s twice", ts.GetTaskId())
		}
		seen[ts.GetTaskId()] = true
	}
	return nil
}

func validService(s *api.ServiceSpec) *cmdError {
	if s == nil {
		return invalid("register_service: service is missing")
	}
	if !nameRE.MatchString(s.GetName()) {
		return invalid("register_service: name %q: want 1 to 64 characters of a-z, 0-9, '_', '.' or '-'", clip(s.GetName()))
	}
	if len(s.GetDescription()) > maxDescription {
		return tooLarge("register_service: description of %d bytes exceeds %d bytes", len(s.GetDescription()), maxDescription)
	}
	if err := multiline("register_service: description", s.GetDescription()); err != nil {
		return err
	}
	ops := s.GetOperations()
	if len(ops) == 0 || len(ops) > maxServiceOps {
		return invalid("register_service: want 1 to %d operations", maxServiceOps)
	}
	seen := make(map[string]bool, len(ops))
	for _, op := range ops {
		if op == nil || !nameRE.MatchString(op.GetName()) {
			return invalid("register_service: operation name %q: want 1 to 64 characters of a-z, 0-9, '_', '.' or '-'", clip(op.GetName()))
		}
		if seen[op.GetName()] {
			return invalid("register_service: operation %q listed twice", op.GetName())
		}
		seen[op.GetName()] = true
		if len(op.GetDescription()) > maxDescription {
			return tooLarge("register_service: operation %s: description of %d bytes exceeds %d bytes", op.GetName(), len(op.GetDescription()), maxDescription)
		}
		if err := multiline("register_service: operation "+op.GetName()+": description", op.GetDescription()); err != nil {
			return err
		}
		for what, schema := range map[string][]byte{"input": op.GetInputSchema(), "result": op.GetResultSchema()} {
			if len(schema) == 0 {
				continue
			}
			if len(schema) > maxSchemaBytes {
				return tooLarge("register_service: operation %s: %s schema of %d bytes exceeds %d", op.GetName(), what, len(schema), maxSchemaBytes)
			}
			if !json.Valid(schema) {
				return invalid("register_service: operation %s: %s schema is not JSON", op.GetName(), what)
			}
		}
	}
	return nil
}

func taskID(id string) *cmdError {
	if !names.TaskID(id) {
		return invalid("task id %q: want %s", clip(id), names.TaskIDForm)
	}
	return nil
}

// text checks a person's text (a request, a message): not empty, within
// maxTextBytes (the daemon's own limit is lower; both answer TOO_LARGE),
// and multi-line text by api.CheckText.
func text(what, s string) *cmdError {
	switch {
	case strings.TrimSpace(s) == "":
		return invalid("%s is empty", what)
	case len(s) > maxTextBytes:
		return tooLarge("%s of %d bytes exceeds %d bytes", what, len(s), maxTextBytes)
	}
	return multiline(what, s)
}

// multiline checks text that may span lines (api.CheckText).
func multiline(what, s string) *cmdError {
	if err := api.CheckText(s, true); err != nil {
		return invalid("%s %v", what, err)
	}
	return nil
}

// line checks text of one line: a path, a name, an id (api.CheckText).
func line(what, s string) *cmdError {
	if err := api.CheckText(s, false); err != nil {
		return invalid("%s %v", what, err)
	}
	return nil
}

func modelID(id string, optional bool) *cmdError {
	if id == "" && optional {
		return nil
	}
	if err := line("model", id); err != nil {
		return err
	}
	p, n, ok := strings.Cut(id, "/")
	if !ok || p == "" || n == "" || len(id) > maxModelBytes {
		return invalid("model %q: want provider/model, for example ollama/qwen3:8b", clip(id))
	}
	return nil
}

// clip shortens a client-provided string quoted in an error.
func clip(s string) string {
	if len(s) <= 80 {
		return s
	}
	return s[:77] + "..."
}
