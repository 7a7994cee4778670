package actors

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"lemo/actors/live"
	"lemo/actors/taskstate"
	"lemo/api"
	"lemo/excerpt"
	"lemo/internal/failpoint"
	"lemo/memory"
	"lemo/persistence"
	"lemo/prompt"
	"lemo/providers"
	"lemo/supervision"
	"lemo/tools"
)

// Limits that keep every event well below the store's record limit.
const (
	maxTextBytes     = 256 << 10 // assistant text, reasoning, messages in failures
	maxArgsBytes     = 256 << 10 // tool call arguments
	maxRetainedBytes = 256 << 10 // a tool's retained output
	maxMetadataBytes = 64 << 10  // provider metadata
)

// inflight is an append waiting for its acknowledgement, and what to do
// after it.
type inflight struct {
	events  []*api.Event
	replies []chan reply
	then    func(ctx actor.Context)
	// held are the times the first events were decided at, when a hold
	// kept them (hold.go); the others are stamped now.
	held []*timestamppb.Timestamp
	// reserve: the append may use the store's reserve (it pauses the Task
	// for a full disk, or because the daemon stops).
	reserve bool
	// tree: what the append does to other Tasks (nil: nothing); onErr
	// answers a tree request when the append fails.
	tree  *treeExtra
	onErr func(error)
	// dayCheck makes the append conditional on the owner's daily budget
	// (it records a Cycle's start: budget.go); dayRefused records instead
	// what the Task does when the store refuses it.
	dayCheck   persistence.DayCheck
	dayRefused func(ctx actor.Context, day *taskstate.DayExceeded)
}

// task is the actor of one Task: the single writer of its history.
type task struct {
	env         *env
	id          string
	received    *atomic.Uint64
	incarnation uint64
	self        *actor.PID

	st      *taskstate.State
	meta    *api.TaskMeta
	loading bool
	// ancestors: the Task's ancestors from the root down to its parent
	// (nil for a root); the hub forwards some of its events to their
	// subscriptions.
	ancestors []string
	// fresh: the actor was activated to create the Task, which has no
	// history to load.
	fresh    bool
	inflight *inflight
	// hold is the append held while read-only calls run (hold.go).
	hold *held
	// queue holds messages that arrived while loading or appending.
	queue []any

	cycle    *actor.PID
	cycleNum uint32
	tools    map[string]*actor.PID // running calls
	// opened are the live outputs of the running calls.
	opened map[string]*live.Result
	// live holds the live results: what the model sees of each call's
	// output, and the whole output (bounded by the accountant).
	live   map[string]liveResult
	timers map[string]*time.Timer // approval deadlines
	// waiters are running calls waiting for the decision of an approval
	// they asked for.
	waiters map[string]chan tools.Decision
	// stopped names who stopped a running call (StopCall), so its
	// cancellation is recorded as theirs.
	stopped map[string]string

	// stopping is set when the daemon stops; answered once the Task told the
	// manager it is done.
	stopping *shutdown
	answered bool

	// diskFull is set from the moment the Task learns that the disk is
	// full until its pause is recorded: its model call and tools are being
	// stopped and it starts nothing new. diskRetry retries a pause the store
	// could not record yet.
	diskFull  bool
	diskRetry *time.Timer

	// history is the Task's decoded history while it runs, so Cycles need
	// not read and decode the store; nil when not held (it is dropped when
	// the Task stops running). tail collects the events appended while it
	// is not held, so a Cycle's read can be adopted.
	history []*api.Event
	tail    []*api.Event

	// crash is the Failure this Task's previous incarnation crashed with,
	// set by the manager when it restarts the Task; the new incarnation
	// records it before it recovers (supervision.RecordTaskRestart).
	crash *atomic.Pointer[api.Failure]
	// Agent tree: calls waiting for children to end or for messages, and
	// whether an inbox read or take is under way (inboxAgain: read again
	// after it).
	waits      []*waitReq
	msgWaits   []*waitMsgReq
	inboxBusy  bool
	inboxAgain bool
	// Budgets (budget.go): timeTimer fires when the working time may have
	// run out; timeUp is set from then until the pause is recorded;
	// lastReservation is the open Cycle's, for the spend metrics.
	timeTimer       *time.Timer
	timeUp          bool
	lastReservation *api.BudgetReservation
	// The tree's budget (treebudget.go).
	tb treeBudget
	// kids are the actors of this Task's child Tasks that run under its
	// own (placement.go), by actor id.
	kids map[string]*taskSlot
}

// liveResult is the model's view of a call's output and the call's whole
// output.
type liveResult struct {
	presented json.RawMessage
	whole     *live.Result
}

// childCrashed reports a Cycle or Tool actor that failed in Receive (a
// panic of its goroutine routed there, or its own), with the message it
// was processing and the decision its Task's supervision took.
type childCrashed struct {
	pid      *actor.PID
	reason   any
	message  any
	decision supervision.Decision
}

func newTask(e *env, id string, received *atomic.Uint64) *task {
	return &task{env: e, id: id, received: received, tools: make(map[string]*actor.PID), live: make(map[string]liveResult), opened: make(map[string]*live.Result),
		timers: make(map[string]*time.Timer), waiters: make(map[string]chan tools.Decision), stopped: make(map[string]string), kids: make(map[string]*taskSlot)}
}

var _ actor.SupervisorStrategy = (*task)(nil)

// HandleFailure is the Task's supervision of its Cycle and Tool actors: it
// decides (supervision.Decide), stops the child, and records the failure
// with the decision through the Task's own path (childCrashed), which
// answers whoever waits on the Cycle or the call. Its child Tasks' actors
// are supervised as Tasks (superviseKid).
func (t *task) HandleFailure(sys *actor.ActorSystem, sup actor.Supervisor, child *actor.PID, rs *actor.RestartStatistics, reason interface{}, message interface{}) {
	level := childLevel(child)
	if level == supervision.LevelChildTask {
		t.superviseKid(sys, sup, child, rs, reason, message)
		return
	}
	d := supervision.Decide(t.env.opts.TaskBudget, supervision.Failure{Level: level, Reason: reason})
	t.env.noteDecision(child, level, reason, d)
	sup.StopChildren(child)
	sys.Root.Send(t.self, &childCrashed{pid: child, reason: reason, message: actor.UnwrapEnvelopeMessage(message), decision: d})
}

func (t *task) busy() bool { return t.loading || t.inflight != nil || t.hold != nil }

func (t *task) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		t.self = ctx.Self()
		t.incarnation = t.env.incarnations.Add(1)
		t.adoptBook()
		if t.fresh {
			s := taskstate.New()
			s.TaskID = t.id
			t.loading = true
			t.onLoaded(ctx, &loaded{incarnation: t.incarnation, state: s})
			return
		}
		t.load(ctx)
	case *actor.Restarting:
		t.endHold() // lost with the incarnation: its answer reads as interrupted
		t.failQueued(ErrInterrupted)
		t.stopTimers()
		t.releaseLive(true)
	case *actor.Stopping:
		t.endHold() // lost with the incarnation: its answer reads as interrupted
		t.failQueued(ErrStopped)
		t.stopTimers()
		t.releaseLive(true)
	case *actor.Stopped, *actor.Terminated:
		if _, ok := m.(*actor.Stopped); ok {
			t.dropBook()
		}
		if term, ok := m.(*actor.Terminated); ok && t.cycle != nil && term.Who.Equal(t.cycle) {
			t.cycle = nil
		} else if ok {
			t.kidTerminated(ctx, term.Who)
		}
	case *spawnTask:
		t.onSpawnTask(ctx, m)
	case *actor.ReceiveTimeout:
		ctx.CancelReceiveTimeout()
		if _, ok := t.passivation(); ok {
			ctx.Send(t.env.tasks, &taskIdle{taskID: t.id, received: t.received.Load()})
		}
	case *loaded:
		if m.incarnation == t.incarnation {
			t.onLoaded(ctx, m)
		}
	case *appended:
		if m.incarnation == t.incarnation {
			t.onAppended(ctx, m)
		}
	case *taskCommand:
		t.received.Add(1)
		t.dispatch(ctx, m)
	default:
		t.dispatch(ctx, m)
	}
}

