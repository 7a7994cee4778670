package actors_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"lemo/actors"
	"lemo/api"
	"lemo/persistence"
	"lemo/providers"
	"lemo/providers/fake"
	"lemo/tools"
)

func TestWorkspacePolicy(t *testing.T) {
	p := actors.WorkspacePolicy{
		Data: "/var/lib/lemo",
		Root: "/var/lib/lemo/workspaces",
		Grants: []actors.WorkspaceGrant{
			{Owner: "alice", Root: "/srv/alice"},
			{Owner: "alice", Root: "/home/alice/src"},
			{Owner: "*", Root: "/srv/ops"},
			{Owner: "root-all", Root: "/"},
		},
	}
	alice := actors.Caller{Owner: "alice"}
	bob := actors.Caller{Owner: "bob"}
	op := actors.Caller{Owner: "local", Operator: true}
	cases := []struct {
		name   string
		caller actors.Caller
		path   string
		want   string // "" allowed, else a part of the error
	}{
		{"granted root", alice, "/srv/alice", ""},
		{"under a granted root", alice, "/srv/alice/project/sub", ""},
		{"under a second grant", alice, "/home/alice/src/x", ""},
		{"a prefix that is not a parent", alice, "/srv/alice2", "under no folder granted to owner alice: want /srv/alice, /home/alice/src"},
		{"parent of a grant", alice, "/srv", "under no folder granted"},
		{"another owner's grant", bob, "/srv/alice", "no folder is granted to owner bob"},
		{"the operator's grant for an owner", alice, "/srv/ops/x", "under no folder granted"},
		{"operator grant", op, "/srv/ops/x", ""},
		{"owner grant not the operator's", op, "/srv/alice", "under no folder granted to owner local or to operators: want /srv/ops"},
		{"data folder", op, "/var/lib/lemo", "is the daemon's data folder"},
		{"inside the data folder", alice, "/var/lib/lemo/store", "is inside the daemon's data folder"},
		{"contains the data folder", alice, "/var/lib", "contains the daemon's data folder"},
		{"the root folder", alice, "/", "contains the daemon's data folder"},
		{"a grant of / still never gives the data folder", actors.Caller{Owner: "root-all"}, "/var/lib/lemo/token", "inside the daemon's data folder"},
		{"a grant of / gives /etc", actors.Caller{Owner: "root-all"}, "/etc", ""},
		{"etc without a grant", alice, "/etc", "under no folder granted"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := p.Allow(tc.caller, tc.path)
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("Allow(%+v, %s) = %v, want allowed", tc.caller, tc.path, err)
			case tc.want != "" && (!errors.Is(err, actors.ErrPermission) || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("Allow(%+v, %s) = %v, want ErrPermission with %q", tc.caller, tc.path, err, tc.want)
			}
		})
	}

	// The workspace root: itself, a Task's folder in it, a folder holding
	// it (when it lies outside the data folder).
	q := actors.WorkspacePolicy{Data: "/d", Root: "/w/tasks", Grants: []actors.WorkspaceGrant{{Owner: "*", Root: "/w"}}}
	for path, want := range map[string]string{
		"/w/tasks":       "is the daemon's workspace root",
		"/w/tasks/01ABC": "inside the daemon's workspace root (another Task's folder)",
		"/w":             "contains the daemon's workspace root",
		"/w/other":       "",
	} {
		err := q.Allow(op, path)
		if (want == "") != (err == nil) || (err != nil && (!errors.Is(err, actors.ErrPermission) || !strings.Contains(err.Error(), want))) {
			t.Errorf("Allow(%s) = %v, want %q", path, err, want)
		}
	}
}

