package console

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	tea "github.com/charmbracelet/bubbletea"

	"lemo/api"
	"lemo/client"
)

// Backend is the part of a daemon connection the console uses
// (*client.Conn). It is wider than most interfaces here because the
// console drives most of the remote API; tests give it a fake.
type Backend interface {
	Welcome() *api.Welcome
	Addr() string
	Tools(ctx context.Context) ([]*api.ToolInfo, error)
	ListTasks(ctx context.Context, before string, limit int) ([]*api.TaskMeta, string, error)
	ReadHistory(ctx context.Context, taskID string, from uint64) ([]*api.Event, error)
	Follow(ctx context.Context, o client.FollowOptions, fn func(*api.Update) error) error
	Inspect(ctx context.Context) (*api.ActorTree, error)
	Approvals(ctx context.Context) ([]*api.Event, error)
	Pause(ctx context.Context, taskID string) (*api.TaskMeta, error)
	Continue(ctx context.Context, taskID, model string) (*api.TaskMeta, error)
	Cancel(ctx context.Context, taskID string) (*api.TaskMeta, error)
	Resolve(ctx context.Context, approvalID string, approve bool, reason string) (*api.TaskMeta, error)
	AllowForTask(ctx context.Context, approvalID, reason string) (*api.TaskMeta, error)
	StopCall(ctx context.Context, taskID, callID string) (*api.TaskMeta, error)
	DelegateSessions(ctx context.Context, taskID string) (*api.DelegateSessionList, error)
}

var _ Backend = (*client.Conn)(nil)

// Options tune the console; zero values take the defaults.
type Options struct {
	// Frame is the least time between two renders caused by the daemon's
	// updates (default 50ms: at most 20 frames a second). Updates that
	// arrive between frames are applied together.
	Frame time.Duration
	// Refresh is how often the actor tree, the pending approvals and,
	// while their pane is open, the delegate sessions are read (default
	// 1s).
	Refresh time.Duration
	// MaxTasks bounds the Tasks listed at start, newest first (default
	// 500); Tasks created later are added as they appear.
	MaxTasks int
	// Inbox bounds the updates waiting for the next frame (default
	// 65536); when it is full the subscription waits, and falls behind
	// and resumes if the console cannot keep up.
	Inbox int
	// ActionTimeout bounds one command (default 30s).
	ActionTimeout time.Duration
}

func (o *Options) defaults() {
	if o.Frame <= 0 {
		o.Frame = 50 * time.Millisecond
	}
	if o.Refresh <= 0 {
		o.Refresh = time.Second
	}
	if o.MaxTasks <= 0 {
		o.MaxTasks = 500
	}
	if o.Inbox <= 0 {
		o.Inbox = 65536
	}
	if o.ActionTimeout <= 0 {
		o.ActionTimeout = 30 * time.Second
	}
}

// item is what the subscription hands the model between frames.
type item struct {
	u      *api.Update
	notice string
}

type pane int

const (
	paneTree pane = iota
	paneTask
	paneSessions
)

// Messages of the model's loop.
type (
	// frameMsg: time to apply what arrived and render.
	frameMsg time.Time
	// pollMsg carries the actor tree and the pending approvals.
	pollMsg struct {
		tree      *api.ActorTree
		treeErr   error
		approvals []*api.Event
		apErr     error
	}
	historyMsg struct {
		taskID string
		events []*api.Event
		err    error
	}
	doneMsg struct {
		a    action
		meta *api.TaskMeta
		err  error
	}
)

// action is a command waiting for (or past) its confirmation.
type action struct {
	verb       string // pause, continue, cancel, approve, always, deny, stop
	taskID     string
	approvalID string
	callID     string
	tool       string
	prompt     string
}

