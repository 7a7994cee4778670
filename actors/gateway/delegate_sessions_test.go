package gateway

import (
	"errors"
	"strings"
	"testing"
	"time"

	"lemo/api"
	"lemo/tools/delegate"
)

func listSessionsReq(task string) *api.Request {
	return &api.Request{Command: &api.Request_ListDelegateSessions{ListDelegateSessions: &api.ListDelegateSessionsRequest{TaskId: task}}}
}

// fakeCatalog discovers fixed entries with the real catalog's scoping:
// Lemo's sessions of the Task, or everything with All.
type fakeCatalog struct {
	entries []delegate.Entry
	err     error
}

func (f *fakeCatalog) Discover(scope delegate.Scope) ([]delegate.Entry, error) {
	if f.err != nil {
		return nil, f.err
	}
	var out []delegate.Entry
	for _, e := range f.entries {
		if scope.All || (scope.TaskID != "" && e.Source == delegate.SourceLemo && e.TaskID == scope.TaskID) {
			out = append(out, e)
		}
	}
	return out, nil
}

func TestValidateListDelegateSessions(t *testing.T) {
	cases := []struct {
		name string
		req  *api.Request
		want api.ErrorCode
	}{
		{"every session", listSessionsReq(""), 0},
		{"a task's", listSessionsReq("01M8PEPSX4T06MEF12P2AAAAAA"), 0},
		{"a bad task id", listSessionsReq("a/b"), api.ErrorCode_ERROR_CODE_INVALID},
		{"a long task id", listSessionsReq(strings.Repeat("t", 65)), api.ErrorCode_ERROR_CODE_INVALID},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tc.req.Id = 3
			var got api.ErrorCode
			if err := validate(tc.req); err != nil {
				got = err.code
			}
			if got != tc.want {
				t.Fatalf("validate = %v, want %v", got, tc.want)
			}
		})
	}
}

// ids lists the session ids of an answer, failing on an error.
func ids(t *testing.T, r *api.Response) []string {
	t.Helper()
	l := r.GetDelegateSessions()
	if l == nil {
		t.Fatalf("answer = %v, want delegate sessions", r)
	}
	var out []string
	for _, s := range l.GetSessions() {
		out = append(out, s.GetSessionId())
	}
	return out
}

