package tests

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"lemo/api"
	"lemo/client"
)

// needTmux returns the tmux binary, installing Debian's package when it
// is missing and this process may (root). Without it the test skips,
// except under CI=true where it must run.
func needTmux(t *testing.T) string {
	t.Helper()
	if p, err := exec.LookPath("tmux"); err == nil {
		return p
	}
	var why string
	if os.Geteuid() == 0 {
		out, err := exec.Command("apt-get", "install", "-y", "tmux").CombinedOutput()
		if err != nil { // the package lists may be missing: read them first
			upd, _ := exec.Command("apt-get", "update").CombinedOutput()
			var again []byte
			again, err = exec.Command("apt-get", "install", "-y", "tmux").CombinedOutput()
			out = append(append(out, upd...), again...)
		}
		if p, lerr := exec.LookPath("tmux"); lerr == nil {
			return p
		}
		why = fmt.Sprintf("apt-get install -y tmux failed: %v\n%s", err, out)
	} else {
		why = "tmux is not installed and installing it needs root (apt-get install -y tmux)"
	}
	if os.Getenv("CI") == "true" {
		t.Fatalf("the console test needs tmux: %s", why)
	}
	t.Skipf("the console test needs tmux: %s", why)
	return ""
}

// terminal is a tmux session on a private server, 80×24, running one
// command.
type terminal struct {
	t      *testing.T
	tmux   string
	socket string
}

func newTerminal(t *testing.T, tmux string, env []string, argv ...string) *terminal {
	t.Helper()
	term := &terminal{t: t, tmux: tmux, socket: filepath.Join(t.TempDir(), "tmux.sock")}
	args := []string{"-S", term.socket, "-f", "/dev/null", "new-session", "-d", "-s", "e2e", "-x", "80", "-y", "24"}
	for _, kv := range env {
		args = append(args, "-e", kv)
	}
	args = append(args, argv...)
	cmd := exec.Command(tmux, args...)
	cmd.Env = cleanEnv("TERM=xterm-256color")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("tmux new-session: %v\n%s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command(tmux, "-S", term.socket, "kill-server").Run() })
	return term
}

func (term *terminal) run(args ...string) (string, error) {
	out, err := exec.Command(term.tmux, append([]string{"-S", term.socket}, args...)...).CombinedOutput()
	return string(out), err
}

// screen returns what the terminal shows.
func (term *terminal) screen() string {
	out, err := term.run("capture-pane", "-p", "-t", "e2e")
	if err != nil {
		return "(no screen: " + err.Error() + ")"
	}
	return out
}

// keys types tmux key names ("Down", "Enter", "y").
func (term *terminal) keys(keys ...string) {
	term.t.Helper()
	if out, err := term.run(append([]string{"send-keys", "-t", "e2e"}, keys...)...); err != nil {
		term.t.Fatalf("send-keys %v: %v\n%s", keys, err, out)
	}
}

// waitFor polls the screen until it shows every text.
func (term *terminal) waitFor(what ...string) string {
	term.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		s := term.screen()
		ok := true
		for _, w := range what {
			ok = ok && strings.Contains(s, w)
		}
		if ok {
			return s
		}
		if time.Now().After(deadline) {
			term.t.Fatalf("the console never showed %q; screen:\n%s", what, s)
		}
		waitABit()
	}
}

// waitWithout polls the screen until it no longer shows text.
func (term *terminal) waitWithout(text string) string {
	term.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		s := term.screen()
		if !strings.Contains(s, text) {
			return s
		}
		if time.Now().After(deadline) {
			term.t.Fatalf("the console kept showing %q; screen:\n%s", text, s)
		}
		waitABit()
	}
}

// helpShown is a line of the console's key help (?).
const helpShown = "quit (the daemon and its Tasks go on)"

// settle returns the screen once the console has handled every key sent
// so far: keys are handled in order, so once the help a ? opens is shown
// and closed by another, the keys before it are done. (Waiting for the
// screen to change is not enough: clocks and counters change it too.)
func (term *terminal) settle() string {
	term.t.Helper()
	term.keys("?")
	term.waitFor(helpShown)
	term.keys("?")
	return term.waitWithout(helpShown)
}

