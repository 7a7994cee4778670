package gateway

import (
	"context"
	"errors"
	"strings"

	"google.golang.org/protobuf/proto"

	"lemo/actors"
	"lemo/actors/services"
	"lemo/actors/taskstate"
	"lemo/api"
	"lemo/tools"
)

// historyPageBytes bounds one history page (it may still be chunked).
const historyPageBytes = 4 << 20

// execute runs one command as caller and returns its answer. Errors are
// typed answers, never silence.
func (g *Gateway) execute(ctx context.Context, caller actors.Caller, req *api.Request) *api.Response {
	d := g.cfg.Daemon
	switch c := req.GetCommand().(type) {
	case *api.Request_CreateTask:
		m := c.CreateTask
		model := m.GetModel()
		if model == "" {
			model = g.cfg.DefaultModel
		}
		if model == "" {
			return errorResponse(invalid("no model given and the daemon has no default model (models.default): pass --model provider/model (lemo models lists them); without a model server, start the daemon with LEMO_FAKE_ENABLED=true and use the demo models (--model fake/echo)"))
		}
		meta, err := d.CreateTask(ctx, caller, actors.CreateTask{Request: m.GetRequest(), Model: model, Tools: m.GetTools(), ToolsRestricted: m.GetToolsRestricted(), Workspace: m.GetWorkspace(), Approvals: m.GetApprovals(), Budget: m.GetBudget()})
		return taskResult(meta, err)
	case *api.Request_SendMessage:
		return taskResult(d.SendMessage(ctx, caller, c.SendMessage.GetTaskId(), c.SendMessage.GetText()))
	case *api.Request_Pause:
		return taskResult(d.Pause(ctx, caller, c.Pause.GetTaskId()))
	case *api.Request_ContinueTask:
		return taskResult(d.Continue(ctx, caller, c.ContinueTask.GetTaskId(), c.ContinueTask.GetModel()))
	case *api.Request_Cancel:
		return taskResult(d.Cancel(ctx, caller, c.Cancel.GetTaskId()))
	case *api.Request_GetTask:
		if f, ok := d.(TaskFinder); ok {
			return taskResult(f.FindTask(ctx, caller, c.GetTask.GetTaskId()))
		}
		return taskResult(d.Task(ctx, caller, c.GetTask.GetTaskId()))
	case *api.Request_ListTasks:
		limit := int(c.ListTasks.GetLimit())
		if limit == 0 {
			limit = 100
		}
		list, next, err := d.ListTasks(ctx, caller, c.ListTasks.GetBefore(), limit)
		if err != nil {
			return errorResponse(toError(err))
		}
		return &api.Response{Result: &api.Response_Tasks{Tasks: &api.TaskPage{Tasks: list, Next: next}}}
	case *api.Request_History:
		return g.history(ctx, caller, c.History)
	case *api.Request_ListTools:
		return &api.Response{Result: &api.Response_Tools{Tools: g.toolList()}}
	case *api.Request_ListModels:
		l := g.cfg.Models.Models(ctx)
		out := &api.ModelList{}
		for _, m := range l.Models {
			out.Models = append(out.Models, &api.ModelInfo{Id: m.ID, Provider: m.Provider, Name: m.Name, Window: uint64(max(m.Window, 0)), Tools: m.Tools, Reasoning: m.Reasoning})
		}
		for _, f := range l.Failures {
			out.Failures = append(out.Failures, &api.ProviderFailure{Provider: f.Provider, Error: f.Err.Error()})
		}
		return &api.Response{Result: &api.Response_Models{Models: out}}
	case *api.Request_ListApprovals:
		if g.cfg.Approvals == nil {
			return errorResponse(noApprovals)
		}
		evs, err := g.cfg.Approvals.PendingApprovals(ctx, caller)
		if err != nil {
			return errorResponse(toError(err))
		}
		return &api.Response{Result: &api.Response_Approvals{Approvals: &api.ApprovalList{Approvals: evs}}}
	case *api.Request_ResolveApproval:
		if g.cfg.Approvals == nil {
			return errorResponse(noApprovals)
		}
		m := c.ResolveApproval
		if m.GetAlwaysForTask() {
			return taskResult(g.cfg.Approvals.AllowForTask(ctx, caller, m.GetApprovalId(), m.GetReason()))
		}
		return taskResult(g.cfg.Approvals.ResolveApproval(ctx, caller, m.GetApprovalId(), m.GetApprove(), m.GetReason()))
	case *api.Request_Steer:
		if g.cfg.Approvals == nil {
			return errorResponse(noApprovals)
		}
		m := c.Steer
		return result(done(), g.cfg.Approvals.Steer(ctx, caller, m.GetTaskId(), m.GetCallId(), m.GetInput()))
	case *api.Request_Inspect:
		return g.inspect(caller)
	case *api.Request_StopCall:
		return g.stopCall(ctx, caller, c.StopCall)
	case *api.Request_ListDelegateSessions:
		return g.delegateSessions(ctx, caller, c.ListDelegateSessions)
	case *api.Request_OwnerBudget:
		r, ok := d.(BudgetRaiser)
		if !ok {
			return errorResponse(&cmdError{code: api.ErrorCode_ERROR_CODE_UNAVAILABLE, msg: "this daemon does not report owners' budgets over the remote API"})
		}
		ob, err := r.OwnerBudget(ctx, caller, c.OwnerBudget.GetOwner())
		return result(&api.Response{Result: &api.Response_OwnerBudget{OwnerBudget: ob}}, err)
	case *api.Request_RaiseBudget:
		r, ok := d.(BudgetRaiser)
		if !ok {
			return errorResponse(&cmdError{code: api.ErrorCode_ERROR_CODE_UNAVAILABLE, msg: "this daemon does not raise budgets over the remote API"})
		}
		if o := c.RaiseBudget.GetOwner(); o != "" {
			if !caller.Operator {
				return errorResponse(notOperator)
			}
			ob, err := r.RaiseOwnerBudget(ctx, caller, o, c.RaiseBudget.GetAdd())
			return result(&api.Response{Result: &api.Response_OwnerBudget{OwnerBudget: ob}}, err)
		}
		return taskResult(r.RaiseBudget(ctx, caller, c.RaiseBudget.GetTaskId(), c.RaiseBudget.GetAdd()))
	}
	return errorResponse(invalid("unknown command"))
}

