package actors_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"go.uber.org/goleak"

	"lemo/actors"
	"lemo/actors/live"
	"lemo/api"
	"lemo/internal/testwait"
	"lemo/persistence"
	"lemo/providers"
	"lemo/providers/fake"
	"lemo/tools"
)

func TestMain(m *testing.M) {
	// protoactor's dead-letter throttle starts a goroutine per throttling
	// period (1 s) after a dead letter; it ends on its own when the period
	// passes. Messages that reach an actor after it stopped (a session's
	// end notice, a late tool report) are expected dead letters.
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction("github.com/asynkron/protoactor-go/actor.NewDeadLetter.NewThrottle.func4.1"))
}

// harness is a daemon on a real store in a temporary folder.
type harness struct {
	t      testing.TB
	dir    string
	dd     *persistence.DataDir
	store  *persistence.Store
	d      *actors.Daemon
	model  *fake.ScriptedModel
	tools  *tools.Registry
	opts   actors.Options
	blocks *blockRegistry
	obs    *countingObserver
	// live, when set before start, keeps the live results.
	live *live.Accountant
	// skew moves the daemon's clock ahead of the real one (nanoseconds).
	skew atomic.Int64
	// freeBytes, when set before start, is the store's free-space reading.
	freeBytes func(string) (int64, error)
	// appends counts the appends the store committed.
	appends atomic.Int64
	// pricer, when set before start, prices models for budgets.
	pricer actors.Pricer
}

// countingObserver counts what the tree reports, by outcome.
type countingObserver struct {
	mu      sync.Mutex
	cycles  map[string]int
	tools   map[string]int
	crashes map[string]int
	// decisions counts supervision decisions by "level directive".
	decisions map[string]int
}

func newCountingObserver() *countingObserver {
	return &countingObserver{cycles: map[string]int{}, tools: map[string]int{}, crashes: map[string]int{}, decisions: map[string]int{}}
}

func (o *countingObserver) CycleDone(provider, model, outcome string, took time.Duration) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.cycles[provider+" "+outcome]++
}

func (o *countingObserver) ToolDone(tool, outcome string, took time.Duration) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.tools[tool+" "+outcome]++
}

// Supervised counts every decision by level and directive (decisions), and
// a Task actor's crashes by directive (crashes).
func (o *countingObserver) Supervised(level, directive string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.decisions[level+" "+directive]++
	if level == "task" || level == "child_task" {
		o.crashes[directive]++
	}
}

func (o *countingObserver) decided() map[string]int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return maps.Clone(o.decisions)
}

func (o *countingObserver) snapshot() (cycles, tools, crashes map[string]int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return maps.Clone(o.cycles), maps.Clone(o.tools), maps.Clone(o.crashes)
}

func newHarness(t testing.TB, plan fake.Plan, extra ...tools.Tool) *harness {
	t.Helper()
	return newHarnessWith(t, plan, nil, extra...)
}

// newHarnessWith lets the test change the daemon's options.
func newHarnessWith(t testing.TB, plan fake.Plan, opts func(*actors.Options), extra ...tools.Tool) *harness {
	t.Helper()
	return newHarnessLive(t, plan, nil, opts, extra...)
}

// newHarnessLive keeps the live results in lv (nil: the daemon's default).
func newHarnessLive(t testing.TB, plan fake.Plan, lv *live.Accountant, opts func(*actors.Options), extra ...tools.Tool) *harness {
	t.Helper()
	h := &harness{t: t, dir: t.TempDir(), blocks: newBlockRegistry(), obs: newCountingObserver(), live: lv}
	h.model = fake.NewScriptedModel("m", 8192, plan)
	h.tools = tools.NewRegistry()
	for _, tl := range append([]tools.Tool{echoTool{}, liveTool{}, &blockTool{reg: h.blocks}, panicTool{}, badOutputTool{}}, extra...) {
		if err := h.tools.Register(tl); err != nil {
			t.Fatal(err)
		}
	}
	h.opts = actors.Options{WorkspaceRoot: t.TempDir(), DataDir: h.dir, ToolGrace: 5 * time.Second, ShutdownTimeout: 20 * time.Second}
	if opts != nil {
		opts(&h.opts)
	}
	h.start()
	t.Cleanup(h.close)
	return h
}

