package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/rs/zerolog"
	"go.uber.org/goleak"
	"google.golang.org/protobuf/proto"

	"lemo/actors"
	"lemo/actors/services"
	"lemo/api"
	"lemo/persistence"
	"lemo/providers"
	"lemo/providers/fake"
	"lemo/tools"
	"lemo/tools/system"
)

func TestMain(m *testing.M) {
	// protoactor's dead-letter throttle starts a goroutine per burst of
	// dead letters that sleeps for the throttle interval (1 s) and cannot
	// be stopped; it ends on its own. Messages to actors that just stopped
	// (a test client, an ended session) start one.
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction("github.com/asynkron/protoactor-go/actor.NewDeadLetter.NewThrottle.func4.1"))
}

// The principals of the tests.
var (
	alice    = Principal{Owner: "alice"}
	bob      = Principal{Owner: "bob"}
	operator = Principal{Owner: "root", Operator: true}
)

// harness is a daemon on a real store with a gateway whose remote layer is
// not started: test clients are local actors that send what the guard
// would let through (with its headers).
type harness struct {
	t     testing.TB
	dd    *persistence.DataDir
	store *persistence.Store
	d     *actors.Daemon
	g     *Gateway
	svcs  *services.Registry
	reg   *tools.Registry
}

// scripts are the harness's models: fake/echo, fake/loop (calls
// test.tick until the cycle limit), fake/words (streams n words).
func scripts() *fake.Scripted {
	loop := func(n int, req *providers.Request) fake.Turn {
		k := 0
		for _, m := range req.Messages {
			if m.Role == providers.RoleTool {
				k++
			}
		}
		return fake.Turn{Text: fmt.Sprintf("tick %d", k), ToolCalls: []providers.ToolCall{fake.ToolCall(fmt.Sprintf("t%d", k), "test_tick", map[string]int{"n": k})}}
	}
	words := func(n int, req *providers.Request) fake.Turn {
		var last string
		for _, m := range req.Messages {
			if m.Role == providers.RoleUser {
				last = m.Content
			}
		}
		count := 100
		fmt.Sscanf(last, "words %d", &count)
		text := ""
		for i := 0; i < count; i++ {
			text += fmt.Sprintf("w%d ", i)
		}
		return fake.Turn{Text: text}
	}
	return fake.NewScripted("fake",
		fake.NewScriptedModel("echo", 8192, fake.Echo()),
		fake.NewScriptedModel("loop", 8192, loop),
		fake.NewScriptedModel("words", 1<<20, words))
}

type tickTool struct{}

func (tickTool) Name() string        { return "test.tick" }
func (tickTool) Description() string { return "returns its input" }
func (tickTool) InputSchema() json.RawMessage {
	return json.RawMessage(`{"type":"object","properties":{"n":{"type":"integer"}}}`)
}
func (tickTool) StateSchema() json.RawMessage  { return nil }
func (tickTool) ResultSchema() json.RawMessage { return json.RawMessage(`{"type":"object"}`) }
func (tickTool) Execute(ctx context.Context, c tools.Call, emit tools.Emit) (json.RawMessage, error) {
	// Slow enough that a Task keeps appending while a test subscribes.
	t := time.NewTimer(2 * time.Millisecond)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
	return c.Input, nil
}
func (tickTool) Retain(out, in json.RawMessage) json.RawMessage { return out }
func (tickTool) View() string                                   { return "" }

func testLog(t testing.TB) zerolog.Logger {
	if os.Getenv("LEMO_TEST_LOG") != "" {
		return zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.DebugLevel)
	}
	return zerolog.Nop()
}