// dispatch handles m now, or after the load or append in flight (or held).
func (t *task) dispatch(ctx actor.Context, m any) {
	if t.holding(ctx, m) {
		t.settle(ctx)
		return
	}
	if t.busy() {
		t.queue = append(t.queue, m)
		return
	}
	t.handle(ctx, m)
	t.settle(ctx)
}

func (t *task) handle(ctx actor.Context, m any) {
	switch m := m.(type) {
	case *taskCommand:
		t.command(ctx, m)
	case *cycleResult:
		t.onCycleResult(ctx, m)
	case *toolResult:
		t.onToolResult(ctx, m)
	case *childCrashed:
		t.onChildCrashed(ctx, m)
	case *approvalTimeout:
		t.onApprovalTimeout(ctx, m)
	case *askApproval:
		t.onAskApproval(ctx, m)
	case *loadTools:
		t.onLoadTools(ctx, m)
	case *abandonApproval:
		t.persist(ctx, t.st.CancelApproval(m.approvalID, "the call no longer waits for it"), nil, nil)
	case *shutdown:
		t.onShutdown(ctx, m)
	case *liveEvicted:
		// As after a restart: the model sees the retained part, or that
		// the result is unavailable.
		if lr, ok := t.live[m.callID]; ok {
			lr.whole.Release()
			delete(t.live, m.callID)
		}
	case *diskFullNotice:
		t.enterDiskFull(ctx)
	case *diskRetry:
		t.diskRetry = nil // settle records the pause
	case *resumeDiskFull:
		t.persist(ctx, t.st.ResumeDiskFull(), nil, nil)
	case *timeBudget:
		t.onTimeBudget(ctx)
	default:
		if t.treeRequest(ctx, m) {
			return
		}
		t.env.log.Warn().Str("task", t.id).Str("type", fmt.Sprintf("%T", m)).Msg("task: unexpected message")
	}
}

// settle takes the next step and drains queued messages while nothing is in
// flight, then arms passivation when the Task is idle.
func (t *task) settle(ctx actor.Context) {
	for !t.busy() {
		t.reconcile(ctx)
		if t.busy() || len(t.queue) == 0 {
			break
		}
		m := t.queue[0]
		// The array keeps no handled message: an idle Task would hold
		// the last ones (a Cycle's result holds its history) until
		// passivated.
		t.queue[0] = nil
		if t.queue = t.queue[1:]; len(t.queue) == 0 {
			t.queue = nil
		}
		t.handle(ctx, m)
	}
	if t.busy() {
		return
	}
	if t.stopping != nil {
		t.checkShutdown(ctx)
		return
	}
	if !t.st.Exists() {
		// Nothing to keep: the manager stops this actor unless a command is
		// on its way.
		ctx.Send(t.env.tasks, &taskIdle{taskID: t.id, received: t.received.Load()})
		return
	}
	t.env.deps.Live.SetIdle(t.id, !t.st.Running())
	t.armTimeBudget(ctx)
	if d, ok := t.passivation(); ok {
		ctx.SetReceiveTimeout(d)
	} else {
		ctx.CancelReceiveTimeout()
	}
}

// passivation says whether the Task may leave memory once idle, and after
// how long.
func (t *task) passivation() (time.Duration, bool) {
	return passivateAfter(idleState{
		Busy:         t.busy() || len(t.queue) > 0 || t.st == nil || t.tb.serving(),
		Working:      t.st != nil && t.st.Running(),
		Cycle:        t.cycle != nil,
		Calls:        len(t.tools),
		LiveResults:  len(t.live),
		ApprovalWait: len(t.timers),
		ChildActors:  len(t.kids),
	}, t.env.opts.IdleTimeout, t.env.opts.PausedLiveTimeout)
}

// idleState is what a Task holds that bears on its passivation.
type idleState struct {
	Busy         bool // loading, appending or with queued messages
	Working      bool // running or awaiting approval
	Cycle        bool
	Calls        int // running tool calls
	LiveResults  int
	ApprovalWait int // approval deadlines armed
	ChildActors  int // child Tasks' actors running under its own
}

// passivateAfter decides whether a Task may be passivated once idle and
// after how long: never while it works, has something in flight or has
// child Tasks' actors under its own (they would stop with it); after
// liveTimeout when it only holds live results (which passivation
// releases, as a restart would); after idleTimeout when it holds nothing.
func passivateAfter(s idleState, idleTimeout, liveTimeout time.Duration) (time.Duration, bool) {
	switch {
	case s.Busy || s.Working || s.Cycle || s.Calls > 0 || s.ApprovalWait > 0 || s.ChildActors > 0:
		return 0, false
	case s.LiveResults > 0:
		return liveTimeout, true
	}
	return idleTimeout, true
}

// releaseLive releases the Task's live results (all: also the outputs of
// running calls).
func (t *task) releaseLive(all bool) {
	for id, lr := range t.live {
		lr.whole.Release()
		delete(t.live, id)
	}
	if all {
		for id, r := range t.opened {
			r.Release()
			delete(t.opened, id)
		}
	}
}

// releaseUnrecorded releases the live outputs of calls that reported but
// whose results were never recorded: after an append that failed and left
// the Task as its log has it, a call no longer running had its result in
// that append (no hold is kept while an append is in flight). The call is
// closed without it (the pause records it as stopped), or was never
// recorded when its start was held with it; nothing will present the
// output, and released, its spill file stops taking space on the disk that
// refused the append.
func (t *task) releaseUnrecorded() {
	for id, r := range t.opened {
		if _, running := t.tools[id]; !running {
			r.Release()
			delete(t.opened, id)
		}
	}
}

func (t *task) failQueued(err error) {
	if t.inflight != nil {
		for _, r := range t.inflight.replies {
			replyTo(r, reply{err: err})
		}
	}
	for _, m := range t.queue {
		if tc, ok := m.(*taskCommand); ok {
			replyTo(tc.reply, reply{err: err})
		}
	}
	t.queue = nil
}

// load folds the Task's history on a goroutine.
func (t *task) load(ctx actor.Context) {
	t.loading = true
	inc, self, sys, store, id := t.incarnation, ctx.Self(), ctx.ActorSystem(), t.env.deps.Store, t.id
	settled := t.env.appending.settled(id)
	t.env.goroutine(func() {
		<-settled // what an earlier incarnation appended lands first
		s, meta, err := loadActivation(store, id)
		var anc []string
		if err == nil {
			anc = readAncestry(store, s.ParentID)
		}
		sys.Root.Send(self, &loaded{incarnation: inc, state: s, meta: meta, ancestors: anc, err: err})
	})
}

