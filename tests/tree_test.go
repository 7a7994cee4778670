package tests

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"lemo/api"
	"lemo/client"
	"lemo/providers/fake"
	"lemo/tools/isolation"
)

// treeModel is the fake Ollama model the tree tests script.
const treeModel = "ollama/qwen3:8b"

// serveTree starts lemo serve on data with the scripted fake Ollama and
// connects to it.
func serveTree(t *testing.T, data string, script []fake.Scenario, extra ...string) (*remoteDaemon, *client.Conn) {
	t.Helper()
	f := fake.StartServer(t, fake.Options{Flavor: fake.FlavorOllama, Script: script})
	env := append([]string{"LEMO_OLLAMA_BASE_URL=" + f.URL()}, extra...)
	return serveTreeEnv(t, data, env)
}

// allTools offers a tree's Tasks every tool from the start: the scripted
// models call the tree's tools without loading them (tools.load is
// discovery's, tested on its own).
const allTools = "LEMO_TOOLS_INITIAL=*"

// serveTreeEnv starts lemo serve on data with env (and every tool
// offered) and args, and connects to it.
func serveTreeEnv(t *testing.T, data string, env []string, args ...string) (*remoteDaemon, *client.Conn) {
	t.Helper()
	rd := serveEnvArgs(t, data, append(env, allTools), args...)
	return rd, rd.connect(t, "")
}

// waitTree waits until task id has status st; on failure it shows the
// tree's histories.
func waitTree(t *testing.T, c *client.Conn, d *daemon, id string, st api.TaskStatus) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		m, err := c.Task(context.Background(), id)
		if err == nil && m.GetStatus() == st {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("task %s is %v (%v), want %v\n%s\n%s", id, m.GetStatus(), err, st, dumpTree(c, id, ""), d.logs())
		}
		time.Sleep(5 * time.Millisecond) // polling the daemon
	}
}