// Model is the console's state and logic (bubbletea's Model). Updates from
// the daemon wait in an inbox and are applied on frame ticks, so however
// fast they arrive the screen is rendered at most once a frame for them.
type Model struct {
	ctx   context.Context
	b     Backend
	o     Options
	inbox <-chan item
	// after schedules the next frame (tea.Tick; tests step frames
	// themselves).
	after func(time.Duration, func(time.Time) tea.Msg) tea.Cmd
	views *client.Views
	st    styles

	welcome *api.Welcome
	width   int
	height  int
	pane    pane
	tasks   map[string]*taskState
	tree    *api.ActorTree
	treeErr error
	rows    []row
	cursor  int
	selKey  string
	rowTop  int
	open    string
	scroll  int
	follow  bool
	details bool
	// eventLog: the Task pane shows the Task's events one a line (l)
	// instead of its transcript.
	eventLog bool
	help     bool
	confirm  *action
	status   string
	isErr    bool
	statusAt time.Time // when status was set (the model's clock); it expires
	// filter narrows the tree to the rows that contain it (/); filtering
	// is true while it is typed.
	filter    string
	filtering bool
	// sortBy is the column the live Tasks are sorted by ("": newest
	// first); o moves to the next.
	sortBy string
	// expanded are the Tasks whose rows show their recent events (e);
	// rowsStale: an event of one arrived, the rows are laid out again at
	// the frame's end.
	expanded  map[string]bool
	rowsStale bool
	notice    string
	polling   bool
	pollSoon  bool
	lastPoll  time.Time
	frameAt   time.Time // the last frame's time: the model's clock

	// Rendering: the frame is re-rendered only when something changed.
	dirty   bool
	frame   string
	renders int
	applied int
	// The sessions pane: the delegate sessions as last read.
	sessions sessionsState
	// transcript cache of the open Task.
	tcKey   string
	tcLines []string
}

// newModel returns a model over b showing metas at first; updates arrive
// on inbox.
func newModel(ctx context.Context, b Backend, o Options, st styles, inbox <-chan item, tools []*api.ToolInfo, metas []*api.TaskMeta) *Model {
	o.defaults()
	m := &Model{ctx: ctx, b: b, o: o, st: st, inbox: inbox, views: client.NewViews(tools), welcome: b.Welcome(),
		tasks: map[string]*taskState{}, follow: true, width: 80, height: 24, dirty: true, after: tea.Tick}
	for _, meta := range metas {
		t := m.task(meta.GetTaskId())
		t.meta, t.seen = meta, meta.GetLastSeq()
	}
	m.rebuild()
	return m
}

func (m *Model) task(id string) *taskState {
	t := m.tasks[id]
	if t == nil {
		t = newTaskState()
		m.tasks[id] = t
	}
	return t
}

// Init starts the frame ticks.
func (m *Model) Init() tea.Cmd { return m.tick() }

func (m *Model) tick() tea.Cmd {
	return m.after(m.o.Frame, func(t time.Time) tea.Msg { return frameMsg(t) })
}

// Update handles one message.
func (m *Model) Update(msg tea.Msg) (tea.Model, tea.Cmd) {
	switch msg := msg.(type) {
	case frameMsg:
		return m, m.onFrame(time.Time(msg))
	case tea.WindowSizeMsg:
		m.width, m.height = msg.Width, msg.Height
		m.dirty = true
	case tea.KeyMsg:
		m.dirty = true
		return m, m.key(msg.String())
	case pollMsg:
		m.onPoll(msg)
	case historyMsg:
		m.dirty = true
		t := m.task(msg.taskID)
		if msg.err != nil {
			t.held = false
			t.events = nil
			m.setStatus(true, "read the history of %s: %v", shortID(msg.taskID), msg.err)
			break
		}
		t.history(msg.events)
	case doneMsg:
		m.onDone(msg)
	case sessionsMsg:
		m.onSessions(msg)
	case recentMsg:
		m.onRecent(msg)
	}
	return m, nil
}

// onFrame applies what arrived since the last frame, polls the tree when
// it is time, and schedules the next frame.
func (m *Model) onFrame(now time.Time) tea.Cmd {
	m.frameAt = now
	if m.status != "" && m.confirm == nil && statusExpired(m.statusAt, now, m.isErr) {
		m.status, m.dirty = "", true
	}
	if m.drain() > 0 {
		m.dirty = true
	}
	if m.rowsStale {
		m.rowsStale = false
		m.rebuild()
	}
	cmds := []tea.Cmd{m.tick()}
	if !m.polling && (m.pollSoon || now.Sub(m.lastPoll) >= m.o.Refresh) {
		m.polling, m.pollSoon, m.lastPoll = true, false, now
		cmds = append(cmds, m.poll())
	}
	if m.pane == paneSessions && now.Sub(m.sessions.readAt) >= m.o.Refresh {
		cmds = append(cmds, m.loadSessions())
	}
	return tea.Batch(cmds...)
}

