package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"lemo/actors/services"
	"lemo/api"
	"lemo/providers"
	"lemo/tools"
	"lemo/tools/system"
)

func TestCommands(t *testing.T) {
	h := newHarness(t, Limits{}, nil)
	c := h.connect(alice)
	if w := c.welcome; w.GetOwner() != "alice" || w.GetOperator() || w.GetCreditWindow() != 256 || w.GetProtocolVersion() != api.ProtocolVersion {
		t.Fatalf("welcome = %v", w)
	}
	meta := mustTask(t, c.call(create("fake/echo", "hello")))
	if meta.GetOwner() != "alice" || meta.GetModel() != "fake/echo" {
		t.Fatalf("created %v", meta)
	}
	id := meta.GetTaskId()
	h.waitStatus(id, api.TaskStatus_TASK_STATUS_FINISHED)

	if got := mustTask(t, c.call(taskRef("get", id))); got.GetStatus() != api.TaskStatus_TASK_STATUS_FINISHED {
		t.Errorf("get_task status = %v", got.GetStatus())
	}
	list := c.call(&api.Request{Command: &api.Request_ListTasks{ListTasks: &api.ListTasksRequest{}}}).GetTasks()
	if len(list.GetTasks()) != 1 || list.GetTasks()[0].GetTaskId() != id {
		t.Errorf("list_tasks = %v", list)
	}
	hist := c.call(&api.Request{Command: &api.Request_History{History: &api.HistoryRequest{TaskId: id, FromSeq: 1, Limit: 3}}}).GetHistory()
	if len(hist.GetEvents()) != 3 || hist.GetNextSeq() != 4 || hist.GetLastSeq() < 7 {
		t.Errorf("history page = %d events, next %d, last %d", len(hist.GetEvents()), hist.GetNextSeq(), hist.GetLastSeq())
	}
	rest := c.call(&api.Request{Command: &api.Request_History{History: &api.HistoryRequest{TaskId: id, FromSeq: 4}}}).GetHistory()
	if rest.GetNextSeq() != 0 || contiguous(rest.GetEvents(), 4) != nil || rest.GetEvents()[len(rest.GetEvents())-1].GetSeq() != rest.GetLastSeq() {
		t.Errorf("history rest: next %d, %v", rest.GetNextSeq(), contiguous(rest.GetEvents(), 4))
	}
	tl := c.call(&api.Request{Command: &api.Request_ListTools{ListTools: &api.ListToolsRequest{}}}).GetTools().GetTools()
	if len(tl) != 2 || tl[0].GetName() != "system" || tl[0].GetView() != "system" || !tl[0].GetUntrusted() || len(tl[0].GetInputSchema()) == 0 || tl[1].GetModelName() != "test_tick" {
		t.Errorf("list_tools = %v", tl)
	}
	// A source whose tools are not listed yet (an MCP server not up) is
	// listed with why.
	h.reg.SetPending(func() []tools.Pending {
		return []tools.Pending{{Source: "mcp server late", Prefix: "mcp.late.", State: "listing failed: refused; retrying in 8s"}}
	})
	pl := c.call(&api.Request{Command: &api.Request_ListTools{ListTools: &api.ListToolsRequest{}}}).GetTools()
	if p := pl.GetPending(); len(p) != 1 || p[0].GetSource() != "mcp server late" || p[0].GetPrefix() != "mcp.late." || p[0].GetState() != "listing failed: refused; retrying in 8s" || len(pl.GetTools()) != 2 {
		t.Errorf("list_tools with a pending source = %v", pl)
	}
	h.reg.SetPending(nil)
	ml := c.call(&api.Request{Command: &api.Request_ListModels{ListModels: &api.ListModelsRequest{}}}).GetModels()
	if len(ml.GetModels()) != 3 || ml.GetModels()[0].GetId() != "fake/echo" || ml.GetModels()[0].GetWindow() != 8192 {
		t.Errorf("list_models = %v", ml)
	}

	cases := []struct {
		name string
		req  *api.Request
		want api.ErrorCode
	}{
		{"pause a finished task", taskRef("pause", id), api.ErrorCode_ERROR_CODE_CONFLICT},
		{"unknown task", taskRef("get", "NOSUCHTASK"), api.ErrorCode_ERROR_CODE_NOT_FOUND},
		{"malformed task id", taskRef("get", "a/b"), api.ErrorCode_ERROR_CODE_INVALID},
		{"unknown model", create("fake/nope", "x"), api.ErrorCode_ERROR_CODE_INVALID},
		{"no model and no default", create("", "x"), api.ErrorCode_ERROR_CODE_INVALID},
		{"empty command", &api.Request{}, api.ErrorCode_ERROR_CODE_INVALID},
		{"hello again", &api.Request{Command: &api.Request_Hello{Hello: &api.Hello{ProtocolVersion: 1}}}, api.ErrorCode_ERROR_CODE_INVALID},
		{"unsubscribe unknown", &api.Request{Command: &api.Request_Unsubscribe{Unsubscribe: &api.UnsubscribeRequest{Subscription: 9}}}, api.ErrorCode_ERROR_CODE_NOT_FOUND},
		{"unknown approval", &api.Request{Command: &api.Request_ResolveApproval{ResolveApproval: &api.ResolveApprovalRequest{ApprovalId: id + ".call-9"}}}, api.ErrorCode_ERROR_CODE_NOT_FOUND},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := errCode(c.call(tc.req)); got != tc.want {
				t.Fatalf("error code = %v, want %v", got, tc.want)
			}
		})
	}

	// A follow-up reopens the Task; cancel ends it.
	if m := mustTask(t, c.call(&api.Request{Command: &api.Request_SendMessage{SendMessage: &api.SendMessageRequest{TaskId: id, Text: "again"}}})); m.GetStatus() != api.TaskStatus_TASK_STATUS_RUNNING {
		t.Errorf("send_message status = %v", m.GetStatus())
	}
	h.waitStatus(id, api.TaskStatus_TASK_STATUS_FINISHED)
	if m := mustTask(t, c.call(taskRef("cancel", id))); m.GetStatus() != api.TaskStatus_TASK_STATUS_CANCELLED {
		t.Errorf("cancel status = %v", m.GetStatus())
	}
	if approvals := c.call(&api.Request{Command: &api.Request_ListApprovals{ListApprovals: &api.ListApprovalsRequest{}}}); approvals.GetApprovals() == nil {
		t.Errorf("list_approvals = %v", approvals)
	}
}