// BudgetRaiser is a Backend that raises Tasks' budgets and owners' daily
// budgets (*actors.Daemon).
type BudgetRaiser interface {
	RaiseBudget(ctx context.Context, c actors.Caller, taskID string, add *api.BudgetAmounts) (*api.TaskMeta, error)
	RaiseOwnerBudget(ctx context.Context, c actors.Caller, owner string, add *api.BudgetAmounts) (*api.OwnerBudget, error)
	OwnerBudget(ctx context.Context, c actors.Caller, owner string) (*api.OwnerBudget, error)
}

var _ BudgetRaiser = (*actors.Daemon)(nil)

// TaskFinder is a Backend that also finds a Task by the beginning or end
// of its id; GetTask uses it when the Backend is one.
type TaskFinder interface {
	FindTask(ctx context.Context, c actors.Caller, idOrPart string) (*api.TaskMeta, error)
}

var noApprovals = &cmdError{code: api.ErrorCode_ERROR_CODE_UNAVAILABLE, msg: "this daemon does not answer approvals over the remote API"}

// history reads one bounded page.
func (g *Gateway) history(ctx context.Context, caller actors.Caller, m *api.HistoryRequest) *api.Response {
	meta, err := g.cfg.Daemon.Task(ctx, caller, m.GetTaskId())
	if err != nil {
		return errorResponse(toError(err))
	}
	limit := int(m.GetLimit())
	if limit == 0 {
		limit = 500
	}
	evs, err := g.cfg.Daemon.History(ctx, caller, m.GetTaskId(), m.GetFromSeq(), limit+1)
	if err != nil {
		return errorResponse(toError(err))
	}
	page := &api.HistoryPage{TaskId: m.GetTaskId(), LastSeq: meta.GetLastSeq()}
	size := 0
	for i, ev := range evs {
		n := proto.Size(ev)
		if i == limit || (i > 0 && size+n > historyPageBytes) {
			page.NextSeq = ev.GetSeq()
			break
		}
		size += n
		page.Events = append(page.Events, ev)
	}
	if last := lastSeq(page.Events); last > page.LastSeq {
		page.LastSeq = last
	}
	return &api.Response{Result: &api.Response_History{History: page}}
}