func (t *task) onLoaded(ctx actor.Context, m *loaded) {
	t.loading = false
	if m.err != nil {
		err := &supervision.StoreError{TaskID: t.id, Op: "load", Err: m.err}
		t.failQueued(err)
		panic(err)
	}
	t.st = m.state
	t.ancestors = m.ancestors
	if !t.st.Exists() {
		t.history = []*api.Event{} // a new Task: everything it records is kept
	}
	var crash *api.Failure // why the previous incarnation crashed
	if t.crash != nil {
		crash = t.crash.Swap(nil)
	}
	if t.st.Exists() {
		t.env.inspector.setState(t.self.Id, t.st.StatusWord(), t.env.now())
		t.meta = m.meta
		t.st.Rerun(rerunnable(t.env.deps.Tools))
		bodies := t.env.opts.Budget.recovered(t.env.deps.Tools, t.st, t.st.Recover(t.env.now()))
		if crash != nil {
			bodies = append([]proto.Message{crash}, bodies...)
		}
		if len(bodies) > 0 {
			t.persist(ctx, bodies, nil, nil)
		}
		t.armPendingApprovals(ctx)
		// What was sent while it was dormant or the daemon was down.
		t.readInbox(ctx)
		// Asks a previous incarnation of this root did not answer.
		t.nextBudgetAsk(ctx)
	}
	t.settle(ctx)
}

// persist stamps bodies, appends them on a goroutine and, once durable,
// applies and publishes them, answers replies and runs then.
func (t *task) persist(ctx actor.Context, bodies []proto.Message, replies []chan reply, then func(ctx actor.Context)) {
	t.persistWith(ctx, bodies, replies, then, false)
}

// persistWith is persist; reserve marks an append that may use the store's
// reserve when the disk is full (persistence.Append.Reserve).
func (t *task) persistWith(ctx actor.Context, bodies []proto.Message, replies []chan reply, then func(ctx actor.Context), reserve bool) {
	t.persistFull(ctx, &inflight{replies: replies, then: then, reserve: reserve}, bodies)
}

// persistTree is persist with effects on other Tasks (x); onErr answers
// the request behind it if the append fails.
func (t *task) persistTree(ctx actor.Context, bodies []proto.Message, x *treeExtra, then func(ctx actor.Context), onErr func(error)) {
	t.persistFull(ctx, &inflight{then: then, tree: x, onErr: onErr}, bodies)
}

// persistFull stamps bodies and appends them with what inf adds.
func (t *task) persistFull(ctx actor.Context, inf *inflight, bodies []proto.Message) {
	replies, then, reserve := inf.replies, inf.then, inf.reserve
	if len(bodies) == 0 {
		for _, r := range replies {
			replyTo(r, reply{meta: t.meta})
		}
		if then != nil {
			then(ctx)
		}
		return
	}
	evs := t.st.Stamp(bodies, t.env.now())
	for i, at := range inf.held {
		evs[i].Time = at
	}
	inf.events = evs
	t.inflight = inf
	x := inf.tree
	if e := t.parentEntry(evs); e != nil {
		// A child that ends (or runs again) tells its parent in the same
		// commit.
		if x == nil {
			x = &treeExtra{}
		}
		parent, prev := t.st.ParentID, x.extra
		x.notify = append(x.notify, parent)
		x.extra = func(evs []*api.Event) ([]persistence.KV, error) {
			var kvs []persistence.KV
			if prev != nil {
				var err error
				if kvs, err = prev(evs); err != nil {
					return nil, err
				}
			}
			kv, err := persistence.InboxPut(parent, e)
			return append(kvs, kv), err
		}
		inf.tree = x
	}
	inc, self, sys, store, id := t.incarnation, ctx.Self(), ctx.ActorSystem(), t.env.deps.Store, t.id
	owner := t.st.Owner
	if owner == "" {
		if c, ok := bodies[0].(*api.TaskCreated); ok {
			owner = c.GetOwner()
		}
	}
	mem := t.env.deps.Memory
	fp := ""
	if failpoint.Armed() {
		fp = stepFailpoint(evs)
	}
	end := t.env.appending.begin(id)
	t.env.goroutine(func() {
		defer end()
		var meta *api.TaskMeta
		err := failpoint.Eval(fp, evs)
		if err == nil {
			var extra []persistence.KV
			if mem != nil {
				extra = mem.Postings(owner, evs)
			}
			a := persistence.Append{TaskID: id, Events: evs, Reserve: reserve, DayCheck: inf.dayCheck}
			if x != nil {
				a.Also = x.also
				if x.extra != nil {
					var more []persistence.KV
					if more, err = x.extra(evs); err == nil {
						extra = append(extra, more...)
					}
				}
			}
			a.Extra = extra
			if err == nil {
				meta, err = store.Append(context.Background(), a)
			}
		}
		sys.Root.Send(self, &appended{incarnation: inc, meta: meta, err: err})
	})
}

// Failpoints at the Task's steps (see package failpoint). Each fails the
// append that records its step as a failed commit would (nothing lands);
// the argument is the append's []*api.Event.
const (
	// FailToolStart: the record of a call's execution start, made before
	// the tool runs.
	FailToolStart = "actors.tool-start"
	// FailToolEnd: the record of a call's result or failure, made after
	// the tool ran.
	FailToolEnd = "actors.tool-end"
	// FailApprovalResolve: the record of an approval's resolution.
	FailApprovalResolve = "actors.approval-resolve"
	// FailCycleStart: the record of a Cycle's start (with its
	// reservation), made before the model call, when the append records
	// none of the steps above.
	FailCycleStart = "actors.cycle-start"
)

// stepFailpoint names the failpoint of the step evs record; "" for none.
// A call's start wins over the end of another call, the end of a call that
// ran over the approvals it cancels, a resolution over the refusal it
// records for a call that never ran, and each of them over a Cycle's
// start.
func stepFailpoint(evs []*api.Event) string {
	start, end, resolve, cycle := false, false, false, false
	for _, ev := range evs {
		switch b := ev.Body.(type) {
		case *api.Event_CycleStarted:
			cycle = true
		case *api.Event_ToolExecutionStarted:
			start = true
		case *api.Event_ToolResult:
			end = true
		case *api.Event_ToolFailed:
			end = end || b.ToolFailed.GetKind() != api.ToolFailureKind_TOOL_FAILURE_KIND_NOT_APPROVED
		case *api.Event_ApprovalResolved:
			resolve = true
		}
	}
	switch {
	case start:
		return FailToolStart
	case end:
		return FailToolEnd
	case resolve:
		return FailApprovalResolve
	case cycle:
		return FailCycleStart
	}
	return ""
}

