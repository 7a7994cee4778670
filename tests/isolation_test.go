package tests

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"lemo/api"
	"lemo/client"
)

// unprivilegedUser returns a user to run a daemon as, and a folder it owns
// (removed at cleanup): as root a fresh user (useradd, removed at cleanup),
// else this process's own user. It skips when running as root and no user
// can be created, except under CI=true, where it fails.
func unprivilegedUser(t *testing.T) (*syscall.Credential, string) {
	t.Helper()
	dir, err := os.MkdirTemp("", "lemo-user-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if os.Getuid() != 0 {
		return &syscall.Credential{Uid: uint32(os.Getuid()), Gid: uint32(os.Getgid())}, dir
	}
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	name := "lemot" + hex.EncodeToString(b)
	if out, err := exec.Command("useradd", "--no-create-home", "--home-dir", dir, "--shell", "/bin/sh", name).CombinedOutput(); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("useradd %s: %v: %s (under CI=true this test must run as an unprivileged user)", name, err, out)
		}
		t.Skipf("no unprivileged user: useradd %s: %v: %s", name, err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("userdel", name).CombinedOutput(); err != nil {
			t.Errorf("userdel %s: %v: %s", name, err, out)
		}
	})
	u, err := user.Lookup(name)
	if err != nil {
		t.Fatal(err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	if err := os.Chown(dir, uid, gid); err != nil {
		t.Fatal(err)
	}
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, dir
}

// buildProcPeek builds testdata/procpeek beside the lemo binary (a folder
// every user may read).
func buildProcPeek(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(filepath.Dir(lemoBin), "procpeek")
	if _, err := os.Stat(bin); err == nil {
		return bin
	}
	out, err := exec.Command("go", "build", "-o", bin, "./testdata/procpeek").CombinedOutput()
	if err != nil {
		t.Fatalf("build procpeek: %v\n%s", err, out)
	}
	return bin
}

// A tool process cannot read the daemon's secrets. The daemon runs with a
// provider key and an operator token in its environment and a tokens file
// in its data folder (also the generated token file); a shell.run command
// then looks everywhere a child could: the environment, command line and
// memory of every process it sees in /proc (its parent, the daemon, among
// them unless it runs in a PID namespace of its own), and every
// descriptor it inherited. None reveals a secret, and it inherited only
// stdin, stdout and stderr.
func TestToolProcessesCannotReadDaemonSecrets(t *testing.T) {
	peek := buildProcPeek(t)
	t.Run("unprivileged", func(t *testing.T) {
		cred, dir := unprivilegedUser(t)
		checkSecretsHidden(t, peek, cred, dir, "auto")
	})
	// Without namespaces, the non-dumpable daemon and the descriptors it
	// passes on are what keeps the secrets.
	t.Run("unprivileged without namespaces", func(t *testing.T) {
		cred, dir := unprivilegedUser(t)
		checkSecretsHidden(t, peek, cred, dir, "off")
	})
	// Root's children are root: only the namespaces hide the daemon (a
	// root tool could still undo them; see tools/isolation).
	t.Run("root", func(t *testing.T) {
		if os.Getuid() != 0 {
			t.Skip("not root")
		}
		dir, err := os.MkdirTemp("", "lemo-root-")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = os.RemoveAll(dir) })
		checkSecretsHidden(t, peek, &syscall.Credential{}, dir, "auto")
	})
}

func checkSecretsHidden(t *testing.T, peek string, cred *syscall.Credential, dir, namespaces string) {
	const prefix = "PLANTED-"
	b := make([]byte, 12)
	_, _ = rand.Read(b)
	secret := func(what string) string { return prefix + what + "-" + hex.EncodeToString(b) }
	envKey, envToken, fileToken := secret("provider-key"), secret("operator-token"), secret("tokens-file")

	data := filepath.Join(dir, "data")
	tokens := filepath.Join(dir, "tokens")
	cfg := filepath.Join(dir, "lemo.yaml")
	for _, f := range []struct {
		path, text string
		mode       os.FileMode
	}{
		{tokens, "other " + fileToken + "\n", 0o600},
		{cfg, "tools:\n  namespaces: " + namespaces + "\n  shell:\n    approval: allow\n", 0o644},
	} {
		if err := os.WriteFile(f.path, []byte(f.text), f.mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(f.path, int(cred.Uid), int(cred.Gid)); err != nil {
			t.Fatal(err)
		}
	}
	env := []string{"LEMO_FAKE_ENABLED=true", "LEMO_OLLAMA_DISABLED=true", "HOME=" + dir,
		"OPENAI_API_KEY=" + envKey, "LEMO_AUTH_TOKEN=" + envToken, "LEMO_AUTH_TOKENS_FILE=" + tokens}
	d := launchDaemonAs(t, cred, lemoBin, data, env, "--config", cfg)
	d.waitServing()
	if namespaces == "auto" {
		needNamespaces(t, d)
	}
	l, err := client.FindLocal(data)
	if err != nil {
		t.Fatalf("FindLocal: %v\n%s", err, d.logs())
	}
	c := (&remoteDaemon{daemon: d, addr: l.Address}).connect(t, envToken)
	ctx := context.Background()

	// The prefix alone is on the command line: the peek finds the secrets
	// only where the whole of one is.
	request := peek + " " + prefix + "; exit $?"
	if namespaces == "auto" {
		// In namespaces the data folder is hidden but for the Task's
		// workspace (data/workspaces/<id>).
		request = "cat ../../token ../../daemon.json; " + request
	}
	m, err := c.CreateTask(ctx, client.CreateTask{Request: request, Model: "fake/shell"})
	if err != nil {
		t.Fatal(err)
	}
	waitTask(t, c, m.GetTaskId(), "finished", statusIs(api.TaskStatus_TASK_STATUS_FINISHED))
	calls, _ := toolCalls(t, c, m.GetTaskId())
	if len(calls) != 1 || calls[0].result == nil {
		t.Fatalf("calls %+v, want one shell.run with a result", calls)
	}
	out := string(calls[0].result.GetRetainedOutput())
	t.Logf("the peek reported: %s", out)
	if !strings.Contains(out, "SUMMARY pids=") {
		t.Fatalf("the peek did not finish: %s", out)
	}
	for _, s := range []string{envKey, envToken, fileToken, tokenOf(t, data)} {
		if strings.Contains(out, s) {
			t.Errorf("a tool process read the secret %q", s)
		}
	}
	if !strings.Contains(out, `FDS 0,1,2\n`) {
		t.Errorf("the tool process inherited descriptors besides stdin, stdout and stderr: %s", out)
	}
}

// tokenOf is the token file of the data folder, if any.
func tokenOf(t *testing.T, data string) string {
	b, err := os.ReadFile(filepath.Join(data, "token"))
	if err != nil || len(strings.TrimSpace(string(b))) == 0 {
		return "\x00no token file"
	}
	return strings.TrimSpace(string(b))
}
