package tests

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"lemo/api"
	"lemo/client"
)

// Approvals by policy end to end: a Task created with lemo run --ask waits
// for approval of a call its tool would run unasked; lemo approvals lists
// it (also as JSON), lemo approve lets it run and the Task finishes. The
// daemon's approvals.deny refuses a call in every Task, and the model's
// request_approval holds a call until someone decides.
func TestApprovalsByPolicy(t *testing.T) {
	data := filepath.Join(t.TempDir(), "data")
	cfg := writeConfig(t, "approvals:\n  deny: [files.write]\n  timeout: 10m\n")
	d := serveRemote(t, data, "--config", cfg)
	c := d.connect(t, "")

	s := startCLI(t, data, "run", "--model", "fake/call", "--ask", "tasks.*", "--deny", "memory.*", "tasks.list {}")
	first, ok := s.next(30 * time.Second)
	if !ok || !strings.HasPrefix(first, "task ") {
		t.Fatalf("lemo run printed %q; stderr:\n%s", first, s.stderr())
	}
	id := strings.Fields(first)[1]
	approval := id + ".call-1-1"
	var listed string
	eventually(t, 30*time.Second, func() error {
		out, code := cli(t, data, "approvals")
		listed = out
		if code != 0 || !strings.Contains(out, approval) {
			return errString("lemo approvals: " + out)
		}
		return nil
	})
	if !strings.Contains(listed, "task's rule asks for approval of tasks.list calls (ask tasks.*)") || !strings.Contains(listed, id) {
		t.Fatalf("lemo approvals:\n%s", listed)
	}
	out, code := cli(t, data, "approvals", "--json")
	if code != 0 {
		t.Fatalf("lemo approvals --json: exit %d\n%s", code, out)
	}
	var list []struct {
		TaskID            string `json:"task_id"`
		ApprovalRequested struct {
			ApprovalID string `json:"approval_id"`
			Tool       string `json:"tool"`
			Deadline   string `json:"deadline"`
		} `json:"approval_requested"`
	}
	if err := json.Unmarshal([]byte(out), &list); err != nil || len(list) == 0 {
		t.Fatalf("lemo approvals --json: %v\n%s", err, out)
	}
	found := false
	for _, ev := range list {
		if ev.ApprovalRequested.ApprovalID == approval {
			found = ev.TaskID == id && ev.ApprovalRequested.Tool == "tasks.list" && ev.ApprovalRequested.Deadline != ""
		}
	}
	if !found {
		t.Fatalf("lemo approvals --json lacks %s (with its tool and the 10m deadline):\n%s", approval, out)
	}
	if out, code := cli(t, data, "approve", approval); code != 0 {
		t.Fatalf("lemo approve: exit %d\n%s", code, out)
	}
	if code := s.wait(t, 30*time.Second); code != 0 {
		t.Fatalf("lemo run exited %d; stderr:\n%s", code, s.stderr())
	}
	waitTask(t, c, id, "finished", statusIs(api.TaskStatus_TASK_STATUS_FINISHED))
	evs := history(t, c, id)
	if !hasEvent(evs, func(e *api.Event) bool { return e.GetToolResult().GetCallId() == "call-1-1" }) {
		t.Fatalf("the approved call did not run:\n%v", evs)
	}
	if rules := evs[0].GetTaskCreated().GetApprovals(); len(rules) != 2 || rules[1].GetTool() != "memory.*" || rules[1].GetRule() != api.ApprovalRule_APPROVAL_RULE_DENY {
		t.Fatalf("the Task's rules = %v", rules)
	}

	// The daemon's deny rule, for a Task without rules of its own.
	m, err := c.CreateTask(context.Background(), client.CreateTask{Model: "fake/call", Request: `files.write {"path":"x.txt","content":"x"}`})
	if err != nil {
		t.Fatal(err)
	}
	waitTask(t, c, m.GetTaskId(), "finished", statusIs(api.TaskStatus_TASK_STATUS_FINISHED))
	evs = history(t, c, m.GetTaskId())
	if !hasEvent(evs, func(e *api.Event) bool {
		return e.GetToolFailed().GetKind() == api.ToolFailureKind_TOOL_FAILURE_KIND_NOT_APPROVED && strings.Contains(e.GetToolFailed().GetMessage(), "daemon's approvals rule denies files.write")
	}) || hasEvent(evs, func(e *api.Event) bool { return e.GetToolExecutionStarted() != nil }) {
		t.Fatalf("approvals.deny did not refuse the call:\n%v", evs)
	}

	// The model asks; lemo deny keeps the call from running.
	m, err = c.CreateTask(context.Background(), client.CreateTask{Model: "fake/call", Request: `tasks.list {"request_approval":"it lists\neverything"}`})
	if err != nil {
		t.Fatal(err)
	}
	waitTask(t, c, m.GetTaskId(), "awaiting approval", statusIs(api.TaskStatus_TASK_STATUS_AWAITING_APPROVAL))
	out, _ = cli(t, data, "approvals")
	if !strings.Contains(out, "the model asked: it lists everything") {
		t.Fatalf("lemo approvals:\n%s", out)
	}
	if out, code := cli(t, data, "deny", m.GetTaskId()+".call-1-1", "--reason", "not now"); code != 0 {
		t.Fatalf("lemo deny: exit %d\n%s", code, out)
	}
	waitTask(t, c, m.GetTaskId(), "finished", statusIs(api.TaskStatus_TASK_STATUS_FINISHED))
	if evs := history(t, c, m.GetTaskId()); hasEvent(evs, func(e *api.Event) bool { return e.GetToolExecutionStarted() != nil }) {
		t.Fatalf("the denied call ran:\n%v", evs)
	}
	if out, _ := cli(t, data, "approvals"); !strings.Contains(out, "no pending approvals") {
		t.Fatalf("approvals left:\n%s", out)
	}
}

