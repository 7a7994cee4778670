package actors_test

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"lemo/actors"
	"lemo/api"
	"lemo/persistence"
	"lemo/providers"
	"lemo/providers/fake"
	"lemo/tools/tasks"
)

// treePlan answers by the last message: a script keyed by markers.
func treePlan(answer func(last string, tool bool) fake.Turn) fake.Plan {
	return func(n int, req *providers.Request) fake.Turn {
		m := req.Messages[len(req.Messages)-1]
		return answer(m.Content, m.Role == providers.RoleTool)
	}
}

func newTreeHarness(t *testing.T, plan fake.Plan) *harness {
	t.Helper()
	var h *harness
	h = newHarness(t, plan, tasks.NewTree(lazyStoreOf(&h))...)
	return h
}

// lazyStoreOf reads the harness *p points to once a tool runs.
func lazyStoreOf(p **harness) tasks.Store { return lazyPtr{p} }

type lazyPtr struct{ p **harness }

func (s lazyPtr) Meta(task string) (*api.TaskMeta, error) { return (*s.p).store.Meta(task) }
func (s lazyPtr) ListTasks(o persistence.ListOptions) ([]*api.TaskMeta, string, error) {
	return (*s.p).store.ListTasks(o)
}
func (s lazyPtr) ReadEvents(task string, from uint64, limit int) ([]*api.Event, error) {
	return (*s.p).store.ReadEvents(task, from, limit)
}

// A spawn with wait returns the child's answer; the child names its
// parent and the parent records its spawn and its end.
func TestTreeSpawnWaitInProcess(t *testing.T) {
	h := newTreeHarness(t, treePlan(func(last string, tool bool) fake.Turn {
		switch {
		case tool:
			return fake.Turn{Text: "parent got: " + last}
		case strings.Contains(last, "CHILD"):
			return fake.Turn{Text: "child answer"}
		case last == "PARENT":
			return fake.Turn{ToolCalls: []providers.ToolCall{fake.ToolCall("c1", "tasks_spawn", map[string]any{"request": "CHILD x", "wait": true, "timeout": 10})}}
		default:
			return fake.Turn{Text: "parent saw: " + last}
		}
	}))
	id := h.create("PARENT")
	evs := h.waitStatus(id, api.TaskStatus_TASK_STATUS_FINISHED)
	var child string
	ended := false
	for _, ev := range evs {
		if cs := ev.GetChildSpawned(); cs != nil {
			child = cs.GetChildId()
		}
		if ce := ev.GetChildEnded(); ce != nil && ce.GetChildId() == child && ce.GetAnswer() == "child answer" {
			ended = true
		}
	}
	if child == "" || !ended {
		t.Fatalf("parent history lacks the child's spawn or end:\n%s", dump(evs))
	}
	if tc := h.history(child)[0].GetTaskCreated(); tc.GetParentId() != id || tc.GetDepth() != 1 {
		t.Fatalf("child TaskCreated = %v", tc)
	}
	var result string
	for _, ev := range evs {
		if r := ev.GetToolResult(); r != nil {
			result = string(r.GetRetainedOutput())
		}
	}
	if !strings.Contains(result, `"answer":"child answer"`) || !strings.Contains(result, `"status":"finished"`) {
		t.Fatalf("spawn result = %q, want the child's answer in it", result)
	}
}