// drain applies every update waiting in the inbox.
func (m *Model) drain() int {
	n := 0
	for {
		select {
		case it, ok := <-m.inbox:
			if !ok {
				m.inbox = nil
				return n
			}
			m.apply(it)
			n++
		default:
			return n
		}
	}
}

func (m *Model) apply(it item) {
	m.applied++
	if it.notice != "" {
		m.notice = it.notice
		return
	}
	switch b := it.u.GetBody().(type) {
	case *api.Update_Event:
		t := m.task(b.Event.GetTaskId())
		known := t.meta != nil
		t.event(b.Event)
		if !known {
			m.rebuild()
		}
		if m.expanded[b.Event.GetTaskId()] {
			t.addRecent(b.Event)
			m.rowsStale = true
		}
	case *api.Update_Delta:
		if t := m.tasks[b.Delta.GetTaskId()]; t != nil {
			t.delta(b.Delta)
		}
	case *api.Update_CaughtUp:
		m.notice = ""
	}
}

func (m *Model) onPoll(p pollMsg) {
	m.polling = false
	m.dirty = true
	if p.treeErr == nil {
		m.tree, m.treeErr = p.tree, nil
	} else {
		m.treeErr = p.treeErr
		if errors.Is(p.treeErr, client.ErrPermissionDenied) {
			m.tree = nil
		}
	}
	if p.apErr == nil {
		by := map[string][]*api.ApprovalRequested{}
		for _, ev := range p.approvals {
			if a := ev.GetApprovalRequested(); a != nil {
				by[ev.GetTaskId()] = append(by[ev.GetTaskId()], a)
			}
		}
		for id, t := range m.tasks {
			t.setPolled(by[id])
		}
		for id, list := range by {
			if m.tasks[id] == nil {
				m.task(id).setPolled(list)
			}
		}
	}
	m.rebuild()
}

// rebuild lays the tree out again, keeping the selection on the same row.
// filterKey edits the filter being typed: Enter keeps it, Esc drops it.
func (m *Model) filterKey(k string) {
	switch k {
	case "enter":
		m.filtering = false
	case "esc":
		m.filtering, m.filter = false, ""
	case "backspace":
		if r := []rune(m.filter); len(r) > 0 {
			m.filter = string(r[:len(r)-1])
		}
	case "ctrl+c":
		m.filtering = false
	default:
		if r := []rune(k); len(r) == 1 && r[0] >= ' ' {
			m.filter += k
		}
	}
	m.rebuild()
}

func (m *Model) rebuild() {
	m.rows = filterRows(withRecent(buildRows(m.tree, m.tasks, sortOrder(m.sortBy)), m.expanded, m.tasks), m.filter)
	m.cursor = min(m.cursor, max(len(m.rows)-1, 0))
	if m.selKey == "" {
		return // the user has not chosen a row yet
	}
	for i, r := range m.rows {
		if r.key == m.selKey {
			m.cursor = i
			return
		}
	}
	// The row is gone (its actor stopped): keep the place, and the Task
	// when its dormant row is there.
	if r := m.selKey; strings.HasPrefix(r, tasksPath+"/") {
		if id, _ := rowPath(r); id != "" {
			for i, row := range m.rows {
				if row.taskID == id && row.callID == "" {
					m.cursor = i
					break
				}
			}
		}
	}
	if m.cursor < len(m.rows) {
		m.selKey = m.rows[m.cursor].key
	}
}

func (m *Model) poll() tea.Cmd {
	ctx, b, timeout := m.ctx, m.b, m.o.ActionTimeout
	inspect := m.welcome.GetOperator()
	return func() tea.Msg {
		ctx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		var p pollMsg
		if inspect {
			p.tree, p.treeErr = b.Inspect(ctx)
		} else {
			p.treeErr = fmt.Errorf("%w: the actor tree is shown to operator tokens only", client.ErrPermissionDenied)
		}
		p.approvals, p.apErr = b.Approvals(ctx)
		return p
	}
}