func (t *task) onAppended(ctx actor.Context, m *appended) {
	inf := t.inflight
	t.inflight = nil
	var day *taskstate.DayExceeded
	if m.err != nil && inf.dayRefused != nil && errors.As(m.err, &day) {
		// The owner's daily budget refused the Cycle's start: nothing was
		// written; the Task records the pause instead. A grant of its
		// tree's root for that Cycle goes back.
		t.grantUsed(ctx, t.tb.grantCycle)
		inf.dayRefused(ctx, day)
		t.settle(ctx)
		return
	}
	if m.err != nil {
		for _, r := range inf.replies {
			replyTo(r, reply{err: fmt.Errorf("record: %w", m.err)})
		}
		if inf.onErr != nil {
			inf.onErr(fmt.Errorf("record: %w", m.err))
		}
		if inf.tree != nil && len(inf.tree.also) > 0 && errors.Is(m.err, persistence.ErrSeqConflict) {
			// A spawn whose child id was taken: nothing of it was
			// written, the spawn's call learned why.
			t.settle(ctx)
			return
		}
		if errors.Is(m.err, persistence.ErrDiskFull) {
			// Nothing was written: the Task's memory still matches its log.
			t.onDiskFull(ctx, inf)
			t.settle(ctx)
			return
		}
		// The Task's memory no longer matches its log: restart from it.
		panic(&supervision.StoreError{TaskID: t.id, Op: "append", Err: m.err})
	}
	wasTerminal := t.st.Terminal()
	for _, ev := range inf.events {
		t.st.Apply(ev)
		t.observeSpend(ev)
		if ar := ev.GetApprovalResolved(); ar != nil {
			t.approvalResolved(ar)
		}
	}
	t.keepHistory(inf.events)
	t.meta = m.meta
	t.env.inspector.setState(t.self.Id, t.st.StatusWord(), t.env.now())
	ctx.Send(t.env.hub, &hubEvents{owner: t.st.Owner, ancestors: t.ancestors, events: inf.events})
	for _, r := range inf.replies {
		replyTo(r, reply{meta: m.meta})
	}
	if x := inf.tree; x != nil {
		for _, id := range x.notify {
			t.tell(ctx, id, &cmdInbox{})
		}
	}
	if t.st.ParentID != "" && t.st.Terminal() && !wasTerminal {
		ctx.Send(t.env.tasks, &childEnded{id: t.id})
	}
	if t.st.ParentID != "" && wasTerminal && !t.st.Terminal() {
		ctx.Send(t.env.tasks, &childRunning{id: t.id})
	}
	if inf.then != nil {
		inf.then(ctx)
	}
	t.checkWaits()
	t.settle(ctx)
}

// command handles a caller's command.
func (t *task) command(ctx actor.Context, tc *taskCommand) {
	if c, ok := tc.cmd.(*cmdCreate); ok {
		if t.st.Exists() {
			replyTo(tc.reply, reply{err: fmt.Errorf("%w: task %s already exists", ErrInvalid, t.id)})
			return
		}
		// Not chained with the first Cycle's start: that Cycle's work
		// would then start with the answer to the creator, and delay it.
		t.persist(ctx, taskstate.Create(c.in), []chan reply{tc.reply}, nil)
		return
	}
	if !t.st.Exists() || !tc.caller.CanSee(t.st.Owner) {
		replyTo(tc.reply, reply{err: fmt.Errorf("%w: task %s", ErrNotFound, t.id)})
		return
	}
	if t.treeCommand(ctx, tc.cmd, tc.reply) {
		return
	}
	var bodies []proto.Message
	var err error
	var then func(ctx actor.Context)
	switch c := tc.cmd.(type) {
	case *cmdMessage:
		bodies, err = t.st.Message(c.text)
	case *cmdPause:
		bodies, err = t.st.Pause()
		then = func(ctx actor.Context) {
			t.stopCycle(ctx)
			t.cascade(ctx, taskstate.CascadePause)
		}
	case *cmdContinue:
		bodies, err = t.continueWith(c)
		if err != nil && len(t.st.LiveChildren()) > 0 {
			// The Task itself may not need it (a parent that finished);
			// its interrupted descendants still do.
			bodies, err = nil, nil
		}
		then = func(ctx actor.Context) { t.cascade(ctx, taskstate.CascadeContinue) }
	case *cmdRaiseBudget:
		bodies, err = t.st.RaiseBudget(c.add, c.by)
	case *cmdCancel:
		bodies, err = t.st.Cancel()
		then = func(ctx actor.Context) {
			t.stopWork(ctx)
			t.cascade(ctx, taskstate.CascadeCancel)
		}
	case *cmdResolve:
		if c.outcome != api.ApprovalOutcome_APPROVAL_OUTCOME_TIMED_OUT && t.st.Expired(c.approvalID, t.env.now()) {
			// Too late: recorded as the timeout it is, never as a
			// decision; the caller learns it once that is durable.
			t.stopTimer(c.approvalID)
			if bodies, err = t.st.Resolve(c.approvalID, api.ApprovalOutcome_APPROVAL_OUTCOME_TIMED_OUT, "", "deadline passed"); err == nil {
				r, late := tc.reply, fmt.Errorf("%w: approval %s (recorded as timed out)", taskstate.ErrExpired, c.approvalID)
				t.persist(ctx, bodies, nil, func(actor.Context) { replyTo(r, reply{err: late}) })
				return
			}
			break
		}
		if c.always {
			bodies, err = t.resolveAllow(c)
			break
		}
		bodies, err = t.st.Resolve(c.approvalID, c.outcome, c.by, c.reason)
	case *cmdSteer:
		t.steer(ctx, c, tc.reply)
		return
	case *cmdStopCall:
		t.stopCall(ctx, c, tc.reply)
		return
	case *cmdResumeDiskFull:
		bodies = t.st.ResumeDiskFull()
	default:
		err = fmt.Errorf("%w: unknown command %T", ErrInvalid, tc.cmd)
	}
	if err != nil {
		replyTo(tc.reply, reply{err: err})
		return
	}
	t.persist(ctx, bodies, []chan reply{tc.reply}, then)
}

// reconcile starts the Task's next step when nothing is in flight.
func (t *task) reconcile(ctx actor.Context) {
	if t.busy() || t.stopping != nil || t.st == nil || !t.st.Exists() {
		return
	}
	if t.diskFull {
		t.recordDiskPause(ctx)
		return
	}
	if t.timeUp {
		t.recordTimeUp(ctx)
		return
	}
	step := t.st.Next(t.nextOptions())
	if step.Kind == taskstate.StepWait {
		return
	}
	if step.Kind == taskstate.StepAskBudget {
		t.askBudget(ctx, step)
		return
	}
	if step.DayChecked {
		t.persistFull(ctx, &inflight{then: t.stepAction(step), dayCheck: t.dayCheck(), dayRefused: func(ctx actor.Context, day *taskstate.DayExceeded) {
			t.persist(ctx, t.st.DayPause(day), nil, nil)
		}}, step.Bodies)
		return
	}
	t.persist(ctx, step.Bodies, nil, t.stepAction(step))
}

func (t *task) nextOptions() taskstate.NextOptions {
	o := t.env.limits.Load()
	return taskstate.NextOptions{Now: t.env.now(), MaxCycles: o.MaxCycles, MaxParallelTools: o.MaxParallelTools, Approval: t.approvalNeed, Budget: t.reserveOptions()}
}

// stepAction is what follows a step once its events are durable: the
// tool or the Cycle it starts, the deadline of the approval it asks for;
// nil when nothing does.
func (t *task) stepAction(step taskstate.Step) func(ctx actor.Context) {
	switch step.Kind {
	case taskstate.StepStartTool:
		calls := step.Calls
		return func(ctx actor.Context) {
			for _, c := range calls {
				t.startTool(ctx, c)
			}
		}
	case taskstate.StepRequestApproval:
		return func(ctx actor.Context) { t.armPendingApprovals(ctx) }
	case taskstate.StepStartCycle:
		n := step.Cycle
		return func(ctx actor.Context) {
			t.grantUsed(ctx, n)
			t.startCycle(ctx, n)
		}
	case taskstate.StepFinish:
		return func(actor.Context) { t.releaseLive(false) }
	}
	return nil
}

