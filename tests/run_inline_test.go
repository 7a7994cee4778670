package tests

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"lemo/api"
	"lemo/client"
)

// lemo run in a real terminal asks for a call's approval inline: "y"
// approves it and the call runs; "n" denies it and the call never runs.
// Either way the Task finishes and lemo run exits 0.
func TestRunAsksInline(t *testing.T) {
	tmux := needTmux(t)
	data := filepath.Join(t.TempDir(), "data")
	d := serveRemote(t, data)
	c := d.connect(t, "")
	for _, tc := range []struct {
		answer  string
		outcome api.ApprovalOutcome
	}{
		{"y", api.ApprovalOutcome_APPROVAL_OUTCOME_APPROVED},
		{"n", api.ApprovalOutcome_APPROVAL_OUTCOME_DENIED},
	} {
		t.Run(tc.answer, func(t *testing.T) {
			done := filepath.Join(t.TempDir(), "exit")
			script := fmt.Sprintf("%s run --private-workspace --model fake/shell 'echo inline %s'; echo $? > %s; sleep 600", lemoBin, tc.answer, done)
			term := newTerminal(t, tmux, []string{"LEMO_DATA=" + data}, "sh", "-c", script)
			screen := term.waitFor("approve ", "? [y/N/a=always/s=skip]")
			var id string
			for _, line := range strings.Split(screen, "\n") {
				if f := strings.Fields(line); len(f) >= 2 && f[0] == "task" {
					id = f[1]
				}
			}
			if id == "" {
				t.Fatalf("lemo run did not name its Task; screen:\n%s", screen)
			}
			term.keys(tc.answer, "Enter")
			deadline := time.Now().Add(30 * time.Second)
			for {
				if b, err := os.ReadFile(done); err == nil && len(b) > 0 {
					if code := strings.TrimSpace(string(b)); code != "0" {
						t.Fatalf("lemo run exited with %s; screen:\n%s", code, term.screen())
					}
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("lemo run did not end; screen:\n%s", term.screen())
				}
				waitABit()
			}
			waitTask(t, c, id, "finished", statusIs(api.TaskStatus_TASK_STATUS_FINISHED))
			evs, err := c.ReadHistory(context.Background(), id, 1)
			if err != nil {
				t.Fatal(err)
			}
			var resolved *api.ApprovalResolved
			ran := false
			for _, ev := range evs {
				if r := ev.GetApprovalResolved(); r != nil {
					resolved = r
				}
				ran = ran || ev.GetToolResult() != nil
			}
			if resolved.GetOutcome() != tc.outcome || ran != (tc.answer == "y") {
				t.Fatalf("answer %q: resolved %v, the call ran: %v", tc.answer, resolved, ran)
			}
		})
	}
}

// runScreenID returns the Task id lemo run names on its first line.
func runScreenID(t *testing.T, screen string) string {
	t.Helper()
	for _, line := range strings.Split(screen, "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "task" {
			return f[1]
		}
	}
	t.Fatalf("lemo run did not name its Task; screen:\n%s", screen)
	return ""
}

// waitExit waits for the exit status a script wrote to file.
func waitExit(t *testing.T, term *terminal, file string) string {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		if b, err := os.ReadFile(file); err == nil && len(b) > 0 {
			return strings.TrimSpace(string(b))
		}
		if time.Now().After(deadline) {
			t.Fatalf("lemo run did not end; screen:\n%s", term.screen())
		}
		waitABit()
	}
}