func (m *Model) loadHistory(id string) tea.Cmd {
	t := m.task(id)
	if t.held {
		return nil
	}
	t.held, t.events = true, nil
	ctx, b, timeout := m.ctx, m.b, m.o.ActionTimeout
	return func() tea.Msg {
		ctx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		evs, err := b.ReadHistory(ctx, id, 1)
		return historyMsg{taskID: id, events: evs, err: err}
	}
}

func (m *Model) setStatus(isErr bool, format string, args ...any) {
	m.status, m.isErr, m.statusAt = fmt.Sprintf(format, args...), isErr, m.frameAt
}

// statusTTL is how long a status message stays (errors twice as long).
const statusTTL = 5 * time.Second

// statusExpired reports whether the status message set at "at" has been
// shown long enough at now.
func statusExpired(at, now time.Time, isErr bool) bool {
	ttl := statusTTL
	if isErr {
		ttl *= 2
	}
	return now.Sub(at) >= ttl
}

// key handles a key press.
func (m *Model) key(k string) tea.Cmd {
	if m.confirm != nil {
		a := *m.confirm
		m.confirm = nil
		if k == "y" || k == "Y" {
			m.setStatus(false, "%s…", a.prompt)
			return m.run(a)
		}
		m.setStatus(false, "not done: %s", a.prompt)
		return nil
	}
	if m.help {
		// Any key closes the help, and does only that.
		m.help = false
		if k == "ctrl+c" {
			return tea.Quit
		}
		return nil
	}
	if m.filtering {
		m.filterKey(k)
		return nil
	}
	if how, ok := map[string]int{"e": expandToggle, "right": expandOpen, "left": expandClose}[k]; ok && m.pane == paneTree {
		return m.expandKey(how)
	}
	switch k {
	case "ctrl+c", "q":
		return tea.Quit
	case "?":
		m.help = true
	case "o":
		if m.pane == paneTree {
			i := slices.Index(sortColumns, m.sortBy)
			m.sortBy = sortColumns[(i+1)%len(sortColumns)]
			m.rebuild()
			if m.sortBy == "" {
				m.setStatus(false, "tasks: newest first")
			} else {
				m.setStatus(false, "tasks sorted by %s (o: the next column)", m.sortBy)
			}
		}
	case "/":
		if m.pane == paneTree {
			m.filtering, m.filter = true, ""
			m.rebuild()
		}
	case "S":
		return m.openSessions()
	case "tab":
		if m.pane == paneSessions {
			m.pane = paneTree
			return nil
		}
		if m.pane == paneTree {
			return m.openTask(m.selectedTask())
		}
		m.pane = paneTree
	case "esc":
		if m.pane == paneTask {
			m.status = ""
		}
		if m.pane == paneTree && m.filter != "" {
			m.filter = ""
			m.rebuild()
		}
		m.pane = paneTree
	case "enter":
		if m.pane == paneTree {
			return m.openTask(m.selectedTask())
		}
		if m.pane == paneSessions {
			return m.openSessionTask()
		}
	case "p", "c", "x", "a", "A", "d", "s":
		m.ask(k)
	case "l":
		// The event log of the open Task, or of the selected one.
		if m.pane == paneSessions {
			return nil
		}
		if m.pane == paneTree {
			id := m.selectedTask()
			if id == "" {
				m.setStatus(true, "select a Task first")
				return nil
			}
			m.eventLog = true
			return m.openTask(id)
		}
		m.eventLog, m.follow = !m.eventLog, true
	default:
		switch m.pane {
		case paneTree:
			m.moveTree(k)
		case paneSessions:
			return m.sessionsKey(k)
		default:
			return m.moveTask(k)
		}
	}
	return nil
}

func (m *Model) openTask(id string) tea.Cmd {
	if id == "" {
		m.setStatus(true, "select a Task first")
		return nil
	}
	if m.pane != paneTask || m.open != id {
		m.status = "" // about what was on screen before
	}
	m.pane, m.open, m.follow = paneTask, id, true
	return m.loadHistory(id)
}

func (m *Model) selectedRow() *row {
	if m.cursor < len(m.rows) {
		return &m.rows[m.cursor]
	}
	return nil
}