// With one running child allowed daemon-wide, a second spawn queues and
// says so, and starts when the first ends.
func TestTreeRunningChildrenQueue(t *testing.T) {
	release := make(chan struct{})
	var h *harness
	plan := treePlan(func(last string, tool bool) fake.Turn {
		switch {
		case strings.Contains(last, "CHILD-1"):
			return fake.Turn{Text: "one", Wait: release}
		case strings.Contains(last, "CHILD-2"):
			return fake.Turn{Text: "two"}
		case last != "PARENT":
			return fake.Turn{Text: "spawned: " + last}
		default:
			return fake.Turn{ToolCalls: []providers.ToolCall{
				fake.ToolCall("c1", "tasks_spawn", map[string]any{"request": "CHILD-1"}),
				fake.ToolCall("c2", "tasks_spawn", map[string]any{"request": "CHILD-2"}),
			}}
		}
	})
	h = newHarnessWith(t, plan, func(o *actors.Options) { o.MaxRunningChildren = 1; o.MaxParallelTools = 1 }, tasks.NewTree(lazyStoreOf(&h))...)
	id := h.create("PARENT")
	evs := h.waitStatus(id, api.TaskStatus_TASK_STATUS_FINISHED)
	var kids []string
	for _, ev := range evs {
		if cs := ev.GetChildSpawned(); cs != nil {
			kids = append(kids, cs.GetChildId())
		}
	}
	if len(kids) != 2 {
		t.Fatalf("spawned %d children, want 2:\n%s", len(kids), dump(evs))
	}
	// Created, never started, and its history says it is queued.
	queued := h.waitFor(kids[1], "its queued record", func(evs []*api.Event) bool { return lastStatus(evs) != api.TaskStatus_TASK_STATUS_UNSPECIFIED })
	if sc := queued[len(queued)-1].GetStatusChanged(); sc.GetStatus() != api.TaskStatus_TASK_STATUS_CREATED || !strings.HasPrefix(sc.GetDetail(), "queued: ") || !strings.Contains(sc.GetDetail(), "1 of 1 places") {
		t.Fatalf("the second child runs while the first holds the only place, or does not say it is queued:\n%s", dump(queued))
	}
	var results []string
	for _, ev := range evs {
		if r := ev.GetToolResult(); r != nil {
			results = append(results, string(r.GetRetainedOutput()))
		}
	}
	if len(results) != 2 || strings.Contains(results[0], "queued") || !strings.Contains(results[1], `"status":"queued"`) {
		t.Fatalf("spawn results = %q, want the second queued", results)
	}
	close(release)
	h.waitStatus(kids[0], api.TaskStatus_TASK_STATUS_FINISHED)
	h.waitStatus(kids[1], api.TaskStatus_TASK_STATUS_FINISHED)
}

// A user pause of a parent pauses its running children (reason parent),
// not a child a person paused; continuing the parent continues the ones it
// paused, and the child a person paused stays paused.
func TestTreePauseContinueCascade(t *testing.T) {
	hold := make(chan struct{})
	defer close(hold)
	var h *harness
	plan := treePlan(func(last string, tool bool) fake.Turn {
		switch {
		case strings.Contains(last, "CHILD"):
			return fake.Turn{Text: "child", Wait: hold}
		case last == "PARENT":
			return fake.Turn{ToolCalls: []providers.ToolCall{
				fake.ToolCall("c1", "tasks_spawn", map[string]any{"request": "CHILD-1"}),
				fake.ToolCall("c2", "tasks_spawn", map[string]any{"request": "CHILD-2"}),
			}}
		default:
			return fake.Turn{ToolCalls: []providers.ToolCall{fake.ToolCall("w", "tasks_wait_message", map[string]any{"timeout": 60})}}
		}
	})
	h = newHarness(t, plan, tasks.NewTree(lazyStoreOf(&h))...)
	id := h.create("PARENT")
	evs := h.waitFor(id, "two children", func(evs []*api.Event) bool {
		n := 0
		for _, ev := range evs {
			if ev.GetChildSpawned() != nil {
				n++
			}
		}
		return n == 2
	})
	var kids []string
	for _, ev := range evs {
		if cs := ev.GetChildSpawned(); cs != nil {
			kids = append(kids, cs.GetChildId())
		}
	}
	for _, k := range kids {
		h.waitStatus(k, api.TaskStatus_TASK_STATUS_RUNNING)
	}
	ctx := context.Background()
	if _, err := h.d.Pause(ctx, actors.Operator, kids[1]); err != nil {
		t.Fatal(err)
	}
	if _, err := h.d.Pause(ctx, actors.Operator, id); err != nil {
		t.Fatal(err)
	}
	reason := func(k string) api.PauseReason {
		var r api.PauseReason
		for _, ev := range h.history(k) {
			if sc := ev.GetStatusChanged(); sc != nil {
				r = sc.GetPauseReason()
			}
		}
		return r
	}
	h.waitStatus(kids[0], api.TaskStatus_TASK_STATUS_PAUSED)
	if r := reason(kids[0]); r != api.PauseReason_PAUSE_REASON_PARENT {
		t.Fatalf("child paused with reason %v, want parent", r)
	}
	if r := reason(kids[1]); r != api.PauseReason_PAUSE_REASON_USER {
		t.Fatalf("the child a person paused has reason %v, want user", r)
	}
	if _, err := h.d.Continue(ctx, actors.Operator, id, ""); err != nil {
		t.Fatal(err)
	}
	h.waitStatus(kids[0], api.TaskStatus_TASK_STATUS_RUNNING)
	h.waitStatus(id, api.TaskStatus_TASK_STATUS_RUNNING)
	if st := lastStatus(h.history(kids[1])); st != api.TaskStatus_TASK_STATUS_PAUSED {
		t.Fatalf("the child a person paused is %v after the parent's continue, want paused", st)
	}
}