// dumpTree renders the histories of a tree.
func dumpTree(c *client.Conn, id, indent string) string {
	evs, err := c.ReadHistory(context.Background(), id, 1)
	if err != nil {
		return indent + id + ": " + err.Error() + "\n"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%stask %s\n", indent, id)
	for _, ev := range evs {
		fmt.Fprintf(&b, "%s  %d %s %s\n", indent, ev.GetSeq(), api.Kind(ev), clipText(fmt.Sprint(ev.Body), 300))
		if cs := ev.GetChildSpawned(); cs != nil {
			b.WriteString(dumpTree(c, cs.GetChildId(), indent+"    "))
		}
	}
	return b.String()
}

func clipText(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}

func call(name, args string) fake.Call { return fake.Call{Name: name, Arguments: args} }

// children returns the ChildSpawned and ChildEnded records of a history.
func children(evs []*api.Event) (spawned []*api.ChildSpawned, ended map[string]*api.ChildEnded) {
	ended = make(map[string]*api.ChildEnded)
	for _, ev := range evs {
		if cs := ev.GetChildSpawned(); cs != nil {
			spawned = append(spawned, cs)
		}
		if ce := ev.GetChildEnded(); ce != nil {
			ended[ce.GetChildId()] = ce
		}
	}
	return spawned, ended
}

func treeHistory(t *testing.T, c *client.Conn, id string) []*api.Event {
	t.Helper()
	evs, err := c.ReadHistory(context.Background(), id, 1)
	if err != nil {
		t.Fatalf("history of %s: %v", id, err)
	}
	if err := contiguousFrom(evs, 1); err != nil {
		t.Fatalf("task %s: %v", id, err)
	}
	return evs
}

func lastAnswer(evs []*api.Event) string {
	a := ""
	for _, ev := range evs {
		if am := ev.GetAssistantMessage(); am != nil && am.GetText() != "" {
			a = am.GetText()
		}
	}
	return a
}

// A parent spawns three children at once and waits for each; two answer,
// one fails. The parent's answer is built from their results, the failing
// child shows as failed in it, every child names its parent and the parent
// records each child's spawn and end.
func TestTreeParentSpawnsThreeAndWaits(t *testing.T) {
	script := []fake.Scenario{
		{Match: "PARENT-3", ToolCalls: []fake.Call{
			call("tasks_spawn", `{"request":"CHILD-A add two and two","wait":true,"timeout":60}`),
			call("tasks_spawn", `{"request":"CHILD-B name a color","wait":true,"timeout":60}`),
			call("tasks_spawn", `{"request":"CHILD-FAIL do the impossible","wait":true,"timeout":60}`),
		}},
		{Match: "CHILD-A", Text: []string{"alpha-four"}},
		{Match: "CHILD-B", Text: []string{"beta-blue"}},
		{Match: "CHILD-FAIL", Status: 400, Message: "this request cannot be served"},
		// The children's ends reach the parent's inbox while it waits:
		// its next input ends with them, after the tool results.
		{Match: "[inbox]", EchoTools: true, Text: []string{"PARENT-DONE from my children: "}},
		{AfterTool: true, Match: `"id"`, EchoTools: true, Text: []string{"PARENT-DONE from my children: "}},
	}
	data := filepath.Join(t.TempDir(), "data")
	d, c := serveTree(t, data, script)
	ctx := context.Background()
	root, err := c.CreateTask(ctx, client.CreateTask{Request: "PARENT-3 split the work", Model: treeModel})
	if err != nil {
		t.Fatal(err)
	}
	waitTree(t, c, d.daemon, root.GetTaskId(), api.TaskStatus_TASK_STATUS_FINISHED)
	evs := treeHistory(t, c, root.GetTaskId())
	answer := lastAnswer(evs)
	defer func() {
		if t.Failed() {
			t.Log(dumpTree(c, root.GetTaskId(), ""))
		}
	}()
	for _, want := range []string{"PARENT-DONE", "alpha-four", "beta-blue", `"status":"failed"`, "this request cannot be served"} {
		if !strings.Contains(answer, want) {
			t.Errorf("the parent's answer lacks %q:\n%s", want, answer)
		}
	}
	spawned, ended := children(evs)
	if len(spawned) != 3 || len(ended) != 3 {
		t.Fatalf("parent recorded %d spawns and %d ends, want 3 and 3", len(spawned), len(ended))
	}
	statuses := map[string]int{}
	for _, cs := range spawned {
		m, err := c.Task(ctx, cs.GetChildId())
		if err != nil {
			t.Fatalf("child %s: %v", cs.GetChildId(), err)
		}
		if m.GetParentId() != root.GetTaskId() || m.GetDepth() != 1 {
			t.Errorf("child %s: parent %q depth %d, want %s depth 1", cs.GetChildId(), m.GetParentId(), m.GetDepth(), root.GetTaskId())
		}
		ch := treeHistory(t, c, cs.GetChildId())
		if tc := ch[0].GetTaskCreated(); tc.GetParentId() != root.GetTaskId() || tc.GetParentCallId() != cs.GetCallId() {
			t.Errorf("child %s TaskCreated = %v, want the parent's link", cs.GetChildId(), tc)
		}
		e := ended[cs.GetChildId()]
		if e == nil || e.GetStatus() != m.GetStatus() {
			t.Errorf("child %s is %v, the parent recorded %v", cs.GetChildId(), m.GetStatus(), e)
		}
		statuses[m.GetStatus().String()]++
	}
	if statuses["TASK_STATUS_FINISHED"] != 2 || statuses["TASK_STATUS_FAILED"] != 1 {
		t.Fatalf("children statuses = %v, want 2 finished and 1 failed", statuses)
	}
	// lemo tasks --tree shows the children under their parent.
	out, code := cli(t, data, "tasks", "--tree")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if code != 0 || len(lines) != 5 || !strings.HasPrefix(lines[1], root.GetTaskId()) {
		t.Fatalf("lemo tasks --tree: exit %d\n%s", code, out)
	}
	for _, l := range lines[2:] {
		if !strings.HasPrefix(l, "└ ") {
			t.Errorf("lemo tasks --tree: child line %q is not under its parent\n%s", l, out)
		}
	}
}

// A child asks its parent a question mid-run (tasks.send to "parent") and
// waits for the answer (tasks.wait_message); the parent, waiting for
// messages, answers it (tasks.send to the child), then waits for the child
// and finishes with its answer. Each message is recorded once in its
// recipient's history with its sender.
func TestTreeChildMessagesParent(t *testing.T) {
	script := []fake.Scenario{
		// A message or a child's end that arrives while a call runs is
		// the inbox section after the call's result: each step is
		// scripted for either.
		// The parent.
		{Match: "PARENT-MSG", ToolCalls: []fake.Call{call("tasks_spawn", `{"request":"CHILD-M ask your parent"}`)}},
		{AfterTool: true, Match: `collect its answer with tasks.wait`, ToolCalls: []fake.Call{call("tasks_wait_message", `{"timeout":60}`)}},
		{AfterTool: true, Match: "QUESTION-42", Capture: `"from":"([0-9A-Za-z]+)"`, ToolCalls: []fake.Call{call("tasks_send", `{"to":"$1","text":"ANSWER-7"}`)}},
		{Match: "QUESTION-42", Capture: `message from task ([0-9A-Za-z]+)`, ToolCalls: []fake.Call{call("tasks_send", `{"to":"$1","text":"ANSWER-7"}`)}},
		{AfterTool: true, Match: `"relation":"child"`, Capture: `"to":"([0-9A-Za-z]+)"`, ToolCalls: []fake.Call{call("tasks_wait", `{"ids":["$1"],"timeout":60}`)}},
		{AfterTool: true, Match: "CHILD-GOT", Capture: `"answer":"([^"]*)"`, Text: []string{"PARENT-FINAL: $1"}},
		{Match: "CHILD-GOT", Capture: `its answer: ([^\n]*)`, Text: []string{"PARENT-FINAL: $1"}},
		// The child.
		{Match: "CHILD-M", ToolCalls: []fake.Call{call("tasks_send", `{"to":"parent","text":"QUESTION-42 what should I use?"}`)}},
		{AfterTool: true, Match: `"relation":"parent"`, ToolCalls: []fake.Call{call("tasks_wait_message", `{"timeout":60}`)}},
		{AfterTool: true, Match: "ANSWER-7", Text: []string{"CHILD-GOT ANSWER-7"}},
		{Match: "ANSWER-7", Text: []string{"CHILD-GOT ANSWER-7"}},
	}
	data := filepath.Join(t.TempDir(), "data")
	d, c := serveTree(t, data, script)
	ctx := context.Background()
	root, err := c.CreateTask(ctx, client.CreateTask{Request: "PARENT-MSG talk to a child", Model: treeModel})
	if err != nil {
		t.Fatal(err)
	}
	waitTree(t, c, d.daemon, root.GetTaskId(), api.TaskStatus_TASK_STATUS_FINISHED)
	pevs := treeHistory(t, c, root.GetTaskId())
	if a := lastAnswer(pevs); a != "PARENT-FINAL: CHILD-GOT ANSWER-7" {
		t.Fatalf("parent's answer = %q, want it built from the child's", a)
	}
	spawned, _ := children(pevs)
	if len(spawned) != 1 {
		t.Fatalf("parent spawned %d children, want 1", len(spawned))
	}
	child := spawned[0].GetChildId()
	cevs := treeHistory(t, c, child)
	count := func(evs []*api.Event, from, text string) int {
		n := 0
		for _, ev := range evs {
			if m := ev.GetMessageReceived(); m != nil && m.GetFrom() == from && strings.Contains(m.GetText(), text) {
				n++
			}
		}
		return n
	}
	if n := count(pevs, child, "QUESTION-42"); n != 1 {
		t.Errorf("the parent received the child's question %d times, want once", n)
	}
	if n := count(cevs, root.GetTaskId(), "ANSWER-7"); n != 1 {
		t.Errorf("the child received the parent's answer %d times, want once", n)
	}
	if a := lastAnswer(cevs); a != "CHILD-GOT ANSWER-7" {
		t.Errorf("child's answer = %q", a)
	}
}

// Limits are refused with errors that name them, and a Task of another
// owner (or one outside the family) reads as not found for tasks.send and
// tasks.wait.
func TestTreeLimitsAndForeignIDs(t *testing.T) {
	data := filepath.Join(t.TempDir(), "data")
	// The foreign Task: created first, by the operator under another owner.
	script := []fake.Scenario{
		{Match: "DEEP", ToolCalls: []fake.Call{call("tasks_spawn", `{"request":"DEEP again","wait":true,"timeout":60}`)}},
		{Match: "MANY", ToolCalls: []fake.Call{
			call("tasks_spawn", `{"request":"LEAF one"}`), call("tasks_spawn", `{"request":"LEAF two"}`), call("tasks_spawn", `{"request":"LEAF three"}`),
		}},
		{Match: "LEAF", Text: []string{"leaf done"}},
		{Match: "FOREIGN", Capture: `FOREIGN ([0-9A-Za-z]+)`, ToolCalls: []fake.Call{
			call("tasks_send", `{"to":"$1","text":"hello stranger"}`), call("tasks_wait", `{"ids":["$1"],"timeout":1}`),
		}},
		{AfterTool: true, Match: "", EchoTools: true, Text: []string{"RESULTS: "}},
		{Match: "[inbox]", EchoTools: true, Text: []string{"RESULTS: "}},
	}
	cfg := writeConfig(t, "tasks:\n  max_depth: 2\n  max_children: 2\n")
	f := fake.StartServer(t, fake.Options{Flavor: fake.FlavorOllama, Script: script})
	rd, c := serveTreeEnv(t, data, []string{"LEMO_OLLAMA_BASE_URL=" + f.URL()}, "--config", cfg)
	d := rd.daemon
	ctx := context.Background()

	// Depth: the root (0) spawns a child (1), which spawns one at 2, which
	// may not spawn at 3.
	deep, err := c.CreateTask(ctx, client.CreateTask{Request: "DEEP start", Model: treeModel})
	if err != nil {
		t.Fatal(err)
	}
	waitTree(t, c, d, deep.GetTaskId(), api.TaskStatus_TASK_STATUS_FINISHED)
	if a := lastAnswer(treeHistory(t, c, deep.GetTaskId())); !strings.Contains(a, "deeper than the limit of 2 (tasks.max_depth)") {
		t.Errorf("the depth limit was not reported through the tree:\n%s", a)
	}
	// Children per Task.
	many, err := c.CreateTask(ctx, client.CreateTask{Request: "MANY children", Model: treeModel})
	if err != nil {
		t.Fatal(err)
	}
	waitTree(t, c, d, many.GetTaskId(), api.TaskStatus_TASK_STATUS_FINISHED)
	mevs := treeHistory(t, c, many.GetTaskId())
	if a := lastAnswer(mevs); !strings.Contains(a, "already spawned 2 child tasks, the limit (tasks.max_children)") {
		t.Errorf("the children limit was not reported:\n%s", a)
	}
	if sp, _ := children(mevs); len(sp) != 2 {
		t.Errorf("%d children spawned, want 2", len(sp))
	}
	// Another root of the same owner is outside the family; another
	// owner's Task is not found.
	for _, target := range []string{deep.GetTaskId(), "01AAAAAAAAAAAAAAAAAAAAAAAA"} {
		ft, err := c.CreateTask(ctx, client.CreateTask{Request: "FOREIGN " + target, Model: treeModel})
		if err != nil {
			t.Fatal(err)
		}
		waitTree(t, c, d, ft.GetTaskId(), api.TaskStatus_TASK_STATUS_FINISHED)
		a := lastAnswer(treeHistory(t, c, ft.GetTaskId()))
		if !strings.Contains(a, "tasks.wait: task: not found: task "+target) {
			t.Errorf("tasks.wait of %s was not refused as not found:\n%s", target, a)
		}
		want := "task: not found: task " + target
		if target == deep.GetTaskId() {
			want = "is not this task's parent, child or sibling"
		}
		if !strings.Contains(a, "tasks.send: "+want) && !strings.Contains(a, want) {
			t.Errorf("tasks.send to %s: want %q in:\n%s", target, want, a)
		}
	}
	_ = errors.New
	_ = fmt.Sprint
	_ = time.Second
}

// Cancelling the parent while its children run shell commands that start
// process trees (a setsid grandchild each) cancels every descendant Task
// and stops every process.
func TestTreeCancelCascadesToProcesses(t *testing.T) {
	script := []fake.Scenario{
		{Match: "PARENT-CANCEL", ToolCalls: []fake.Call{
			call("tasks_spawn", `{"request":"CHILD-SH one"}`),
			call("tasks_spawn", `{"request":"CHILD-SH two"}`),
			call("tasks_spawn", `{"request":"CHILD-GRAND three"}`),
		}},
		{Match: "CHILD-GRAND", ToolCalls: []fake.Call{call("tasks_spawn", `{"request":"CHILD-SH grandchild","wait":true,"timeout":600}`)}},
		{Match: "CHILD-SH", ToolCalls: []fake.Call{call("shell_run", `{"command":"setsid sleep 1000 & sleep 1000"}`)}},
		{AfterTool: true, Match: "collect its answer", Capture: `"id":"([0-9A-Za-z]+)"`, ToolCalls: []fake.Call{call("tasks_wait", `{"ids":["$1"],"timeout":600}`)}},
	}
	data := filepath.Join(t.TempDir(), "data")
	cfg := writeConfig(t, "tools:\n  shell:\n    approval: allow\n")
	f := fake.StartServer(t, fake.Options{Flavor: fake.FlavorOllama, Script: script})
	rd, c := serveTreeEnv(t, data, []string{"LEMO_OLLAMA_BASE_URL=" + f.URL()}, "--config", cfg)
	d := rd.daemon
	tag, err := isolation.RunTag(data)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	root, err := c.CreateTask(ctx, client.CreateTask{Request: "PARENT-CANCEL fan out", Model: treeModel})
	if err != nil {
		t.Fatal(err)
	}
	// Three shell commands (two children, one grandchild), each with a
	// setsid grandchild of its own.
	var sleeps []int
	eventually(t, 60*time.Second, func() error {
		sleeps = sleeps[:0]
		for pid, cl := range taggedProcs(tag) {
			if cl == "sleep 1000" {
				sleeps = append(sleeps, pid)
			}
		}
		if len(sleeps) < 6 {
			return fmt.Errorf("%d sleeps run, want 6\n%s", len(sleeps), dumpTree(c, root.GetTaskId(), ""))
		}
		return nil
	})
	if _, err := c.Cancel(ctx, root.GetTaskId()); err != nil {
		t.Fatal(err)
	}
	// Every Task of the tree ends cancelled.
	var walk func(id string, depth int) int
	walk = func(id string, depth int) int {
		waitTree(t, c, d, id, api.TaskStatus_TASK_STATUS_CANCELLED)
		n := 1
		sp, _ := children(treeHistory(t, c, id))
		for _, cs := range sp {
			n += walk(cs.GetChildId(), depth+1)
		}
		return n
	}
	if n := walk(root.GetTaskId(), 0); n != 5 {
		t.Fatalf("%d Tasks in the tree, want 5 (a root, three children, a grandchild)", n)
	}
	eventually(t, 30*time.Second, func() error {
		if left := taggedProcs(tag); len(left) != 0 {
			return fmt.Errorf("processes of the cancelled tree still run: %v", left)
		}
		return nil
	})
	for _, pid := range sleeps {
		if !procDead(pid) {
			t.Errorf("sleep %d survived the cancel", pid)
		}
	}
}

// A child's approval is listed with the Task path from its root, and the
// child goes on once it is approved.
func TestTreeApprovalShowsPath(t *testing.T) {
	script := []fake.Scenario{
		{Match: "PARENT-APPR", ToolCalls: []fake.Call{call("tasks_spawn", `{"request":"CHILD-APPR run it","wait":true,"timeout":120}`)}},
		{Match: "CHILD-APPR", ToolCalls: []fake.Call{call("shell_run", `{"command":"echo approved-run"}`)}},
		{AfterTool: true, Match: "approved-run", Text: []string{"child ran it"}},
		{Match: "[inbox]", Text: []string{"parent done"}},
		{AfterTool: true, Match: `"id"`, Text: []string{"parent done"}},
	}
	data := filepath.Join(t.TempDir(), "data")
	cfg := writeConfig(t, "tools:\n  shell:\n    approval: ask\n")
	f := fake.StartServer(t, fake.Options{Flavor: fake.FlavorOllama, Script: script})
	rd, c := serveTreeEnv(t, data, []string{"LEMO_OLLAMA_BASE_URL=" + f.URL()}, "--config", cfg)
	d := rd.daemon
	root, err := c.CreateTask(context.Background(), client.CreateTask{Request: "PARENT-APPR delegate", Model: treeModel})
	if err != nil {
		t.Fatal(err)
	}
	var approval, child string
	eventually(t, 30*time.Second, func() error {
		sp, _ := children(treeHistory(t, c, root.GetTaskId()))
		if len(sp) != 1 {
			return fmt.Errorf("no child yet")
		}
		child = sp[0].GetChildId()
		for _, ev := range treeHistory(t, c, child) {
			if a := ev.GetApprovalRequested(); a != nil {
				approval = a.GetApprovalId()
				return nil
			}
		}
		return fmt.Errorf("the child asks for no approval yet")
	})
	out, code := cli(t, data, "approvals")
	if code != 0 || !strings.Contains(out, approval) || !strings.Contains(out, root.GetTaskId()+"/"+child) {
		t.Fatalf("lemo approvals does not list %s with the path %s/%s: exit %d\n%s", approval, root.GetTaskId(), child, code, out)
	}
	if out, code := cli(t, data, "approve", approval); code != 0 {
		t.Fatalf("lemo approve: exit %d\n%s", code, out)
	}
	waitTree(t, c, d, root.GetTaskId(), api.TaskStatus_TASK_STATUS_FINISHED)
	if a := lastAnswer(treeHistory(t, c, child)); a != "child ran it" {
		t.Fatalf("child's answer = %q", a)
	}
}

// lemo run on a root asks, in a real terminal, for the approval its
// child's shell call needs, labelled with the path root/child; "y" there
// lets the child run the call and finish, then the root finishes and lemo
// run exits 0. The child's progress shows as a line under the root's.
func TestTreeRunAsksForChildApproval(t *testing.T) {
	tmux := needTmux(t)
	script := []fake.Scenario{
		{Match: "PARENT-RUN", ToolCalls: []fake.Call{call("tasks_spawn", `{"request":"CHILD-RUN run it","wait":true,"timeout":120}`)}},
		{Match: "CHILD-RUN", ToolCalls: []fake.Call{call("shell_run", `{"command":"echo approved-at-root"}`)}},
		{AfterTool: true, Match: "approved-at-root", Text: []string{"child ran it"}},
		{Match: "[inbox]", Text: []string{"parent done"}},
		{AfterTool: true, Match: `"id"`, Text: []string{"parent done"}},
	}
	data := filepath.Join(t.TempDir(), "data")
	cfg := writeConfig(t, "tools:\n  shell:\n    approval: ask\n")
	f := fake.StartServer(t, fake.Options{Flavor: fake.FlavorOllama, Script: script})
	rd, c := serveTreeEnv(t, data, []string{"LEMO_OLLAMA_BASE_URL=" + f.URL()}, "--config", cfg)
	d := rd.daemon
	done := filepath.Join(t.TempDir(), "exit")
	term := newTerminal(t, tmux, []string{"LEMO_DATA=" + data}, "sh", "-c",
		fmt.Sprintf("%s run --private-workspace --model %s 'PARENT-RUN delegate'; echo $? > %s; sleep 600", lemoBin, treeModel, done))
	screen := term.waitFor("? [y/N/a=always/s=skip]")
	// The screen may have scrolled past lemo run's first line: the root
	// is the one Task without a parent.
	tasks, _, err := c.ListTasks(context.Background(), "", 0)
	if err != nil {
		t.Fatal(err)
	}
	var root string
	for _, m := range tasks {
		if m.GetParentId() == "" {
			root = m.GetTaskId()
		}
	}
	sp, _ := children(treeHistory(t, c, root))
	if len(sp) != 1 {
		t.Fatalf("root %s spawned %d children, want 1; screen:\n%s", root, len(sp), screen)
	}
	child := sp[0].GetChildId()
	pending := pendingFor(t, c, child)
	if len(pending) != 1 {
		t.Fatalf("child %s has pending approvals %v, want one", child, pending)
	}
	// The terminal wraps long lines (compare without the breaks) and may
	// have scrolled (read its history too).
	all, err := term.run("capture-pane", "-p", "-S", "-", "-t", "e2e")
	if err != nil {
		t.Fatalf("capture-pane: %v\n%s", err, all)
	}
	flat := strings.ReplaceAll(all, "\n", "")
	if want := "approve " + pending[0] + " in task " + root + "/" + child + "?"; !strings.Contains(flat, want) {
		t.Fatalf("the prompt is not %q; screen:\n%s", want, screen)
	}
	// The child's progress shows before its approval is asked for, even
	// when its first events passed before lemo run subscribed (it is told
	// what runs below when it subscribes).
	if want := "↳ " + root + "/" + child + ": "; !strings.Contains(flat, want) {
		t.Fatalf("no progress line %q for the child before its prompt; screen:\n%s", want, all)
	}
	term.keys("y", "Enter")
	if code := waitExit(t, term, done); code != "0" {
		t.Fatalf("lemo run exited with %s; screen:\n%s", code, term.screen())
	}
	// The child's progress under the root's run, live once its call was
	// approved.
	all, err = term.run("capture-pane", "-p", "-S", "-", "-t", "e2e")
	if err != nil {
		t.Fatalf("capture-pane: %v\n%s", err, all)
	}
	if want := "↳ " + root + "/" + child + ": running"; !strings.Contains(strings.ReplaceAll(all, "\n", ""), want) {
		t.Fatalf("no progress line %q for the child; screen:\n%s", want, all)
	}
	waitTree(t, c, d, root, api.TaskStatus_TASK_STATUS_FINISHED)
	if a := lastAnswer(treeHistory(t, c, child)); a != "child ran it" {
		t.Fatalf("child's answer = %q", a)
	}
	for _, ev := range treeHistory(t, c, child) {
		if r := ev.GetApprovalResolved(); r != nil && r.GetOutcome() != api.ApprovalOutcome_APPROVAL_OUTCOME_APPROVED {
			t.Fatalf("the child's approval was %v, want approved at the root's terminal", r)
		}
	}
}

// A client that subscribes to a root while its child waits for an approval
// is told of it before CaughtUp (as a TreeEvent labelled root/child, apart
// from the root's own seqs), and of its resolution elsewhere live.
func TestTreeSubscriptionToldOfPendingBelow(t *testing.T) {
	script := []fake.Scenario{
		{Match: "PARENT-SUB", ToolCalls: []fake.Call{call("tasks_spawn", `{"request":"CHILD-SUB run it","wait":true,"timeout":120}`)}},
		{Match: "CHILD-SUB", ToolCalls: []fake.Call{call("shell_run", `{"command":"echo approved-elsewhere"}`)}},
		{AfterTool: true, Match: "approved-elsewhere", Text: []string{"child ran it"}},
		{Match: "[inbox]", Text: []string{"parent done"}},
		{AfterTool: true, Match: `"id"`, Text: []string{"parent done"}},
	}
	data := filepath.Join(t.TempDir(), "data")
	cfg := writeConfig(t, "tools:\n  shell:\n    approval: ask\n")
	f := fake.StartServer(t, fake.Options{Flavor: fake.FlavorOllama, Script: script})
	rd, c := serveTreeEnv(t, data, []string{"LEMO_OLLAMA_BASE_URL=" + f.URL()}, "--config", cfg)
	d := rd.daemon
	root, err := c.CreateTask(context.Background(), client.CreateTask{Request: "PARENT-SUB delegate", Model: treeModel})
	if err != nil {
		t.Fatal(err)
	}
	var child string
	var pending []string
	eventually(t, 30*time.Second, func() error {
		sp, _ := children(treeHistory(t, c, root.GetTaskId()))
		if len(sp) != 1 {
			return fmt.Errorf("no child yet")
		}
		child = sp[0].GetChildId()
		if pending = pendingFor(t, c, child); len(pending) != 1 {
			return fmt.Errorf("the child has pending approvals %v", pending)
		}
		return nil
	})
	sub, err := c.Subscribe(context.Background(), client.SubscribeOptions{TaskID: root.GetTaskId(), FromSeq: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	next := func() *api.Update {
		t.Helper()
		select {
		case u, ok := <-sub.C:
			if !ok {
				t.Fatal("the subscription ended")
			}
			return u
		case <-time.After(30 * time.Second):
			t.Fatal("no update within 30s")
		}
		return nil
	}
	told, state := false, false
	for {
		u := next()
		if u.GetCaughtUp() != nil {
			break
		}
		if ts := u.GetTreeState(); ts != nil {
			// What the child is doing: its status, Cycle and the call.
			for _, te := range ts.GetEvents() {
				if strings.Join(te.GetPath(), "/") != root.GetTaskId()+"/"+child {
					t.Fatalf("tree state of %v, want %s/%s", te.GetPath(), root.GetTaskId(), child)
				}
				if te.GetEvent().GetStatusChanged().GetStatus() == api.TaskStatus_TASK_STATUS_AWAITING_APPROVAL {
					state = true
				}
			}
		}
		if te := u.GetTreeEvent(); te != nil {
			want := []string{root.GetTaskId(), child}
			if te.GetEvent().GetApprovalRequested().GetApprovalId() != pending[0] || strings.Join(te.GetPath(), "/") != strings.Join(want, "/") {
				t.Fatalf("tree event %v, want the approval %s at %v", te, pending[0], want)
			}
			told = true
		}
		if ev := u.GetEvent(); ev != nil && ev.GetTaskId() != root.GetTaskId() {
			t.Fatalf("the root's subscription got an event of %s as its own", ev.GetTaskId())
		}
	}
	if !told || !state {
		t.Fatalf("the subscription to the root was not told of the approval %s pending below it (%v) or of its child waiting for it (%v)", pending[0], told, state)
	}
	if _, err := c.Resolve(context.Background(), pending[0], true, ""); err != nil {
		t.Fatal(err)
	}
	for resolved := false; !resolved; {
		u := next()
		resolved = u.GetTreeEvent().GetEvent().GetApprovalResolved().GetApprovalId() == pending[0]
	}
	waitTree(t, c, d, root.GetTaskId(), api.TaskStatus_TASK_STATUS_FINISHED)
}

// lemo attach on a root whose two children already wait for approvals
// (their first events long past) shows each child's progress line under
// the root as a client attached from the start would, then follows them
// live once approved, until the root finished.
func TestTreeAttachMidRunShowsChildren(t *testing.T) {
	script := []fake.Scenario{
		{Match: "PARENT-ATT", ToolCalls: []fake.Call{
			call("tasks_spawn", `{"request":"CHILD-ATT-A run it","wait":true,"timeout":120}`),
			call("tasks_spawn", `{"request":"CHILD-ATT-B run it","wait":true,"timeout":120}`),
		}},
		{Match: "CHILD-ATT-A", ToolCalls: []fake.Call{call("shell_run", `{"command":"echo a-ran"}`)}},
		{Match: "CHILD-ATT-B", ToolCalls: []fake.Call{call("shell_run", `{"command":"echo b-ran"}`)}},
		{AfterTool: true, Match: "a-ran", Text: []string{"A done"}},
		{AfterTool: true, Match: "b-ran", Text: []string{"B done"}},
		{Match: "[inbox]", Text: []string{"parent done"}},
		{AfterTool: true, Match: `"id"`, Text: []string{"parent done"}},
	}
	data := filepath.Join(t.TempDir(), "data")
	cfg := writeConfig(t, "tools:\n  shell:\n    approval: ask\n")
	f := fake.StartServer(t, fake.Options{Flavor: fake.FlavorOllama, Script: script})
	rd, c := serveTreeEnv(t, data, []string{"LEMO_OLLAMA_BASE_URL=" + f.URL()}, "--config", cfg)
	d := rd.daemon
	root, err := c.CreateTask(context.Background(), client.CreateTask{Request: "PARENT-ATT delegate", Model: treeModel})
	if err != nil {
		t.Fatal(err)
	}
	id := root.GetTaskId()
	var kids []string
	var pending []string
	eventually(t, 30*time.Second, func() error {
		sp, _ := children(treeHistory(t, c, id))
		if len(sp) != 2 {
			return fmt.Errorf("%d children yet", len(sp))
		}
		kids, pending = nil, nil
		for _, s := range sp {
			kids = append(kids, s.GetChildId())
			pending = append(pending, pendingFor(t, c, s.GetChildId())...)
		}
		if len(pending) != 2 {
			return fmt.Errorf("pending approvals below: %v", pending)
		}
		return nil
	})
	s := startCLI(t, data, "attach", id)
	want := map[string]bool{}
	for _, k := range kids {
		want["  ↳ "+id+"/"+k+": awaiting_approval · cycle 1"] = true
	}
	var seen []string
	for len(want) > 0 {
		l, ok := s.next(30 * time.Second)
		if !ok {
			t.Fatalf("lemo attach showed no line %v; it showed:\n%s\nstderr:\n%s", want, strings.Join(seen, "\n"), s.stderr())
		}
		seen = append(seen, l)
		delete(want, l)
	}
	for _, p := range pending {
		if out, code := cli(t, data, "approve", p); code != 0 {
			t.Fatalf("lemo approve %s: exit %d\n%s", p, code, out)
		}
	}
	if code := s.wait(t, 60*time.Second); code != 0 {
		t.Fatalf("lemo attach exited %d; stderr:\n%s", code, s.stderr())
	}
	waitTree(t, c, d, id, api.TaskStatus_TASK_STATUS_FINISHED)
}