func TestGatewayAcceptsOnlyHello(t *testing.T) {
	h := newHarness(t, Limits{}, nil)
	c := h.connect(alice)
	if got := errCode(c.callTo(h.g.pid, create("fake/echo", "x"))); got != api.ErrorCode_ERROR_CODE_INVALID {
		t.Fatalf("create sent to the gateway: code %v, want INVALID", got)
	}
}

// A Task of another owner reads as not found for every command, and never
// shows in lists or subscriptions; an operator sees it.
func TestOwnerScoping(t *testing.T) {
	h := newHarness(t, Limits{}, nil)
	a, b, op := h.connect(alice), h.connect(bob), h.connect(operator)
	// Bob follows every Task he may see from before alice's Task exists.
	if r := b.call(subscribe(1, "", 0)); r.GetSubscribed() == nil {
		t.Fatalf("subscribe all: %v", r)
	}
	id := mustTask(t, a.call(create("fake/echo", "alice's secret"))).GetTaskId()
	h.waitStatus(id, api.TaskStatus_TASK_STATUS_FINISHED)

	foreign := []*api.Request{
		taskRef("get", id), taskRef("pause", id), taskRef("cancel", id),
		{Command: &api.Request_SendMessage{SendMessage: &api.SendMessageRequest{TaskId: id, Text: "hi"}}},
		{Command: &api.Request_ContinueTask{ContinueTask: &api.ContinueRequest{TaskId: id}}},
		{Command: &api.Request_History{History: &api.HistoryRequest{TaskId: id}}},
		subscribe(2, id, 1),
		{Command: &api.Request_Steer{Steer: &api.SteerRequest{TaskId: id, CallId: "c1", Input: []byte(`{}`)}}},
		{Command: &api.Request_ResolveApproval{ResolveApproval: &api.ResolveApprovalRequest{ApprovalId: id + ".call-1-1"}}},
		{Command: &api.Request_RaiseBudget{RaiseBudget: &api.RaiseBudgetRequest{TaskId: id, Add: &api.BudgetAmounts{Tokens: 1}}}},
	}
	for _, req := range foreign {
		if got := errCode(b.call(req)); got != api.ErrorCode_ERROR_CODE_NOT_FOUND {
			t.Errorf("bob %T on alice's task: code %v, want NOT_FOUND", req.GetCommand(), got)
		}
	}
	// An owner's daily budget: bob sees his own day, not alice's; only an
	// operator raises one.
	ownerBudget := func(owner string) *api.Request {
		return &api.Request{Command: &api.Request_OwnerBudget{OwnerBudget: &api.OwnerBudgetRequest{Owner: owner}}}
	}
	if got := errCode(b.call(ownerBudget("alice"))); got != api.ErrorCode_ERROR_CODE_NOT_FOUND {
		t.Errorf("bob asks for alice's daily budget: code %v, want NOT_FOUND", got)
	}
	if ob := b.call(ownerBudget("bob")).GetOwnerBudget(); ob.GetOwner() != "bob" || ob.GetResets() == nil {
		t.Errorf("bob's own daily budget = %v", ob)
	}
	raiseDay := &api.Request{Command: &api.Request_RaiseBudget{RaiseBudget: &api.RaiseBudgetRequest{Owner: "bob", Add: &api.BudgetAmounts{Tokens: 1}}}}
	if got := errCode(b.call(raiseDay)); got != api.ErrorCode_ERROR_CODE_PERMISSION_DENIED {
		t.Errorf("bob raises his own daily budget: code %v, want PERMISSION_DENIED", got)
	}
	if got := errCode(b.call(ownerBudget("a/b"))); got != api.ErrorCode_ERROR_CODE_INVALID {
		t.Errorf("an invalid owner: code %v, want INVALID", got)
	}
	if l := b.call(&api.Request{Command: &api.Request_ListTasks{ListTasks: &api.ListTasksRequest{}}}).GetTasks(); len(l.GetTasks()) != 0 {
		t.Errorf("bob lists %v", l.GetTasks())
	}
	// Bob's own Task's events reach his subscription; alice's never did.
	own := mustTask(t, b.call(create("fake/echo", "bob's"))).GetTaskId()
	us := b.waitUpdates(1, "bob's task to finish", func(us []*api.Update) bool { return hasStatus(us, api.TaskStatus_TASK_STATUS_FINISHED) })
	for _, u := range us {
		if task := u.GetEvent().GetTaskId() + u.GetDelta().GetTaskId(); task != "" && task != own {
			t.Fatalf("bob received an update of task %s: %v", task, u)
		}
	}
	if m := mustTask(t, op.call(taskRef("get", id))); m.GetOwner() != "alice" {
		t.Errorf("operator get = %v", m)
	}
	if l := op.call(&api.Request{Command: &api.Request_ListTasks{ListTasks: &api.ListTasksRequest{}}}).GetTasks(); len(l.GetTasks()) != 2 {
		t.Errorf("operator lists %d tasks, want 2", len(l.GetTasks()))
	}
}

