package client

import (
	"context"
	"encoding/json"

	"lemo/api"
)

// CreateTask is a new Task's input.
type CreateTask struct {
	// Request is the user's request (required).
	Request string
	// Model is "provider/model"; "" uses the daemon's default model.
	Model string
	// Tools, when ToolsRestricted, are the only tools the Task may use.
	Tools           []string
	ToolsRestricted bool
	// Workspace is an existing absolute folder on the daemon's host; ""
	// gives the Task a folder of its own.
	Workspace string
	// Approvals are the Task's own approval rules: calls of the tools a
	// rule names (a tool name, or a pattern with "*") need a person's
	// approval (ask) or never run (deny). They add to the tools' and the
	// daemon's rules; deny wins over ask.
	Approvals []*api.ToolApproval
	// Budget is the Task's budget (tokens, cost in nano-USD, working time
	// in milliseconds); a zero amount takes the daemon's default
	// (budgets.*), nil: the defaults in every dimension.
	Budget *api.BudgetAmounts
}

func taskMeta(resp *api.Response, err error) (*api.TaskMeta, error) {
	if err != nil {
		return nil, err
	}
	m := resp.GetTask()
	if m == nil {
		return nil, unexpected(resp, "task")
	}
	return m, nil
}

// CreateTask creates a Task owned by the token's owner; it returns once the
// creation is durable. Text that is not UTF-8 or holds control characters
// (api.CheckText) is refused before it is sent, with ErrInvalid.
func (c *Conn) CreateTask(ctx context.Context, in CreateTask) (*api.TaskMeta, error) {
	if err := checkText(field{"the request", in.Request, true}, field{"the model", in.Model, false}, field{"the workspace", in.Workspace, false}); err != nil {
		return nil, err
	}
	return taskMeta(c.call(ctx, &api.Request{Command: &api.Request_CreateTask{CreateTask: &api.CreateTaskRequest{
		Request: in.Request, Model: in.Model, Tools: in.Tools, ToolsRestricted: in.ToolsRestricted, Workspace: in.Workspace, Approvals: in.Approvals, Budget: in.Budget}}}))
}

// SendMessage sends a follow-up message; a finished Task is reopened.
func (c *Conn) SendMessage(ctx context.Context, taskID, text string) (*api.TaskMeta, error) {
	if err := checkText(field{"the message", text, true}); err != nil {
		return nil, err
	}
	return taskMeta(c.call(ctx, &api.Request{Command: &api.Request_SendMessage{SendMessage: &api.SendMessageRequest{TaskId: taskID, Text: text}}}))
}

// Pause pauses a running Task.
func (c *Conn) Pause(ctx context.Context, taskID string) (*api.TaskMeta, error) {
	return taskMeta(c.call(ctx, &api.Request{Command: &api.Request_Pause{Pause: &api.TaskRef{TaskId: taskID}}}))
}

// Continue resumes a paused or failed Task, with another model when model
// is not "".
func (c *Conn) Continue(ctx context.Context, taskID, model string) (*api.TaskMeta, error) {
	if err := checkText(field{"the model", model, false}); err != nil {
		return nil, err
	}
	return taskMeta(c.call(ctx, &api.Request{Command: &api.Request_ContinueTask{ContinueTask: &api.ContinueRequest{TaskId: taskID, Model: model}}}))
}

// RaiseBudget adds to a Task's budget limits (its owner or an operator);
// a Task paused for its budget goes on when continued.
func (c *Conn) RaiseBudget(ctx context.Context, taskID string, add *api.BudgetAmounts) (*api.TaskMeta, error) {
	return taskMeta(c.call(ctx, &api.Request{Command: &api.Request_RaiseBudget{RaiseBudget: &api.RaiseBudgetRequest{TaskId: taskID, Add: add}}}))
}

// RaiseOwnerBudget raises owner's daily budget for the current UTC day
// (operator tokens only) and returns it after the raise.
func (c *Conn) RaiseOwnerBudget(ctx context.Context, owner string, add *api.BudgetAmounts) (*api.OwnerBudget, error) {
	return ownerBudget(c.call(ctx, &api.Request{Command: &api.Request_RaiseBudget{RaiseBudget: &api.RaiseBudgetRequest{Owner: owner, Add: add}}}))
}

// OwnerBudget returns owner's daily budget on the current UTC day: its
// limits, raises and spend (a token sees its own owner's; an operator
// any).
func (c *Conn) OwnerBudget(ctx context.Context, owner string) (*api.OwnerBudget, error) {
	return ownerBudget(c.call(ctx, &api.Request{Command: &api.Request_OwnerBudget{OwnerBudget: &api.OwnerBudgetRequest{Owner: owner}}}))
}

// ownerBudget is the owner's day an answer carries.
func ownerBudget(resp *api.Response, err error) (*api.OwnerBudget, error) {
	if err != nil {
		return nil, err
	}
	ob := resp.GetOwnerBudget()
	if ob == nil {
		return nil, unexpected(resp, "owner_budget")
	}
	return ob, nil
}

// Cancel cancels a Task.
func (c *Conn) Cancel(ctx context.Context, taskID string) (*api.TaskMeta, error) {
	return taskMeta(c.call(ctx, &api.Request{Command: &api.Request_Cancel{Cancel: &api.TaskRef{TaskId: taskID}}}))
}

