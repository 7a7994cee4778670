package console

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/lipgloss"
	"github.com/muesli/termenv"
	"go.uber.org/goleak"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"lemo/api"
	"lemo/client"
)

func TestMain(m *testing.M) {
	// teatest waits for a SIGINT on a goroutine of each test program that
	// only an interrupt ends.
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction("github.com/charmbracelet/x/exp/teatest.NewTestModel.func2"))
}

// fakeBackend is a daemon connection the tests script: fields hold what
// it answers, calls records the commands it received.
type fakeBackend struct {
	mu        sync.Mutex
	welcome   *api.Welcome
	tools     []*api.ToolInfo
	metas     []*api.TaskMeta
	history   map[string][]*api.Event
	tree      *api.ActorTree
	approvals []*api.Event
	sessions  *api.DelegateSessionList
	sessErr   error
	fail      error // answered to every action when set
	calls     []string
	resume    map[string]uint64
	// follow, when set, runs as Follow's body; else Follow waits for ctx.
	follow func(ctx context.Context, fn func(*api.Update) error) error
}

func newFakeBackend() *fakeBackend {
	return &fakeBackend{welcome: &api.Welcome{Owner: "local", Operator: true}, history: map[string][]*api.Event{},
		tools: []*api.ToolInfo{{Name: "shell.run", View: client.ViewShell}, {Name: "demo.tick"}}}
}

func (f *fakeBackend) record(format string, args ...any) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, fmt.Sprintf(format, args...))
}

func (f *fakeBackend) recorded() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.calls...)
}

func (f *fakeBackend) Welcome() *api.Welcome { return f.welcome }
func (f *fakeBackend) Addr() string          { return "127.0.0.1:7465" }
func (f *fakeBackend) Tools(ctx context.Context) ([]*api.ToolInfo, error) {
	return f.tools, nil
}
func (f *fakeBackend) ListTasks(ctx context.Context, before string, limit int) ([]*api.TaskMeta, string, error) {
	return f.metas, "", nil
}
func (f *fakeBackend) ReadHistory(ctx context.Context, taskID string, from uint64) ([]*api.Event, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	evs, ok := f.history[taskID]
	if !ok {
		return nil, client.ErrNotFound
	}
	return evs, nil
}
func (f *fakeBackend) Follow(ctx context.Context, o client.FollowOptions, fn func(*api.Update) error) error {
	f.mu.Lock()
	f.resume = o.Resume
	body := f.follow
	f.mu.Unlock()
	if body != nil {
		return body(ctx, fn)
	}
	<-ctx.Done()
	return nil
}
func (f *fakeBackend) Inspect(ctx context.Context) (*api.ActorTree, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.tree, nil
}
func (f *fakeBackend) Approvals(ctx context.Context) ([]*api.Event, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.approvals, nil
}
func (f *fakeBackend) DelegateSessions(ctx context.Context, taskID string) (*api.DelegateSessionList, error) {
	f.record("sessions %s", taskID)
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.sessErr != nil {
		return nil, f.sessErr
	}
	if f.sessions == nil {
		return &api.DelegateSessionList{}, nil
	}
	return f.sessions, nil
}
func (f *fakeBackend) act(verb, task, arg string, st api.TaskStatus) (*api.TaskMeta, error) {
	f.record("%s %s %s", verb, task, arg)
	if f.fail != nil {
		return nil, f.fail
	}
	return &api.TaskMeta{TaskId: task, Status: st}, nil
}
func (f *fakeBackend) Pause(ctx context.Context, id string) (*api.TaskMeta, error) {
	return f.act("pause", id, "", api.TaskStatus_TASK_STATUS_PAUSED)
}
func (f *fakeBackend) Continue(ctx context.Context, id, model string) (*api.TaskMeta, error) {
	return f.act("continue", id, model, api.TaskStatus_TASK_STATUS_RUNNING)
}
func (f *fakeBackend) Cancel(ctx context.Context, id string) (*api.TaskMeta, error) {
	return f.act("cancel", id, "", api.TaskStatus_TASK_STATUS_CANCELLED)
}
func (f *fakeBackend) Resolve(ctx context.Context, approvalID string, approve bool, reason string) (*api.TaskMeta, error) {
	task, _, _ := strings.Cut(approvalID, ".")
	return f.act(map[bool]string{true: "approve", false: "deny"}[approve], task, approvalID, api.TaskStatus_TASK_STATUS_RUNNING)
}
func (f *fakeBackend) AllowForTask(ctx context.Context, approvalID, reason string) (*api.TaskMeta, error) {
	task, _, _ := strings.Cut(approvalID, ".")
	return f.act("always", task, approvalID, api.TaskStatus_TASK_STATUS_RUNNING)
}
func (f *fakeBackend) StopCall(ctx context.Context, taskID, callID string) (*api.TaskMeta, error) {
	return f.act("stop", taskID, callID, api.TaskStatus_TASK_STATUS_RUNNING)
}