// chain is taskstate.Chain on s; crashed is what deciding the next steps
// panicked with (a tool's approval rule, say), nil when it did not.
func (t *task) chain(s *taskstate.State, bodies []proto.Message) (all []proto.Message, steps []taskstate.Step, after *taskstate.State, crashed any) {
	defer func() {
		if r := recover(); r != nil {
			all, steps, after, crashed = nil, nil, nil, r
		}
	}()
	all, steps, after = s.Chain(bodies, t.nextOptions())
	return all, steps, after, nil
}

// persistStep is persist for bodies after which the Task takes its next
// step at once (a Cycle's answer, a call's result): the
// events that begin the steps that follow are appended with them, in one
// commit (taskstate.Chain), and their actions run after then. The order
// is the one reconcile would give: it runs before any queued message.
// When those steps only start calls that read, the append is held while
// they run (hold.go).
func (t *task) persistStep(ctx actor.Context, bodies []proto.Message, replies []chan reply, then func(ctx actor.Context)) {
	if len(bodies) == 0 || t.stopping != nil || t.diskFull || t.timeUp {
		t.persist(ctx, bodies, replies, then)
		return
	}
	t.chainStep(ctx, bodies, replies, then)
}

// chainStep chains bodies after what the Task holds (if anything) and
// appends all of it, or holds it while the read-only calls it starts run.
func (t *task) chainStep(ctx actor.Context, bodies []proto.Message, replies []chan reply, then func(ctx actor.Context)) {
	s, running := t.st, 0
	var prior []proto.Message
	var priorAt []*timestamppb.Timestamp
	var actions []func(ctx actor.Context)
	if h := t.hold; h != nil {
		s, prior, priorAt, actions, running = h.st, h.bodies, h.at, h.actions, len(h.running)
	}
	if then != nil {
		actions = append(actions, then)
	}
	all, steps, after, crashed := t.chain(s, bodies)
	if crashed != nil {
		// The bodies are recorded alone, and the Task crashes once they
		// are durable, where the step itself would have: it restarts
		// with them in its history.
		t.endHold()
		actions = append(actions, func(actor.Context) { panic(crashed) })
		t.persistFull(ctx, &inflight{replies: replies, then: func(ctx actor.Context) { runAll(ctx, actions) }, held: priorAt}, append(prior, bodies...))
		return
	}
	if replies == nil && t.env.opts.HoldFor > 0 && taskstate.Holds(steps, running, t.readOnly) {
		if size := t.holdable(all); size >= 0 {
			t.holdStep(ctx, all, size, after, steps, actions)
			return
		}
	}
	t.endHold()
	for _, st := range steps {
		if a := t.stepAction(st); a != nil {
			actions = append(actions, a)
		}
	}
	all = append(prior, all...)
	inf := &inflight{replies: replies, then: func(ctx actor.Context) { runAll(ctx, actions) }, held: priorAt}
	if n := len(steps); n > 0 && steps[n-1].Kind == taskstate.StepStartCycle && steps[n-1].DayChecked {
		// The Cycle's start ends the chain; refused by the owner's daily
		// budget, what preceded it is recorded with the pause instead.
		last := steps[n-1]
		inf.dayCheck = t.dayCheck()
		before := all[: len(all)-len(last.Bodies) : len(all)-len(last.Bodies)]
		earlier := actions[:len(actions)-1] // all but the Cycle's start
		inf.dayRefused = func(ctx actor.Context, day *taskstate.DayExceeded) {
			t.persist(ctx, append(before, t.st.DayPause(day)...), replies, func(ctx actor.Context) { runAll(ctx, earlier) })
		}
	}
	t.persistFull(ctx, inf, all)
}

// approvalNeed combines what a call needs before it runs: the tool's own
// rule, the daemon's policy, the Task's own rules and the model's request
// (request_approval). Deny wins over ask; none of them can loosen another.
// The tool and the policy judge the input without the model's request.
func (t *task) approvalNeed(c *taskstate.Call) taskstate.ApprovalNeed {
	reg, ok := t.env.deps.Tools.Get(c.Tool)
	if !ok {
		return taskstate.ApprovalNeed{}
	}
	input, asked, err := tools.SplitApprovalRequest(c.Args)
	if err != nil {
		// Recorded calls were checked before; one that is not (an older
		// record) is held for a person rather than run unasked.
		input, asked = c.Args, "its request_approval could not be read"
	}
	from := func(a tools.Approval) taskstate.ApprovalNeed {
		return taskstate.ApprovalNeed{Deny: a.Deny, Required: a.Required, Reason: a.Reason, Deadline: a.Deadline}
	}
	var need taskstate.ApprovalNeed
	if ap, ok := reg.Tool.(tools.Approver); ok {
		need.Add(from(ap.Approval(input)))
	}
	pol := t.env.policy.Load()
	if pol.fn != nil {
		need.Add(from(pol.fn(t.st.Owner, reg, input)))
	}
	need.Add(t.st.RuleNeed(c.Tool, pol.timeout, tools.MatchPattern))
	var model taskstate.ApprovalNeed
	if asked != "" {
		model = taskstate.ApprovalNeed{Required: true, Reason: "the model asked: " + asked, Deadline: pol.timeout}
	}
	return taskstate.Combine(need, t.st.Allowed(c.Tool, tools.ApprovalScope(reg.Tool, input)), model)
}

// resolveAllow approves a pending approval and allows the Task's later
// calls of the same kind (see taskstate.ResolveAllow).
func (t *task) resolveAllow(c *cmdResolve) ([]proto.Message, error) {
	scope := ""
	if a, ok := t.st.Approvals[c.approvalID]; ok {
		if call, ok := t.st.Calls[a.CallID]; ok {
			reg, ok := t.env.deps.Tools.Get(call.Tool)
			if !ok {
				return nil, fmt.Errorf("%w: approval %s: tool %s is no longer registered; approve this call alone", ErrInvalid, c.approvalID, call.Tool)
			}
			input, _, err := tools.SplitApprovalRequest(call.Args)
			if err != nil {
				input = call.Args
			}
			scope = tools.ApprovalScope(reg.Tool, input)
		}
	}
	return t.st.ResolveAllow(c.approvalID, c.by, c.reason, scope)
}

func (t *task) startCycle(ctx actor.Context, n uint32) {
	set := t.toolSet()
	allowed, err := t.env.deps.Tools.Select(set.Names, set.Restricted())
	if err != nil {
		t.env.log.Warn().Err(err).Str("task", t.id).Msg("some allowed tools are no longer registered")
		allowed = t.availableTools()
	}
	specs := make([]providers.ToolSpec, len(allowed))
	for i, r := range allowed {
		specs[i] = r.Spec()
	}
	var live map[string]json.RawMessage // read only: nil when the Task holds none
	if len(t.live) > 0 {
		live = make(map[string]json.RawMessage, len(t.live))
		for k, v := range t.live {
			live[k] = v.presented
		}
	}
	c := &cycleActor{env: t.env, task: t.id, owner: t.st.Owner, n: n, model: t.st.Model, specs: specs, live: live, history: t.history[:len(t.history):len(t.history)], maxOutput: t.maxOutput()}
	pid, err := ctx.SpawnNamed(t.env.props("cycle", func() actor.Actor { return c }), "cycle-"+strconv.FormatUint(uint64(n), 10))
	if err != nil {
		ctx.Send(ctx.Self(), &cycleResult{cycle: n, err: fmt.Errorf("start cycle: %w", err)})
		return
	}
	t.cycle, t.cycleNum = pid, n
}