// A subscription taken while the Task appends replays from the requested
// seq and continues live: every seq once, in order, equal to history.
func TestSubscribeIsGapFree(t *testing.T) {
	// Small pages: the replay takes many reads while the Task appends, so
	// live events and replayed ones overlap and must be deduplicated.
	h := newHarness(t, Limits{CreditWindow: 16, SnapshotPage: 3}, nil)
	c := h.connect(alice)
	id := mustTask(t, c.call(create("fake/loop", "go"))).GetTaskId()
	// Let it append for a while, then subscribe from the start.
	deadline := time.Now().Add(10 * time.Second)
	for {
		m, _ := h.d.Task(context.Background(), alice.Caller(), id)
		if m.GetLastSeq() >= 20 || time.Now().After(deadline) {
			break
		}
		time.Sleep(time.Millisecond)
	}
	if r := c.call(subscribe(1, id, 1)); r.GetSubscribed().GetTask().GetTaskId() != id {
		t.Fatalf("subscribe: %v", r)
	}
	acked := 0
	us := c.waitUpdates(1, "the task to pause at the cycle limit", func(us []*api.Update) bool {
		if n := len(us) - acked; n > 0 {
			// Acknowledge as a client reading them would.
			go c.ack(1, n)
			acked = len(us)
		}
		return hasStatus(us, api.TaskStatus_TASK_STATUS_PAUSED)
	})
	evs := events(us)
	if err := contiguous(evs, 1); err != nil {
		t.Fatal(err)
	}
	caught := 0
	for i, u := range us {
		if u.GetCaughtUp() != nil {
			caught++
			if i == 0 {
				t.Errorf("CaughtUp before any replayed event")
			}
		}
	}
	if caught != 1 {
		t.Errorf("CaughtUp %d times, want 1", caught)
	}
	hist, err := h.d.History(context.Background(), alice.Caller(), id, 1, 0)
	if err != nil {
		t.Fatal(err)
	}
	for i, ev := range evs {
		if !proto.Equal(ev, hist[i]) {
			t.Fatalf("event seq %d differs from history", ev.GetSeq())
		}
	}
}

