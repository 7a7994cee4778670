package client

import (
	"context"

	"lemo/api"
)

// Inspect returns the daemon's live internal actor tree, parents before
// their children: each actor's kind, state and time in state, mailbox
// depth, messages processed, restarts and last failure. Operator tokens
// only: others get an error matching ErrPermissionDenied.
func (c *Conn) Inspect(ctx context.Context) (*api.ActorTree, error) {
	resp, err := c.call(ctx, &api.Request{Command: &api.Request_Inspect{Inspect: &api.InspectRequest{}}})
	if err != nil {
		return nil, err
	}
	if resp.GetActors() == nil {
		return nil, unexpected(resp, "actors")
	}
	return resp.GetActors(), nil
}

// StopCall stops one running tool call of a Task (its Tool actor): the
// call is recorded as a cancelled failure, or as outcome unknown when it
// does not stop in time, and the Task goes on. It returns once the stop
// was delivered. Operator tokens only (ErrPermissionDenied); a call that
// is not running reads as ErrNotFound.
func (c *Conn) StopCall(ctx context.Context, taskID, callID string) (*api.TaskMeta, error) {
	return taskMeta(c.call(ctx, &api.Request{Command: &api.Request_StopCall{StopCall: &api.StopCallRequest{TaskId: taskID, CallId: callID}}}))
}