// selectedTask is the Task the keys act on: the open one in the Task
// pane, the selected row's in the tree.
func (m *Model) selectedTask() string {
	if m.pane == paneTask {
		return m.open
	}
	if m.pane == paneSessions {
		return ""
	}
	if r := m.selectedRow(); r != nil {
		return r.taskID
	}
	return ""
}

// moveCursor moves a list cursor over n rows by key k (a page is page
// rows) and keeps it in the list; ok is false for a key that does not move.
func moveCursor(cursor, n, page int, k string) (moved int, ok bool) {
	switch k {
	case "up", "k":
		cursor--
	case "down", "j":
		cursor++
	case "pgup":
		cursor -= page
	case "pgdown", " ":
		cursor += page
	case "home", "g":
		cursor = 0
	case "end", "G":
		cursor = n - 1
	default:
		return cursor, false
	}
	return max(min(cursor, n-1), 0), true
}

func (m *Model) moveTree(k string) {
	c, ok := moveCursor(m.cursor, len(m.rows), max(m.treeRows()-1, 1), k)
	if !ok {
		m.dirty = false
		return
	}
	m.cursor = c
	if m.cursor < len(m.rows) {
		m.selKey = m.rows[m.cursor].key
	}
}

func (m *Model) moveTask(k string) tea.Cmd {
	page := max(m.transcriptRows()-1, 1)
	switch k {
	case "up", "k":
		m.scrollBy(-1)
	case "down", "j":
		m.scrollBy(1)
	case "pgup":
		m.scrollBy(-page)
	case "pgdown", " ":
		m.scrollBy(page)
	case "home", "g":
		m.follow, m.scroll = false, 0
	case "end", "G":
		m.follow = true
	case "i":
		m.details = !m.details
	case "[", "]":
		ids := m.taskIDs()
		i := sort.Search(len(ids), func(i int) bool { return ids[i] <= m.open })
		if k == "[" {
			i--
		} else if i < len(ids) && ids[i] == m.open {
			i++
		}
		if i >= 0 && i < len(ids) {
			return m.openTask(ids[i])
		}
	default:
		m.dirty = false
	}
	return nil
}

func (m *Model) scrollBy(n int) {
	if m.follow {
		m.scroll = max(len(m.tcLines)-m.transcriptRows(), 0)
	}
	m.scroll += n
	limit := max(len(m.tcLines)-m.transcriptRows(), 0)
	m.scroll = max(min(m.scroll, limit), 0)
	m.follow = m.scroll >= limit
}

// taskIDs returns the known Tasks, newest first.
func (m *Model) taskIDs() []string {
	ids := make([]string, 0, len(m.tasks))
	for id, t := range m.tasks {
		if t.meta != nil {
			ids = append(ids, id)
		}
	}
	sort.Sort(sort.Reverse(sort.StringSlice(ids)))
	return ids
}

// ask prepares the action of key k and asks for its confirmation.
func (m *Model) ask(k string) {
	id := m.selectedTask()
	if id == "" {
		m.setStatus(true, "select a Task first")
		return
	}
	a := action{taskID: id}
	name := shortID(id)
	switch k {
	case "p":
		a.verb, a.prompt = "pause", "pause task "+name
	case "c":
		a.verb, a.prompt = "continue", "continue task "+name
	case "x":
		a.verb, a.prompt = "cancel", "cancel task "+name
	case "a", "A", "d":
		pend := m.task(id).pending()
		if len(pend) == 0 {
			m.setStatus(true, "task %s has no pending approval", name)
			return
		}
		p := pend[0]
		a.approvalID, a.callID, a.tool = p.GetApprovalId(), p.GetCallId(), p.GetTool()
		a.verb = map[string]string{"a": "approve", "A": "always", "d": "deny"}[k]
		a.prompt = fmt.Sprintf("%s %s %s of task %s", a.verb, orText(a.tool, "call"), a.callID, name)
		if k == "A" {
			if p.GetDuringRun() {
				m.setStatus(true, "a running call's own question is decided once: a approves it, d denies it")
				return
			}
			a.prompt = fmt.Sprintf("approve %s and always allow %s in task %s", a.callID, alwaysKind(a.tool), name)
		}
	case "s":
		call, tool := m.stopTarget(id)
		if call == "" {
			m.setStatus(true, "task %s has no running tool call", name)
			return
		}
		a.verb, a.callID, a.tool = "stop", call, tool
		a.prompt = fmt.Sprintf("stop %s %s of task %s", orText(tool, "call"), call, name)
	}
	m.confirm = &a
}