func TestSubscribeResumesEveryTask(t *testing.T) {
	h := newHarness(t, Limits{}, nil)
	c := h.connect(alice)
	id := mustTask(t, c.call(create("fake/echo", "one"))).GetTaskId()
	h.waitStatus(id, api.TaskStatus_TASK_STATUS_FINISHED)
	r := c.call(&api.Request{Command: &api.Request_Subscribe{Subscribe: &api.SubscribeRequest{Subscription: 5, Resume: []*api.TaskSeq{{TaskId: id, Seq: 3}, {TaskId: "NOTATASK", Seq: 1}}}}})
	if r.GetSubscribed() == nil {
		t.Fatalf("subscribe: %v", r)
	}
	us := c.waitUpdates(5, "the replay", func(us []*api.Update) bool { return len(us) > 0 && us[len(us)-1].GetCaughtUp() != nil })
	if err := contiguous(events(us), 4); err != nil || len(events(us)) == 0 {
		t.Fatalf("replay after seq 3: %v (%d events)", err, len(events(us)))
	}
	// Live: a follow-up's events arrive after the replay, none repeated.
	c.call(&api.Request{Command: &api.Request_SendMessage{SendMessage: &api.SendMessageRequest{TaskId: id, Text: "two"}}})
	us = c.waitUpdates(5, "the follow-up", func(us []*api.Update) bool {
		return len(events(us)) > 0 && events(us)[len(events(us))-1].GetStatusChanged().GetStatus() == api.TaskStatus_TASK_STATUS_FINISHED && len(events(us)) > 5
	})
	if err := contiguous(events(us), 4); err != nil {
		t.Fatal(err)
	}
}

// Without acknowledgements a subscription sends at most its window; acks
// release more; no_deltas leaves deltas out.
func TestCreditWindow(t *testing.T) {
	h := newHarness(t, Limits{CreditWindow: 8}, nil)
	c := h.connect(alice)
	// Subscribed before the Task exists, so its 200 deltas all come.
	c.call(subscribe(1, "", 0))
	id := mustTask(t, c.call(create("fake/words", "words 200"))).GetTaskId()
	h.waitStatus(id, api.TaskStatus_TASK_STATUS_FINISHED)
	c.waitUpdates(1, "the first window", func(us []*api.Update) bool { return len(us) >= 8 })
	// The Task finished and all its updates were offered: still 8 sent.
	// One more message round trip through the session proves the pump had
	// its chance to (wrongly) send more.
	c.call(taskRef("get", id))
	if n := len(c.updatesOf(1)); n != 8 {
		t.Fatalf("sent %d updates without acknowledgement, want 8", n)
	}
	c.ack(1, 8)
	c.waitUpdates(1, "the second window", func(us []*api.Update) bool { return len(us) >= 16 })
	c.call(taskRef("get", id))
	if n := len(c.updatesOf(1)); n != 16 {
		t.Fatalf("after acking 8: %d updates, want 16", n)
	}

	r := c.call(&api.Request{Command: &api.Request_Subscribe{Subscribe: &api.SubscribeRequest{Subscription: 2, TaskId: id, FromSeq: 1, NoDeltas: true}}})
	if r.GetSubscribed() == nil {
		t.Fatal(r)
	}
	us := c.waitUpdates(2, "the replay", func(us []*api.Update) bool { return len(us) >= 8 })
	for _, u := range us {
		if u.GetDelta() != nil {
			t.Fatalf("no_deltas subscription got a delta")
		}
	}
}

