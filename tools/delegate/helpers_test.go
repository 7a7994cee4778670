package delegate

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
	"golang.org/x/sys/unix"

	"lemo/internal/testwait"
	"lemo/tools"
	"lemo/tools/internal/proc"
	"lemo/tools/isolation"
)

// fakeAgentBin is the fake agent built by TestMain.
var fakeAgentBin string

func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == isolation.InitArg {
		os.Exit(isolation.Main(os.Args[2:]))
	}
	if bin := os.Getenv(envDaemonHelper); bin != "" {
		runDaemonHelper(bin)
		return
	}
	dir, err := os.MkdirTemp("", "delegate-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	fakeAgentBin = filepath.Join(dir, "fakeagent")
	// The go command that runs the tests is on PATH, or in $GOROOT/bin.
	goBin := filepath.Join(os.Getenv("GOROOT"), "bin", "go")
	if p, err := exec.LookPath("go"); err == nil {
		goBin = p
	}
	build := exec.Command(goBin, "build", "-o", fakeAgentBin, "./testdata/fakeagent")
	if out, err := build.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "build the fake agent: %v\n%s", err, out)
		os.RemoveAll(dir)
		os.Exit(2)
	}
	code := 0
	func() {
		defer os.RemoveAll(dir)
		// protoactor's dead-letter throttle starts a goroutine per
		// throttling period after a dead letter; it ends on its own.
		// goleak.VerifyTestMain would exit before the deferred removal.
		code = m.Run()
		if code == 0 {
			if err := goleak.Find(goleak.IgnoreTopFunction("github.com/asynkron/protoactor-go/actor.NewDeadLetter.NewThrottle.func4.1")); err != nil {
				fmt.Fprintln(os.Stderr, "goleak:", err)
				code = 1
			}
		}
	}()
	os.Exit(code)
}

func randomHex() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// markVar is set in the agents' environment by the tests (through
// Config.SetEnv); every process a test's agent starts carries it.
const markVar = "DELEGATE_TEST_MARK"

// marked lists the live processes (not zombies) whose environment holds
// markVar=mark.
func marked(t testing.TB, mark string) []proc.Proc {
	t.Helper()
	ps, err := proc.Survivors(proc.WithEnv(markVar + "=" + mark))
	if err != nil {
		t.Fatal(err)
	}
	return ps
}

// checkNoAgents fails the test if a process of the mark is alive. When
// the agents were stopped by Lemo, none may be left at all: no polling.
func checkNoAgents(t testing.TB, mark string) {
	t.Helper()
	if ps := marked(t, mark); len(ps) > 0 {
		for _, p := range ps {
			_ = syscallKill(p.Pid)
		}
		t.Errorf("agent processes survived: %+v", ps)
	}
}

// eventually polls f until it returns nil or d passes.
func eventually(t testing.TB, d time.Duration, what string, f func() error) {
	t.Helper()
	testwait.Until(t, d, what, f)
}

var errNotYet = errors.New("not yet")

// testHost is a tools.SessionHost for running the tool without the actor
// tree: each session runs on a goroutine whose context ends on Stop; Close
// stops them all (as the end of a call does) and waits.
type testHost struct {
	mu      sync.Mutex
	handles []*testHandle
	wg      sync.WaitGroup
}

type testHandle struct {
	inbox  chan any
	done   chan struct{}
	cancel context.CancelFunc
	mu     sync.Mutex
	err    error
	ended  bool
}

func (h *testHost) Start(name string, s tools.Session) (tools.SessionHandle, error) {
	ctx, cancel := context.WithCancel(context.Background())
	th := &testHandle{inbox: make(chan any, 64), done: make(chan struct{}), cancel: cancel}
	h.mu.Lock()
	h.handles = append(h.handles, th)
	h.mu.Unlock()
	h.wg.Add(1)
	go func() {
		defer h.wg.Done()
		err := s.Run(ctx, th.inbox)
		th.mu.Lock()
		th.err, th.ended = err, true
		th.mu.Unlock()
		close(th.done)
	}()
	return th, nil
}

func (h *testHost) Close() {
	h.mu.Lock()
	hs := h.handles
	h.mu.Unlock()
	for _, th := range hs {
		th.Stop()
	}
	h.wg.Wait()
}

func (th *testHandle) Send(m any) bool {
	th.mu.Lock()
	defer th.mu.Unlock()
	if th.ended {
		return false
	}
	select {
	case th.inbox <- m:
		return true
	default:
		return false
	}
}
func (th *testHandle) Done() <-chan struct{} { return th.done }
func (th *testHandle) Err() error {
	th.mu.Lock()
	defer th.mu.Unlock()
	return th.err
}
func (th *testHandle) Stop() { th.cancel() }

// fakeApprovals answers approval requests with a function.
type fakeApprovals struct {
	mu     sync.Mutex
	asked  []string
	decide func(ctx context.Context, reason string, deadline time.Duration) (tools.Decision, error)
}

func (f *fakeApprovals) Ask(ctx context.Context, reason string, deadline time.Duration) (tools.Decision, error) {
	f.mu.Lock()
	f.asked = append(f.asked, reason)
	f.mu.Unlock()
	return f.decide(ctx, reason, deadline)
}

func (f *fakeApprovals) reasons() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.asked...)
}

func approveAll() *fakeApprovals {
	return &fakeApprovals{decide: func(context.Context, string, time.Duration) (tools.Decision, error) {
		return tools.Decision{Approved: true, Outcome: "approved", By: "test"}, nil
	}}
}

// rig runs delegate.run directly (no actor tree) against the fake agent,
// validating every state update, the result and the retained part against
// the tool's schemas, and checks afterwards that no agent process is left.
type rig struct {
	t      testing.TB
	dt     *Tools
	reg    *tools.Registry
	ws     string
	mark   string
	cfg    Config
	mu     sync.Mutex
	states []State
}

