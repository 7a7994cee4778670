package client

import (
	"context"

	"lemo/api"
)

// DelegateSessions lists the delegate agent's resumable sessions, newest
// first: with taskID, only that Task's (a Task this token may not see is
// ErrNotFound); else every session the token may see. An owner sees the
// sessions its own Tasks created; an operator sees all of them, those in
// the agent's own folders too, with their paths. A daemon without the
// delegate tool answers an empty list with a warning saying so. The
// first prompts are untrusted text (sanitised and bounded by the daemon).
func (c *Conn) DelegateSessions(ctx context.Context, taskID string) (*api.DelegateSessionList, error) {
	resp, err := c.call(ctx, &api.Request{Command: &api.Request_ListDelegateSessions{ListDelegateSessions: &api.ListDelegateSessionsRequest{TaskId: taskID}}})
	if err != nil {
		return nil, err
	}
	if resp.GetDelegateSessions() == nil {
		return nil, unexpected(resp, "delegate_sessions")
	}
	return resp.GetDelegateSessions(), nil
}