// A client that does not acknowledge is told it fell behind, with the last
// seq sent; the Task is not slowed; it resumes from there.
func TestFellBehind(t *testing.T) {
	h := newHarness(t, Limits{CreditWindow: 4, MaxQueue: 32}, nil)
	c := h.connect(alice)
	c.call(subscribe(1, "", 0))
	id := mustTask(t, c.call(create("fake/words", "words 500"))).GetTaskId()
	us := c.waitUpdates(1, "fell behind", func(us []*api.Update) bool {
		return len(us) > 0 && us[len(us)-1].GetFellBehind() != nil
	})
	h.waitStatus(id, api.TaskStatus_TASK_STATUS_FINISHED)
	if len(us) != 5 || us[0].GetCaughtUp() == nil {
		t.Errorf("%d updates before FellBehind, want the window of 4 (CaughtUp first) and the notice", len(us))
	}
	last := uint64(0)
	for _, ts := range us[len(us)-1].GetFellBehind().GetLast() {
		if ts.GetTaskId() == id {
			last = ts.GetSeq()
		}
	}
	if got := events(us); len(got) == 0 || got[len(got)-1].GetSeq() != last {
		t.Fatalf("FellBehind last seq %d, events sent %v", last, got)
	}
	// The subscription is over: an ack changes nothing, a new one resumes.
	c.call(subscribe(2, id, last+1))
	acked := 0
	rest := c.waitUpdates(2, "the rest", func(us []*api.Update) bool {
		if n := len(us) - acked; n > 0 {
			go c.ack(2, n)
			acked = len(us)
		}
		return hasStatus(us, api.TaskStatus_TASK_STATUS_FINISHED)
	})
	all := append(events(us), events(rest)...)
	if err := contiguous(all, 1); err != nil {
		t.Fatal(err)
	}
}

// A client that goes away ends its session: subscriptions and Services go
// with it, and its calls in flight fail.
func TestSessionEndsWithItsClient(t *testing.T) {
	h := newHarness(t, Limits{}, nil)
	c := h.connect(alice)
	spec := &api.ServiceSpec{Name: "echo", Operations: []*api.ServiceOperation{{Name: "say", InputSchema: []byte(`{"type":"object","required":["text"]}`)}}}
	if r := c.call(&api.Request{Command: &api.Request_RegisterService{RegisterService: &api.RegisterServiceRequest{Service: spec}}}); r.GetDone() == nil {
		t.Fatalf("register: %v", r)
	}
	c.call(subscribe(1, "", 0))
	errc := make(chan error, 1)
	go func() {
		_, err := h.svcs.Execute(context.Background(), system.Request{Owner: "alice", Service: "echo", Operation: "say", Input: json.RawMessage(`{"text":"hi"}`)})
		errc <- err
	}()
	c.wait("the service call", func() bool { return len(c.calls) == 1 })
	c.stop()
	if err := <-errc; !errors.Is(err, services.ErrGone) {
		t.Fatalf("call in flight: %v, want ErrGone", err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		h.g.guard.mu.Lock()
		n := len(h.g.guard.sessions)
		h.g.guard.mu.Unlock()
		if n == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d sessions left after the client stopped", n)
		}
		time.Sleep(time.Millisecond)
	}
	if _, err := h.svcs.Execute(context.Background(), system.Request{Owner: "alice", Service: "echo", Operation: "say", Input: json.RawMessage(`{"text":"hi"}`)}); !errors.Is(err, services.ErrNotFound) {
		t.Fatalf("after the client left: %v, want ErrNotFound", err)
	}
}

