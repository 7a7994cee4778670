package tests

import (
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"lemo/api"
	"lemo/client"
)

// sessionsOpened returns the ids of the sessions the daemon's debug log
// says were opened, in order.
func sessionsOpened(d *daemon) []string {
	var ids []string
	for _, line := range strings.Split(d.logs(), "\n") {
		var rec struct{ Message, Session string }
		if json.Unmarshal([]byte(line), &rec) == nil && rec.Message == "session opened" {
			ids = append(ids, rec.Session)
		}
	}
	return ids
}

// logged reports whether the daemon logged msg for session.
func logged(d *daemon, session, msg string) bool {
	for _, line := range strings.Split(d.logs(), "\n") {
		var rec struct{ Message, Session string }
		if json.Unmarshal([]byte(line), &rec) == nil && rec.Message == msg && rec.Session == session {
			return true
		}
	}
	return false
}

// A client process killed with SIGKILL (no goodbye) is noticed: its session
// and its subscription end and the attached-client gauge drops, while the
// daemon, the Task and another attached client go on.
func TestClientsKilledClientIsCleanedUp(t *testing.T) {
	data := filepath.Join(t.TempDir(), "data")
	cfg := writeConfig(t, "log:\n  level: debug\ntasks:\n  max_cycles: 1000000\n")
	d := serveRemote(t, data, "--config", cfg, "--http-listen", "127.0.0.1:0")
	addr := httpAddr(t, d.daemon)
	c := d.connect(t, "")
	ctx := context.Background()
	m, err := c.CreateTask(ctx, client.CreateTask{Request: "loop", Model: "fake/loop"})
	if err != nil {
		t.Fatal(err)
	}
	id := m.GetTaskId()
	clients := func(want float64) func() error {
		return func() error {
			if n := scrape(t, addr)["lemo_clients"]; n != want {
				return fmt.Errorf("lemo_clients = %v, want %v", n, want)
			}
			return nil
		}
	}
	eventually(t, 30*time.Second, clients(1)) // this test's connection
	// attached reads lines until one shows an event after seq.
	attached := func(s *stream, after uint64) uint64 {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for time.Now().Before(deadline) {
			line, ok := s.next(time.Until(deadline))
			if !ok {
				break
			}
			if seq := parseUpdate(t, line).GetEvent().GetSeq(); seq > after {
				return seq
			}
		}
		t.Fatalf("%v showed no event after seq %d; stderr:\n%s", s.cmd.Args, after, s.stderr())
		return 0
	}

	survivor := startCLI(t, data, "attach", "--json", "--no-deltas", id)
	attached(survivor, 0)
	eventually(t, 30*time.Second, clients(2))
	victim := startCLI(t, data, "attach", "--json", "--no-deltas", id)
	attached(victim, 0)
	eventually(t, 30*time.Second, clients(3))
	opened := sessionsOpened(d.daemon)
	if len(opened) != 3 {
		t.Fatalf("%d sessions opened, want 3:\n%s", len(opened), d.logs())
	}
	session := opened[2] // the victim's: it connected last

	if err := victim.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	victim.wait(t, 10*time.Second)
	eventually(t, 60*time.Second, func() error {
		if err := clients(2)(); err != nil {
			return err
		}
		// The session ends its subscriptions, withdraws its services and
		// leaves the gateway before it logs that it closed.
		for _, msg := range []string{"client went away", "session closed"} {
			if !logged(d.daemon, session, msg) {
				return fmt.Errorf("the daemon has not logged %q for session %s", msg, session)
			}
		}
		return nil
	})
	for _, other := range opened[:2] {
		if logged(d.daemon, other, "session closed") {
			t.Fatalf("session %s of a client that is still attached was closed:\n%s", other, d.logs())
		}
	}

	// The Task, the other attached client and the daemon are unaffected.
	now, err := c.Task(ctx, id)
	if err != nil || now.GetStatus() != api.TaskStatus_TASK_STATUS_RUNNING {
		t.Fatalf("the Task after the client died: %v (%v)", now, err)
	}
	attached(survivor, now.GetLastSeq())
	if _, err := c.Cancel(ctx, id); err != nil {
		t.Fatal(err)
	}
	if code := survivor.wait(t, 30*time.Second); code != 0 {
		t.Fatalf("the surviving lemo attach exited %d when the Task was cancelled; stderr:\n%s", code, survivor.stderr())
	}
	eventually(t, 30*time.Second, clients(1))
	if !d.alive() {
		t.Fatal("the daemon exited")
	}
}