// An owner sees the sessions its own Tasks created, without paths; a Task
// it may not see reads as not found; an operator sees every session, the
// agent's own folders too, with paths.
func TestDelegateSessionsAreScoped(t *testing.T) {
	h := newHarness(t, Limits{}, nil)
	a, b, op := h.connect(alice), h.connect(bob), h.connect(operator)
	ta := mustTask(t, a.call(create("fake/echo", "alice's"))).GetTaskId()
	tb := mustTask(t, b.call(create("fake/echo", "bob's"))).GetTaskId()
	now := time.Now().UTC()
	prompt := "fix the \x1b[31mbug\x1b[0m\nnow \u202eplease " + strings.Repeat("x", 1000)
	h.g.cfg.DelegateSessions = &fakeCatalog{entries: []delegate.Entry{
		{ID: "s-alice", Kind: "pi", Source: delegate.SourceLemo, Path: "/data/delegate/pi/s-alice.jsonl", Cwd: "/w/a", Modified: now, Created: now, Bytes: 42,
			FirstPrompt: prompt, TaskID: ta, Owner: "alice", Invocation: "dlg-1"},
		{ID: "s-bob", Kind: "pi", Source: delegate.SourceLemo, Path: "/data/delegate/pi/s-bob.jsonl", Modified: now.Add(-time.Minute), TaskID: tb, Owner: "bob"},
		// Another owner's record naming alice's Task (it cannot happen,
		// but the record's owner decides).
		{ID: "s-forged", Kind: "pi", Source: delegate.SourceLemo, Path: "/data/delegate/pi/s-forged.jsonl", TaskID: ta, Owner: "mallory"},
		{ID: "s-agent", Kind: "pi", Source: delegate.SourceAgent, Path: "/home/u/.pi/agent/sessions/--w--/s-agent.jsonl", Modified: now.Add(-time.Hour)},
	}}

	cases := []struct {
		name string
		c    *testClient
		task string
		want string
		code api.ErrorCode
	}{
		{"alice", a, "", "s-alice", 0},
		{"alice's task", a, ta, "s-alice", 0},
		{"bob", b, "", "s-bob", 0},
		{"bob's task", b, tb, "s-bob", 0},
		{"bob's task for alice", a, tb, "", api.ErrorCode_ERROR_CODE_NOT_FOUND},
		{"alice's task for bob", b, ta, "", api.ErrorCode_ERROR_CODE_NOT_FOUND},
		{"an unknown task", a, "01M8PEPSX4T06MEF12P2ZZZZZZ", "", api.ErrorCode_ERROR_CODE_NOT_FOUND},
		{"an unknown task for the operator", op, "01M8PEPSX4T06MEF12P2ZZZZZZ", "", api.ErrorCode_ERROR_CODE_NOT_FOUND},
		{"operator", op, "", "s-alice s-bob s-forged s-agent", 0},
		{"operator, bob's task", op, tb, "s-bob", 0},
		{"operator, alice's task", op, ta, "s-alice s-forged", 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := tc.c.call(listSessionsReq(tc.task))
			if tc.code != 0 {
				if got := errCode(r); got != tc.code {
					t.Fatalf("code = %v, want %v (%v)", got, tc.code, r)
				}
				return
			}
			if got := strings.Join(ids(t, r), " "); got != tc.want {
				t.Fatalf("sessions = %q, want %q", got, tc.want)
			}
			for _, s := range r.GetDelegateSessions().GetSessions() {
				if hasPath := s.GetPath() != ""; hasPath != tc.c.principal.Operator {
					t.Errorf("%s: path %q shown to %v", s.GetSessionId(), s.GetPath(), tc.c.principal)
				}
			}
		})
	}

	s := a.call(listSessionsReq("")).GetDelegateSessions().GetSessions()[0]
	if s.GetTaskId() != ta || s.GetOwner() != "alice" || s.GetInvocation() != "dlg-1" || s.GetKind() != "pi" || s.GetSource() != "lemo" ||
		s.GetCwd() != "/w/a" || s.GetBytes() != 42 || !s.GetModified().AsTime().Equal(now) || !s.GetCreated().AsTime().Equal(now) {
		t.Errorf("session = %v", s)
	}
	// The first prompt is untrusted: one bounded line with no escapes,
	// controls or direction overrides.
	fp := s.GetFirstPrompt()
	if len(fp) > maxFirstPromptBytes || strings.ContainsAny(fp, "\x1b\n\u202e") || !strings.HasPrefix(fp, "fix the bug now please xxx") || !strings.HasSuffix(fp, "…") {
		t.Errorf("first prompt = %q (%d bytes)", fp, len(fp))
	}
}

// Without the delegate tool the listing is empty and says why; a folder
// that cannot be read is a warning, with its details for operators only.
func TestDelegateSessionsWarnings(t *testing.T) {
	h := newHarness(t, Limits{}, nil)
	a, op := h.connect(alice), h.connect(operator)
	l := a.call(listSessionsReq("")).GetDelegateSessions()
	if l == nil || len(l.GetSessions()) != 0 || len(l.GetWarnings()) != 1 || !strings.Contains(l.GetWarnings()[0], "delegate tool is not configured") {
		t.Fatalf("without the delegate: %v", l)
	}
	h.g.cfg.DelegateSessions = &fakeCatalog{err: errors.New("delegate: read /data/delegate/pi: permission denied")}
	l = a.call(listSessionsReq("")).GetDelegateSessions()
	if l == nil || len(l.GetWarnings()) != 1 || strings.Contains(l.GetWarnings()[0], "/data") || !strings.Contains(l.GetWarnings()[0], "could not be read") {
		t.Fatalf("alice's warning: %v", l)
	}
	l = op.call(listSessionsReq("")).GetDelegateSessions()
	if l == nil || len(l.GetWarnings()) != 1 || !strings.Contains(l.GetWarnings()[0], "/data/delegate/pi: permission denied") {
		t.Fatalf("the operator's warning: %v", l)
	}
}

// At most maxDelegateSessions are listed; the rest are counted.
func TestDelegateSessionsAreBounded(t *testing.T) {
	var cat fakeCatalog
	for i := 0; i < maxDelegateSessions+5; i++ {
		cat.entries = append(cat.entries, delegate.Entry{ID: "s", Source: delegate.SourceAgent})
	}
	list, warnings := listDelegateSessions(&cat, operator.Caller(), "")
	if len(list) != maxDelegateSessions || len(warnings) != 1 || !strings.HasPrefix(warnings[0], "5 older sessions") {
		t.Fatalf("%d sessions, warnings %q", len(list), warnings)
	}
}
