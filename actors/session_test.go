package actors_test

import (
	"context"
	"encoding/json"
	"sync/atomic"
	"testing"

	"lemo/actors"
	"lemo/api"
	"lemo/providers"
	"lemo/providers/fake"
	"lemo/tools"
)

// sessionTool starts a session that echoes its inbox until its context
// ends; "wait" keeps the call running until cancelled.
type sessionTool struct {
	echoTool
	ended *atomic.Int32
}

type echoSession struct {
	out   chan any
	ended *atomic.Int32
}

func (s *echoSession) Run(ctx context.Context, inbox <-chan any) error {
	defer s.ended.Add(1)
	for {
		select {
		case m := <-inbox:
			s.out <- m
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

func (sessionTool) Name() string { return "test.session" }
func (t sessionTool) Execute(ctx context.Context, c tools.Call, emit tools.Emit) (json.RawMessage, error) {
	s := &echoSession{out: make(chan any, 1), ended: t.ended}
	if _, err := c.Sessions.Start("bad name!", s); err == nil {
		return nil, errNotYet
	}
	h, err := c.Sessions.Start("echo", s)
	if err != nil {
		return nil, err
	}
	if !h.Send("ping") {
		return nil, errNotYet
	}
	got := <-s.out
	var in struct{ Text string }
	_ = json.Unmarshal(c.Input, &in)
	if in.Text == "wait" {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	return json.Marshal(map[string]any{"echo": got})
}

func TestSessionsEndWithTheirCall(t *testing.T) {
	ended := new(atomic.Int32)
	h := newHarness(t, func(n int, req *providers.Request) fake.Turn {
		if !hasTool(req) {
			return fake.Turn{ToolCalls: []providers.ToolCall{call("p", "test_session", req.Messages[0].Content)}}
		}
		return fake.Turn{Text: "done"}
	}, sessionTool{ended: ended})
	done := h.create("done")
	evs := h.waitStatus(done, api.TaskStatus_TASK_STATUS_FINISHED)
	if !has(evs, func(e *api.Event) bool { return string(e.GetToolResult().GetRetainedOutput()) == `{"echo":"ping"}` }) {
		t.Fatalf("session did not answer:\n%s", dump(evs))
	}
	eventually(t, "session of a finished call ended", func() error {
		if ended.Load() != 1 {
			return errNotYet
		}
		return nil
	})
	wait := h.create("wait")
	h.waitFor(wait, "call running", func(evs []*api.Event) bool {
		return has(evs, func(e *api.Event) bool { return e.GetToolExecutionStarted() != nil })
	})
	if _, err := h.d.Cancel(context.Background(), actors.Operator, wait); err != nil {
		t.Fatal(err)
	}
	eventually(t, "session of a cancelled call ended", func() error {
		if ended.Load() != 2 {
			return errNotYet
		}
		return nil
	})
}

// presentTool's output holds more than the model should see.
type presentTool struct{ echoTool }

func (presentTool) Name() string { return "test.present" }
func (presentTool) Execute(ctx context.Context, c tools.Call, emit tools.Emit) (json.RawMessage, error) {
	return json.RawMessage(`{"echo":"shown","live":"everything"}`), nil
}
func (presentTool) Retain(out, in json.RawMessage) json.RawMessage { return nil }
func (presentTool) Present(out json.RawMessage) json.RawMessage {
	return json.RawMessage(`{"echo":"shown"}`)
}

func TestModelSeesThePresentedLiveResult(t *testing.T) {
	h := newHarness(t, fake.Sequence(
		fake.Turn{ToolCalls: []providers.ToolCall{call("p", "test_present", "x")}},
		fake.Turn{Text: "done"},
	), presentTool{})
	id := h.create("present")
	h.waitStatus(id, api.TaskStatus_TASK_STATUS_FINISHED)
	if got, _ := toolMessage(h.model.Requests()[1], "call-1-1"); got != `{"echo":"shown"}` {
		t.Fatalf("the model saw %q, want the presented view", got)
	}
}

func TestInspectShowsTheLiveTree(t *testing.T) {
	h := newHarness(t, fake.Sequence(
		fake.Turn{ToolCalls: []providers.ToolCall{call("p", "test_block", "inspect")}},
		fake.Turn{Text: "done"},
	))
	id := h.create("inspect")
	eventually(t, "tool running", func() error {
		if !h.blocks.isRunning("inspect") {
			return errNotYet
		}
		return nil
	})
	byID := map[string]actors.ActorInfo{}
	var order []string
	for _, a := range h.d.Inspect() {
		byID[a.ID] = a
		order = append(order, a.ID)
	}
	taskPath := "daemon/tasks/" + id
	toolPath := taskPath + "/tool-call-1-1"
	for path, kind := range map[string]string{"daemon": "daemon", "daemon/hub": "hub", "daemon/tasks": "tasks", taskPath: "task", toolPath: "tool"} {
		if byID[path].Kind != kind {
			t.Fatalf("actor %s = %+v, want kind %s; tree %v", path, byID[path], kind, order)
		}
	}
	if byID[taskPath].State != "running" || byID[toolPath].State != "running test.block" || byID[taskPath].Processed == 0 {
		t.Fatalf("task %+v, tool %+v", byID[taskPath], byID[toolPath])
	}
	h.blocks.release("inspect")
	h.waitStatus(id, api.TaskStatus_TASK_STATUS_FINISHED)
	eventually(t, "tool actor gone", func() error {
		for _, a := range h.d.Inspect() {
			if a.ID == toolPath {
				return errNotYet
			}
		}
		return nil
	})
}
