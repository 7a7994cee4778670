package delegate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"lemo/actors"
	"lemo/api"
	"lemo/persistence"
	"lemo/prompt"
	"lemo/providers"
	"lemo/providers/fake"
	"lemo/tools"
)

// daemon is a real actor tree on a real store with the delegate tools and
// a scripted model, as lemo serve builds it.
type daemon struct {
	t     testing.TB
	d     *actors.Daemon
	model *fake.ScriptedModel
	ws    string
}

func startDaemon(t testing.TB, dt *Tools, plan fake.Plan) *daemon {
	t.Helper()
	dir := t.TempDir()
	dd, err := persistence.OpenDataDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	store, err := persistence.Open(dd, persistence.Options{Log: zerolog.Nop(), MemTableSize: 4 << 20, BlockCacheSize: 4 << 20})
	if err != nil {
		t.Fatal(err)
	}
	reg := tools.NewRegistry()
	for _, tl := range dt.List() {
		if err := reg.Register(tl); err != nil {
			t.Fatal(err)
		}
	}
	model := fake.NewScriptedModel("m", 32768, plan)
	provs := providers.NewRegistry()
	if err := provs.Register(fake.NewScripted("fake", model)); err != nil {
		t.Fatal(err)
	}
	log := zerolog.Nop()
	if os.Getenv("DELEGATE_TEST_LOG") != "" {
		log = zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.DebugLevel)
	}
	// The Tasks work in a folder the daemon grants to operators.
	ws := t.TempDir()
	d, err := actors.Start(context.Background(), actors.Deps{Store: store, Providers: provs, Tools: reg, Log: log},
		actors.Options{WorkspaceRoot: t.TempDir(), DataDir: dir, WorkspaceGrants: []actors.WorkspaceGrant{{Owner: actors.OperatorGrant, Root: ws}},
			ToolGrace: 10 * time.Second, ShutdownTimeout: 20 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := d.Stop(context.Background()); err != nil {
			t.Errorf("Stop: %v", err)
		}
		store.Close()
		dd.Close()
	})
	return &daemon{t: t, d: d, model: model, ws: ws}
}

func (h *daemon) create(request string) string {
	h.t.Helper()
	m, err := h.d.CreateTask(context.Background(), actors.Operator, actors.CreateTask{Request: request, Model: "fake/m", Workspace: h.ws})
	if err != nil {
		h.t.Fatalf("CreateTask: %v", err)
	}
	return m.GetTaskId()
}

func (h *daemon) history(id string) []*api.Event {
	h.t.Helper()
	evs, err := h.d.History(context.Background(), actors.Operator, id, 1, 0)
	if err != nil {
		h.t.Fatal(err)
	}
	return evs
}

func dump(evs []*api.Event) string {
	var b strings.Builder
	for _, e := range evs {
		fmt.Fprintf(&b, "  %d %s %.300v\n", e.GetSeq(), api.Kind(e), e.GetBody())
	}
	return b.String()
}

