package tests

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"lemo/api"
)

// The client commands against a real daemon: output for people and JSON
// for scripts, and clear errors.
func TestCLI(t *testing.T) {
	data := filepath.Join(t.TempDir(), "data")
	d := serveRemote(t, data)

	out, code := cli(t, data, "run", "--model", "fake/echo", "hello from the cli")
	if code != 0 || !strings.Contains(out, "echo: hello from the cli") || !strings.Contains(out, "[finished: answered]") {
		t.Fatalf("lemo run: exit %d\n%s", code, out)
	}
	out, code = cli(t, data, "tasks")
	if code != 0 || !strings.Contains(out, "finished") || !strings.Contains(out, "hello from the cli") {
		t.Fatalf("lemo tasks: exit %d\n%s", code, out)
	}
	out, code = cli(t, data, "tasks", "--json")
	var tasks []map[string]any
	mustJSON(t, out, &tasks)
	if code != 0 || len(tasks) != 1 || tasks[0]["status"] != "TASK_STATUS_FINISHED" {
		t.Fatalf("lemo tasks --json: exit %d\n%s", code, out)
	}
	id := tasks[0]["task_id"].(string)

	out, code = cli(t, data, "attach", id)
	if code != 0 || !strings.Contains(out, "> hello from the cli") || !strings.Contains(out, "echo: hello from the cli") {
		t.Fatalf("lemo attach: exit %d\n%s", code, out)
	}
	out, code = cli(t, data, "attach", "--json", "--from", "5", id)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if code != 0 || parseUpdate(t, lines[0]).GetEvent().GetSeq() != 5 {
		t.Fatalf("lemo attach --from 5: exit %d\n%s", code, out)
	}
	if out, code := cli(t, data, "send", id, "and again"); code != 0 || !strings.Contains(out, "is running") {
		t.Fatalf("lemo send: exit %d\n%s", code, out)
	}
	if out, code := cli(t, data, "attach", "--from", "8", id); code != 0 || !strings.Contains(out, "echo: and again") {
		t.Fatalf("attach after send: exit %d\n%s", code, out)
	}
	out, code = cli(t, data, "tools", "--json")
	var tl []map[string]any
	mustJSON(t, out, &tl)
	views := map[string]string{}
	for _, tool := range tl {
		v, _ := tool["view"].(string)
		views[tool["name"].(string)] = v
	}
	if code != 0 || views["files.read"] != "files" || views["shell.run"] != "shell" || views["system"] != "system" {
		t.Fatalf("lemo tools --json: exit %d, views %v", code, views)
	}
	if out, code = cli(t, data, "models"); code != 0 || !strings.Contains(out, "fake/echo") || !strings.Contains(out, "fake/stream") {
		t.Fatalf("lemo models: exit %d\n%s", code, out)
	}

	errorsCases := []struct {
		name string
		args []string
		env  []string
		want string
	}{
		{"pause a finished task", []string{"pause", id}, nil, "cannot pause: task is finished"},
		{"unknown task", []string{"attach", "01NOSUCHTASK"}, nil, "unknown task 01NOSUCHTASK"},
		{"unknown task to cancel", []string{"cancel", "01NOSUCHTASK"}, nil, "unknown task"},
		{"wrong token", []string{"tasks", "--token", "not-the-right-token-at-all"}, nil, "refused the token"},
		{"wrong token from the environment", []string{"tasks"}, []string{"LEMO_TOKEN=not-the-right-token-at-all"}, "refused the token"},
		{"nothing at the address", []string{"tasks", "--addr", "127.0.0.1:1"}, nil, "not running"},
		{"no data folder", []string{"tasks", "--data", filepath.Join(t.TempDir(), "none")}, nil, "not running"},
		{"unknown approval", []string{"approve", id + ".call-9"}, nil, "unknown approval"},
	}
	for _, tc := range errorsCases {
		t.Run(tc.name, func(t *testing.T) {
			out, code := lemo(t, cleanEnv(append([]string{"LEMO_DATA=" + data}, tc.env...)...), tc.args...)
			if code == 0 || !strings.Contains(out, tc.want) {
				t.Fatalf("exit %d, want an error saying %q:\n%s", code, tc.want, out)
			}
		})
	}
	if out, code := cli(t, data, "tasks", "--bogus"); code != 2 {
		t.Fatalf("unknown flag: exit %d\n%s", code, out)
	}

	// A clean stop removes daemon.json: clients then say it is not running.
	d.stop()
	if _, err := os.Stat(filepath.Join(data, "daemon.json")); !os.IsNotExist(err) {
		t.Fatalf("daemon.json after a clean stop: %v", err)
	}
	out, code = cli(t, data, "tasks")
	if code == 0 || !strings.Contains(out, "not running") || !strings.Contains(out, "lemo serve --data") {
		t.Fatalf("after the stop: exit %d\n%s", code, out)
	}
}

// Ctrl-C detaches lemo run (the Task goes on) unless --cancel-on-exit.
func TestRunDetachAndCancel(t *testing.T) {
	data := filepath.Join(t.TempDir(), "data")
	d := serveRemote(t, data)
	c := d.connect(t, "")
	for _, cancel := range []bool{false, true} {
		args := []string{"run", "--model", "fake/loop", "loop"}
		if cancel {
			args = append(args, "--cancel-on-exit")
		}
		s := startCLI(t, data, args...)
		first, ok := s.next(20 * time.Second)
		if !ok || !strings.HasPrefix(first, "task ") {
			t.Fatalf("lemo run printed %q; stderr:\n%s", first, s.stderr())
		}
		id := strings.Fields(first)[1]
		for i := 0; i < 3; i++ { // some progress
			if _, ok := s.next(20 * time.Second); !ok {
				t.Fatalf("no progress; stderr:\n%s", s.stderr())
			}
		}
		s.signal(syscall.SIGINT)
		code := s.wait(t, 20*time.Second)
		if cancel {
			if code == 0 || !strings.Contains(s.stderr(), "cancelled task "+id) {
				t.Fatalf("--cancel-on-exit: exit %d\n%s", code, s.stderr())
			}
			waitTask(t, c, id, "cancelled", statusIs(api.TaskStatus_TASK_STATUS_CANCELLED))
			continue
		}
		if code != 0 || !strings.Contains(s.stderr(), "detached") {
			t.Fatalf("detach: exit %d\n%s", code, s.stderr())
		}
		// The Task went on after the client left.
		m, err := c.Task(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		waitTask(t, c, id, "more progress", func(n *api.TaskMeta) bool { return n.GetLastSeq() > m.GetLastSeq()+5 })
		if _, err := c.Cancel(context.Background(), id); err != nil {
			t.Fatal(err)
		}
	}
}