// Fixture: three Tasks. Task A runs a shell call (its actor live), B
// waits for an approval, C finished long ago (dormant).
const (
	taskA = "01M8PEPSX4T06MEF12P2AAAAAA"
	taskB = "01M8PEPSX4T06MEF12P1BBBBBB"
	taskC = "01M8PEPSX4T06MEF12P0CCCCCC"
)

var epoch = time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)

func ts(sec int) *timestamppb.Timestamp {
	return timestamppb.New(epoch.Add(time.Duration(sec) * time.Second))
}

// events numbers bodies from seq 1.
func events(task string, bodies ...protoMessage) []*api.Event {
	out := make([]*api.Event, len(bodies))
	for i, b := range bodies {
		out[i] = api.NewEvent(task, uint64(i+1), ts(i+1), b)
	}
	return out
}

func fold(evs []*api.Event) *api.TaskMeta {
	var m *api.TaskMeta
	for _, e := range evs {
		m = api.FoldMeta(m, e)
	}
	return m
}

func shellArgs(cmd string) []byte {
	b, _ := json.Marshal(map[string]string{"command": cmd})
	return b
}

// fixture returns a backend holding the three Tasks and the live tree.
func fixture() *fakeBackend {
	f := newFakeBackend()
	input := &api.InputSummary{WindowTokens: 131072, CeilingTokens: 45875, WindowKnown: true, EstimatedTokens: 3394,
		Sections: []*api.SectionSize{{Section: "instructions", Tokens: 84}, {Section: "tools", Tokens: 3302}, {Section: "recall", Tokens: 120}, {Section: "conversation", Tokens: 8}},
		Excerpts: []*api.Excerpt{{Seq: 7, CallId: "call-1-1", Part: "result", OriginalTokens: 5000, KeptTokens: 800}},
		Recalled: []*api.RecallItem{{TaskId: taskC, Seq: 5, Kind: "fact", Tokens: 120, Score: 0.82}}}
	f.history[taskA] = events(taskA,
		&api.TaskCreated{Owner: "local", Model: "fake/shell", Title: "sleep a while", Workspace: "/w/a"},
		&api.UserMessage{Text: "sleep a while"},
		&api.StatusChanged{Status: api.TaskStatus_TASK_STATUS_RUNNING, Detail: "created"},
		&api.CycleStarted{Cycle: 1, Model: "fake/shell"},
		&api.AssistantMessage{Cycle: 1, Text: "let me sleep", ToolCallIds: []string{"call-1-1"}},
		&api.ToolCallRecorded{CallId: "call-1-1", Cycle: 1, Tool: "shell.run", Arguments: shellArgs("sleep 300")},
		&api.CycleFinished{Cycle: 1, Outcome: api.CycleOutcome_CYCLE_OUTCOME_COMPLETED, Usage: &api.Usage{PromptTokens: 2739, CompletionTokens: 12, EstimatedPromptTokens: 3394}, Input: input},
		&api.ToolExecutionStarted{CallId: "call-1-1"},
	)
	f.history[taskB] = events(taskB,
		&api.TaskCreated{Owner: "alice", Model: "fake/shell", Title: "echo approve me", Workspace: "/w/b"},
		&api.UserMessage{Text: "echo approve me"},
		&api.StatusChanged{Status: api.TaskStatus_TASK_STATUS_RUNNING, Detail: "created"},
		&api.CycleStarted{Cycle: 1, Model: "fake/shell"},
		&api.AssistantMessage{Cycle: 1, ToolCallIds: []string{"call-1-1"}},
		&api.ToolCallRecorded{CallId: "call-1-1", Cycle: 1, Tool: "shell.run", Arguments: shellArgs("echo approve me")},
		&api.CycleFinished{Cycle: 1, Outcome: api.CycleOutcome_CYCLE_OUTCOME_COMPLETED, Usage: &api.Usage{PromptTokens: 2739, EstimatedPromptTokens: 3394}},
		&api.ApprovalRequested{ApprovalId: taskB + ".call-1-1", CallId: "call-1-1", Reason: `no allow rule covers "echo approve me"`, Tool: "shell.run"},
		&api.StatusChanged{Status: api.TaskStatus_TASK_STATUS_AWAITING_APPROVAL, Detail: "waiting for approval of shell.run"},
	)
	f.history[taskC] = events(taskC,
		&api.TaskCreated{Owner: "local", Model: "fake/echo", Title: "hello there", Workspace: "/w/c"},
		&api.UserMessage{Text: "hello there"},
		&api.StatusChanged{Status: api.TaskStatus_TASK_STATUS_RUNNING, Detail: "created"},
		&api.CycleStarted{Cycle: 1, Model: "fake/echo"},
		&api.AssistantMessage{Cycle: 1, Text: "echo: hello there"},
		&api.CycleFinished{Cycle: 1, Outcome: api.CycleOutcome_CYCLE_OUTCOME_COMPLETED, Usage: &api.Usage{PromptTokens: 10, CompletionTokens: 3}},
		&api.StatusChanged{Status: api.TaskStatus_TASK_STATUS_FINISHED, Detail: "answered"},
	)
	f.metas = []*api.TaskMeta{fold(f.history[taskC]), fold(f.history[taskB]), fold(f.history[taskA])}
	f.approvals = []*api.Event{f.history[taskB][7]}
	f.sessions = &api.DelegateSessionList{Sessions: []*api.DelegateSession{
		{SessionId: "3f6c2a9e-51d4-4b8e-9a0c-6d1e2f3a4b5c", Kind: "pi", Source: "lemo", TaskId: taskA, Owner: "local", Invocation: "dlg-20300102T030405-a1b2c3d4e5f6",
			Cwd: "/w/a", Created: ts(10), Modified: ts(60), Bytes: 18234, FirstPrompt: "write the tests for the parser and run them", Path: "/data/delegate/pi/2030-01-02T03-04-15_3f6c2a9e.jsonl"},
		{SessionId: "9a8b7c6d-0000-4111-8222-333344445555", Kind: "pi", Source: "agent", Cwd: "/home/u/src", Created: ts(-86400), Modified: ts(-3600), Bytes: 512,
			FirstPrompt: "started by hand", Path: "/home/u/.pi/agent/sessions/--home-u-src--/2030-01-01_9a8b7c6d.jsonl"},
	}}
	actor := func(id, kind, state string, since, mbox, msgs int, restarts uint32, failure string) *api.ActorInfo {
		a := &api.ActorInfo{Id: id, Kind: kind, State: state, Started: ts(0), Mailbox: uint64(mbox), Processed: uint64(msgs), Restarts: restarts, LastFailure: failure}
		if state != "" {
			a.StateSince = ts(since)
		}
		return a
	}
	f.tree = &api.ActorTree{Time: ts(100), Actors: []*api.ActorInfo{
		actor("daemon", "daemon", "", 0, 0, 1, 0, ""),
		actor("daemon/hub", "hub", "", 0, 0, 432, 0, ""),
		actor("daemon/tasks", "tasks", "", 0, 2, 57, 0, ""),
		supervised(actor("daemon/tasks/"+taskA, "task", "running", 40, 0, 40, 0, ""), 2, "cycle-1: stop (panic): panic: model exploded"),
		actor("daemon/tasks/"+taskA+"/cycle-2", "cycle", "calling fake/shell", 98, 0, 2, 0, ""),
		actor("daemon/tasks/"+taskA+"/tool-call-1-1", "tool", "running shell.run", 60, 3, 1, 0, ""),
		actor("daemon/tasks/"+taskA+"/tool-call-1-1/session-pi", "session", "", 0, 0, 5, 1, "panic: session exploded"),
		actor("daemon/tasks/"+taskB, "task", "awaiting_approval", 90, 0, 9, 0, ""),
	}}
	return f
}

