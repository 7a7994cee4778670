package gateway

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"lemo/actors"
	"lemo/api"
)

func inspectReq() *api.Request {
	return &api.Request{Command: &api.Request_Inspect{Inspect: &api.InspectRequest{}}}
}

func stopCallReq(task, call string) *api.Request {
	return &api.Request{Command: &api.Request_StopCall{StopCall: &api.StopCallRequest{TaskId: task, CallId: call}}}
}

func TestValidateInspection(t *testing.T) {
	cases := []struct {
		name string
		req  *api.Request
		want api.ErrorCode
	}{
		{"inspect", inspectReq(), 0},
		{"stop call", stopCallReq("T", "call-1-1"), 0},
		{"stop call without call id", stopCallReq("T", ""), api.ErrorCode_ERROR_CODE_INVALID},
		{"stop call with a long call id", stopCallReq("T", strings.Repeat("c", maxIDBytes+1)), api.ErrorCode_ERROR_CODE_INVALID},
		{"stop call with a bad task id", stopCallReq("a/b", "c"), api.ErrorCode_ERROR_CODE_INVALID},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tc.req.Id = 3
			var got api.ErrorCode
			if err := validate(tc.req); err != nil {
				got = err.code
			}
			if got != tc.want {
				t.Fatalf("validate = %v, want %v", got, tc.want)
			}
		})
	}
}

// Only operators read the actor tree and stop calls; everyone else gets a
// typed permission error, whatever the Task.
func TestInspectIsForOperators(t *testing.T) {
	h := newHarness(t, Limits{}, nil)
	a, op := h.connect(alice), h.connect(operator)
	id := mustTask(t, a.call(create("fake/loop", "keep ticking"))).GetTaskId()
	t.Cleanup(func() { a.call(taskRef("cancel", id)) })

	for _, req := range []*api.Request{inspectReq(), stopCallReq(id, "call-1-1")} {
		if got := errCode(a.call(req)); got != api.ErrorCode_ERROR_CODE_PERMISSION_DENIED {
			t.Errorf("alice %T: code %v, want PERMISSION_DENIED", req.GetCommand(), got)
		}
	}

	// The operator sees the tree, parents first, with the Task's actor in
	// its state.
	deadline := time.Now().Add(10 * time.Second)
	var tree *api.ActorTree
	for {
		tree = op.call(inspectReq()).GetActors()
		if tree == nil {
			t.Fatal("inspect answered no tree")
		}
		if a := find(tree, "daemon/tasks/"+id); a != nil && a.GetState() == "running" && a.GetProcessed() > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the Task's actor never showed as running: %v", tree)
		}
		time.Sleep(5 * time.Millisecond)
	}
	if tree.GetTime() == nil {
		t.Error("the tree has no time")
	}
	kinds := map[string]string{"daemon": "daemon", "daemon/hub": "hub", "daemon/tasks": "tasks", "daemon/tasks/" + id: "task"}
	for path, kind := range kinds {
		a := find(tree, path)
		if a == nil || a.GetKind() != kind || a.GetStarted() == nil {
			t.Errorf("actor %s = %v, want kind %s with a start time", path, a, kind)
		}
	}
	seen := map[string]bool{}
	for _, a := range tree.GetActors() {
		if i := strings.LastIndex(a.GetId(), "/"); i > 0 && !seen[a.GetId()[:i]] {
			t.Errorf("actor %s comes before its parent", a.GetId())
		}
		seen[a.GetId()] = true
	}
	// A call that is not running reads as not found for the operator too.
	if got := errCode(op.call(stopCallReq(id, "call-999-1"))); got != api.ErrorCode_ERROR_CODE_NOT_FOUND {
		t.Errorf("operator stops a call that is not running: code %v, want NOT_FOUND", got)
	}
}

func find(tree *api.ActorTree, id string) *api.ActorInfo {
	for _, a := range tree.GetActors() {
		if a.GetId() == id {
			return a
		}
	}
	return nil
}

// fakeInspector records the stops it is asked for.
type fakeInspector struct {
	mu    sync.Mutex
	stops []string
	tree  []actors.ActorInfo
}

func (f *fakeInspector) Inspect() []actors.ActorInfo { return f.tree }

func (f *fakeInspector) StopCall(ctx context.Context, c actors.Caller, taskID, callID string) (*api.TaskMeta, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.stops = append(f.stops, c.Owner+" "+taskID+" "+callID)
	return &api.TaskMeta{TaskId: taskID, Status: api.TaskStatus_TASK_STATUS_RUNNING}, nil
}

// The gateway converts the tree faithfully and passes a stop to the
// daemon as the operator.
func TestInspectConvertsAndStops(t *testing.T) {
	h := newHarness(t, Limits{}, nil)
	since := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	fi := &fakeInspector{tree: []actors.ActorInfo{
		{ID: "daemon", Kind: "daemon", Started: since},
		{ID: "daemon/tasks/T/tool-call-1-1", Kind: "tool", State: "running shell.run", StateSince: since, Mailbox: 3, Processed: 7, Restarts: 1,
			LastFailure: strings.Repeat("é", 2000), StoppedChildren: 2, LastDecision: "session-pi: stop (panic): " + strings.Repeat("x", 5000)},
	}}
	h.g.cfg.Inspector = fi
	op := h.connect(operator)
	tree := op.call(inspectReq()).GetActors()
	if len(tree.GetActors()) != 2 {
		t.Fatalf("tree = %v", tree)
	}
	tool := tree.GetActors()[1]
	if tool.GetKind() != "tool" || tool.GetState() != "running shell.run" || !tool.GetStateSince().AsTime().Equal(since) ||
		tool.GetMailbox() != 3 || tool.GetProcessed() != 7 || tool.GetRestarts() != 1 {
		t.Errorf("tool actor = %v", tool)
	}
	if f := tool.GetLastFailure(); len(f) > maxFailureBytes || !strings.HasSuffix(f, "...") || !strings.HasPrefix(f, "éé") {
		t.Errorf("last failure of %d bytes not bounded on a rune boundary: %q…", len(f), f[:10])
	}
	if d := tool.GetLastDecision(); tool.GetStoppedChildren() != 2 || len(d) > maxFailureBytes || !strings.HasPrefix(d, "session-pi: stop (panic): xx") {
		t.Errorf("supervision of the tool actor: %d stopped children, last decision of %d bytes %q…; want 2 and the decision bounded", tool.GetStoppedChildren(), len(d), d[:min(len(d), 30)])
	}
	if tree.GetActors()[0].GetStateSince() != nil {
		t.Errorf("an actor without a state has a state time: %v", tree.GetActors()[0])
	}
	if m := mustTask(t, op.call(stopCallReq("T", "call-1-1"))); m.GetTaskId() != "T" {
		t.Errorf("stop_call answered %v", m)
	}
	fi.mu.Lock()
	defer fi.mu.Unlock()
	if len(fi.stops) != 1 || fi.stops[0] != "root T call-1-1" {
		t.Errorf("stops = %q, want one by the operator", fi.stops)
	}
}