// An owner cannot point a Task at the daemon's data folder (and so read its
// token) or anywhere else not granted, however the path is spelled; it can
// under a granted root, and the Task records the resolved folder.
func TestWorkspaceRequests(t *testing.T) {
	grant := t.TempDir()
	opsGrant := t.TempDir()
	h := newHarnessWith(t, fake.Echo(), func(o *actors.Options) {
		o.WorkspaceGrants = []actors.WorkspaceGrant{{Owner: "alice", Root: grant}, {Owner: "*", Root: opsGrant}}
	})
	ctx := context.Background()
	alice := actors.Caller{Owner: "alice"}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	// Symlink tricks inside the granted root.
	must(os.Symlink(h.dir, filepath.Join(grant, "to-data")))
	must(os.Symlink(filepath.Dir(h.dir), filepath.Join(grant, "to-parent")))
	must(os.Symlink("/etc", filepath.Join(grant, "to-etc")))
	must(os.Mkdir(filepath.Join(grant, "project"), 0o700))
	must(os.Symlink(filepath.Join(grant, "project"), filepath.Join(grant, "to-project")))
	other := h.create("another Task")
	otherWS, err := h.d.Task(ctx, actors.Operator, other)
	must(err)

	refused := map[string]string{
		"the data folder":                   h.dir,
		"inside the data folder":            filepath.Join(h.dir, "store"),
		"a folder holding the data folder":  filepath.Dir(h.dir),
		"/":                                 "/",
		"/etc":                              "/etc",
		"a symlink to the data folder":      filepath.Join(grant, "to-data"),
		"a path whose parent is a symlink":  filepath.Join(grant, "to-parent", filepath.Base(h.dir)),
		"a symlink out of the granted root": filepath.Join(grant, "to-etc"),
		"dot-dot out of the granted root":   grant + "/project/../../" + filepath.Base(h.dir),
		"the workspace root":                h.opts.WorkspaceRoot,
		"another Task's folder":             otherWS.GetWorkspace(),
		"the operator's grant":              opsGrant,
	}
	for name, ws := range refused {
		t.Run(name, func(t *testing.T) {
			_, err := h.d.CreateTask(ctx, alice, actors.CreateTask{Request: "cat token", Model: "fake/m", Workspace: ws})
			if !errors.Is(err, actors.ErrPermission) {
				t.Fatalf("CreateTask(workspace %s) = %v, want ErrPermission", ws, err)
			}
		})
	}
	// The data folder is refused to the operator too.
	if _, err := h.d.CreateTask(ctx, actors.Operator, actors.CreateTask{Request: "x", Model: "fake/m", Workspace: h.dir}); !errors.Is(err, actors.ErrPermission) || !strings.Contains(err.Error(), "data folder") {
		t.Fatalf("operator CreateTask(data folder) = %v, want ErrPermission naming the data folder", err)
	}
	if _, err := h.d.CreateTask(ctx, alice, actors.CreateTask{Request: "x", Model: "fake/m", Workspace: filepath.Join(grant, "missing")}); !errors.Is(err, actors.ErrInvalid) {
		t.Fatalf("CreateTask(missing folder) = %v, want ErrInvalid", err)
	}

	realGrant, err := filepath.EvalSymlinks(grant)
	must(err)
	for ws, want := range map[string]string{
		grant:                              realGrant,
		filepath.Join(grant, "project"):    filepath.Join(realGrant, "project"),
		filepath.Join(grant, "to-project"): filepath.Join(realGrant, "project"),
	} {
		m, err := h.d.CreateTask(ctx, alice, actors.CreateTask{Request: "x", Model: "fake/m", Workspace: ws})
		if err != nil {
			t.Fatalf("CreateTask(workspace %s under the grant) = %v", ws, err)
		}
		if m.GetWorkspace() != want || m.GetOwner() != "alice" {
			t.Fatalf("workspace %s recorded as %q (owner %s), want %q", ws, m.GetWorkspace(), m.GetOwner(), want)
		}
	}
	if _, err := h.d.CreateTask(ctx, actors.Operator, actors.CreateTask{Request: "x", Model: "fake/m", Workspace: opsGrant}); err != nil {
		t.Fatalf("operator CreateTask(its grant) = %v", err)
	}
}