// pendingFor returns the ids of the Task's approvals still pending.
func pendingFor(t *testing.T, c *client.Conn, taskID string) []string {
	t.Helper()
	evs, err := c.Approvals(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, ev := range evs {
		if ev.GetTaskId() == taskID {
			ids = append(ids, ev.GetApprovalRequested().GetApprovalId())
		}
	}
	return ids
}

// Ctrl-C at an approval prompt detaches at once (no Enter needed) and
// leaves the approval pending: nothing is decided for the person.
func TestRunCtrlCAtPromptDetaches(t *testing.T) {
	tmux := needTmux(t)
	data := filepath.Join(t.TempDir(), "data")
	d := serveRemote(t, data)
	c := d.connect(t, "")
	done := filepath.Join(t.TempDir(), "exit")
	// The shell survives the interrupt (its trap) and records lemo's exit
	// status; lemo gets SIGINT with its default disposition.
	script := fmt.Sprintf("trap 'true' INT; %s run --private-workspace --model fake/shell 'echo interrupted'; echo $? > %s; sleep 600", lemoBin, done)
	term := newTerminal(t, tmux, []string{"LEMO_DATA=" + data}, "sh", "-c", script)
	screen := term.waitFor("? [y/N/a=always/s=skip]")
	id := runScreenID(t, screen)
	term.keys("C-c")
	if code := waitExit(t, term, done); code != "0" {
		t.Fatalf("lemo run exited with %s; screen:\n%s", code, term.screen())
	}
	term.waitFor("detached; task " + id)
	if p := pendingFor(t, c, id); len(p) != 1 {
		t.Fatalf("pending approvals of %s after Ctrl-C: %v, want the one asked", id, p)
	}
	evs, err := c.ReadHistory(context.Background(), id, 1)
	if err != nil {
		t.Fatal(err)
	}
	for _, ev := range evs {
		if r := ev.GetApprovalResolved(); r != nil {
			t.Fatalf("Ctrl-C decided the approval: %v", r)
		}
	}
}

// A call approved elsewhere takes its prompt away and the next approval is
// asked at once, without a key pressed at the terminal.
func TestRunPromptFollowsApprovalsDecidedElsewhere(t *testing.T) {
	tmux := needTmux(t)
	data := filepath.Join(t.TempDir(), "data")
	d := serveRemote(t, data)
	c := d.connect(t, "")
	script := fmt.Sprintf("%s run --private-workspace --model fake/loop --ask demo.tick 'tick'; sleep 600", lemoBin)
	term := newTerminal(t, tmux, []string{"LEMO_DATA=" + data}, "sh", "-c", script)
	screen := term.waitFor("? [y/N/a=always/s=skip]")
	id := runScreenID(t, screen)
	var first string
	eventually(t, 30*time.Second, func() error {
		p := pendingFor(t, c, id)
		if len(p) != 1 {
			return fmt.Errorf("pending %v, want one", p)
		}
		first = p[0]
		return nil
	})
	term.waitFor("approve " + first + "? [y/N/a=always/s=skip]")
	if _, err := c.Resolve(context.Background(), first, true, ""); err != nil {
		t.Fatal(err)
	}
	var second string
	eventually(t, 30*time.Second, func() error {
		p := pendingFor(t, c, id)
		if len(p) != 1 || p[0] == first {
			return fmt.Errorf("pending %v, want the next one", p)
		}
		second = p[0]
		return nil
	})
	screen = term.waitFor("approve " + second + "? [y/N/a=always/s=skip]")
	if strings.Contains(screen, "lemo: approve:") || strings.Contains(screen, "lemo: deny:") {
		t.Fatalf("the terminal tried to decide a call decided elsewhere; screen:\n%s", screen)
	}
	// The open prompt is the second's: "y" decides it.
	term.keys("y", "Enter")
	eventually(t, 30*time.Second, func() error {
		evs, err := c.ReadHistory(context.Background(), id, 1)
		if err != nil {
			return err
		}
		for _, ev := range evs {
			if r := ev.GetApprovalResolved(); r != nil && r.GetApprovalId() == second {
				if r.GetOutcome() != api.ApprovalOutcome_APPROVAL_OUTCOME_APPROVED {
					return fmt.Errorf("second approval: %v", r)
				}
				return nil
			}
		}
		return fmt.Errorf("the second approval is not decided")
	})
	if _, err := c.Cancel(context.Background(), id); err != nil {
		t.Fatal(err)
	}
}

// With stdin not a terminal lemo run never prompts: it says how to decide
// (lemo approve) and goes on following the Task.
func TestRunWithoutTerminalNeverPrompts(t *testing.T) {
	data := filepath.Join(t.TempDir(), "data")
	d := serveRemote(t, data)
	c := d.connect(t, "")
	cmd := exec.Command(lemoBin, "run", "--private-workspace", "--model", "fake/shell", "echo unattended")
	cmd.Env = cleanEnv("LEMO_DATA=" + data)
	devNull, err := os.Open(os.DevNull) // a character device, not a terminal
	if err != nil {
		t.Fatal(err)
	}
	defer devNull.Close()
	out := &lockedBuffer{}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = devNull, out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	var id string
	eventually(t, 30*time.Second, func() error {
		s := out.String()
		if !strings.Contains(s, "lemo approve ") {
			return fmt.Errorf("output so far:\n%s", s)
		}
		for _, line := range strings.Split(s, "\n") {
			if f := strings.Fields(line); len(f) >= 2 && f[0] == "task" {
				id = f[1]
			}
		}
		return nil
	})
	var pending []string
	eventually(t, 30*time.Second, func() error {
		if pending = pendingFor(t, c, id); len(pending) != 1 {
			return fmt.Errorf("pending %v", pending)
		}
		return nil
	})
	if _, err := c.Resolve(context.Background(), pending[0], true, ""); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("lemo run: %v\n%s", err, out.String())
		}
	case <-time.After(30 * time.Second):
		_ = cmd.Process.Kill()
		t.Fatalf("lemo run did not end after the approval; output:\n%s", out.String())
	}
	if s := out.String(); strings.Contains(s, "[y/N") {
		t.Fatalf("lemo run prompted without a terminal:\n%s", s)
	}
}