func newHarness(t testing.TB, lim Limits, models ModelLister) *harness {
	t.Helper()
	h := &harness{t: t}
	var err error
	if h.dd, err = persistence.OpenDataDir(t.TempDir()); err != nil {
		t.Fatal(err)
	}
	if h.store, err = persistence.Open(h.dd, persistence.Options{Log: zerolog.Nop(), MemTableSize: 4 << 20, BlockCacheSize: 4 << 20}); err != nil {
		t.Fatal(err)
	}
	provs := providers.NewRegistry()
	if err := provs.Register(scripts()); err != nil {
		t.Fatal(err)
	}
	h.svcs = services.New(services.Options{})
	reg := tools.NewRegistry()
	h.reg = reg
	for _, tl := range []tools.Tool{tickTool{}, system.New(h.svcs)} {
		if err := reg.Register(tl); err != nil {
			t.Fatal(err)
		}
	}
	h.d, err = actors.Start(context.Background(), actors.Deps{Store: h.store, Providers: provs, Tools: reg, Log: testLog(t)},
		actors.Options{WorkspaceRoot: t.TempDir(), DataDir: h.dd.Path(), MaxCycles: 20, ShutdownTimeout: 20 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	tokens, err := NewTokens(Token{Secret: "alice-secret-0123456789", Principal: alice})
	if err != nil {
		t.Fatal(err)
	}
	if models == nil {
		models = provs
	}
	cfg := Config{Tokens: tokens, Daemon: h.d, Tools: reg, Models: models, Services: h.svcs, Approvals: h.d, Version: "test", Log: testLog(t), Limits: lim}
	cfg.Limits.defaults()
	h.g = newGateway(cfg)
	if err := h.g.spawn(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.close)
	return h
}

func (h *harness) close() {
	if err := h.g.Stop(context.Background()); err != nil {
		h.t.Errorf("gateway Stop: %v", err)
	}
	if err := h.d.Stop(context.Background()); err != nil {
		h.t.Errorf("daemon Stop: %v", err)
	}
	if err := h.store.Close(); err != nil {
		h.t.Errorf("store Close: %v", err)
	}
	if err := h.dd.Close(); err != nil {
		h.t.Errorf("data folder Close: %v", err)
	}
}

// testClient is a local actor standing in for a remote client: it records
// everything the gateway sends it.
type testClient struct {
	h         *harness
	pid       *actor.PID
	principal Principal
	header    map[string]string
	session   *actor.PID
	welcome   *api.Welcome

	mu        sync.Mutex
	cond      *sync.Cond
	responses map[uint64]*api.Response
	updates   map[uint64][]*api.Update
	calls     []*api.ServiceCall
	chunks    []*api.Chunk
	nextID    uint64
	stopped   bool
}

func (c *testClient) Receive(ctx actor.Context) {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch m := ctx.Message().(type) {
	case *api.Response:
		c.responses[m.GetId()] = m
	case *api.UpdateBatch:
		c.updates[m.GetSubscription()] = append(c.updates[m.GetSubscription()], m.GetUpdates()...)
	case *api.ServiceCall:
		c.calls = append(c.calls, m)
	case *api.Chunk:
		c.chunks = append(c.chunks, m)
		if m.GetIndex()+1 == m.GetCount() {
			var data []byte
			for _, ch := range c.chunks {
				if ch.GetId() == m.GetId() {
					data = append(data, ch.GetData()...)
				}
			}
			var tc api.ToClient
			if err := proto.Unmarshal(data, &tc); err == nil && tc.GetResponse() != nil {
				c.responses[tc.GetResponse().GetId()] = tc.GetResponse()
			} else if tc.GetUpdates() != nil {
				u := tc.GetUpdates()
				c.updates[u.GetSubscription()] = append(c.updates[u.GetSubscription()], u.GetUpdates()...)
			}
		}
	case *actor.Stopped:
		c.stopped = true
	}
	c.cond.Broadcast()
}

// connect opens a session as p through the gateway actor.
func (h *harness) connect(p Principal) *testClient {
	h.t.Helper()
	c := &testClient{h: h, principal: p, responses: make(map[uint64]*api.Response), updates: make(map[uint64][]*api.Update)}
	c.cond = sync.NewCond(&c.mu)
	c.pid = h.g.system.Root.SpawnPrefix(actor.PropsFromProducer(func() actor.Actor { return c }), "client")
	pid := c.pid
	c.header = map[string]string{hdrPeer: "peer-" + pid.Id, hdrOwner: p.Owner, hdrOperator: fmt.Sprint(p.Operator), hdrAddress: "test-" + pid.Id, hdrToken: "token-" + p.Owner}
	resp := c.callTo(h.g.pid, &api.Request{Command: &api.Request_Hello{Hello: &api.Hello{ProtocolVersion: api.ProtocolVersion, Client: "test"}}})
	c.welcome = resp.GetWelcome()
	if c.welcome == nil {
		h.t.Fatalf("hello: %v", resp)
	}
	c.session = h.g.system.NewLocalPID(c.welcome.GetSession())
	return c
}

func (c *testClient) sendTo(target *actor.PID, req *api.Request) uint64 {
	c.mu.Lock()
	c.nextID++
	if req.Id == 0 {
		req.Id = c.nextID
	}
	c.mu.Unlock()
	c.h.g.system.Root.Send(target, &actor.MessageEnvelope{Header: c.header, Message: req, Sender: c.pid})
	return req.Id
}

func (c *testClient) send(req *api.Request) uint64 { return c.sendTo(c.session, req) }

// wait waits until cond holds (under the client's lock) or fails the test.
func (c *testClient) wait(what string, cond func() bool) {
	c.h.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	timer := time.AfterFunc(10*time.Second, func() {
		c.mu.Lock()
		c.cond.Broadcast()
		c.mu.Unlock()
	})
	defer timer.Stop()
	c.mu.Lock()
	defer c.mu.Unlock()
	for !cond() {
		if time.Now().After(deadline) {
			c.h.t.Fatalf("timed out waiting for %s", what)
		}
		c.cond.Wait()
	}
}

func (c *testClient) callTo(target *actor.PID, req *api.Request) *api.Response {
	c.h.t.Helper()
	id := c.sendTo(target, req)
	var resp *api.Response
	c.wait(fmt.Sprintf("the answer to request %d", id), func() bool {
		resp = c.responses[id]
		return resp != nil
	})
	return resp
}

func (c *testClient) call(req *api.Request) *api.Response {
	c.h.t.Helper()
	return c.callTo(c.session, req)
}

// updatesOf returns the updates received so far on sub.
func (c *testClient) updatesOf(sub uint64) []*api.Update {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]*api.Update(nil), c.updates[sub]...)
}

