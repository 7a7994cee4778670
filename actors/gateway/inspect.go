package gateway

import (
	"context"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"lemo/actors"
	"lemo/api"
	"lemo/excerpt"
)

// Inspector is the part of the daemon API behind the inspection console
// (*actors.Daemon): the live internal actor tree, and stopping one tool
// call. The commands that use it are for operator tokens only: the tree
// names every owner's Tasks.
type Inspector interface {
	Inspect() []actors.ActorInfo
	StopCall(ctx context.Context, c actors.Caller, taskID, callID string) (*api.TaskMeta, error)
}

var _ Inspector = (*actors.Daemon)(nil)

var (
	notOperator = &cmdError{code: api.ErrorCode_ERROR_CODE_PERMISSION_DENIED, msg: "this command is for operator tokens only"}
	noInspector = &cmdError{code: api.ErrorCode_ERROR_CODE_UNAVAILABLE, msg: "this daemon does not offer inspection over the remote API"}
)

// inspect answers the live actor tree to an operator.
func (g *Gateway) inspect(caller actors.Caller) *api.Response {
	if !caller.Operator {
		return errorResponse(notOperator)
	}
	if g.cfg.Inspector == nil {
		return errorResponse(noInspector)
	}
	return &api.Response{Result: &api.Response_Actors{Actors: actorTree(g.cfg.Inspector.Inspect(), time.Now())}}
}

// stopCall stops one running tool call for an operator.
func (g *Gateway) stopCall(ctx context.Context, caller actors.Caller, m *api.StopCallRequest) *api.Response {
	if !caller.Operator {
		return errorResponse(notOperator)
	}
	if g.cfg.Inspector == nil {
		return errorResponse(noInspector)
	}
	return taskResult(g.cfg.Inspector.StopCall(ctx, caller, m.GetTaskId(), m.GetCallId()))
}

// actorTree converts the daemon's view of its tree to the wire's.
func actorTree(list []actors.ActorInfo, now time.Time) *api.ActorTree {
	out := &api.ActorTree{Actors: make([]*api.ActorInfo, len(list)), Time: timestamppb.New(now)}
	for i, a := range list {
		ai := &api.ActorInfo{Id: a.ID, Kind: a.Kind, State: a.State, Mailbox: uint64(max(a.Mailbox, 0)),
			Processed: a.Processed, Restarts: a.Restarts, LastFailure: clipBytes(a.LastFailure, maxFailureBytes),
			StoppedChildren: a.StoppedChildren, LastDecision: clipBytes(a.LastDecision, maxFailureBytes)}
		if !a.StateSince.IsZero() {
			ai.StateSince = timestamppb.New(a.StateSince)
		}
		if !a.Started.IsZero() {
			ai.Started = timestamppb.New(a.Started)
		}
		out.Actors[i] = ai
	}
	return out
}

// maxFailureBytes bounds a last failure in the tree (a panic value can be
// anything).
const maxFailureBytes = 1024

// clipBytes bounds s to n bytes on a rune boundary.
func clipBytes(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return excerpt.Head(s, n-3) + "..."
}