// lockedBuffer is a bytes.Buffer a process writes while a test reads it.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// The prompt shows what is decided on: a write's content (bounded, m shows
// the rest) in the Task's folder; "n REASON" denies with that reason, which
// the history records. lemo approvals lists the tool and a summary.
func TestRunPromptShowsWhatIsDecided(t *testing.T) {
	tmux := needTmux(t)
	data := filepath.Join(t.TempDir(), "data")
	d := serveRemote(t, data)
	c := d.connect(t, "")
	var content strings.Builder
	for i := 1; i <= 25; i++ {
		fmt.Fprintf(&content, "row %02d\n", i)
	}
	args := fmt.Sprintf(`files.write {"path":"notes.txt","content":%q}`, content.String())
	script := fmt.Sprintf("%s run --private-workspace --model fake/call --ask files.write '%s'; sleep 600", lemoBin, args)
	term := newTerminal(t, tmux, []string{"LEMO_DATA=" + data}, "sh", "-c", script)
	if out, err := term.run("resize-window", "-t", "e2e", "-x", "250", "-y", "60"); err != nil {
		t.Fatalf("tmux resize-window: %v\n%s", err, out)
	}
	screen := term.waitFor("? [y/N/a=always/s=skip]", "m shows all")
	id := runScreenID(t, screen)
	if !strings.Contains(screen, "│ row 20") || strings.Contains(screen, "│ row 21") || !strings.Contains(screen, "5 more line(s)") ||
		!strings.Contains(screen, filepath.Join(data, "workspaces", id, "notes.txt")) {
		t.Fatalf("the prompt does not show the bounded content in the Task's folder; screen:\n%s", screen)
	}
	out, code := cli(t, data, "approvals")
	if code != 0 || !strings.Contains(out, "TOOL") || !strings.Contains(out, "SUMMARY") || !strings.Contains(out, "files.write") || !strings.Contains(out, "write notes.txt") {
		t.Fatalf("lemo approvals: exit %d\n%s", code, out)
	}
	term.keys("m", "Enter")
	term.waitFor("│ row 25")
	term.keys("n not in my notes", "Enter")
	eventually(t, 30*time.Second, func() error {
		evs, err := c.ReadHistory(context.Background(), id, 1)
		if err != nil {
			return err
		}
		for _, ev := range evs {
			if r := ev.GetApprovalResolved(); r != nil {
				if r.GetOutcome() != api.ApprovalOutcome_APPROVAL_OUTCOME_DENIED || r.GetReason() != "not in my notes" {
					return fmt.Errorf("resolved %v", r)
				}
				return nil
			}
		}
		return fmt.Errorf("not decided yet")
	})
}

// writesOf counts, in Task id's history, the approval requests and the
// files.write results.
func writesOf(t *testing.T, c *client.Conn, id string) (asked, written int) {
	t.Helper()
	evs, err := c.ReadHistory(context.Background(), id, 1)
	if err != nil {
		t.Fatal(err)
	}
	for _, ev := range evs {
		if ev.GetApprovalRequested() != nil {
			asked++
		}
		if ev.GetToolResult() != nil {
			written++
		}
	}
	return asked, written
}

