package gateway

import (
	"context"
	"fmt"
	"strings"

	"google.golang.org/protobuf/types/known/timestamppb"

	"lemo/actors"
	"lemo/api"
	"lemo/tools/delegate"
)

// DelegateCatalog discovers the delegate agent's resumable sessions
// (*delegate.Catalog). Discovery only reads the session folders.
type DelegateCatalog interface {
	Discover(scope delegate.Scope) ([]delegate.Entry, error)
}

var _ DelegateCatalog = (*delegate.Catalog)(nil)

// Bounds of a delegate session listing: the sessions in one answer, and
// the texts that come from session files (untrusted: the agent wrote them).
const (
	maxDelegateSessions = 1000
	maxFirstPromptBytes = 200
	maxSessionTextBytes = 1024
)

// noDelegateWarning answers a listing on a daemon without the delegate
// tool. It is a warning on an empty list, not an error: "no sessions" is
// the truth, scripts get a valid list, and the user reads why.
const noDelegateWarning = "the delegate tool is not configured on this daemon (delegate.enabled), so there are no delegate sessions"

// delegateSessions lists the delegate sessions the caller may see.
//
// Scoping: an owner sees only the sessions its own Tasks created (Lemo's
// records say which Task and owner); an operator sees every session,
// Lemo's and those in the agent's own folders, with their paths. With a
// task id, only that Task's sessions, and a Task the caller may not see
// (another owner's, or none) reads as not found, as everywhere else.
func (g *Gateway) delegateSessions(ctx context.Context, caller actors.Caller, m *api.ListDelegateSessionsRequest) *api.Response {
	taskID := m.GetTaskId()
	if taskID != "" {
		if _, err := g.cfg.Daemon.Task(ctx, caller, taskID); err != nil {
			return errorResponse(toError(err))
		}
	}
	out := &api.DelegateSessionList{}
	answer := &api.Response{Result: &api.Response_DelegateSessions{DelegateSessions: out}}
	if g.cfg.DelegateSessions == nil {
		out.Warnings = append(out.Warnings, noDelegateWarning)
		return answer
	}
	out.Sessions, out.Warnings = listDelegateSessions(g.cfg.DelegateSessions, caller, taskID)
	return answer
}

// listDelegateSessions is the listing's core: discovery in the caller's
// scope, filtered, bounded and sanitised.
func listDelegateSessions(cat DelegateCatalog, caller actors.Caller, taskID string) ([]*api.DelegateSession, []string) {
	// An owner's listing without a task reads every session and keeps its
	// own: Lemo's records, not the caller, say whose a session is.
	scope := delegate.Scope{TaskID: taskID, All: taskID == ""}
	entries, err := cat.Discover(scope)
	var warnings []string
	if err != nil {
		if caller.Operator {
			warnings = append(warnings, clean(err.Error(), maxSessionTextBytes))
		} else {
			warnings = append(warnings, "Lemo's delegate session folder could not be read; ask the daemon's operator")
		}
	}
	var list []*api.DelegateSession
	omitted := 0
	for _, e := range entries {
		if !caller.Operator && (e.Source != delegate.SourceLemo || e.Owner != caller.Owner) {
			continue
		}
		if taskID != "" && e.TaskID != taskID {
			continue
		}
		if len(list) == maxDelegateSessions {
			omitted++
			continue
		}
		list = append(list, delegateSession(e, caller.Operator))
	}
	if omitted > 0 {
		warnings = append(warnings, fmt.Sprintf("%d older sessions are not listed (at most %d are)", omitted, maxDelegateSessions))
	}
	return list, warnings
}

// delegateSession converts one discovered session for the wire; paths go
// to operators only.
func delegateSession(e delegate.Entry, operator bool) *api.DelegateSession {
	s := &api.DelegateSession{
		SessionId: clean(e.ID, maxIDBytes), Kind: clean(e.Kind, maxIDBytes), Source: clean(e.Source, maxIDBytes),
		TaskId: clean(e.TaskID, maxIDBytes), Owner: clean(e.Owner, maxIDBytes), Invocation: clean(e.Invocation, maxIDBytes),
		Cwd: clean(e.Cwd, maxPathBytes), Bytes: e.Bytes, FirstPrompt: clean(e.FirstPrompt, maxFirstPromptBytes),
	}
	if !e.Created.IsZero() {
		s.Created = timestamppb.New(e.Created)
	}
	if !e.Modified.IsZero() {
		s.Modified = timestamppb.New(e.Modified)
	}
	if operator {
		// A path keeps its spaces; only what would break a line goes.
		s.Path = delegate.Short(strings.Map(func(r rune) rune {
			if r == '\n' || r == '\t' {
				return '?'
			}
			return r
		}, delegate.Clean(e.Path)), maxPathBytes)
	}
	return s
}

// clean makes text from a session file one bounded line: terminal escapes,
// controls and bidirectional overrides removed, whitespace runs (newlines
// included) folded to one space, at most max bytes.
func clean(s string, max int) string {
	if len(s) > 4*max+64 {
		s = s[:4*max+64] // Short cuts on a rune boundary; Clean mends a split rune
	}
	return delegate.Short(strings.Join(strings.Fields(delegate.Clean(s)), " "), max)
}