type errString string

func (e errString) Error() string { return string(e) }

func history(t *testing.T, c *client.Conn, id string) []*api.Event {
	t.Helper()
	evs, err := c.ReadHistory(context.Background(), id, 1)
	if err != nil {
		t.Fatal(err)
	}
	return evs
}

func hasEvent(evs []*api.Event, pred func(*api.Event) bool) bool {
	for _, e := range evs {
		if pred(e) {
			return true
		}
	}
	return false
}

// An approval survives the daemon: one pending when lemo serve is stopped
// cleanly, and one pending when it is killed, are both listed again by the
// next daemon and in the history a client reads then. Their Tasks are
// paused as interrupted (the design: a restart pauses, it does not cancel
// approvals); approved, and continued as lemo approve says, each call runs
// once and its Task finishes.
func TestApprovalSurvivesServeRestart(t *testing.T) {
	data := filepath.Join(t.TempDir(), "data")
	d := serveRemote(t, data)
	c := d.connect(t, "")
	ask := []*api.ToolApproval{{Tool: "tasks.list", Rule: api.ApprovalRule_APPROVAL_RULE_ASK}}
	var ids []string
	awaiting := func() {
		t.Helper()
		m, err := c.CreateTask(context.Background(), client.CreateTask{Model: "fake/call", Request: "tasks.list {}", Approvals: ask})
		if err != nil {
			t.Fatal(err)
		}
		waitTask(t, c, m.GetTaskId(), "awaiting approval", statusIs(api.TaskStatus_TASK_STATUS_AWAITING_APPROVAL))
		ids = append(ids, m.GetTaskId())
	}
	awaiting()
	d.stop()
	d = serveRemote(t, data)
	c = d.connect(t, "")
	if out, _ := cli(t, data, "approvals"); !strings.Contains(out, ids[0]+".call-1-1") {
		t.Fatalf("lemo approvals after a clean stop:\n%s", out)
	}
	awaiting()
	d.kill()
	d = serveRemote(t, data)
	c = d.connect(t, "")

	out, code := cli(t, data, "approvals")
	for _, id := range ids {
		if code != 0 || !strings.Contains(out, id+".call-1-1") {
			t.Fatalf("lemo approvals after the restarts (exit %d) lacks %s:\n%s", code, id, out)
		}
	}
	for _, id := range ids {
		// Announced again: a subscription from seq 1 of the new daemon
		// sees the request, and no resolution.
		evs := history(t, c, id)
		if !hasEvent(evs, func(e *api.Event) bool { return e.GetApprovalRequested().GetCallId() == "call-1-1" }) ||
			hasEvent(evs, func(e *api.Event) bool { return e.GetApprovalResolved() != nil }) {
			t.Fatalf("task %s after the restarts:\n%v", id, evs)
		}
		out, code := cli(t, data, "approve", id+".call-1-1")
		if code != 0 || !strings.Contains(out, "lemo continue "+id) {
			t.Fatalf("lemo approve after the restarts: exit %d\n%s", code, out)
		}
		if out, code := cli(t, data, "continue", id); code != 0 {
			t.Fatalf("lemo continue: exit %d\n%s", code, out)
		}
		waitTask(t, c, id, "finished", statusIs(api.TaskStatus_TASK_STATUS_FINISHED))
		ran := 0
		for _, e := range history(t, c, id) {
			if e.GetToolExecutionStarted() != nil {
				ran++
			}
		}
		if ran != 1 {
			t.Fatalf("task %s: the approved call started %d times, want once", id, ran)
		}
	}
}