// supervised sets what an actor's supervision decided about its children.
func supervised(a *api.ActorInfo, stopped uint32, decision string) *api.ActorInfo {
	a.StoppedChildren, a.LastDecision = stopped, decision
	return a
}

type protoMessage = proto.Message

// testModel is a model whose frames the test steps: commands run
// synchronously, frame ticks are not scheduled.
type testModel struct {
	*Model
	t     testing.TB
	inbox chan item
}

func plainStyles() styles {
	r := lipgloss.NewRenderer(io.Discard)
	r.SetColorProfile(termenv.Ascii)
	return newStyles(r)
}

func newTestModel(t testing.TB, f *fakeBackend, w, h int) *testModel {
	t.Helper()
	inbox := make(chan item, 1<<16)
	tools, _ := f.Tools(context.Background())
	m := newModel(context.Background(), f, Options{}, plainStyles(), inbox, tools, f.metas)
	m.after = func(time.Duration, func(time.Time) tea.Msg) tea.Cmd { return nil }
	tm := &testModel{Model: m, t: t, inbox: inbox}
	tm.send(tea.WindowSizeMsg{Width: w, Height: h})
	tm.frame(epoch)
	return tm
}

// send delivers msg and runs the commands it returns, and theirs.
func (tm *testModel) send(msg tea.Msg) {
	tm.t.Helper()
	_, cmd := tm.Update(msg)
	tm.exec(cmd)
}