// waitFor polls a Task's history until cond holds.
func (h *daemon) waitFor(id, what string, d time.Duration, cond func([]*api.Event) bool) []*api.Event {
	h.t.Helper()
	var evs []*api.Event
	deadline := time.Now().Add(d)
	for {
		evs = h.history(id)
		if cond(evs) {
			return evs
		}
		if time.Now().After(deadline) {
			h.t.Fatalf("task %s: timed out waiting for %s:\n%s", id, what, dump(evs))
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func (h *daemon) waitStatus(id string, st api.TaskStatus, d time.Duration) []*api.Event {
	h.t.Helper()
	return h.waitFor(id, st.String(), d, func(evs []*api.Event) bool {
		last := api.TaskStatus_TASK_STATUS_UNSPECIFIED
		for _, e := range evs {
			if sc := e.GetStatusChanged(); sc != nil {
				last = sc.GetStatus()
			}
		}
		return last == st
	})
}

func (h *daemon) pending(n int) []*api.Event {
	h.t.Helper()
	var got []*api.Event
	h.t.Cleanup(func() {
		if h.t.Failed() {
			ts, _, _ := h.d.ListTasks(context.Background(), actors.Operator, "", 0)
			for _, m := range ts {
				h.t.Logf("task %s:\n%s", m.GetTaskId(), dump(h.history(m.GetTaskId())))
			}
		}
	})
	eventually(h.t, 60*time.Second, fmt.Sprintf("%d pending approvals", n), func() error {
		var err error
		if got, err = h.d.PendingApprovals(context.Background(), actors.Operator); err != nil {
			return err
		}
		if len(got) != n {
			return errNotYet
		}
		return nil
	})
	return got
}

// results returns the Task's delegate.run results, in order.
func results(t testing.TB, evs []*api.Event) []Result {
	t.Helper()
	var out []Result
	for _, e := range evs {
		if r := e.GetToolResult(); r != nil && strings.HasPrefix(string(r.GetRetainedOutput()), `{"invocation"`) {
			var res Result
			if err := json.Unmarshal(r.GetRetainedOutput(), &res); err != nil {
				t.Fatal(err)
			}
			out = append(out, res)
		}
	}
	return out
}

func delegateCall(id string, in map[string]any) providers.ToolCall {
	return fake.ToolCall(id, "delegate_run", in)
}

// toolResults counts the tool results in a request.
func toolResults(req *providers.Request) []string {
	var out []string
	for _, m := range req.Messages {
		if m.Role == providers.RoleTool {
			out = append(out, m.Content)
		}
	}
	return out
}

// The whole path through the daemon: the agent's approval becomes a Lemo
// approval a person answers; a client steers the running call through the
// daemon's generic steer command; live state reaches subscribers; the
// model sees the result marked untrusted.
func TestDaemonApprovalSteeringAndLiveState(t *testing.T) {
	r := newRig(t, nil)
	h := startDaemon(t, r.dt, func(n int, req *providers.Request) fake.Turn {
		switch len(toolResults(req)) {
		case 0:
			return fake.Turn{ToolCalls: []providers.ToolCall{delegateCall("p1", map[string]any{"prompt": "run a TOOL"})}}
		case 1:
			return fake.Turn{ToolCalls: []providers.ToolCall{delegateCall("p2", map[string]any{"prompt": "go SLOW"})}}
		}
		return fake.Turn{Text: "all delegated"}
	})
	id := h.create("delegate things")
	sub, err := h.d.Subscribe(context.Background(), actors.Operator, actors.SubscribeOptions{TaskID: id, FromSeq: 1})
	if err != nil {
		t.Fatal(err)
	}
	var deltas []json.RawMessage
	var subDone sync.WaitGroup
	subDone.Add(1)
	go func() {
		defer subDone.Done()
		for u := range sub.C {
			if u.Delta != nil && u.Delta.GetKind() == api.DeltaKind_DELTA_KIND_TOOL_STATE {
				deltas = append(deltas, u.Delta.GetData())
			}
		}
	}()

	ps := h.pending(1)
	ar := ps[0].GetApprovalRequested()
	if !ar.GetDuringRun() || ar.GetTool() != RunName || !strings.Contains(ar.GetReason(), "Command: echo hello-from-tool") {
		t.Fatalf("approval = %v", ar)
	}
	if _, err := h.d.ResolveApproval(context.Background(), actors.Operator, ar.GetApprovalId(), true, ""); err != nil {
		t.Fatal(err)
	}
	h.waitFor(id, "the slow run", 20*time.Second, func(evs []*api.Event) bool {
		return len(results(t, evs)) == 1 && strings.Contains(dump(evs), "call-2-1")
	})
	eventually(t, 20*time.Second, "the steer to be taken", func() error {
		return h.d.Steer(context.Background(), actors.Operator, id, "call-2-1", json.RawMessage(`{"kind":"steer","message":"focus on tests"}`))
	})
	evs := h.waitStatus(id, api.TaskStatus_TASK_STATUS_FINISHED, 20*time.Second)
	res := results(t, evs)
	if len(res) != 2 || res[0].FinalAnswer != "Done. The tool said: hello-from-tool" || res[0].Summary.Approvals.Approved != 1 ||
		res[1].FinalAnswer != "steered: focus on tests" || res[1].Summary.Steers != 1 {
		t.Fatalf("results = %+v\n%s", res, dump(evs))
	}
	if err := h.d.Steer(context.Background(), actors.Operator, id, "call-2-1", json.RawMessage(`{"kind":"abort"}`)); !errors.Is(err, actors.ErrNotFound) {
		t.Fatalf("steering a finished call: %v", err)
	}
	reqs := h.model.Requests()
	if tr := toolResults(reqs[len(reqs)-1]); len(tr) != 2 || !strings.HasPrefix(tr[0], prompt.MarkUntrusted) {
		t.Fatalf("the model saw %q", tr)
	}
	sub.Close()
	subDone.Wait()
	sawEvents := false
	for _, d := range deltas {
		var st State
		if err := json.Unmarshal(d, &st); err != nil {
			t.Fatal(err)
		}
		sawEvents = sawEvents || len(st.Events) > 0
	}
	if len(deltas) < 3 || !sawEvents {
		t.Fatalf("live state: %d deltas", len(deltas))
	}
}

// A denied approval blocks the agent's tool; a user pause cancels a pending
// one (the agent is told no); cancelling the Task stops the agent.
func TestDaemonDenyPauseAndCancel(t *testing.T) {
	r := newRig(t, nil)
	h := startDaemon(t, r.dt, func(n int, req *providers.Request) fake.Turn {
		if len(toolResults(req)) == 0 {
			return fake.Turn{ToolCalls: []providers.ToolCall{delegateCall("p", map[string]any{"prompt": req.Messages[len(req.Messages)-1].Content})}}
		}
		return fake.Turn{Text: "ok"}
	})
	deny := h.create("run a TOOL")
	ps := h.pending(1)
	if _, err := h.d.ResolveApproval(context.Background(), actors.Operator, ps[0].GetApprovalRequested().GetApprovalId(), false, "not now"); err != nil {
		t.Fatal(err)
	}
	res := results(t, h.waitStatus(deny, api.TaskStatus_TASK_STATUS_FINISHED, 20*time.Second))
	if len(res) != 1 || res[0].FinalAnswer != "Done. The tool said: denied" || res[0].Summary.Approvals.Denied != 1 {
		t.Fatalf("denied: %+v", res)
	}

	pause := h.create("run a TOOL again")
	h.pending(1)
	if _, err := h.d.Pause(context.Background(), actors.Operator, pause); err != nil {
		t.Fatal(err)
	}
	evs := h.waitFor(pause, "the call's result", 20*time.Second, func(evs []*api.Event) bool { return len(results(t, evs)) == 1 })
	if res := results(t, evs); res[0].FinalAnswer != "Done. The tool said: denied" || res[0].Summary.Approvals.Cancelled != 1 {
		t.Fatalf("paused: %+v", res)
	}

	cancel := h.create("go SLOW")
	eventually(t, 20*time.Second, "the agent", func() error {
		if len(marked(t, r.mark)) == 0 {
			return errNotYet
		}
		return nil
	})
	if _, err := h.d.Cancel(context.Background(), actors.Operator, cancel); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "the agent to be stopped", func() error {
		if ps := marked(t, r.mark); len(ps) > 0 {
			return fmt.Errorf("alive: %v", ps)
		}
		return nil
	})
}

// A Task reaches only its own sessions: another Task's session id reads as
// not found, even in the same workspace and for the same owner.
func TestDaemonScopesSessionsToTheirTask(t *testing.T) {
	r := newRig(t, nil)
	var mu sync.Mutex
	var first string
	h := startDaemon(t, r.dt, func(n int, req *providers.Request) fake.Turn {
		mu.Lock()
		s := first
		mu.Unlock()
		last := req.Messages[len(req.Messages)-1]
		switch {
		case last.Role != providers.RoleUser:
			return fake.Turn{Text: "done"}
		case last.Content == "owner":
			return fake.Turn{ToolCalls: []providers.ToolCall{delegateCall("p", map[string]any{"prompt": "hello"})}}
		}
		// "other" (another Task) and "continue" (the owner again) resume.
		return fake.Turn{ToolCalls: []providers.ToolCall{delegateCall("p", map[string]any{"prompt": "HISTORY", "resume": s})}}
	})
	owner := h.create("owner")
	res := results(t, h.waitStatus(owner, api.TaskStatus_TASK_STATUS_FINISHED, 20*time.Second))
	mu.Lock()
	first = res[0].SessionID
	mu.Unlock()

	other := h.create("other")
	evs := h.waitStatus(other, api.TaskStatus_TASK_STATUS_FINISHED, 20*time.Second)
	failed := false
	for _, e := range evs {
		if f := e.GetToolFailed(); f != nil && strings.Contains(f.GetMessage(), "no such session") {
			failed = true
		}
	}
	if !failed || len(results(t, evs)) != 0 {
		t.Fatalf("another Task resumed the session:\n%s", dump(evs))
	}
	if _, err := h.d.SendMessage(context.Background(), actors.Operator, owner, "continue"); err != nil {
		t.Fatal(err)
	}
	evs = h.waitFor(owner, "the resumed run", 20*time.Second, func(evs []*api.Event) bool { return len(results(t, evs)) == 2 })
	if res := results(t, evs); !res[1].Resumed || res[1].SessionID != first || !strings.HasPrefix(res[1].FinalAnswer, "history: 3") {
		t.Fatalf("resumed: %+v", res[1])
	}
}