// A grant that overlaps the data folder or the workspace root, or names no
// folder, stops the daemon from starting.
func TestWorkspaceGrantsAreChecked(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	cases := map[string]actors.WorkspaceGrant{
		"the data folder":    {Owner: "alice", Root: "DATA"},
		"inside it":          {Owner: "alice", Root: "DATA/store"},
		"containing it":      {Owner: "*", Root: "/"},
		"the workspace root": {Owner: "alice", Root: "ROOT"},
		"a missing folder":   {Owner: "alice", Root: filepath.Join(dir, "missing")},
		"a file":             {Owner: "alice", Root: file},
		"a relative folder":  {Owner: "alice", Root: "rel"},
		"no owner":           {Root: dir},
	}
	for name, g := range cases {
		t.Run(name, func(t *testing.T) {
			data := t.TempDir()
			dd, err := persistence.OpenDataDir(data)
			if err != nil {
				t.Fatal(err)
			}
			defer dd.Close()
			st, err := persistence.Open(dd, persistence.Options{Log: zerolog.Nop(), MemTableSize: 4 << 20, BlockCacheSize: 4 << 20})
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			root := t.TempDir()
			g.Root = strings.Replace(strings.Replace(g.Root, "DATA", data, 1), "ROOT", root, 1)
			d, err := actors.Start(context.Background(), actors.Deps{Store: st, Providers: providers.NewRegistry(), Tools: tools.NewRegistry(), Log: zerolog.Nop()},
				actors.Options{DataDir: data, WorkspaceRoot: root, WorkspaceGrants: []actors.WorkspaceGrant{g}})
			if err == nil {
				_ = d.Stop(context.Background())
			}
			if err == nil || !strings.Contains(err.Error(), "workspace") {
				t.Fatalf("Start with grant %+v = %v, want a workspace error", g, err)
			}
		})
	}
}

func TestWorkspaceInUse(t *testing.T) {
	p := actors.WorkspacePolicy{Data: "/var/lib/lemo", Root: "/var/lib/lemo/workspaces"}
	for _, tc := range []struct {
		task, path, want string
	}{
		{"T1", "/var/lib/lemo/workspaces/T1", ""},
		{"T1", "/srv/alice/project", ""},
		{"T1", "/var/lib/lemo/workspaces/T2", "inside the daemon's data folder"},
		{"T1", "/var/lib/lemo", "is the daemon's data folder"},
		{"T1", "/var", "contains the daemon's data folder"},
		{"T1", "/", "contains the daemon's data folder"},
	} {
		err := p.InUse(tc.task, tc.path)
		if (tc.want == "") != (err == nil) || (err != nil && (!errors.Is(err, actors.ErrPermission) || !strings.Contains(err.Error(), tc.want))) {
			t.Errorf("InUse(%s, %s) = %v, want %q", tc.task, tc.path, err, tc.want)
		}
	}
	q := actors.WorkspacePolicy{Data: "/d", Root: "/w"}
	if err := q.InUse("T1", "/w/T2"); !errors.Is(err, actors.ErrPermission) || !strings.Contains(err.Error(), "inside the daemon's workspace root") {
		t.Errorf("InUse(another Task's folder) = %v", err)
	}
}

// secretTool reads the file "secret" of the call's workspace.
type secretTool struct{ baseTool }

func (secretTool) Name() string                  { return "test.secret" }
func (secretTool) Description() string           { return "reads the workspace's secret" }
func (secretTool) InputSchema() json.RawMessage  { return json.RawMessage(`{"type":"object"}`) }
func (secretTool) ResultSchema() json.RawMessage { return json.RawMessage(`{"type":"object"}`) }
func (secretTool) UsesWorkspace() bool           { return true }
func (secretTool) Retain(out, in json.RawMessage) json.RawMessage {
	return out
}
func (secretTool) Execute(ctx context.Context, c tools.Call, emit tools.Emit) (json.RawMessage, error) {
	b, err := os.ReadFile(filepath.Join(c.Workspace, "secret"))
	if err != nil {
		return nil, err
	}
	return json.Marshal(map[string]string{"secret": string(b)})
}