func lastSeq(evs []*api.Event) uint64 {
	if len(evs) == 0 {
		return 0
	}
	return evs[len(evs)-1].GetSeq()
}

func (g *Gateway) toolList() *api.ToolList {
	out := &api.ToolList{}
	for _, r := range g.cfg.Tools.List() {
		t := r.Tool
		info := &api.ToolInfo{Name: t.Name(), ModelName: r.ModelName, Description: t.Description(),
			InputSchema: t.InputSchema(), StateSchema: t.StateSchema(), ResultSchema: t.ResultSchema(), View: t.View()}
		if u, ok := t.(interface{ Untrusted() bool }); ok {
			info.Untrusted = u.Untrusted()
		}
		if m, ok := t.(interface {
			Server() string
			ServerState() string
		}); ok {
			info.Server, info.ServerState = m.Server(), m.ServerState()
		}
		out.Tools = append(out.Tools, info)
	}
	// Sources whose tools are not listed yet (an MCP server not up when
	// the daemon started), with why.
	if p, ok := g.cfg.Tools.(tools.PendingSource); ok {
		for _, pd := range p.Pending() {
			out.Pending = append(out.Pending, &api.PendingTools{Source: pd.Source, Prefix: pd.Prefix, State: pd.State})
		}
	}
	return out
}

func taskResult(meta *api.TaskMeta, err error) *api.Response {
	if err != nil {
		return errorResponse(toError(err))
	}
	return &api.Response{Result: &api.Response_Task{Task: meta}}
}

// result answers ok, or the error.
func result(ok *api.Response, err error) *api.Response {
	if err != nil {
		return errorResponse(toError(err))
	}
	return ok
}

// errorResponse answers e. The message is made valid UTF-8 (it may quote
// what a client sent), because protoactor drops a message protobuf cannot
// encode and the client would wait for an answer that never comes.
func errorResponse(e *cmdError) *api.Response {
	return &api.Response{Result: &api.Response_Error{Error: &api.Error{Code: e.code, Message: strings.ToValidUTF8(e.msg, "\uFFFD")}}}
}

// toError classifies a daemon error for the client.
func toError(err error) *cmdError {
	var ce *cmdError
	var se *taskstate.StateError
	code := api.ErrorCode_ERROR_CODE_INTERNAL
	switch {
	case errors.As(err, &ce):
		return ce
	case errors.Is(err, actors.ErrNotFound), errors.Is(err, services.ErrNotFound):
		code = api.ErrorCode_ERROR_CODE_NOT_FOUND
	case errors.Is(err, actors.ErrInvalid), errors.Is(err, services.ErrInvalid):
		code = api.ErrorCode_ERROR_CODE_INVALID
	case errors.Is(err, actors.ErrTooLarge):
		code = api.ErrorCode_ERROR_CODE_TOO_LARGE
	case errors.Is(err, actors.ErrPermission):
		code = api.ErrorCode_ERROR_CODE_PERMISSION_DENIED
	case errors.As(err, &se), errors.Is(err, services.ErrConflict), errors.Is(err, taskstate.ErrExpired):
		code = api.ErrorCode_ERROR_CODE_CONFLICT
	case errors.Is(err, actors.ErrStopped):
		code = api.ErrorCode_ERROR_CODE_UNAVAILABLE
	case errors.Is(err, context.DeadlineExceeded):
		code = api.ErrorCode_ERROR_CODE_TIMEOUT
	case errors.Is(err, context.Canceled):
		code = api.ErrorCode_ERROR_CODE_UNAVAILABLE
	}
	return &cmdError{code: code, msg: err.Error()}
}