// toolSet is the Task's tool set, from its history.
func (t *task) toolSet() taskstate.ToolSet { return t.st.ToolSet() }

// availableTools is the allow-list without the tools that vanished.
func (t *task) availableTools() []*tools.Registered {
	var out []*tools.Registered
	for _, n := range t.toolSet().Names {
		if r, ok := t.env.deps.Tools.Get(n); ok {
			out = append(out, r)
		}
	}
	return out
}

func (t *task) stopCycle(ctx actor.Context) {
	if t.cycle != nil {
		ctx.Stop(t.cycle)
		t.cycle = nil
	}
}

func (t *task) onCycleResult(ctx actor.Context, m *cycleResult) {
	if m.cycle == t.cycleNum {
		t.cycle = nil
	}
	t.adoptHistory(m.history)
	provider, _, _ := strings.Cut(t.st.Model, "/")
	if m.err != nil {
		kind := supervision.CycleFailureKind(m.err)
		t.env.deps.Observer.CycleDone(provider, t.st.Model, kind, m.took)
		f := taskstate.CycleFailure{Cycle: m.cycle, Kind: kind, Message: capText(m.err.Error(), 4096), Input: m.summary, Decision: m.decision}
		var oe *prompt.OverflowError
		if errors.As(m.err, &oe) {
			f.Overflow = oe.Overflow()
		}
		t.persist(ctx, t.st.CycleFailed(f), nil, nil)
		return
	}
	t.env.deps.Observer.CycleDone(provider, t.st.Model, "completed", m.took)
	r := m.resp
	out := taskstate.CycleOutput{
		Cycle:     m.cycle,
		Text:      capText(r.Text, maxTextBytes),
		Reasoning: capText(r.Reasoning, maxTextBytes),
		Finish:    r.FinishReason,
		Input:     m.summary,
		Usage:     &api.Usage{PromptTokens: uint64(r.Usage.PromptTokens), CompletionTokens: uint64(r.Usage.CompletionTokens), EstimatedPromptTokens: m.summary.GetEstimatedTokens(), CachedPromptTokens: uint64(r.Usage.CachedPromptTokens)},
	}
	if len(r.ProviderMetadata) <= maxMetadataBytes {
		out.Metadata = r.ProviderMetadata
	}
	for _, c := range r.ToolCalls {
		out.Calls = append(out.Calls, t.resolveCall(c))
	}
	t.persistStep(ctx, t.st.CycleDone(out), nil, nil)
}

// resolveCall maps a model's tool call to a registered, allowed tool and
// validates its arguments; a call that cannot run is rejected before it is
// ever started.
func (t *task) resolveCall(c providers.ToolCall) taskstate.ResolvedCall {
	rc := taskstate.ResolvedCall{ModelName: capText(c.Name, 256), ProviderID: capText(c.ID, 256), Args: c.Arguments}
	reject := func(kind api.ToolFailureKind, msg string) {
		rc.Reject = &api.ToolFailed{Kind: kind, Message: msg}
	}
	if len(rc.Args) > maxArgsBytes {
		rc.Args = []byte(capText(string(c.Arguments), 4096))
		reject(api.ToolFailureKind_TOOL_FAILURE_KIND_INVALID_INPUT, fmt.Sprintf("arguments of %d bytes exceed the limit of %d bytes; only an excerpt was recorded; split the work into smaller calls", len(c.Arguments), maxArgsBytes))
		return rc
	}
	reg, ok := t.env.deps.Tools.ByModelName(c.Name)
	if ok && !t.toolSet().Has(reg.Tool.Name()) && t.st.Offered(reg.Tool.Name(), tools.MatchPattern) {
		reject(api.ToolFailureKind_TOOL_FAILURE_KIND_UNKNOWN_TOOL, taskstate.NotLoaded(c.Name, reg.Tool.Name()))
		return rc
	}
	if !ok || !t.toolSet().Has(reg.Tool.Name()) {
		msg := fmt.Sprintf("unknown tool %q; available tools: %s", c.Name, t.modelToolNames())
		if t.st.Discovery {
			msg += "; tools_search finds others to load"
		}
		reject(api.ToolFailureKind_TOOL_FAILURE_KIND_UNKNOWN_TOOL, msg)
		return rc
	}
	rc.Tool = reg.Tool.Name()
	// The model's request_approval is not the tool's input: the recorded
	// call keeps the arguments as sent, the tool is checked without it.
	input, _, err := tools.SplitApprovalRequest(c.Arguments)
	if err == nil {
		err = reg.ValidateInput(input)
	}
	if err != nil {
		reject(api.ToolFailureKind_TOOL_FAILURE_KIND_INVALID_INPUT, err.Error())
	}
	return rc
}

func (t *task) modelToolNames() string {
	set := t.toolSet()
	regs, err := t.env.deps.Tools.Select(set.Names, set.Restricted())
	if err != nil {
		regs = t.availableTools()
	}
	if len(regs) == 0 {
		return "none"
	}
	names := make([]string, len(regs))
	for i, r := range regs {
		names[i] = r.ModelName
	}
	sort.Strings(names)
	s := ""
	for i, n := range names {
		if i > 0 {
			s += ", "
		}
		s += n
	}
	return s
}

func (t *task) startTool(ctx actor.Context, call *taskstate.Call) {
	reg, ok := t.env.deps.Tools.Get(call.Tool)
	if !ok {
		ctx.Send(ctx.Self(), &toolResult{callID: call.ID, err: fmt.Errorf("tool %q is no longer registered", call.Tool)})
		return
	}
	input, _, err := tools.SplitApprovalRequest(call.Args)
	if err != nil {
		ctx.Send(ctx.Self(), &toolResult{callID: call.ID, err: err})
		return
	}
	whole := t.env.deps.Live.Open(t.id, call.ID)
	tc := tools.Call{TaskID: t.id, CallID: call.ID, Owner: t.st.Owner, Workspace: t.st.Workspace, Input: input, Live: whole,
		Approvals: &approvalBridge{sys: ctx.ActorSystem(), task: ctx.Self(), callID: call.ID}, Toolset: t.toolset(ctx, call.ID, call.Tool),
		Tree: &treeBridge{env: t.env, sys: ctx.ActorSystem(), task: ctx.Self(), taskID: t.id, callID: call.ID}}
	if m := t.env.deps.Memory; m != nil {
		tc.Memory = factRecorder{m: m, owner: t.st.Owner, task: t.id, call: call.ID}
	}
	ta := &toolActor{env: t.env, reg: reg, call: tc, wsOwner: t.workspaceOwner()}
	pid, err := ctx.SpawnNamed(t.env.props("tool", func() actor.Actor { return ta }), "tool-"+call.ID)
	if err != nil {
		whole.Release()
		ctx.Send(ctx.Self(), &toolResult{callID: call.ID, err: fmt.Errorf("start tool: %w", err)})
		return
	}
	t.tools[call.ID] = pid
	t.opened[call.ID] = whole
}

