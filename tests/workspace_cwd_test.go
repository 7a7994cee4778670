package tests

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// homeEnv is the clean environment plus extra, with home as HOME (see
// withHome).
func homeEnv(home string, extra ...string) []string {
	return withHome(cleanEnv(extra...), home)
}

// withHome is env with HOME set to home and no XDG_DATA_HOME: the
// daemon's default data folder is then home/.local/share/lemo, apart from
// the user's own.
func withHome(env []string, home string) []string {
	var out []string
	for _, kv := range env {
		name, _, _ := strings.Cut(kv, "=")
		if name == "HOME" || name == "XDG_DATA_HOME" {
			continue
		}
		out = append(out, kv)
	}
	return append(out, "HOME="+home)
}

// shIn runs script with sh in dir and returns its output and exit code.
func shIn(t *testing.T, dir string, env []string, script string) (string, int) {
	t.Helper()
	cmd := exec.Command("sh", "-c", script)
	cmd.Dir, cmd.Env = dir, env
	out, err := cmd.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); ok {
		return string(out), ee.ExitCode()
	} else if err != nil {
		t.Fatalf("sh -c %q: %v", script, err)
	}
	return string(out), 0
}

// The README's example works as written from the checkout, against the
// daemon exactly as make run starts it (its command taken from make -n):
// lemo run works in the current folder, a relative --workspace is taken
// from it, --private-workspace gives the Task a folder of its own, and a
// folder the daemon refuses, the current one included, is an error that
// says why and the ways out (never a silent folder of the Task's own).
func TestReadmeExampleWorksInTheCheckout(t *testing.T) {
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	if root, err = filepath.EvalSymlinks(root); err != nil {
		t.Fatal(err)
	}
	home := t.TempDir()
	env := homeEnv(home, "LEMO_FAKE_ENABLED=true", "LEMO_OLLAMA_DISABLED=true", "LEMO_LOG_FORMAT=json")

	// make run's serve command, as make prints it.
	// (Under make test this make is a sub-make: it would name the folders
	// it enters and leaves around the commands.)
	plan, code := shIn(t, root, env, `make --no-print-directory -n run ARGS="--listen 127.0.0.1:0"`)
	serveLine := ""
	for _, l := range strings.Split(strings.TrimSpace(plan), "\n") {
		if strings.Contains(l, "./bin/lemo serve") {
			serveLine = l
		}
	}
	if code != 0 || serveLine == "" {
		t.Fatalf("make -n run (exit %d) ends with no ./bin/lemo serve:\n%s", code, plan)
	}
	serve := exec.Command("sh", "-c", strings.Replace(serveLine, "./bin/lemo", lemoBin, 1))
	serve.Dir, serve.Env = root, env
	serve.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	log := &lockedBuffer{}
	serve.Stdout, serve.Stderr = log, log
	if err := serve.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- serve.Wait() }()
	t.Cleanup(func() {
		_ = syscall.Kill(-serve.Process.Pid, syscall.SIGINT)
		select {
		case <-exited:
		case <-time.After(30 * time.Second):
			_ = syscall.Kill(-serve.Process.Pid, syscall.SIGKILL)
			<-exited
		}
	})
	eventually(t, 30*time.Second, func() error {
		select {
		case err := <-exited:
			t.Fatalf("make run's daemon exited (%v):\n%s", err, log.String())
		default:
		}
		if !strings.Contains(log.String(), "lemo is serving") {
			return errString("not serving yet:\n" + log.String())
		}
		return nil
	})
	data := filepath.Join(home, ".local", "share", "lemo")
	if _, err := os.Stat(filepath.Join(data, "daemon.json")); err != nil {
		t.Fatalf("the default data folder: %v", err)
	}
	own := filepath.Join(data, "workspaces") + "/"

	// The README's own lines, as written, from the checkout: each
	// ./bin/lemo run of the demo but the shell's, which waits for an
	// answer at a terminal (the tmux tests answer it: run_inline_test.go).
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	ran := map[string]bool{}
	for _, l := range strings.Split(string(readme), "\n") {
		if !strings.HasPrefix(l, "./bin/lemo run") || strings.Contains(l, "fake/shell") {
			continue
		}
		example, _, _ := strings.Cut(l, "  #")
		out, code := shIn(t, root, env, strings.Replace(example, "./bin/lemo", lemoBin, 1))
		switch {
		case strings.Contains(l, "fake/echo"):
			ran["fake/echo"] = true
			if code != 0 || !strings.Contains(out, "works in "+root+"\n") || !strings.Contains(out, "echo: hello, Lemo") {
				t.Fatalf("%s (exit %d): want the echo, working in %s:\n%s", example, code, root, out)
			}
		case strings.Contains(l, `"summarise README.md"`):
			ran["summarise"] = true
			if code != 0 || !strings.Contains(out, "works in "+root+"\n") || !strings.Contains(out, "README.md: ") || !strings.Contains(out, "lines; it begins: # Lemo") {
				t.Fatalf("%s (exit %d): want it to work in %s and read README.md:\n%s", example, code, root, out)
			}
		default:
			t.Fatalf("README.md line %q: the test does not know what it should print; add it here", l)
		}
	}
	if !ran["fake/echo"] || !ran["summarise"] {
		t.Fatalf("README.md lacks a ./bin/lemo run line of the demo: ran %v, want fake/echo and summarise README.md", ran)
	}

	lemoIn := func(dir string, args ...string) (string, int) {
		t.Helper()
		cmd := exec.Command(lemoBin, args...)
		cmd.Dir, cmd.Env = dir, env
		b, err := cmd.CombinedOutput()
		if ee, ok := err.(*exec.ExitError); ok {
			return string(b), ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		return string(b), 0
	}

	// A relative --workspace is taken from the current folder.
	out, code := lemoIn(root, "run", "-m", "fake/summarise", "-w", "docs", "summarise quickstart-demo.md")
	if code != 0 || !strings.Contains(out, "works in "+filepath.Join(root, "docs")+"\n") || !strings.Contains(out, "it begins: # Quickstart") {
		t.Fatalf("-w docs (exit %d): want the Task in %s/docs:\n%s", code, root, out)
	}

	// --private-workspace: a folder of the Task's own, even here.
	out, code = lemoIn(root, "run", "-m", "fake/summarise", "--private-workspace", "summarise README.md")
	if code != 0 || !strings.Contains(out, "works in "+own) || !strings.Contains(out, "could not read README.md") || strings.Contains(out, "refuses") {
		t.Fatalf("--private-workspace (exit %d): want a folder of its own under %s, unasked:\n%s", code, own, out)
	}

	// A folder the daemon grants nobody: the default is refused, no Task
	// is created, and the person reads why and the ways out; with --json
	// the error is one object with a stable code.
	elsewhere := filepath.Join(home, "project")
	if err := os.Mkdir(elsewhere, 0o755); err != nil {
		t.Fatal(err)
	}
	tasksBefore, _ := lemoIn(root, "tasks", "--json")
	out, code = lemoIn(elsewhere, "run", "-m", "fake/summarise", "summarise README.md")
	if code != 1 || !strings.Contains(out, "refuses the current folder ("+elsewhere+")") ||
		!strings.Contains(out, "workspaces.grants") || !strings.Contains(out, "--private-workspace") || strings.Contains(out, "works in") {
		t.Fatalf("from an ungranted folder (exit %d): want an error saying the refusal and the ways out, no Task:\n%s", code, out)
	}
	if tasksAfter, _ := lemoIn(root, "tasks", "--json"); tasksAfter != tasksBefore {
		t.Fatalf("a refused current folder created a Task:\nbefore %s\nafter %s", tasksBefore, tasksAfter)
	}
	cmd := exec.Command(lemoBin, "run", "--json", "-m", "fake/echo", "hello")
	cmd.Dir, cmd.Env = elsewhere, env
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err = cmd.Run()
	var e struct{ Code, Message string }
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 || stdout.Len() != 0 ||
		json.Unmarshal([]byte(stderr.String()), &e) != nil || e.Code != "permission_denied" || !strings.Contains(e.Message, elsewhere) {
		t.Fatalf("lemo run --json from an ungranted folder: %v, stdout %q, stderr %q; want exit 1 and code permission_denied", err, stdout.String(), stderr.String())
	}
	// --private-workspace is the explicit way out there.
	out, code = lemoIn(elsewhere, "run", "-m", "fake/echo", "--private-workspace", "hello")
	if code != 0 || !strings.Contains(out, "works in "+own) || !strings.Contains(out, "echo: hello") {
		t.Fatalf("--private-workspace from an ungranted folder (exit %d):\n%s", code, out)
	}

	// Named explicitly, a refused folder is an error that says why: the
	// home contains the data folder.
	out, code = lemoIn(home, "run", "-m", "fake/echo", "-w", ".", "hello")
	if code == 0 || !strings.Contains(out, "contains the daemon's data folder") || !strings.Contains(out, "--private-workspace") || strings.Contains(out, "works in") {
		t.Fatalf("-w . in the home (exit %d): want a refusal naming the data folder:\n%s", code, out)
	}
	out, code = lemoIn(elsewhere, "run", "-m", "fake/echo", "-w", ".", "hello")
	if code == 0 || !strings.Contains(out, "workspaces.grants") || !strings.Contains(out, elsewhere) {
		t.Fatalf("-w . in an ungranted folder (exit %d): want a refusal naming workspaces.grants:\n%s", code, out)
	}
}

// runTaskID is the Task id in lemo run's output: its header line "task
// <id> (<model>)" (a note may come before it on stderr).
func runTaskID(t testing.TB, out string) string {
	t.Helper()
	for _, l := range strings.Split(out, "\n") {
		if f := strings.Fields(l); len(f) == 3 && f[0] == "task" && strings.HasPrefix(f[2], "(") {
			return f[1]
		}
	}
	t.Fatalf("no task header in lemo run's output:\n%s", out)
	return ""
}