func TestServices(t *testing.T) {
	h := newHarness(t, Limits{}, nil)
	a, b := h.connect(alice), h.connect(bob)
	spec := &api.ServiceSpec{Name: "calc", Description: "adds", Operations: []*api.ServiceOperation{{
		Name: "add", InputSchema: []byte(`{"type":"object","properties":{"a":{"type":"number"},"b":{"type":"number"}},"required":["a","b"]}`),
		ResultSchema: []byte(`{"type":"number"}`),
	}}}
	reg := &api.Request{Command: &api.Request_RegisterService{RegisterService: &api.RegisterServiceRequest{Service: spec}}}
	if r := a.call(reg); r.GetDone() == nil {
		t.Fatalf("register: %v", r)
	}
	if got := errCode(b.call(reg)); got != api.ErrorCode_ERROR_CODE_CONFLICT {
		t.Errorf("bob registers alice's name: %v, want CONFLICT", got)
	}
	if l := h.svcs.List("bob"); len(l) != 0 {
		t.Errorf("bob sees %v", l)
	}
	if l := h.svcs.List("alice"); len(l) != 1 || l[0].Operations[0].Name != "add" {
		t.Errorf("alice sees %v", l)
	}
	exec := func(input string, timeout time.Duration) (json.RawMessage, error) {
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		return h.svcs.Execute(ctx, system.Request{Owner: "alice", TaskID: "T", CallID: "c1", Service: "calc", Operation: "add", Input: json.RawMessage(input)})
	}
	if _, err := exec(`{"a":1}`, time.Second); !errors.Is(err, services.ErrInvalid) {
		t.Errorf("invalid input: %v", err)
	}
	type result struct {
		out json.RawMessage
		err error
	}
	res := make(chan result, 1)
	go func() {
		out, err := exec(`{"a":1,"b":2}`, 10*time.Second)
		res <- result{out, err}
	}()
	a.wait("the call", func() bool { return len(a.calls) == 1 })
	call := a.calls[0]
	if call.GetOperation() != "add" || call.GetTaskId() != "T" || call.GetOwner() != "alice" || call.GetDeadline() == nil {
		t.Errorf("call = %v", call)
	}
	// Only the program that was asked may answer.
	if got := errCode(b.call(&api.Request{Command: &api.Request_ServiceResult{ServiceResult: &api.ServiceResult{Call: call.GetCall(), Output: []byte(`666`)}}})); got != api.ErrorCode_ERROR_CODE_NOT_FOUND {
		t.Errorf("bob answers alice's call: %v", got)
	}
	if r := a.call(&api.Request{Command: &api.Request_ServiceResult{ServiceResult: &api.ServiceResult{Call: call.GetCall(), Output: []byte(`3`)}}}); r.GetDone() == nil {
		t.Errorf("answer: %v", r)
	}
	if r := <-res; r.err != nil || string(r.out) != "3" {
		t.Fatalf("Execute = %s, %v", r.out, r.err)
	}
	// No answer before the deadline.
	if _, err := exec(`{"a":1,"b":2}`, 50*time.Millisecond); !errors.Is(err, services.ErrTimeout) {
		t.Errorf("unanswered: %v, want ErrTimeout", err)
	}
	// A result that breaks the result schema, and a failure.
	go func() {
		out, err := exec(`{"a":1,"b":2}`, 10*time.Second)
		res <- result{out, err}
	}()
	a.wait("the third call", func() bool { return len(a.calls) == 3 })
	a.call(&api.Request{Command: &api.Request_ServiceResult{ServiceResult: &api.ServiceResult{Call: a.calls[2].GetCall(), Output: []byte(`"three"`)}}})
	if r := <-res; !errors.Is(r.err, services.ErrInvalid) {
		t.Errorf("result against its schema: %v", r.err)
	}
	if r := a.call(&api.Request{Command: &api.Request_UnregisterService{UnregisterService: &api.UnregisterServiceRequest{Name: "calc"}}}); r.GetDone() == nil {
		t.Errorf("unregister: %v", r)
	}
	if _, err := exec(`{"a":1,"b":2}`, time.Second); !errors.Is(err, services.ErrNotFound) || !strings.Contains(err.Error(), "not available") {
		t.Errorf("after unregistering: %v", err)
	}
}

// blockingModels holds ListModels until released.
type blockingModels struct{ release chan struct{} }

func (b blockingModels) Models(ctx context.Context) providers.Listing {
	select {
	case <-b.release:
	case <-ctx.Done():
	}
	return providers.Listing{}
}