// Task returns a Task's metadata.
func (c *Conn) Task(ctx context.Context, taskID string) (*api.TaskMeta, error) {
	return taskMeta(c.call(ctx, &api.Request{Command: &api.Request_GetTask{GetTask: &api.TaskRef{TaskId: taskID}}}))
}

// ListTasks returns a page of the Tasks the token may see, newest first,
// and the cursor of the next page ("" when this is the last). limit 0
// means 100; at most 500.
func (c *Conn) ListTasks(ctx context.Context, before string, limit int) ([]*api.TaskMeta, string, error) {
	resp, err := c.call(ctx, &api.Request{Command: &api.Request_ListTasks{ListTasks: &api.ListTasksRequest{Before: before, Limit: uint32(max(limit, 0))}}})
	if err != nil {
		return nil, "", err
	}
	p := resp.GetTasks()
	if p == nil {
		return nil, "", unexpected(resp, "tasks")
	}
	return p.GetTasks(), p.GetNext(), nil
}

// History returns one page of a Task's events from seq from (at most limit,
// 0: 500, and bounded in bytes); NextSeq is 0 at the end.
func (c *Conn) History(ctx context.Context, taskID string, from uint64, limit int) (*api.HistoryPage, error) {
	resp, err := c.call(ctx, &api.Request{Command: &api.Request_History{History: &api.HistoryRequest{TaskId: taskID, FromSeq: from, Limit: uint32(max(limit, 0))}}})
	if err != nil {
		return nil, err
	}
	p := resp.GetHistory()
	if p == nil {
		return nil, unexpected(resp, "history")
	}
	return p, nil
}

// ReadHistory reads a Task's events from seq from to the end, page by page.
func (c *Conn) ReadHistory(ctx context.Context, taskID string, from uint64) ([]*api.Event, error) {
	var out []*api.Event
	for {
		p, err := c.History(ctx, taskID, from, 0)
		if err != nil {
			return nil, err
		}
		out = append(out, p.GetEvents()...)
		if p.GetNextSeq() == 0 {
			return out, nil
		}
		from = p.GetNextSeq()
	}
}

// Tools returns the daemon's tool contracts.
func (c *Conn) Tools(ctx context.Context) ([]*api.ToolInfo, error) {
	l, err := c.ToolList(ctx)
	if err != nil {
		return nil, err
	}
	return l.GetTools(), nil
}

// ToolList returns the daemon's tools as Tools does, and the sources whose
// tools are not offered yet (MCP servers not up when the daemon started),
// with why.
func (c *Conn) ToolList(ctx context.Context) (*api.ToolList, error) {
	resp, err := c.call(ctx, &api.Request{Command: &api.Request_ListTools{ListTools: &api.ListToolsRequest{}}})
	if err != nil {
		return nil, err
	}
	if resp.GetTools() == nil {
		return nil, unexpected(resp, "tools")
	}
	return resp.GetTools(), nil
}

// Models returns the models of every provider, and the providers that could
// not list theirs.
func (c *Conn) Models(ctx context.Context) (*api.ModelList, error) {
	resp, err := c.call(ctx, &api.Request{Command: &api.Request_ListModels{ListModels: &api.ListModelsRequest{}}})
	if err != nil {
		return nil, err
	}
	if resp.GetModels() == nil {
		return nil, unexpected(resp, "models")
	}
	return resp.GetModels(), nil
}

// Approvals returns the pending approval requests (ApprovalRequested
// events) the token may see.
func (c *Conn) Approvals(ctx context.Context) ([]*api.Event, error) {
	resp, err := c.call(ctx, &api.Request{Command: &api.Request_ListApprovals{ListApprovals: &api.ListApprovalsRequest{}}})
	if err != nil {
		return nil, err
	}
	if resp.GetApprovals() == nil {
		return nil, unexpected(resp, "approvals")
	}
	return resp.GetApprovals().GetApprovals(), nil
}

// Resolve approves or denies a pending approval.
func (c *Conn) Resolve(ctx context.Context, approvalID string, approve bool, reason string) (*api.TaskMeta, error) {
	if err := checkText(field{"the reason", reason, true}); err != nil {
		return nil, err
	}
	return taskMeta(c.call(ctx, &api.Request{Command: &api.Request_ResolveApproval{ResolveApproval: &api.ResolveApprovalRequest{ApprovalId: approvalID, Approve: approve, Reason: reason}}}))
}

// AllowForTask approves a pending approval and allows the Task's later
// calls of the same kind without asking (the same tool; for the shell the
// same command). A deny or the model's own request_approval still applies.
func (c *Conn) AllowForTask(ctx context.Context, approvalID, reason string) (*api.TaskMeta, error) {
	if err := checkText(field{"the reason", reason, true}); err != nil {
		return nil, err
	}
	return taskMeta(c.call(ctx, &api.Request{Command: &api.Request_ResolveApproval{ResolveApproval: &api.ResolveApprovalRequest{ApprovalId: approvalID, Approve: true, Reason: reason, AlwaysForTask: true}}}))
}

// Steer sends JSON input to a running tool call that accepts steering.
func (c *Conn) Steer(ctx context.Context, taskID, callID string, input json.RawMessage) error {
	_, err := c.call(ctx, &api.Request{Command: &api.Request_Steer{Steer: &api.SteerRequest{TaskId: taskID, CallId: callID, Input: input}}})
	return err
}