func (h *harness) start() {
	h.t.Helper()
	var err error
	if h.dd, err = persistence.OpenDataDir(h.dir); err != nil {
		h.t.Fatal(err)
	}
	if h.store, err = persistence.Open(h.dd, persistence.Options{Log: zerolog.Nop(), MemTableSize: 4 << 20, BlockCacheSize: 4 << 20, FreeBytes: h.freeBytes, DiskPoll: time.Millisecond,
		OnCommit: func(appends, events int, wait time.Duration) { h.appends.Add(int64(appends)) }}); err != nil {
		h.t.Fatal(err)
	}
	reg := providers.NewRegistry()
	if err := reg.Register(fake.NewScripted("fake", h.model, fake.NewScriptedModel("healthy", 8192, fake.Echo()))); err != nil {
		h.t.Fatal(err)
	}
	now := func() time.Time { return time.Now().Add(time.Duration(h.skew.Load())) }
	if h.d, err = actors.Start(context.Background(), actors.Deps{Store: h.store, Providers: reg, Tools: h.tools, Log: testLog(h.t), Observer: h.obs, Now: now, Live: h.live, Pricer: h.pricer}, h.opts); err != nil {
		h.t.Fatal(err)
	}
}

func testLog(t testing.TB) zerolog.Logger {
	if os.Getenv("LEMO_TEST_LOG") != "" {
		return zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.DebugLevel)
	}
	return zerolog.Nop()
}

// stop stops the daemon and closes the store and folder.
func (h *harness) stop() {
	h.t.Helper()
	if h.d == nil {
		return
	}
	if err := h.d.Stop(context.Background()); err != nil {
		h.t.Errorf("Stop: %v", err)
	}
	if err := h.store.Close(); err != nil {
		h.t.Errorf("store Close: %v", err)
	}
	if err := h.dd.Close(); err != nil {
		h.t.Errorf("data folder Close: %v", err)
	}
	h.d = nil
}

func (h *harness) close() {
	h.blocks.releaseAll()
	h.stop()
}

// restart closes everything and reopens the same folder.
func (h *harness) restart() {
	h.t.Helper()
	h.stop()
	h.start()
}

func (h *harness) create(request string) string {
	h.t.Helper()
	m, err := h.d.CreateTask(context.Background(), actors.Operator, actors.CreateTask{Request: request, Model: "fake/m"})
	if err != nil {
		h.t.Fatalf("CreateTask: %v", err)
	}
	return m.GetTaskId()
}

// history returns a Task's whole history.
func (h *harness) history(id string) []*api.Event {
	h.t.Helper()
	evs, err := h.d.History(context.Background(), actors.Operator, id, 1, 0)
	if err != nil {
		h.t.Fatalf("History: %v", err)
	}
	return evs
}