// The client commands' success paths against a real running Task: pause,
// continue and cancel (for people and with --json), send --json, models
// --json, and a client with only --addr and --token (or LEMO_ADDR and
// LEMO_TOKEN) and no data folder.
func TestClientsCLISuccessPaths(t *testing.T) {
	data := filepath.Join(t.TempDir(), "data")
	d := serveRemote(t, data, "--config", writeConfig(t, "tasks:\n  max_cycles: 1000000\n"))
	c := d.connect(t, "")
	ctx := context.Background()
	progress := func(id string) {
		t.Helper()
		m, err := c.Task(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		waitTask(t, c, id, "progress", func(n *api.TaskMeta) bool {
			return n.GetStatus() == api.TaskStatus_TASK_STATUS_RUNNING && n.GetLastSeq() > m.GetLastSeq()+3
		})
	}
	// control runs lemo <cmd> [--json] id and checks what it says.
	control := func(asJSON bool, cmd, id string, want api.TaskStatus, word string) {
		t.Helper()
		args := []string{cmd, id}
		if asJSON {
			args = []string{cmd, "--json", id}
		}
		out, code := cli(t, data, args...)
		if code != 0 {
			t.Fatalf("lemo %v: exit %d\n%s", args, code, out)
		}
		if !asJSON {
			if got := "task " + id + " is " + word + "\n"; out != got {
				t.Fatalf("lemo %v printed %q, want %q", args, out, got)
			}
			return
		}
		var meta struct {
			TaskID string `json:"task_id"`
			Status string `json:"status"`
		}
		mustJSON(t, out, &meta)
		if meta.TaskID != id || meta.Status != want.String() {
			t.Fatalf("lemo %v: task %q status %q, want %s %s\n%s", args, meta.TaskID, meta.Status, id, want, out)
		}
	}
	for _, asJSON := range []bool{false, true} {
		t.Run(fmt.Sprintf("json=%v", asJSON), func(t *testing.T) {
			m, err := c.CreateTask(ctx, client.CreateTask{Request: "loop", Model: "fake/loop"})
			if err != nil {
				t.Fatal(err)
			}
			id := m.GetTaskId()
			progress(id)

			control(asJSON, "pause", id, api.TaskStatus_TASK_STATUS_PAUSED, "paused")
			paused := waitTask(t, c, id, "paused", statusIs(api.TaskStatus_TASK_STATUS_PAUSED))
			if paused.GetPauseReason() != api.PauseReason_PAUSE_REASON_USER {
				t.Fatalf("pause reason %v, want user", paused.GetPauseReason())
			}
			// Paused means no more model calls (a tool call that was running
			// may still record its result).
			evs, err := c.ReadHistory(ctx, id, 1)
			if err != nil {
				t.Fatal(err)
			}
			pausedAt := -1
			for i, ev := range evs {
				if ev.GetStatusChanged().GetStatus() == api.TaskStatus_TASK_STATUS_PAUSED {
					pausedAt = i
				}
				if pausedAt >= 0 && ev.GetCycleStarted() != nil {
					t.Fatalf("a Cycle started at seq %d after the pause at seq %d", ev.GetSeq(), evs[pausedAt].GetSeq())
				}
			}
			if pausedAt < 0 {
				t.Fatal("the pause is not in the history")
			}

			control(asJSON, "continue", id, api.TaskStatus_TASK_STATUS_RUNNING, "running")
			progress(id)

			control(asJSON, "cancel", id, api.TaskStatus_TASK_STATUS_CANCELLED, "cancelled")
			waitTask(t, c, id, "cancelled", statusIs(api.TaskStatus_TASK_STATUS_CANCELLED))
		})
	}

	// send --json --no-follow reopens a finished Task and says so in JSON.
	m, err := c.CreateTask(ctx, client.CreateTask{Request: "first", Model: "fake/echo"})
	if err != nil {
		t.Fatal(err)
	}
	id := m.GetTaskId()
	waitTask(t, c, id, "finished", statusIs(api.TaskStatus_TASK_STATUS_FINISHED))
	out, code := cli(t, data, "send", "--json", "--no-follow", id, "second")
	var sent struct {
		TaskID  string `json:"task_id"`
		Status  string `json:"status"`
		LastSeq uint64 `json:"last_seq"` // a number (docs/json.md)
	}
	mustJSON(t, out, &sent)
	if code != 0 || sent.TaskID != id || sent.Status == api.TaskStatus_TASK_STATUS_FINISHED.String() || sent.LastSeq == 0 {
		t.Fatalf("lemo send --json: exit %d\n%s", code, out)
	}
	waitHistory(t, c, id, func(ev *api.Event) bool { return ev.GetAssistantMessage().GetText() == "echo: second" })

	// models --json lists the demo models with their capabilities.
	out, code = cli(t, data, "models", "--json")
	var models struct {
		Models []struct {
			ID     string `json:"id"`
			Window uint64 `json:"window"` // a number (docs/json.md)
			Tools  bool   `json:"tools"`
		} `json:"models"`
	}
	mustJSON(t, out, &models)
	found := map[string]bool{}
	for _, m := range models.Models {
		found[m.ID] = m.Window != 0
	}
	for _, want := range []string{"fake/echo", "fake/loop", "fake/shell", "fake/call", "fake/files", "fake/stream"} {
		if !found[want] {
			t.Errorf("lemo models --json lacks %s with its window:\n%s", want, out)
		}
	}
	if code != 0 {
		t.Fatalf("lemo models --json: exit %d\n%s", code, out)
	}

	// With only the address and the token, from a folder without a data
	// folder: flags, then the environment.
	nowhere := t.TempDir()
	run := func(env []string, args ...string) (string, int) {
		t.Helper()
		cmd := exec.Command(lemoBin, args...)
		cmd.Env, cmd.Dir = cleanEnv(env...), nowhere
		b, err := cmd.CombinedOutput()
		if ee, ok := err.(*exec.ExitError); ok {
			return string(b), ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		return string(b), 0
	}
	if out, code := run(nil, "tasks"); code == 0 || !strings.Contains(out, "not running") {
		t.Fatalf("without a data folder, address or token: exit %d\n%s", code, out)
	}
	for name, how := range map[string]struct {
		env  []string
		args []string
	}{
		"flags":       {nil, []string{"--addr", d.addr, "--token", d.token}},
		"environment": {[]string{"LEMO_ADDR=" + d.addr, "LEMO_TOKEN=" + d.token}, nil},
	} {
		out, code := run(how.env, append([]string{"tasks", "--json"}, how.args...)...)
		var tasks []map[string]any
		mustJSON(t, out, &tasks)
		if code != 0 || len(tasks) != 3 {
			t.Fatalf("lemo tasks --json with the address and token from the %s: exit %d, %d tasks, want 3\n%s", name, code, len(tasks), out)
		}
		out, code = run(how.env, append([]string{"send", id, "third from the " + name}, how.args...)...)
		if code != 0 || !strings.Contains(out, "task "+id+" is ") {
			t.Fatalf("lemo send with the address and token from the %s: exit %d\n%s", name, code, out)
		}
		waitHistory(t, c, id, func(ev *api.Event) bool { return ev.GetAssistantMessage().GetText() == "echo: third from the "+name })
	}
}
