package tests

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"lemo/api"
	"lemo/client"
)

// program is the test Program (testdata/serviceprog) in its own process.
type program struct {
	cmd   *exec.Cmd
	lines chan string
	done  chan struct{}
}

func startProgram(t *testing.T, bin, addr, token string) *program {
	t.Helper()
	p := &program{cmd: exec.Command(bin), lines: make(chan string, 100), done: make(chan struct{})}
	p.cmd.Env = cleanEnv("LEMO_ADDR="+addr, "LEMO_TOKEN="+token)
	p.cmd.Stderr = os.Stderr
	out, err := p.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.cmd.StdinPipe(); err != nil { // kept open: the program serves until it closes
		t.Fatal(err)
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			p.lines <- sc.Text()
		}
		_ = p.cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() { _ = p.cmd.Process.Kill(); <-p.done })
	p.expect(t, "registered")
	return p
}

func (p *program) expect(t *testing.T, prefix string) string {
	t.Helper()
	select {
	case l, ok := <-p.lines:
		if !ok || !strings.HasPrefix(l, prefix) {
			t.Fatalf("program said %q, want %q", l, prefix)
		}
		return l
	case <-time.After(30 * time.Second):
		t.Fatalf("program did not say %q", prefix)
	}
	return ""
}

func (p *program) kill() {
	_ = p.cmd.Process.Kill()
	<-p.done
}

// runSystem runs a Task of the fake/system model (it calls the system tool
// with the request as its input) and returns its history.
func runSystem(t *testing.T, c *client.Conn, input string) []*api.Event {
	t.Helper()
	ctx := context.Background()
	m, err := c.CreateTask(ctx, client.CreateTask{Request: input, Model: "fake/system"})
	if err != nil {
		t.Fatal(err)
	}
	waitTask(t, c, m.GetTaskId(), "finished", statusIs(api.TaskStatus_TASK_STATUS_FINISHED))
	evs, err := c.ReadHistory(ctx, m.GetTaskId(), 1)
	if err != nil {
		t.Fatal(err)
	}
	return evs
}

func toolOutcome(evs []*api.Event) (*api.ToolResult, *api.ToolFailed) {
	for _, ev := range evs {
		if r := ev.GetToolResult(); r != nil {
			return r, nil
		}
		if f := ev.GetToolFailed(); f != nil {
			return nil, f
		}
	}
	return nil, nil
}

// A Service registered by a separate program is called by a Task through
// the system tool; its result is marked untrusted; when the program goes
// away (before or during a call) the Task gets an error that says so.
func TestProgramServices(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "serviceprog")
	build := exec.Command("go", "build", "-o", bin, "./testdata/serviceprog")
	build.Stderr = os.Stderr
	if err := build.Run(); err != nil {
		t.Fatalf("build serviceprog: %v", err)
	}
	data := filepath.Join(t.TempDir(), "data")
	d := serveRemote(t, data)
	c := d.connect(t, "")
	prog := startProgram(t, bin, d.addr, d.token)

	list, _ := toolOutcome(runSystem(t, c, `{"action":"list"}`))
	if list == nil || !strings.Contains(string(list.GetRetainedOutput()), `"name":"notes"`) || !strings.Contains(string(list.GetRetainedOutput()), `"echo"`) {
		t.Fatalf("system list: %v", list)
	}
	evs := runSystem(t, c, `{"action":"execute","service":"notes","operation":"echo","input":{"text":"hello program"}}`)
	res, failed := toolOutcome(evs)
	want := fmt.Sprintf(`"pid":%d`, prog.cmd.Process.Pid)
	if failed != nil || res == nil || !strings.Contains(string(res.GetRetainedOutput()), `"echo":"hello program"`) || !strings.Contains(string(res.GetRetainedOutput()), want) {
		t.Fatalf("execute: result %v, failure %v", res, failed)
	}
	if !res.GetUntrusted() {
		t.Error("a Service's result is not marked untrusted")
	}
	if call := prog.expect(t, "call "); !strings.Contains(call, evs[0].GetTaskId()) {
		t.Errorf("the program was told %q, want the Task's id %s", call, evs[0].GetTaskId())
	}
	if _, failed := toolOutcome(runSystem(t, c, `{"action":"execute","service":"notes","operation":"echo","input":{}}`)); failed == nil || !strings.Contains(failed.GetMessage(), "text") {
		t.Errorf("input against the operation's schema: %v", failed)
	}

	// The program goes away during a call.
	m, err := c.CreateTask(context.Background(), client.CreateTask{Request: `{"action":"execute","service":"notes","operation":"hang"}`, Model: "fake/system"})
	if err != nil {
		t.Fatal(err)
	}
	prog.expect(t, "hanging ")
	prog.kill()
	waitTask(t, c, m.GetTaskId(), "finished", statusIs(api.TaskStatus_TASK_STATUS_FINISHED))
	hist, _ := c.ReadHistory(context.Background(), m.GetTaskId(), 1)
	if _, failed := toolOutcome(hist); failed == nil || !strings.Contains(failed.GetMessage(), "went away") {
		t.Fatalf("program gone during the call: %v", failed)
	}
	// And afterwards the Service is gone.
	if _, failed := toolOutcome(runSystem(t, c, `{"action":"execute","service":"notes","operation":"echo","input":{"text":"x"}}`)); failed == nil || !strings.Contains(failed.GetMessage(), "not available") {
		t.Fatalf("program gone: %v", failed)
	}
	if !d.alive() {
		t.Fatal("the daemon died")
	}
}