// waitFor polls the Task's history until cond holds, or fails after 10 s.
func (h *harness) waitFor(id, what string, cond func([]*api.Event) bool) []*api.Event {
	h.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		evs := h.history(id)
		if cond(evs) {
			return evs
		}
		if time.Now().After(deadline) {
			h.t.Fatalf("task %s: timed out waiting for %s; history:\n%s", id, what, dump(evs))
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func (h *harness) waitStatus(id string, st api.TaskStatus) []*api.Event {
	h.t.Helper()
	return h.waitFor(id, "status "+st.String(), func(evs []*api.Event) bool { return lastStatus(evs) == st })
}

func lastStatus(evs []*api.Event) api.TaskStatus {
	st := api.TaskStatus_TASK_STATUS_UNSPECIFIED
	for _, e := range evs {
		if sc := e.GetStatusChanged(); sc != nil {
			st = sc.GetStatus()
		}
	}
	return st
}

func has(evs []*api.Event, pred func(*api.Event) bool) bool {
	for _, e := range evs {
		if pred(e) {
			return true
		}
	}
	return false
}

func kinds(evs []*api.Event) []string {
	out := make([]string, len(evs))
	for i, e := range evs {
		out[i] = api.Kind(e)
	}
	return out
}

func dump(evs []*api.Event) string {
	var b strings.Builder
	for _, e := range evs {
		fmt.Fprintf(&b, "  %d %s %v\n", e.GetSeq(), api.Kind(e), e.GetBody())
	}
	return b.String()
}

func checkContiguous(t testing.TB, evs []*api.Event) {
	t.Helper()
	for i, e := range evs {
		if e.GetSeq() != uint64(i+1) {
			t.Fatalf("event %d has seq %d; history:\n%s", i, e.GetSeq(), dump(evs))
		}
	}
}

// Test tools.

type baseTool struct{}

func (baseTool) StateSchema() json.RawMessage { return nil }
func (baseTool) View() string                 { return "" }

var textInput = json.RawMessage(`{"type":"object","properties":{"text":{"type":"string"}},"required":["text"],"additionalProperties":false}`)

// echoTool returns its input text; it retains everything.
type echoTool struct{ baseTool }

func (echoTool) Name() string                 { return "test.echo" }
func (echoTool) Description() string          { return "echoes text" }
func (echoTool) InputSchema() json.RawMessage { return textInput }
func (echoTool) ResultSchema() json.RawMessage {
	return json.RawMessage(`{"type":"object","required":["echo"]}`)
}
func (echoTool) Execute(ctx context.Context, c tools.Call, emit tools.Emit) (json.RawMessage, error) {
	var in struct{ Text string }
	_ = json.Unmarshal(c.Input, &in)
	return json.Marshal(map[string]string{"echo": in.Text})
}
func (echoTool) Retain(out, in json.RawMessage) json.RawMessage { return out }

// liveTool returns its input text and retains nothing: after a restart or
// once released, its result is unavailable.
type liveTool struct{ echoTool }

func (liveTool) Name() string                                   { return "test.live" }
func (liveTool) Retain(out, in json.RawMessage) json.RawMessage { return nil }

// blockTool blocks until released by the test (or cancelled); it retains
// nothing.
type blockTool struct {
	baseTool
	reg *blockRegistry
}

func (*blockTool) Name() string                  { return "test.block" }
func (*blockTool) Description() string           { return "blocks until released" }
func (*blockTool) InputSchema() json.RawMessage  { return textInput }
func (*blockTool) ResultSchema() json.RawMessage { return json.RawMessage(`{"type":"object"}`) }
func (b *blockTool) Execute(ctx context.Context, c tools.Call, emit tools.Emit) (json.RawMessage, error) {
	var in struct{ Text string }
	_ = json.Unmarshal(c.Input, &in)
	ch := b.reg.started(in.Text)
	select {
	case <-ch:
		return json.Marshal(map[string]string{"released": in.Text})
	case <-ctx.Done():
		b.reg.cancelled(in.Text)
		return nil, ctx.Err()
	}
}
func (*blockTool) Retain(out, in json.RawMessage) json.RawMessage { return nil }

type blockRegistry struct {
	mu       sync.Mutex
	chans    map[string]chan struct{}
	running  map[string]bool
	canceled map[string]bool
}

func newBlockRegistry() *blockRegistry {
	return &blockRegistry{chans: make(map[string]chan struct{}), running: make(map[string]bool), canceled: make(map[string]bool)}
}

func (r *blockRegistry) ch(key string) chan struct{} {
	if r.chans[key] == nil {
		r.chans[key] = make(chan struct{})
	}
	return r.chans[key]
}

func (r *blockRegistry) started(key string) chan struct{} {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.running[key] = true
	return r.ch(key)
}

func (r *blockRegistry) cancelled(key string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.canceled[key] = true
}

func (r *blockRegistry) isRunning(key string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.running[key]
}

func (r *blockRegistry) wasCancelled(key string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.canceled[key]
}

func (r *blockRegistry) release(key string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	c := r.ch(key)
	select {
	case <-c:
	default:
		close(c)
	}
}

func (r *blockRegistry) releaseAll() {
	r.mu.Lock()
	keys := make([]string, 0, len(r.chans))
	for k := range r.chans {
		keys = append(keys, k)
	}
	r.mu.Unlock()
	for _, k := range keys {
		r.release(k)
	}
}

// panicTool panics.
type panicTool struct{ echoTool }

func (panicTool) Name() string { return "test.panic" }
func (panicTool) Execute(ctx context.Context, c tools.Call, emit tools.Emit) (json.RawMessage, error) {
	panic("tool exploded")
}

// badOutputTool returns output that does not match its result schema.
type badOutputTool struct{ echoTool }

func (badOutputTool) Name() string { return "test.bad" }
func (badOutputTool) Execute(ctx context.Context, c tools.Call, emit tools.Emit) (json.RawMessage, error) {
	return json.RawMessage(`{"wrong":1}`), nil
}

// waitAppends waits until the store has committed want appends: a Task's
// last append may be acknowledged just before its commit callback counts
// it. evs, the Task's history, is shown when the count is wrong.
func (h *harness) waitAppends(want int64, evs []*api.Event) {
	h.t.Helper()
	eventually(h.t, "the appends counted", func() error {
		if n := h.appends.Load(); n != want {
			return fmt.Errorf("%d appends for %d events, want %d:\n%s", n, len(evs), want, dump(evs))
		}
		return nil
	})
}

// eventually polls f until it returns nil or 10 s pass.
func eventually(t testing.TB, what string, f func() error) {
	t.Helper()
	testwait.Until(t, 10*time.Second, what, f)
}

var errNotYet = errors.New("not yet")

// toolMessage returns the content of the tool message answering callID in
// a request.
func toolMessage(req *providers.Request, callID string) (string, bool) {
	for _, m := range req.Messages {
		if m.Role == providers.RoleTool && m.ToolCallID == callID {
			return m.Content, true
		}
	}
	return "", false
}