// A granted folder replaced by a symlink to the data folder after the Task
// was created does not lead its tool calls there.
func TestWorkspaceSwappedAfterCreation(t *testing.T) {
	grant := t.TempDir()
	project := filepath.Join(grant, "project")
	if err := os.Mkdir(project, 0o700); err != nil {
		t.Fatal(err)
	}
	// Each user message makes the model call test.secret once, then answer.
	plan := func(n int, req *providers.Request) fake.Turn {
		if last := req.Messages[len(req.Messages)-1]; last.Role == providers.RoleTool {
			return fake.Turn{Text: "done"}
		}
		return fake.Turn{ToolCalls: []providers.ToolCall{{ID: fmt.Sprintf("c%d", n), Name: "test_secret", Arguments: json.RawMessage(`{}`)}}}
	}
	h := newHarnessWith(t, plan, func(o *actors.Options) {
		o.WorkspaceGrants = []actors.WorkspaceGrant{{Owner: "alice", Root: grant}}
	}, secretTool{})
	if err := os.WriteFile(filepath.Join(h.dir, "secret"), []byte("the operator token"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(project, "secret"), []byte("alice's own"), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	alice := actors.Caller{Owner: "alice"}
	m, err := h.d.CreateTask(ctx, alice, actors.CreateTask{Request: "read", Model: "fake/m", Workspace: project})
	if err != nil {
		t.Fatal(err)
	}
	id := m.GetTaskId()
	evs := h.waitStatus(id, api.TaskStatus_TASK_STATUS_FINISHED)
	if !strings.Contains(dump(evs), "alice's own") {
		t.Fatalf("the first call did not read the project's secret:\n%s", dump(evs))
	}
	// The project folder becomes a symlink to the data folder.
	if err := os.Rename(project, project+".old"); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(h.dir, project); err != nil {
		t.Fatal(err)
	}
	if _, err := h.d.SendMessage(ctx, alice, id, "read again"); err != nil {
		t.Fatal(err)
	}
	evs = h.waitFor(id, "the second call's end", func(evs []*api.Event) bool { return count(evs, "tool_failed")+count(evs, "tool_result") >= 2 })
	if s := dump(evs); strings.Contains(s, "the operator token") || !strings.Contains(s, "now leads to") {
		t.Fatalf("the second call after the swap:\n%s", s)
	}
}

// probeTool reports the workspace its call was given; it does not say it
// uses one.
type probeTool struct{ echoTool }

func (probeTool) Name() string { return "test.probe" }
func (probeTool) Execute(ctx context.Context, c tools.Call, emit tools.Emit) (json.RawMessage, error) {
	return json.Marshal(map[string]string{"echo": "workspace=" + c.Workspace})
}

// A tool that does not say it works in the workspace is not given it (and
// costs no check of it); one that does is given the Task's folder.
func TestWorkspaceOnlyForToolsThatUseIt(t *testing.T) {
	h := newHarness(t, fake.Sequence(
		fake.Turn{ToolCalls: []providers.ToolCall{{ID: "p", Name: "test_probe", Arguments: json.RawMessage(`{"text":"x"}`)}}},
		fake.Turn{Text: "done"},
	), probeTool{})
	id := h.create("probe")
	evs := h.waitStatus(id, api.TaskStatus_TASK_STATUS_FINISHED)
	var got string
	for _, e := range evs {
		if r := e.GetToolResult(); r != nil {
			var out struct{ Echo string }
			if err := json.Unmarshal(r.GetRetainedOutput(), &out); err != nil {
				t.Fatal(err)
			}
			got = out.Echo
		}
	}
	if got != "workspace=" {
		t.Fatalf("the probe was given %q, want no workspace:\n%s", got, dump(evs))
	}
	var ws string
	for _, e := range evs {
		if c := e.GetTaskCreated(); c != nil {
			ws = c.GetWorkspace()
		}
	}
	if ws == "" {
		t.Fatal("the Task has no workspace")
	}
}