func (t *task) onToolResult(ctx actor.Context, m *toolResult) {
	bodies, then := t.toolOutcome(t.st, m)
	if bodies == nil {
		t.checkShutdown(ctx)
		return
	}
	t.persistStep(ctx, bodies, nil, then)
}

// toolOutcome returns the events that record the end m reports of a call
// open in s, and what follows once they are durable (the call's live
// result); nil bodies when s has no such call open.
func (t *task) toolOutcome(s *taskstate.State, m *toolResult) ([]proto.Message, func(ctx actor.Context)) {
	delete(t.tools, m.callID)
	// whole stays in opened (released if the Task restarts) until the
	// result is recorded; then it becomes a live result or is released.
	whole := t.opened[m.callID]
	stoppedBy, stopped := t.stopped[m.callID]
	delete(t.stopped, m.callID)
	o := taskstate.ToolOutcome{CallID: m.callID}
	tool := ""
	if c := s.Calls[m.callID]; c != nil {
		tool = c.Tool
	}
	if m.err != nil {
		o.Failed = true
		o.Kind = supervision.ToolFailureKind(m.err)
		o.Decision = m.decision
		t.env.deps.Observer.ToolDone(tool, strings.ToLower(strings.TrimPrefix(o.Kind.String(), "TOOL_FAILURE_KIND_")), m.took)
		o.Message = capText(m.err.Error(), 4096)
		switch {
		case t.stopping != nil && o.Kind == api.ToolFailureKind_TOOL_FAILURE_KIND_CANCELLED:
			o.Message = "interrupted: the daemon stopped while the tool ran; it may have had partial effects"
		case stopped && o.Kind == api.ToolFailureKind_TOOL_FAILURE_KIND_CANCELLED:
			o.Message = capText("stopped by "+stoppedBy+" while it ran; it may have had partial effects ("+m.err.Error()+")", 4096)
		}
	} else {
		t.env.deps.Observer.ToolDone(tool, "ok", m.took)
		o.Retained = capRetained(m.retained)
		o.OutputBytes = len(m.output)
		if whole != nil {
			o.OutputBytes += int(whole.Stats().Bytes)
		}
		o.Untrusted = m.untrusted
	}
	bodies := s.ToolDone(o)
	if bodies == nil {
		if whole != nil {
			delete(t.opened, m.callID)
			whole.Release()
		}
		return nil, nil
	}
	bodies = append(bodies, t.toolCharge(tool, m)...)
	return bodies, func(ctx actor.Context) {
		delete(t.opened, m.callID)
		if m.err != nil || t.st.Terminal() || t.stopping != nil || whole == nil {
			if whole != nil {
				whole.Release()
			}
			return
		}
		whole.Hold(int64(len(m.presented)))
		t.live[m.callID] = liveResult{presented: m.presented, whole: whole}
		ctx.Send(t.env.hub, &hubDelta{owner: t.st.Owner, delta: &api.Delta{TaskId: t.id, Kind: api.DeltaKind_DELTA_KIND_TOOL_OUTPUT, CallId: m.callID, Data: m.presented, AfterSeq: t.st.LastSeq}})
	}
}

// onChildCrashed records a Cycle or Tool actor that its supervision
// stopped: as the result it was reporting when it failed (a goroutine's
// panic), or else as a panic of the Cycle or call it ran.
func (t *task) onChildCrashed(ctx actor.Context, m *childCrashed) {
	err, ok := m.reason.(error)
	if !ok {
		err = &supervision.PanicError{Value: m.reason}
	}
	dec := m.decision.Directive.String()
	switch r := m.message.(type) {
	case *cycleResult:
		res := *r
		res.err, res.decision = err, dec
		t.onCycleResult(ctx, &res)
		return
	case *toolResult:
		res := *r
		res.output, res.presented, res.retained, res.err, res.decision = nil, nil, nil, err, dec
		t.onToolResult(ctx, &res)
		return
	case *steerCall:
		// The call crashed on its steering: its caller is answered.
		replyTo(r.reply, reply{err: fmt.Errorf("the call crashed: %w", err)})
	case *startSession:
		r.reply <- startSessionReply{err: fmt.Errorf("the call crashed: %w", err)}
	}
	if t.cycle != nil && m.pid.Equal(t.cycle) {
		t.onCycleResult(ctx, &cycleResult{cycle: t.cycleNum, err: err, decision: dec})
		return
	}
	for id, pid := range t.tools {
		if pid.Equal(m.pid) {
			t.onToolResult(ctx, &toolResult{callID: id, err: err, decision: dec})
			return
		}
	}
}

// armPendingApprovals starts a timer for every pending approval with a
// deadline that has none yet.
func (t *task) armPendingApprovals(ctx actor.Context) {
	self, sys := ctx.Self(), ctx.ActorSystem()
	for id, a := range t.st.Approvals {
		if a.Deadline.IsZero() || t.timers[id] != nil {
			continue
		}
		apID := id
		d := a.Deadline.Sub(t.env.now())
		t.timers[id] = time.AfterFunc(max(d, 0), func() { sys.Root.Send(self, &approvalTimeout{approvalID: apID}) })
	}
}

// approvalResolved stops the approval's timer and gives the decision to the
// call that waits for it.
func (t *task) approvalResolved(ar *api.ApprovalResolved) {
	t.stopTimer(ar.GetApprovalId())
	ch := t.waiters[ar.GetApprovalId()]
	if ch == nil {
		return
	}
	delete(t.waiters, ar.GetApprovalId())
	d := tools.Decision{Approved: ar.GetOutcome() == api.ApprovalOutcome_APPROVAL_OUTCOME_APPROVED, By: ar.GetBy(), Reason: ar.GetReason(),
		Outcome: strings.ToLower(strings.TrimPrefix(ar.GetOutcome().String(), "APPROVAL_OUTCOME_"))}
	select {
	case ch <- d:
	default:
	}
}

// onAskApproval records an approval a running call asks for.
func (t *task) onAskApproval(ctx actor.Context, m *askApproval) {
	if m.abandoned.Load() {
		return
	}
	bodies, id, err := t.st.AskDuringRun(m.callID, m.reason, m.deadline, t.env.now())
	if err != nil {
		m.requested <- askAck{err: err}
		return
	}
	t.persist(ctx, bodies, nil, func(ctx actor.Context) {
		if m.abandoned.Load() {
			ctx.Send(ctx.Self(), &abandonApproval{approvalID: id})
			return
		}
		t.waiters[id] = m.decided
		m.requested <- askAck{id: id}
		t.armPendingApprovals(ctx)
	})
}

// steer hands steering input to a running call; the call answers the caller.
func (t *task) steer(ctx actor.Context, c *cmdSteer, r chan reply) {
	pid := t.tools[c.callID]
	call := t.st.Calls[c.callID]
	if pid == nil || call == nil {
		replyTo(r, reply{err: fmt.Errorf("%w: call %s is not running", ErrNotFound, c.callID)})
		return
	}
	reg, ok := t.env.deps.Tools.Get(call.Tool)
	if !ok {
		replyTo(r, reply{err: fmt.Errorf("%w: tool %s", ErrNotFound, call.Tool)})
		return
	}
	if err := reg.ValidateSteer(c.input); err != nil {
		replyTo(r, reply{err: fmt.Errorf("%w: %v", ErrInvalid, err)})
		return
	}
	ctx.Send(pid, &steerCall{input: c.input, reply: r})
}