// "a" at the prompt approves the write and always allows files.write for
// the Task: the next write (fake/repeat writes again after every result)
// runs without a second prompt. The decision is in the Task's history.
func TestRunPromptAlwaysAllowsForTheTask(t *testing.T) {
	tmux := needTmux(t)
	data := filepath.Join(t.TempDir(), "data")
	d := serveRemote(t, data)
	c := d.connect(t, "")
	script := fmt.Sprintf(`%s run --private-workspace --model fake/repeat --ask files.write 'files.write {"path":"notes.txt","content":"hello"}'; sleep 600`, lemoBin)
	term := newTerminal(t, tmux, []string{"LEMO_DATA=" + data}, "sh", "-c", script)
	if out, err := term.run("resize-window", "-t", "e2e", "-x", "250", "-y", "60"); err != nil {
		t.Fatalf("tmux resize-window: %v\n%s", err, out)
	}
	screen := term.waitFor("? [y/N/a=always/s=skip]", "a approves and allows files.write calls for this task")
	id := runScreenID(t, screen)
	term.keys("a", "Enter")
	if asked, written := secondWriteThenCancel(t, c, id); asked != 1 {
		t.Fatalf("%d approvals asked for %d writes, want only the first; screen:\n%s", asked, written, term.screen())
	}
	evs, err := c.ReadHistory(context.Background(), id, 1)
	if err != nil {
		t.Fatal(err)
	}
	for _, ev := range evs {
		if r := ev.GetApprovalResolved(); r != nil && (r.GetOutcome() != api.ApprovalOutcome_APPROVAL_OUTCOME_APPROVED || r.GetAllowRule().GetTool() != "files.write") {
			t.Fatalf("resolved %v, want approved with an allow rule for files.write", r)
		}
	}
	if s := term.screen(); strings.Contains(s, "lemo: approve") {
		t.Fatalf("the terminal reported an error; screen:\n%s", s)
	}
}

// secondWriteThenCancel waits for the Task's second write, cancels the
// Task and returns how many writes were asked for and done.
func secondWriteThenCancel(t *testing.T, c *client.Conn, id string) (asked, written int) {
	t.Helper()
	eventually(t, 30*time.Second, func() error {
		if asked, written := writesOf(t, c, id); written < 2 {
			return fmt.Errorf("%d write(s) done, %d asked; want a second write", written, asked)
		}
		return nil
	})
	if _, err := c.Cancel(context.Background(), id); err != nil {
		t.Fatal(err)
	}
	waitTask(t, c, id, "cancelled", statusIs(api.TaskStatus_TASK_STATUS_CANCELLED))
	return writesOf(t, c, id)
}

// lemo approve --always does the same from another terminal; lemo deny has
// no --always.
func TestApproveAlwaysCommand(t *testing.T) {
	data := filepath.Join(t.TempDir(), "data")
	d := serveRemote(t, data)
	c := d.connect(t, "")
	m, err := c.CreateTask(context.Background(), client.CreateTask{Request: `files.write {"path":"notes.txt","content":"hello"}`, Model: "fake/repeat",
		Approvals: []*api.ToolApproval{{Tool: "files.write", Rule: api.ApprovalRule_APPROVAL_RULE_ASK}}})
	if err != nil {
		t.Fatal(err)
	}
	id := m.GetTaskId()
	var first string
	eventually(t, 30*time.Second, func() error {
		p := pendingFor(t, c, id)
		if len(p) != 1 {
			return fmt.Errorf("pending %v, want one", p)
		}
		first = p[0]
		return nil
	})
	if out, code := cli(t, data, "deny", "--always", first); code == 0 || !strings.Contains(out, "always") {
		t.Fatalf("lemo deny --always: exit %d\n%s", code, out)
	}
	out, code := cli(t, data, "approve", "--always", first)
	if code != 0 || !strings.Contains(out, "allowed for the rest of the task") {
		t.Fatalf("lemo approve --always: exit %d\n%s", code, out)
	}
	if asked, written := secondWriteThenCancel(t, c, id); asked != 1 {
		t.Fatalf("%d approvals asked for %d writes, want only the first", asked, written)
	}
}