func (tm *testModel) exec(cmd tea.Cmd) {
	if cmd == nil {
		return
	}
	switch msg := cmd().(type) {
	case nil:
	case tea.BatchMsg:
		for _, c := range msg {
			tm.exec(c)
		}
	case tea.QuitMsg:
	default:
		tm.send(msg)
	}
}

// frame runs one frame tick at now and returns the screen.
func (tm *testModel) frame(now time.Time) string {
	tm.send(frameMsg(now))
	return tm.View()
}

// keys types each key (tea's names: "down", "enter", "x", ...).
func (tm *testModel) keys(keys ...string) string {
	for _, k := range keys {
		tm.send(keyMsg(k))
	}
	return tm.View()
}

func keyMsg(k string) tea.KeyMsg {
	switch k {
	case "up":
		return tea.KeyMsg{Type: tea.KeyUp}
	case "down":
		return tea.KeyMsg{Type: tea.KeyDown}
	case "enter":
		return tea.KeyMsg{Type: tea.KeyEnter}
	case "esc":
		return tea.KeyMsg{Type: tea.KeyEsc}
	case "tab":
		return tea.KeyMsg{Type: tea.KeyTab}
	case "end":
		return tea.KeyMsg{Type: tea.KeyEnd}
	case "pgup":
		return tea.KeyMsg{Type: tea.KeyPgUp}
	}
	return tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune(k)}
}

// push queues updates for the next frame.
func (tm *testModel) push(us ...*api.Update) {
	for _, u := range us {
		tm.inbox <- item{u: u}
	}
}

func eventUpdate(e *api.Event) *api.Update { return &api.Update{Body: &api.Update_Event{Event: e}} }

func textDelta(task string, cycle uint32, text string) *api.Update {
	return &api.Update{Body: &api.Update_Delta{Delta: &api.Delta{TaskId: task, Cycle: cycle, Kind: api.DeltaKind_DELTA_KIND_TEXT, Text: text}}}
}