// stopCall cancels one running call (its context dies, its processes are
// killed); the call reports back and is recorded as cancelled, or as
// outcome unknown when it does not stop within the grace period. The
// caller is answered once the cancellation is sent.
func (t *task) stopCall(ctx actor.Context, c *cmdStopCall, r chan reply) {
	pid := t.tools[c.callID]
	if pid == nil {
		replyTo(r, reply{err: fmt.Errorf("%w: call %s is not running", ErrNotFound, c.callID)})
		return
	}
	if _, already := t.stopped[c.callID]; !already {
		t.stopped[c.callID] = c.by
		ctx.Send(pid, &cancelTool{})
	}
	replyTo(r, reply{meta: t.meta})
}

func (t *task) onApprovalTimeout(ctx actor.Context, m *approvalTimeout) {
	t.stopTimer(m.approvalID)
	if _, pending := t.st.Approvals[m.approvalID]; !pending {
		return
	}
	bodies, err := t.st.Resolve(m.approvalID, api.ApprovalOutcome_APPROVAL_OUTCOME_TIMED_OUT, "", "deadline passed")
	if err == nil {
		t.persist(ctx, bodies, nil, nil)
	}
}

func (t *task) stopTimer(id string) {
	if tm := t.timers[id]; tm != nil {
		tm.Stop()
		delete(t.timers, id)
	}
}

func (t *task) stopTimers() {
	for id := range t.timers {
		t.stopTimer(id)
	}
	t.stopTimeBudget()
	if t.diskRetry != nil {
		t.diskRetry.Stop()
		t.diskRetry = nil
	}
}

// onShutdown pauses the Task durably as interrupted, cancels its model call
// and tool calls, and answers the manager once the calls have reported.
func (t *task) onShutdown(ctx actor.Context, s *shutdown) {
	t.stopping = s
	t.stopTimers()
	var bodies []proto.Message
	if t.st.Exists() {
		bodies = t.st.Interrupt()
	}
	t.persistWith(ctx, bodies, nil, func(ctx actor.Context) {
		t.stopCycle(ctx)
		for _, pid := range t.tools {
			ctx.Send(pid, &cancelTool{})
		}
	}, true)
}

// diskPauseRetry is how long a Task waits before it tries again to record
// its pause for a full disk when even that did not fit.
const diskPauseRetry = 500 * time.Millisecond

// onDiskFull handles an append the store refused because the disk is full
// (nothing was written; the caller was answered).
func (t *task) onDiskFull(ctx actor.Context, inf *inflight) {
	t.releaseUnrecorded()
	switch {
	case t.stopping != nil:
		// The daemon stops: stop what runs all the same; the next start
		// pauses the Task as interrupted.
		t.stopCycle(ctx)
		for _, pid := range t.tools {
			ctx.Send(pid, &cancelTool{})
		}
	case t.diskFull && inf.reserve:
		// Not even the pause fits: try again later.
		if t.diskRetry == nil {
			self, sys := ctx.Self(), ctx.ActorSystem()
			t.diskRetry = time.AfterFunc(diskPauseRetry, func() { sys.Root.Send(self, &diskRetry{}) })
		}
	default:
		t.enterDiskFull(ctx)
	}
}

// enterDiskFull stops a running Task because the disk is full: its model
// call and tools are stopped now, before they or the store write more, and
// the pause is recorded once the tools have reported (recordDiskPause).
func (t *task) enterDiskFull(ctx actor.Context) {
	if t.diskFull || t.stopping != nil || t.st == nil || !t.st.Running() {
		return
	}
	t.env.log.Warn().Str("task", t.id).Int("tools", len(t.tools)).Msg("the disk is full: stopping the task's tools and pausing it")
	t.diskFull = true
	t.stopCycle(ctx)
	for _, pid := range t.tools {
		ctx.Send(pid, &cancelTool{})
	}
}

// recordDiskPause records the pause for a full disk once no tool runs any
// more (their reports may still be recorded first, or be refused too).
func (t *task) recordDiskPause(ctx actor.Context) {
	if len(t.tools) > 0 || t.diskRetry != nil {
		return
	}
	bodies := t.st.DiskFull("paused: the data folder's disk is full; it continues by itself once space is freed")
	if bodies == nil {
		t.diskFull = false
		return
	}
	store := t.env.deps.Store
	t.persistWith(ctx, bodies, nil, func(ctx actor.Context) {
		t.diskFull = false
		t.releaseLive(false) // as after a restart: they read as unavailable
		if !store.DiskFull() {
			// Space came back before the pause was recorded: the daemon's
			// resume may have missed it.
			ctx.Send(ctx.Self(), &resumeDiskFull{})
		}
	}, true)
}

func (t *task) checkShutdown(ctx actor.Context) {
	if t.stopping == nil || t.answered || t.busy() || len(t.tools) > 0 {
		return
	}
	t.answered = true
	t.failQueued(ErrStopped)
	ctx.Send(t.env.tasks, &taskShutdownDone{taskID: t.id})
}

// capText bounds s to max bytes on a rune boundary, saying how much was
// left out. Bytes that are not UTF-8 (a tool's error quoting a file name,
// for example) become U+FFFD: protobuf cannot record them, and the append
// would fail.
func capText(s string, max int) string {
	return excerpt.Clip(strings.ToValidUTF8(s, "\uFFFD"), max)
}

// factRecorder is what a tool call records facts through: the memory, with
// the call as their source.
type factRecorder struct {
	m                 Memory
	owner, task, call string
}

func (r factRecorder) RecordFact(ctx context.Context, f tools.Fact) (string, error) {
	return r.m.RecordFact(ctx, r.owner, r.task, r.call, memory.FactInput(f))
}

// capRetained bounds a retained output; one over the limit is replaced by a
// labelled excerpt (valid JSON).
func capRetained(b json.RawMessage) json.RawMessage {
	if len(b) <= maxRetainedBytes {
		return b
	}
	half := maxRetainedBytes / 4
	out, _ := json.Marshal(map[string]any{
		"retained_excerpt": excerpt.Ends(string(b), half, half),
		"retained_bytes":   len(b),
		"note":             "the tool retained more than the record limit; only this excerpt was kept",
	})
	return out
}

// keepHistory extends the held history with appended events, or drops it
// when the Task stops running (an idle Task holds no history).
func (t *task) keepHistory(evs []*api.Event) {
	if !t.st.Running() {
		t.history, t.tail = nil, nil
		return
	}
	if t.history != nil {
		t.history = append(t.history, evs...)
		return
	}
	t.tail = append(t.tail, evs...)
}

// adoptHistory takes a history a Cycle read from the store, completed with
// the events appended since, when the result is contiguous up to the last
// seq.
func (t *task) adoptHistory(read []*api.Event) {
	if read == nil || t.history != nil || !t.st.Running() {
		return
	}
	h := read[:len(read):len(read)]
	last := uint64(0)
	if len(h) > 0 {
		last = h[len(h)-1].GetSeq()
	}
	for _, ev := range t.tail {
		if ev.GetSeq() == last+1 {
			h = append(h, ev)
			last++
		}
	}
	t.tail = nil
	if last == t.st.LastSeq && len(h) == int(last) {
		t.history = h
	}
}