func TestBusy(t *testing.T) {
	bm := blockingModels{release: make(chan struct{})}
	h := newHarness(t, Limits{MaxInflight: 2}, bm)
	c := h.connect(alice)
	listModels := &api.Request{Command: &api.Request_ListModels{ListModels: &api.ListModelsRequest{}}}
	first, second := c.send(proto.Clone(listModels).(*api.Request)), c.send(proto.Clone(listModels).(*api.Request))
	if got := errCode(c.call(taskRef("get", "NOSUCH"))); got != api.ErrorCode_ERROR_CODE_BUSY {
		t.Fatalf("third command in flight: %v, want BUSY", got)
	}
	close(bm.release)
	c.wait("the blocked commands", func() bool { return c.responses[first] != nil && c.responses[second] != nil })
	if got := errCode(c.call(taskRef("get", "NOSUCH"))); got != api.ErrorCode_ERROR_CODE_NOT_FOUND {
		t.Fatalf("after they finished: %v, want NOT_FOUND", got)
	}
}

// A history page larger than the message bound arrives as chunks.
func TestLargeAnswersAreChunked(t *testing.T) {
	h := newHarness(t, Limits{MaxMessageBytes: 2048}, nil)
	c := h.connect(alice)
	id := mustTask(t, c.call(create("fake/words", "words 2000"))).GetTaskId()
	h.waitStatus(id, api.TaskStatus_TASK_STATUS_FINISHED)
	r := c.call(&api.Request{Command: &api.Request_History{History: &api.HistoryRequest{TaskId: id}}})
	if len(r.GetHistory().GetEvents()) < 5 {
		t.Fatalf("history = %v", r)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.chunks) < 2 {
		t.Fatalf("%d chunks, want the large answer split", len(c.chunks))
	}
	for _, ch := range c.chunks {
		if proto.Size(ch) > 2048 {
			t.Fatalf("a chunk of %d bytes exceeds the bound", proto.Size(ch))
		}
	}
}

type panickingModels struct{}

func (panickingModels) Models(ctx context.Context) providers.Listing { panic("provider bug") }

// A command that panics inside the daemon is answered with an error; the
// session goes on.
func TestPanickingCommandIsAnswered(t *testing.T) {
	h := newHarness(t, Limits{}, panickingModels{})
	c := h.connect(alice)
	r := c.call(&api.Request{Command: &api.Request_ListModels{ListModels: &api.ListModelsRequest{}}})
	if errCode(r) != api.ErrorCode_ERROR_CODE_INTERNAL || !strings.Contains(r.GetError().GetMessage(), "provider bug") {
		t.Fatalf("answer = %v", r)
	}
	if got := errCode(c.call(taskRef("get", "NOSUCH"))); got != api.ErrorCode_ERROR_CODE_NOT_FOUND {
		t.Fatalf("the next command: %v", got)
	}
}

// Subscriptions of one principal share a hub subscription; each still gets
// every update; the last to leave closes it.
func TestFeedsAreShared(t *testing.T) {
	h := newHarness(t, Limits{}, nil)
	a1, a2, b := h.connect(alice), h.connect(alice), h.connect(bob)
	for i, c := range []*testClient{a1, a2, b} {
		if r := c.call(subscribe(1, "", 0)); r.GetSubscribed() == nil {
			t.Fatalf("client %d: %v", i, r)
		}
	}
	h.g.feeds.mu.Lock()
	n := len(h.g.feeds.m)
	h.g.feeds.mu.Unlock()
	if n != 2 {
		t.Fatalf("%d feeds for two principals, want 2", n)
	}
	id := mustTask(t, a1.call(create("fake/echo", "shared"))).GetTaskId()
	for _, c := range []*testClient{a1, a2} {
		us := c.waitUpdates(1, "the task's end", func(us []*api.Update) bool { return hasStatus(us, api.TaskStatus_TASK_STATUS_FINISHED) })
		if err := contiguous(events(us), 1); err != nil || events(us)[0].GetTaskId() != id {
			t.Fatalf("a listener of the shared feed: %v", err)
		}
	}
	if len(b.updatesOf(1)) != 1 { // only its CaughtUp
		t.Fatalf("bob got %d updates of alice's task", len(b.updatesOf(1))-1)
	}
	for _, c := range []*testClient{a1, a2, b} {
		c.call(&api.Request{Command: &api.Request_Unsubscribe{Unsubscribe: &api.UnsubscribeRequest{Subscription: 1}}})
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		h.g.feeds.mu.Lock()
		n = len(h.g.feeds.m)
		h.g.feeds.mu.Unlock()
		if n == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d feeds left after every subscription ended", n)
		}
		time.Sleep(time.Millisecond)
	}
}