// A subscription to a root follows its child as TreeEvents labelled
// root/child, apart from the root's own events: the child's progress and,
// when the child keeps crashing and supervision records it failed (the
// manager writes that record, not the child's actor), its failed status.
func TestTreeRootSubscriptionSeesChildFail(t *testing.T) {
	crashes := new(atomic.Int32)
	var h *harness
	plan := treePlan(func(last string, tool bool) fake.Turn {
		switch {
		case strings.Contains(last, "CHILD"):
			return fake.Turn{ToolCalls: []providers.ToolCall{call("p", "test_crashy", "x")}}
		case last == "PARENT":
			return fake.Turn{ToolCalls: []providers.ToolCall{fake.ToolCall("c1", "tasks_spawn", map[string]any{"request": "CHILD x", "wait": true, "timeout": 60})}}
		default:
			return fake.Turn{Text: "parent saw: " + last}
		}
	})
	h = newHarness(t, plan, append(tasks.NewTree(lazyStoreOf(&h)), crashyTool{crashes: crashes})...)
	id := h.create("PARENT")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	sub, err := h.d.Subscribe(ctx, actors.Operator, actors.SubscribeOptions{TaskID: id, FromSeq: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	var child string
	h.waitFor(id, "a child", func(evs []*api.Event) bool {
		for _, ev := range evs {
			if cs := ev.GetChildSpawned(); cs != nil {
				child = cs.GetChildId()
			}
		}
		return child != ""
	})
	for i := 1; i <= 3; i++ {
		h.waitFor(child, fmt.Sprintf("pause %d after a crash", i), interrupted(i))
		if _, err := h.d.Continue(ctx, actors.Operator, child, ""); err != nil {
			t.Fatalf("Continue %d: %v", i, err)
		}
	}
	h.waitStatus(child, api.TaskStatus_TASK_STATUS_FAILED)
	cycles := 0
	for {
		select {
		case u, ok := <-sub.C:
			if !ok {
				t.Fatal("the subscription ended")
			}
			if u.Event != nil && u.Event.GetTaskId() != id {
				t.Fatalf("the root's subscription got the child's event %v as its own", u.Event)
			}
			if u.Tree == nil {
				continue
			}
			if got := strings.Join(u.Tree.GetPath(), "/"); got != id+"/"+child {
				t.Fatalf("tree event path %s, want %s/%s", got, id, child)
			}
			if u.Tree.GetEvent().GetCycleStarted() != nil {
				cycles++
			}
			if u.Tree.GetEvent().GetStatusChanged().GetStatus() == api.TaskStatus_TASK_STATUS_FAILED {
				if cycles == 0 {
					t.Fatal("the child's Cycles were not forwarded before its failure")
				}
				return
			}
		case <-ctx.Done():
			t.Fatalf("the root's subscription never saw its child fail:\n%s", dump(h.history(child)))
		}
	}
}

// blockedChild starts a parent that spawns a child and waits for it; the
// child's call (test.block, marker) runs until released. It returns once
// that call runs, with the parent's id and the child's.
func blockedChild(t *testing.T, marker string) (h *harness, parent, child string) {
	t.Helper()
	plan := treePlan(func(last string, tool bool) fake.Turn {
		switch {
		case strings.Contains(last, "released"), strings.Contains(last, "interrupted"), strings.Contains(last, "stopped"):
			return fake.Turn{Text: "child done"}
		case strings.Contains(last, "CHILD"):
			return fake.Turn{ToolCalls: []providers.ToolCall{call("b", "test_block", marker)}}
		case last == "PARENT":
			return fake.Turn{ToolCalls: []providers.ToolCall{fake.ToolCall("c1", "tasks_spawn", map[string]any{"request": "CHILD x", "wait": true, "timeout": 60})}}
		default:
			return fake.Turn{Text: "parent saw: " + last}
		}
	})
	h = newHarness(t, plan, tasks.NewTree(lazyStoreOf(&h))...)
	parent = h.create("PARENT")
	eventually(t, "the child's call", func() error {
		if !h.blocks.isRunning(marker) {
			return fmt.Errorf("the child's call has not started")
		}
		return nil
	})
	for _, ev := range h.history(parent) {
		if cs := ev.GetChildSpawned(); cs != nil {
			child = cs.GetChildId()
		}
	}
	return h, parent, child
}

// A subscription that starts after a child's first events (lemo run
// subscribes once its Task exists; a client attaches mid-run or again
// after a reconnect) is still told what the child is doing: ProgressBelow
// holds its status, its Cycle and its open call, labelled from the root,
// and forgets it once it ended.
func TestTreeProgressBelowTellsRunningChild(t *testing.T) {
	h, id, child := blockedChild(t, "child-call")
	ctx := context.Background()
	st, err := h.d.ProgressBelow(ctx, actors.Operator, id)
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, te := range st.GetEvents() {
		if got := strings.Join(te.GetPath(), "/"); got != id+"/"+child {
			t.Fatalf("progress of %s, want %s/%s", got, id, child)
		}
		kinds = append(kinds, api.Kind(te.GetEvent()))
	}
	if want := "status_changed cycle_started tool_call_recorded"; strings.Join(kinds, " ") != want || st.GetOmitted() != 0 {
		t.Fatalf("told %v (omitted %d), want %s:\n%s", kinds, st.GetOmitted(), want, dump(h.history(child)))
	}
	if c := st.GetEvents()[2].GetEvent().GetToolCallRecorded(); c.GetTool() != "test.block" {
		t.Fatalf("the open call is %v, want test.block's", c)
	}
	// The child is below the root only: not below itself, nor another's.
	if st, err := h.d.ProgressBelow(ctx, actors.Operator, child); err != nil || len(st.GetEvents()) != 0 {
		t.Fatalf("below the child: %v, %v", st, err)
	}
	if _, err := h.d.ProgressBelow(ctx, actors.Caller{Owner: "mallory"}, id); err == nil {
		t.Fatal("another owner was told of the tree")
	}
	h.blocks.release("child-call")
	childForgotten(t, h, id)
}

// A child paused by a person is told of with its pause and the Cycle it
// reached (its call ended with the pause), until it ends: a client
// attaching then shows the line of the child that waits, as one attached
// before it does.
func TestTreeProgressBelowTellsPausedChild(t *testing.T) {
	h, id, child := blockedChild(t, "paused-call")
	ctx := context.Background()
	if _, err := h.d.Pause(ctx, actors.Operator, child); err != nil {
		t.Fatal(err)
	}
	h.waitStatus(child, api.TaskStatus_TASK_STATUS_PAUSED)
	var kinds []string
	eventually(t, "the paused child told of", func() error {
		st, err := h.d.ProgressBelow(ctx, actors.Operator, id)
		if err != nil {
			return err
		}
		var pause *api.StatusChanged
		kinds, pause = progressKinds(t, st, id, child)
		paused := pause.GetPauseReason() == api.PauseReason_PAUSE_REASON_USER
		if want := "cycle_started status_changed"; strings.Join(kinds, " ") != want || !paused {
			return fmt.Errorf("told %v, want %s with the user's pause", kinds, want)
		}
		return nil
	})
	if _, err := h.d.Continue(ctx, actors.Operator, child, ""); err != nil {
		t.Fatal(err)
	}
	h.blocks.release("paused-call")
	childForgotten(t, h, id)
}

// A child that had not ended when the daemon started (paused by the
// restart) is told of to a subscription to its parent, as a child paused
// since the start is: its pause and the Cycle it reached, labelled from
// the root.
func TestTreeProgressBelowAfterRestart(t *testing.T) {
	h, id, child := blockedChild(t, "restart-call")
	h.restart()
	st, err := h.d.ProgressBelow(context.Background(), actors.Operator, id)
	if err != nil {
		t.Fatal(err)
	}
	kinds, pause := progressKinds(t, st, id, child)
	if want := "cycle_started status_changed"; strings.Join(kinds, " ") != want || pause == nil {
		t.Fatalf("after the restart told %v, want %s with the pause:\n%s", kinds, want, dump(h.history(child)))
	}
}

// progressKinds returns the kinds of the events a TreeState tells of
// child (each labelled root/child) and its pause, if one is among them.
func progressKinds(t *testing.T, st *api.TreeState, root, child string) (kinds []string, pause *api.StatusChanged) {
	t.Helper()
	for _, te := range st.GetEvents() {
		if got := strings.Join(te.GetPath(), "/"); got != root+"/"+child {
			t.Fatalf("progress of %s, want %s/%s", got, root, child)
		}
		kinds = append(kinds, api.Kind(te.GetEvent()))
		if sc := te.GetEvent().GetStatusChanged(); sc.GetStatus() == api.TaskStatus_TASK_STATUS_PAUSED {
			pause = sc
		}
	}
	return kinds, pause
}

// childForgotten waits for root to finish, then for the hub to tell of
// nothing below it.
func childForgotten(t *testing.T, h *harness, root string) {
	t.Helper()
	h.waitStatus(root, api.TaskStatus_TASK_STATUS_FINISHED)
	eventually(t, "the child forgotten", func() error {
		st, err := h.d.ProgressBelow(context.Background(), actors.Operator, root)
		if err != nil || len(st.GetEvents()) != 0 {
			return fmt.Errorf("after the child ended: %v, %v", st, err)
		}
		return nil
	})
}

// A parent that sends a follow-up to its child that finished gets it
// read: the child is reopened by the message (recorded as such), runs a
// Cycle that reads it and finishes again, and the parent's wait returns
// the new answer. A child that was cancelled is not reopened: the message
// is recorded in its history, and the send's result tells the parent it
// will not read it.
func TestTreeMessageReopensFinishedChild(t *testing.T) {
	var child atomic.Value
	ulid := regexp.MustCompile(`[0-9A-Z]{26}`)
	plan := treePlan(func(last string, tool bool) fake.Turn {
		// The parent's last message is a tool's result or, when its
		// inbox had entries meanwhile, the [inbox] section after it.
		switch {
		case strings.Contains(last, "second answer") && !strings.Contains(last, "FOLLOWUP"):
			return fake.Turn{Text: "parent saw the second answer"}
		case strings.Contains(last, "FOLLOWUP"):
			return fake.Turn{Text: "second answer"}
		case strings.Contains(last, `"sent":true`) || strings.Contains(last, "runs again"):
			return fake.Turn{ToolCalls: []providers.ToolCall{fake.ToolCall("w1", "tasks_wait", map[string]any{"ids": []string{child.Load().(string)}, "timeout": 30})}}
		case strings.Contains(last, "first answer"):
			child.Store(ulid.FindString(last))
			return fake.Turn{ToolCalls: []providers.ToolCall{fake.ToolCall("s1", "tasks_send", map[string]any{"to": child.Load().(string), "text": "FOLLOWUP please"})}}
		case strings.Contains(last, "CHILD-A"):
			return fake.Turn{Text: "first answer"}
		case last == "PARENT":
			return fake.Turn{ToolCalls: []providers.ToolCall{fake.ToolCall("c1", "tasks_spawn", map[string]any{"request": "CHILD-A x", "wait": true, "timeout": 30})}}
		default:
			return fake.Turn{Text: "parent saw: " + last}
		}
	})
	var h *harness
	h = newHarness(t, plan, tasks.NewTree(lazyStoreOf(&h))...)
	id := h.create("PARENT")
	evs := h.waitFor(id, "the parent's answer", func(evs []*api.Event) bool {
		return strings.Contains(dump(evs), "parent saw the second answer") && lastStatus(evs) == api.TaskStatus_TASK_STATUS_FINISHED
	})
	cid := child.Load().(string)
	sendResult := sendResultOf(evs)
	var parentKinds []string
	for _, ev := range evs {
		switch ev.GetBody().(type) {
		case *api.Event_ChildEnded, *api.Event_ChildReopened, *api.Event_MessageSent:
			parentKinds = append(parentKinds, api.Kind(ev))
		}
	}
	if !strings.Contains(sendResult, `"read":true`) || !strings.Contains(sendResult, "reopens it") {
		t.Fatalf("the send's result = %s, want the child read it once reopened", sendResult)
	}
	if want := "child_ended message_sent child_reopened child_ended"; strings.Join(parentKinds, " ") != want {
		t.Fatalf("the parent recorded %v, want %s:\n%s", parentKinds, want, dump(evs))
	}
	cevs := h.waitStatus(cid, api.TaskStatus_TASK_STATUS_FINISHED)
	var reopened *api.StatusChanged
	finished := 0
	for _, ev := range cevs {
		if sc := ev.GetStatusChanged(); sc != nil {
			if sc.GetReopenedBy() != "" {
				reopened = sc
			}
			if sc.GetStatus() == api.TaskStatus_TASK_STATUS_FINISHED {
				finished++
			}
		}
	}
	if reopened.GetReopenedBy() != id || reopened.GetDetail() != "reopened by message from "+id || finished != 2 || lastAnswerOf(cevs) != "second answer" {
		t.Fatalf("the child's history does not show it reopened by %s, answering and finishing again:\n%s", id, dump(cevs))
	}
}

// A message to a cancelled child is recorded in its history and does not
// reopen it; the send's result says it will not be read.
func TestTreeMessageToCancelledChild(t *testing.T) {
	var child atomic.Value
	plan := treePlan(func(last string, tool bool) fake.Turn {
		switch {
		case tool && strings.Contains(last, `"sent":true`):
			return fake.Turn{Text: "sent: " + last}
		case tool && strings.Contains(last, `"id"`):
			var r struct {
				ID string `json:"id"`
			}
			_ = json.Unmarshal([]byte(last), &r)
			child.Store(r.ID)
			return fake.Turn{Text: "spawned"}
		case strings.Contains(last, "SEND"):
			return fake.Turn{ToolCalls: []providers.ToolCall{fake.ToolCall("s1", "tasks_send", map[string]any{"to": child.Load().(string), "text": "are you there"})}}
		case strings.Contains(last, "CHILD-C"):
			return fake.Turn{ToolCalls: []providers.ToolCall{call("b", "test_block", "cancelled-child")}}
		case last == "PARENT":
			return fake.Turn{ToolCalls: []providers.ToolCall{fake.ToolCall("c1", "tasks_spawn", map[string]any{"request": "CHILD-C x"})}}
		default:
			return fake.Turn{Text: "?"}
		}
	})
	var h *harness
	h = newHarness(t, plan, tasks.NewTree(lazyStoreOf(&h))...)
	id := h.create("PARENT")
	h.waitStatus(id, api.TaskStatus_TASK_STATUS_FINISHED)
	eventually(t, "the child's call", func() error {
		if !h.blocks.isRunning("cancelled-child") {
			return errNotYet
		}
		return nil
	})
	ctx := context.Background()
	cid := child.Load().(string)
	if _, err := h.d.Cancel(ctx, actors.Operator, cid); err != nil {
		t.Fatal(err)
	}
	h.waitStatus(cid, api.TaskStatus_TASK_STATUS_CANCELLED)
	// (The parent took its child's end before it is asked to send: the
	// model's last message is then the request.)
	h.waitFor(id, "the child's end", func(evs []*api.Event) bool {
		return has(evs, func(ev *api.Event) bool { return ev.GetChildEnded() != nil })
	})
	if _, err := h.d.SendMessage(ctx, actors.Operator, id, "SEND it"); err != nil {
		t.Fatal(err)
	}
	evs := h.waitFor(id, "the send's result", func(evs []*api.Event) bool { return sendResultOf(evs) != "" })
	if r := sendResultOf(evs); !strings.Contains(r, `"read":false`) || !strings.Contains(r, `"status":"cancelled"`) || !strings.Contains(r, "will not read") {
		t.Fatalf("the send's result %s does not say the cancelled child will not read it", r)
	}
	cevs := h.waitFor(cid, "the message in the child's history", func(evs []*api.Event) bool {
		return has(evs, func(ev *api.Event) bool { return ev.GetMessageReceived() != nil })
	})
	received := false
	for _, ev := range cevs {
		received = received || ev.GetMessageReceived() != nil
		if received && (ev.GetCycleStarted() != nil || ev.GetStatusChanged() != nil) {
			t.Fatalf("the cancelled child went on after the message:\n%s", dump(cevs))
		}
	}
	if st := lastStatus(cevs); st != api.TaskStatus_TASK_STATUS_CANCELLED {
		t.Fatalf("the cancelled child is %v after the message, want cancelled:\n%s", st, dump(cevs))
	}
}

// sendResultOf is the output of the last tasks.send call in evs.
func sendResultOf(evs []*api.Event) string {
	out := ""
	for _, ev := range evs {
		if r := ev.GetToolResult(); r != nil && strings.Contains(string(r.GetRetainedOutput()), `"sent":true`) {
			out = string(r.GetRetainedOutput())
		}
	}
	return out
}

// lastAnswerOf is the last answer's text in evs.
func lastAnswerOf(evs []*api.Event) string {
	out := ""
	for _, ev := range evs {
		if a := ev.GetAssistantMessage(); a != nil && a.GetText() != "" {
			out = a.GetText()
		}
	}
	return out
}