func fakeConfig(t testing.TB, mark string, extraArgs ...string) Config {
	return Config{
		Binary:         fakeAgentBin,
		Args:           extraArgs,
		Dir:            filepath.Join(t.TempDir(), "delegate"),
		Environ:        []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir(), "LEMO_TOKEN=daemon-secret", "OPENAI_API_KEY=sk-secret", "GITHUB_TOKEN=gh", "PROVIDER_URL=http://x", "LANG=C.UTF-8"},
		SetEnv:         []string{markVar + "=" + mark},
		StartTimeout:   10 * time.Second,
		CommandTimeout: 5 * time.Second,
		ExitGrace:      2 * time.Second,
		KillGrace:      500 * time.Millisecond,
		StateInterval:  10 * time.Millisecond,
	}
}

func newRig(t testing.TB, mutate func(*Config), extraArgs ...string) *rig {
	t.Helper()
	mark := randomHex()
	cfg := fakeConfig(t, mark, extraArgs...)
	if mutate != nil {
		mutate(&cfg)
	}
	dt, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	reg := tools.NewRegistry()
	for _, tl := range dt.List() {
		if err := reg.Register(tl); err != nil {
			t.Fatalf("Register: %v", err)
		}
	}
	ws, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	r := &rig{t: t, dt: dt, reg: reg, ws: ws, mark: mark, cfg: dt.cfg}
	t.Cleanup(func() { checkNoAgents(t, mark) })
	return r
}

// runOpts are what one direct run gets besides its input.
type runOpts struct {
	taskID    string
	approvals tools.Approvals
	steer     chan tools.Steering
	ctx       context.Context
}

// run executes delegate.run like the runtime does. It may be called from
// any goroutine: it reports problems with Errorf.
func (r *rig) run(input any, o runOpts) (*Result, error) {
	in, err := json.Marshal(input)
	if err != nil {
		return nil, err
	}
	rt, _ := r.reg.Get(RunName)
	if err := rt.ValidateInput(in); err != nil {
		r.t.Errorf("input %s: %v", in, err)
		return nil, err
	}
	if o.taskID == "" {
		o.taskID = "task-1"
	}
	if o.ctx == nil {
		o.ctx = context.Background()
	}
	host := &testHost{}
	defer host.Close()
	call := tools.Call{TaskID: o.taskID, CallID: "call-1", Owner: "alice", Workspace: r.ws, Input: in, Approvals: o.approvals, Sessions: host}
	if o.steer != nil {
		call.Steer = o.steer
	}
	emit := func(s json.RawMessage) error {
		if err := rt.ValidateState(s); err != nil {
			r.t.Errorf("state update %.500s: %v", s, err)
			return err
		}
		var st State
		if err := json.Unmarshal(s, &st); err != nil {
			r.t.Error(err)
		}
		r.mu.Lock()
		r.states = append(r.states, st)
		r.mu.Unlock()
		return nil
	}
	out, err := rt.Tool.Execute(o.ctx, call, emit)
	if err != nil {
		return nil, err
	}
	if err := rt.ValidateOutput(out); err != nil {
		r.t.Errorf("output does not match the result schema: %v\n%.2000s", err, out)
		return nil, err
	}
	kept := rt.Tool.Retain(out, in)
	if err := rt.ValidateOutput(kept); err != nil {
		r.t.Errorf("retained part does not match the result schema: %v", err)
		return nil, err
	}
	if len(kept) > 64<<10 {
		r.t.Errorf("retained %d bytes; the result should be bounded", len(kept))
		return nil, errors.New("unbounded result")
	}
	var res Result
	if err := json.Unmarshal(out, &res); err != nil {
		return nil, err
	}
	return &res, nil
}

// async runs input on a goroutine; the channel yields its result, or nil
// after reporting the error.
func (r *rig) async(input any, o runOpts) <-chan *Result {
	done := make(chan *Result, 1)
	go func() {
		res, err := r.run(input, o)
		if err != nil {
			r.t.Errorf("run %v: %v", input, err)
		}
		done <- res
	}()
	return done
}

// await waits for an async run.
func await(t testing.TB, done <-chan *Result) *Result {
	t.Helper()
	res := <-done
	if res == nil {
		t.FailNow()
	}
	return res
}

func (r *rig) must(input any, o runOpts) *Result {
	r.t.Helper()
	res, err := r.run(input, o)
	if err != nil {
		r.t.Fatalf("run %v: %v", input, err)
	}
	return res
}

// events returns every live event emitted so far.
func (r *rig) events() []LiveEvent {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []LiveEvent
	for _, s := range r.states {
		out = append(out, s.Events...)
	}
	return out
}

// reset forgets the state updates seen so far.
func (r *rig) reset() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.states = nil
}

func (r *rig) lastState() State {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.states) == 0 {
		return State{}
	}
	return r.states[len(r.states)-1]
}

func hasEvent(evs []LiveEvent, pred func(LiveEvent) bool) bool {
	for _, e := range evs {
		if pred(e) {
			return true
		}
	}
	return false
}

// steerAsync sends a steering input and returns where its answer arrives.
func steerAsync(ch chan tools.Steering, input string) <-chan error {
	ans := make(chan error, 1)
	ch <- tools.Steering{Input: json.RawMessage(input), Reply: func(err error) { ans <- err }}
	return ans
}

func waitAnswer(t testing.TB, ans <-chan error, d time.Duration) error {
	t.Helper()
	select {
	case err := <-ans:
		return err
	case <-time.After(d):
		t.Fatalf("no answer to the steering within %v", d)
		return nil
	}
}

func syscallKill(pid int) error { return unix.Kill(pid, unix.SIGKILL) }
