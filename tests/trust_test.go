package tests

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"lemo/api"
	"lemo/client"
)

// An owner's token cannot make a Task work in the daemon's data folder and
// read the operator token there (through the real lemo serve, the client
// library and the CLI), whatever the path's spelling; "/" and "/etc" are
// refused too. Under the folder the configuration grants the owner, the
// same Task works.
func TestWorkspaceDataFolderAttack(t *testing.T) {
	dir := t.TempDir()
	tokens := filepath.Join(dir, "tokens")
	if err := os.WriteFile(tokens, []byte("alice "+aliceToken+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	data := filepath.Join(dir, "data")
	project := filepath.Join(dir, "project")
	if err := os.Mkdir(project, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(project, "notes.txt"), []byte("the notes of alice\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	// A symlink in the granted folder that leads to the data folder.
	if err := os.Symlink(data, filepath.Join(project, "to-data")); err != nil {
		t.Fatal(err)
	}
	d := serveRemote(t, data, "--config", writeConfig(t, "auth:\n  tokens_file: "+tokens+"\nworkspaces:\n  grants: [\"alice="+project+"\"]\n"))
	a := d.connect(t, aliceToken)
	ctx := context.Background()
	steal := `files.read {"path":"token"}`
	for _, ws := range []string{data, filepath.Join(project, "to-data"), filepath.Join(data, "workspaces"), "/", "/etc"} {
		m, err := a.CreateTask(ctx, client.CreateTask{Model: "fake/call", Request: steal, Workspace: ws})
		if !errors.Is(err, client.ErrPermissionDenied) || !strings.Contains(err.Error(), "workspace") {
			t.Errorf("alice's Task in %s: %v, %v; want permission denied naming the workspace rule", ws, m, err)
		}
	}
	alice := func(args ...string) (string, int) {
		return lemo(t, cleanEnv("LEMO_DATA="+data, "LEMO_TOKEN="+aliceToken), args...)
	}
	if out, code := alice("run", "--model", "fake/call", "--workspace", data, steal); code == 0 || !strings.Contains(out, "data folder") || strings.Contains(out, d.token) {
		t.Errorf("lemo run --workspace <data folder> as alice: exit %d\n%s", code, out)
	}

	// Under the granted folder, the Task works and reads what is there.
	m, err := a.CreateTask(ctx, client.CreateTask{Model: "fake/call", Request: `files.read {"path":"notes.txt"}`, Workspace: project})
	if err != nil {
		t.Fatalf("alice's Task in the granted folder: %v", err)
	}
	real, err := filepath.EvalSymlinks(project)
	if err != nil {
		t.Fatal(err)
	}
	if m.GetWorkspace() != real {
		t.Fatalf("workspace = %q, want %q", m.GetWorkspace(), real)
	}
	waitTask(t, a, m.GetTaskId(), "finished", statusIs(api.TaskStatus_TASK_STATUS_FINISHED))
	evs, err := a.ReadHistory(ctx, m.GetTaskId(), 1)
	if err != nil {
		t.Fatal(err)
	}
	var text strings.Builder
	for _, ev := range evs {
		text.WriteString(ev.String())
	}
	if !strings.Contains(text.String(), "the notes of alice") {
		t.Fatalf("the Task did not read notes.txt:\n%s", text.String())
	}
}

// Text the daemon cannot take, given to the CLI, is refused at once with
// what is wrong: not the 30 s wait and "no answer from the daemon" of a
// command protoactor dropped.
func TestCLIRefusesInvalidText(t *testing.T) {
	data := filepath.Join(t.TempDir(), "data")
	serveRemote(t, data)
	out, code := cli(t, data, "run", "--model", "fake/echo", "caf\xe9 au lait")
	if code == 0 || !strings.Contains(out, "the request is not valid UTF-8") || strings.Contains(out, "no answer") {
		t.Fatalf("lemo run with invalid UTF-8: exit %d\n%s", code, out)
	}
	out, code = cli(t, data, "run", "--model", "fake/echo", "\x1b]0;title\x07hello")
	if code == 0 || !strings.Contains(out, "control character U+001B") {
		t.Fatalf("lemo run with an escape sequence: exit %d\n%s", code, out)
	}
	if out, code := cli(t, data, "run", "--model", "fake/echo", "tab\tand\nnew line"); code != 0 || !strings.Contains(out, "echo: tab") {
		t.Fatalf("lemo run with tab and new line: exit %d\n%s", code, out)
	}
}
