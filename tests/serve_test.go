package tests

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"lemo/api"
	"lemo/client"
)

func TestVersion(t *testing.T) {
	out, code := lemo(t, cleanEnv(), "version")
	if code != 0 || !strings.Contains(out, "lemo ") || !strings.Contains(out, "api protocol 1") {
		t.Fatalf("lemo version: exit %d\n%s", code, out)
	}
}

func TestServeStartsAndStopsCleanly(t *testing.T) {
	data := filepath.Join(t.TempDir(), "data")
	d := startDaemon(t, data)
	d.stop()
	for _, f := range []string{"FORMAT", "lock", "store"} {
		if _, err := os.Stat(filepath.Join(data, f)); err != nil {
			t.Errorf("data folder lacks %s: %v", f, err)
		}
	}
	// It starts again on the same folder.
	startDaemon(t, data).stop()
}

// Ctrl-C (SIGINT) stops lemo serve cleanly while a Task runs: the Task is
// durably paused as interrupted (read by the next daemon), and continuing
// it there goes on from where it was.
func TestCtrlCPausesRunningTasks(t *testing.T) {
	data := filepath.Join(t.TempDir(), "data")
	d := serveRemote(t, data)
	c := d.connect(t, "")
	m, err := c.CreateTask(context.Background(), client.CreateTask{Request: "loop", Model: "fake/loop"})
	if err != nil {
		t.Fatal(err)
	}
	id := m.GetTaskId()
	running := waitTask(t, c, id, "some progress", func(m *api.TaskMeta) bool { return m.GetLastSeq() > 10 })
	d.stop() // SIGINT, as Ctrl-C sends; exit status 0
	d = serveRemote(t, data)
	c = d.connect(t, "")
	m, err = c.Task(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	if m.GetStatus() != api.TaskStatus_TASK_STATUS_PAUSED || m.GetPauseReason() != api.PauseReason_PAUSE_REASON_INTERRUPTED || m.GetLastSeq() < running.GetLastSeq() {
		t.Fatalf("after Ctrl-C and a restart: %v (it had %d events)", m, running.GetLastSeq())
	}
	if _, err := c.Continue(context.Background(), id, ""); err != nil {
		t.Fatal(err)
	}
	waitTask(t, c, id, "progress after continue", func(n *api.TaskMeta) bool {
		return n.GetStatus() == api.TaskStatus_TASK_STATUS_RUNNING && n.GetLastSeq() > m.GetLastSeq()+5
	})
	if _, err := c.Cancel(context.Background(), id); err != nil {
		t.Fatal(err)
	}
}

// A bad config file, an unknown key, an unreadable data folder and a second
// daemon on the same folder each give a clear error and a non-zero exit,
// and change nothing on disk.
func TestBadStartsChangeNothing(t *testing.T) {
	base := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(base, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	bad := write("bad.yaml", "tasks: [\n")
	unknown := write("unknown.yaml", "tasks:\n  max_cycle: 3\nproviders:\n  ollama:\n    bse_url: http://x\n")
	invalid := write("invalid.yaml", "tasks:\n  max_cycles: 0\nlog:\n  level: loud\n")
	cases := []struct {
		name string
		args []string
		env  []string
		code int
		want []string
	}{
		{"invalid yaml", []string{"--config", bad}, nil, 2, []string{"bad.yaml", "not valid YAML"}},
		{"unknown keys", []string{"--config", unknown}, nil, 2, []string{"2 problems", "tasks.max_cycle: unknown key", "providers.ollama.bse_url: unknown key"}},
		{"invalid values", []string{"--config", invalid}, nil, 2, []string{"tasks.max_cycles: must be at least 1", "log.level"}},
		{"missing config", []string{"--config", filepath.Join(base, "nope.yaml")}, nil, 2, []string{"nope.yaml"}},
		{"unknown variable", nil, []string{"LEMO_TASKS_MAXCYCLES=3"}, 2, []string{"LEMO_TASKS_MAXCYCLES: unknown LEMO_ variable"}},
		{"unknown flag", []string{"--bogus"}, nil, 2, []string{"bogus"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			data := filepath.Join(t.TempDir(), "data")
			out, code := lemo(t, cleanEnv(c.env...), append([]string{"serve", "--data", data}, c.args...)...)
			if code != c.code {
				t.Fatalf("exit %d, want %d\n%s", code, c.code, out)
			}
			for _, w := range c.want {
				if !strings.Contains(out, w) {
					t.Errorf("output lacks %q:\n%s", w, out)
				}
			}
			if _, err := os.Stat(data); !os.IsNotExist(err) {
				t.Fatalf("the data folder was created: %v", err)
			}
		})
	}

	t.Run("second daemon on the same folder", func(t *testing.T) {
		data := filepath.Join(t.TempDir(), "data")
		first := startDaemon(t, data)
		before := snapshot(t, data)
		out, code := lemo(t, cleanEnv("LEMO_OLLAMA_DISABLED=true"), "serve", "--data", data)
		if code == 0 || !strings.Contains(out, "another lemo daemon is using it") {
			t.Fatalf("second daemon: exit %d\n%s", code, out)
		}
		if after := snapshot(t, data); after != before {
			t.Fatalf("the second daemon changed the folder:\nbefore:\n%s\nafter:\n%s", before, after)
		}
		first.stop()
	})

	t.Run("unreadable data folder", func(t *testing.T) {
		data := filepath.Join(t.TempDir(), "data")
		startDaemon(t, data).stop()
		if err := os.Chmod(data, 0o700); err != nil {
			t.Fatal(err)
		}
		before := snapshot(t, data)
		cmd := exec.Command(lemoBin, "serve", "--data", data)
		cmd.Env = cleanEnv("LEMO_OLLAMA_DISABLED=true")
		if os.Getuid() == 0 {
			// Root reads everything: run as nobody, who cannot read a
			// root-owned 0700 folder.
			cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
			for _, dir := range []string{filepath.Dir(data), filepath.Dir(filepath.Dir(data))} {
				if err := os.Chmod(dir, 0o755); err != nil {
					t.Fatal(err)
				}
			}
		} else if err := os.Chmod(data, 0); err != nil {
			t.Fatal(err)
		} else {
			defer os.Chmod(data, 0o700)
		}
		out, err := cmd.CombinedOutput()
		ee, ok := err.(*exec.ExitError)
		if !ok || ee.ExitCode() == 0 || !strings.Contains(string(out), "cannot be read") {
			t.Fatalf("unreadable folder: %v\n%s", err, out)
		}
		_ = os.Chmod(data, 0o700)
		if after := snapshot(t, data); after != before {
			t.Fatalf("the folder changed:\nbefore:\n%s\nafter:\n%s", before, after)
		}
	})
}