// waitUpdates waits until sub received an update satisfying stop.
func (c *testClient) waitUpdates(sub uint64, what string, stop func([]*api.Update) bool) []*api.Update {
	c.h.t.Helper()
	var out []*api.Update
	c.wait(what, func() bool {
		out = c.updates[sub]
		return stop(out)
	})
	return append([]*api.Update(nil), out...)
}

func (c *testClient) ack(sub uint64, n int) {
	c.send(&api.Request{Command: &api.Request_Ack{Ack: &api.Ack{Subscription: sub, Count: uint32(n)}}})
}

func (c *testClient) stop() {
	_ = c.h.g.system.Root.StopFuture(c.pid).Wait()
}

// Request builders.

func create(model, request string) *api.Request {
	return &api.Request{Command: &api.Request_CreateTask{CreateTask: &api.CreateTaskRequest{Request: request, Model: model}}}
}

func taskRef(kind, id string) *api.Request {
	ref := &api.TaskRef{TaskId: id}
	switch kind {
	case "pause":
		return &api.Request{Command: &api.Request_Pause{Pause: ref}}
	case "cancel":
		return &api.Request{Command: &api.Request_Cancel{Cancel: ref}}
	}
	return &api.Request{Command: &api.Request_GetTask{GetTask: ref}}
}

func subscribe(sub uint64, task string, from uint64) *api.Request {
	return &api.Request{Command: &api.Request_Subscribe{Subscribe: &api.SubscribeRequest{Subscription: sub, TaskId: task, FromSeq: from}}}
}

func errCode(r *api.Response) api.ErrorCode { return r.GetError().GetCode() }

// mustTask returns the TaskMeta of a successful answer.
func mustTask(t testing.TB, r *api.Response) *api.TaskMeta {
	t.Helper()
	if r.GetTask() == nil {
		t.Fatalf("answer = %v, want a task", r)
	}
	return r.GetTask()
}

// waitStatus polls the daemon until the Task has status st.
func (h *harness) waitStatus(id string, st api.TaskStatus) *api.TaskMeta {
	h.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		m, err := h.d.Task(context.Background(), actors.Operator, id)
		if err == nil && m.GetStatus() == st {
			return m
		}
		if time.Now().After(deadline) {
			h.t.Fatalf("task %s: status %v, want %v (err %v)", id, m.GetStatus(), st, err)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// events returns the events among updates.
func events(us []*api.Update) []*api.Event {
	var out []*api.Event
	for _, u := range us {
		if ev := u.GetEvent(); ev != nil {
			out = append(out, ev)
		}
	}
	return out
}

// hasStatus reports whether updates hold a StatusChanged to st.
func hasStatus(us []*api.Update, st api.TaskStatus) bool {
	for _, ev := range events(us) {
		if ev.GetStatusChanged().GetStatus() == st {
			return true
		}
	}
	return false
}

// contiguous checks that evs are one Task's seqs from..to without gap or
// repeat.
func contiguous(evs []*api.Event, from uint64) error {
	for i, ev := range evs {
		if want := from + uint64(i); ev.GetSeq() != want {
			return fmt.Errorf("event %d has seq %d, want %d", i, ev.GetSeq(), want)
		}
	}
	return nil
}