// selectRow moves the tree's cursor (›) to the row that shows text: from a
// settled screen it sends as many Down (or Up) as the row is away, and
// looks again, until the cursor is on it.
func (term *terminal) selectRow(text string) {
	term.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		s := term.settle()
		cursor, row, tree := -1, -1, false
		for i, line := range strings.Split(s, "\n") {
			tree = tree || strings.Contains(line, "ACTOR")
			if strings.HasPrefix(line, "›") {
				cursor = i
			}
			if tree && row < 0 && strings.Contains(line, text) {
				row = i
			}
		}
		if cursor >= 0 && cursor == row {
			return
		}
		if time.Now().After(deadline) {
			term.t.Fatalf("could not select the row %q; screen:\n%s", text, s)
		}
		if cursor < 0 || row < 0 {
			waitABit() // the row is not there yet
			continue
		}
		key, n := "Down", row-cursor
		if n < 0 {
			key, n = "Up", -n
		}
		term.keys(slices.Repeat([]string{key}, n)...)
	}
}

func short(id string) string { return "…" + id[len(id)-6:] }

// The console in a real terminal against a real daemon with running
// Tasks: keys select a Task, approve its call, stop another Task's tool
// call and cancel a streaming Task; the screen and the daemon agree.
func TestConsoleInTmux(t *testing.T) {
	tmux := needTmux(t)
	data := filepath.Join(t.TempDir(), "data")
	d := serveRemote(t, data, "--config", writeConfig(t, "tools:\n  shell:\n    allow: [\"sleep\"]\n"))
	c := d.connect(t, "")
	ctx := context.Background()
	create := func(model, request string) string {
		t.Helper()
		m, err := c.CreateTask(ctx, client.CreateTask{Request: request, Model: model})
		if err != nil {
			t.Fatal(err)
		}
		return m.GetTaskId()
	}
	asks := create("fake/shell", "echo approved in the console")
	sleeps := create("fake/shell", "sleep 120")
	streams := create("fake/stream", "deltas=100000 rate=1000")
	waitTask(t, c, asks, "awaiting approval", statusIs(api.TaskStatus_TASK_STATUS_AWAITING_APPROVAL))

	done := filepath.Join(t.TempDir(), "exit")
	term := newTerminal(t, tmux, []string{"LEMO_DATA=" + data}, "sh", "-c", fmt.Sprintf("%s console; echo $? > %s", lemoBin, done))
	var captures []string
	capture := func(title, screen string) { captures = append(captures, "── "+title+" ──\n"+screen) }
	capture("the actor tree", term.waitFor("lemo console", "running shell.run", "awaiting_approval ?1", short(sleeps)+" sleep 120", short(streams)+" deltas=100000"))

	// Select the Task that waits, open it, approve its call.
	term.selectRow(short(asks))
	term.keys("Enter")
	term.waitFor("task "+asks, "shell.run call-1-1 awaits approval", "$ echo approved in the console")
	term.keys("a")
	term.waitFor("Approve shell.run call-1-1 of task " + short(asks) + "? [y/N]")
	term.keys("y")
	capture("a Task after its approval", term.waitFor("approved shell.run call-1-1 of task "+short(asks), "[finished: answered]", "approved by local"))
	waitTask(t, c, asks, "finished", statusIs(api.TaskStatus_TASK_STATUS_FINISHED))

	// Back to the tree: stop the sleeping Task's tool call. The tree must
	// show before the next key: an Escape the console reads together with
	// the key after it is that key with Alt (bubbletea), and does not go
	// back.
	term.keys("Escape")
	term.waitFor("ACTOR")
	term.selectRow(short(sleeps))
	term.keys("Down") // its tool call: the Task waits for it, no Cycle runs
	term.waitFor("›  │ └ tool-call-1-1")
	term.keys("s")
	capture("stopping one tool call (confirm with y)", term.waitFor("Stop shell.run call-1-1 of task "+short(sleeps)+"? [y/N]"))
	term.keys("y")
	term.waitFor("stopped shell.run call-1-1 of task " + short(sleeps))
	evs := waitHistory(t, c, sleeps, func(ev *api.Event) bool { return ev.GetToolFailed() != nil })
	if f := evs[len(evs)-1].GetToolFailed(); f.GetKind() != api.ToolFailureKind_TOOL_FAILURE_KIND_CANCELLED || !strings.Contains(f.GetMessage(), "stopped by local") {
		t.Fatalf("the stopped call was recorded as %v", f)
	}
	// The Task goes on: the model sees the failure and answers.
	waitTask(t, c, sleeps, "finished after the stop", statusIs(api.TaskStatus_TASK_STATUS_FINISHED))

	// Open the streaming Task: its text streams live; cancel it.
	term.selectRow(short(streams))
	term.keys("Enter")
	capture("a Task streaming 1,000 deltas a second", term.waitFor("task "+streams, "⋯ cycle 1: "))
	term.keys("x")
	term.waitFor("Cancel task " + short(streams) + "? [y/N]")
	term.keys("y")
	term.waitFor("cancelled task " + short(streams))
	waitTask(t, c, streams, "cancelled", statusIs(api.TaskStatus_TASK_STATUS_CANCELLED))
	term.keys("Escape")
	capture("the tree afterwards", term.waitFor("ACTOR", "cancelled", "finished"))

	term.keys("q")
	deadline := time.Now().Add(20 * time.Second)
	for {
		if b, err := os.ReadFile(done); err == nil && len(b) > 0 {
			if code := strings.TrimSpace(string(b)); code != "0" {
				t.Fatalf("lemo console exited with %s", code)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("lemo console did not quit on q; screen:\n%s", term.screen())
		}
		waitABit()
	}
	if path := os.Getenv("LEMO_CONSOLE_CAPTURE"); path != "" {
		head := "Text captures of lemo console in an 80×24 terminal (tmux), attached to lemo serve running the\n" +
			"demo models, while the keys select a Task, approve its call, stop another Task's tool call and\n" +
			"cancel a Task that streams 1,000 deltas a second. Written by the end-to-end test:\n" +
			"  LEMO_CONSOLE_CAPTURE=$PWD/docs/console.txt go test ./tests -run TestConsoleInTmux\n\n"
		if err := os.WriteFile(path, []byte(head+strings.Join(captures, "\n")), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// waitHistory polls a Task's history until its last event satisfies cond.
func waitHistory(t *testing.T, c *client.Conn, id string, cond func(*api.Event) bool) []*api.Event {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		evs, err := c.ReadHistory(context.Background(), id, 1)
		if err == nil {
			for i, ev := range evs {
				if cond(ev) {
					return evs[:i+1]
				}
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("task %s: the awaited event never came (%v)", id, err)
		}
		waitABit()
	}
}

// lemo console --json prints the actor tree for an operator; another
// token gets a permission error; without a terminal the console says it
// needs one.
func TestConsoleJSONAndPermissions(t *testing.T) {
	dir := t.TempDir()
	tokens := filepath.Join(dir, "tokens")
	if err := os.WriteFile(tokens, []byte("alice "+aliceToken+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	data := filepath.Join(dir, "data")
	serveRemote(t, data, "--config", writeConfig(t, "auth:\n  tokens_file: "+tokens+"\n"))
	out, code := cli(t, data, "console", "--json")
	var tree struct {
		Actors []struct{ ID, Kind string }
	}
	mustJSON(t, out, &tree)
	kinds := map[string]string{}
	for _, a := range tree.Actors {
		kinds[a.ID] = a.Kind
	}
	if code != 0 || kinds["daemon/tasks"] != "tasks" || kinds["daemon/hub"] != "hub" {
		t.Fatalf("lemo console --json: exit %d\n%s", code, out)
	}
	out, code = lemo(t, cleanEnv("LEMO_DATA="+data, "LEMO_TOKEN="+aliceToken), "console", "--json")
	if code == 0 || !strings.Contains(out, "operator tokens only") {
		t.Fatalf("alice's lemo console --json: exit %d\n%s", code, out)
	}
	if out, code = cli(t, data, "console"); code != 2 || !strings.Contains(out, "needs a terminal") {
		t.Fatalf("lemo console without a terminal: exit %d\n%s", code, out)
	}
}