// stopTarget is the tool call s stops: the selected tool row, else the
// Task's first running call.
func (m *Model) stopTarget(taskID string) (call, tool string) {
	if m.pane == paneTree {
		if r := m.selectedRow(); r != nil && r.callID != "" && r.taskID == taskID {
			return r.callID, m.toolOf(taskID, r.callID)
		}
	}
	for _, r := range m.rows {
		if r.taskID == taskID && r.kind == "tool" && r.callID != "" {
			return r.callID, m.toolOf(taskID, r.callID)
		}
	}
	if t := m.tasks[taskID]; t != nil {
		if run := t.running(); len(run) > 0 {
			return run[0], t.calls[run[0]]
		}
	}
	return "", ""
}

// toolOf names the tool of a call: from the Task's events, else from its
// actor's state.
func (m *Model) toolOf(taskID, callID string) string {
	if tool := m.task(taskID).calls[callID]; tool != "" {
		return tool
	}
	for _, r := range m.rows {
		if r.taskID == taskID && r.callID == callID && r.tool != "" {
			return r.tool
		}
	}
	return ""
}

// run executes a confirmed action.
func (m *Model) run(a action) tea.Cmd {
	ctx, b, timeout := m.ctx, m.b, m.o.ActionTimeout
	return func() tea.Msg {
		ctx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		var meta *api.TaskMeta
		var err error
		switch a.verb {
		case "pause":
			meta, err = b.Pause(ctx, a.taskID)
		case "continue":
			meta, err = b.Continue(ctx, a.taskID, "")
		case "cancel":
			meta, err = b.Cancel(ctx, a.taskID)
		case "approve", "deny":
			meta, err = b.Resolve(ctx, a.approvalID, a.verb == "approve", "decided in the console")
		case "always":
			meta, err = b.AllowForTask(ctx, a.approvalID, "decided in the console")
		case "stop":
			meta, err = b.StopCall(ctx, a.taskID, a.callID)
		}
		return doneMsg{a: a, meta: meta, err: err}
	}
}

func (m *Model) onDone(d doneMsg) {
	m.dirty = true
	m.pollSoon = true
	if d.err != nil {
		if d.a.verb == "always" {
			// The prompt is long; the error must fit.
			m.setStatus(true, "always allow %s failed: %v", d.a.callID, d.err)
			return
		}
		m.setStatus(true, "%s failed: %v", d.a.prompt, d.err)
		return
	}
	past := map[string]string{"pause": "paused", "continue": "continued", "cancel": "cancelled", "approve": "approved", "always": "approved (always)", "deny": "denied", "stop": "stopped"}[d.a.verb]
	what := "task " + shortID(d.a.taskID)
	if d.a.callID != "" {
		what = orText(d.a.tool, "call") + " " + d.a.callID + " of " + what
	}
	m.setStatus(false, "%s %s; the task is %s", past, what, statusName(d.meta.GetStatus()))
	if d.meta != nil {
		t := m.task(d.a.taskID)
		if t.meta == nil || d.meta.GetLastSeq() > t.meta.GetLastSeq() {
			// Events up to the answer's seq arrive through the
			// subscription; the metadata shows the outcome at once.
			t.meta = d.meta
		}
	}
	if d.a.approvalID != "" {
		t := m.task(d.a.taskID)
		t.resolved[d.a.approvalID] = true
		delete(t.asked, d.a.approvalID)
		delete(t.polled, d.a.approvalID)
	}
}

// alwaysKind names what an always-allow of a call of tool covers: the
// same command for the shell, else every call of the tool (as the daemon
// decides it: ApprovalResolved.allow_rule).
func alwaysKind(tool string) string {
	switch tool {
	case "shell.run":
		return "this exact command"
	case "":
		return "such calls"
	}
	return tool + " calls"
}

func orText(s, d string) string {
	if s == "" {
		return d
	}
	return s
}
