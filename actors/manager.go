package actors

import (
	"fmt"
	"strings"
	"sync/atomic"

	"github.com/asynkron/protoactor-go/actor"

	"lemo/api"
	"lemo/supervision"
)

// childState is the manager's view of one activated Task.
type childState int

const (
	childActive    childState = iota
	childStopping             // passivating or stopped by supervision
	childRecording            // its failure is being recorded after repeated crashes
)

type child struct {
	pid       *actor.PID
	state     childState
	forwarded uint64 // commands forwarded to the child
	// received counts the commands the child's instances received; it
	// survives restarts.
	received *atomic.Uint64
	// crashed is the Failure supervision stopped it with (recorded once it
	// stopped, when decision says so), nil otherwise.
	crashed  *api.Failure
	decision supervision.Decision
	// crash hands the Failure that restarted it to its next incarnation,
	// which records it.
	crash *atomic.Pointer[api.Failure]
	// pending holds commands that arrived while the child was stopping.
	pending []*taskCommand
}

// manager activates Tasks on demand, routes commands to them, passivates
// idle ones and supervises them.
type manager struct {
	env      *env
	children map[string]*child
	strategy *supervision.Strategy
	// stopping is set once shutdown started; waiting are the Tasks that have
	// not answered it yet.
	stopping *shutdown
	waiting  map[string]bool
	// Child Tasks started by spawns that have not ended (running), and
	// the spawned ones waiting for a place among them (queued, in spawn
	// order): at most MaxRunningChildren run at once daemon-wide.
	running map[string]bool
	queued  []string
}

// childStart asks the manager to start a spawned child now or when a
// place among the running children frees; reply learns which (nil: no
// one asks).
type childStart struct {
	id    string
	reply func(queued bool)
}

// childEnded tells the manager that a child Task ended: its place frees.
type childEnded struct{ id string }

// childRunning tells the manager that a child Task that had ended runs
// again (reopened by a message, a person's message or continue): it counts
// among the running children until it ends again. It does not queue: it
// was started before, and what reopened it expects it to run.
type childRunning struct{ id string }

type failureRecorded struct {
	taskID string
	owner  string
	events []*api.Event
	// parent is the Task's parent, told of its failure ("" for a root);
	// ancestors, root first, are told of it as of any event of the Task.
	parent    string
	ancestors []string
	err       error
}

func newManager(e *env) *manager {
	m := &manager{env: e, children: make(map[string]*child), running: make(map[string]bool)}
	// Strategy.Level stays nil: a child Task crashing past its budget
	// is decided as a root Task is (stop, recorded failed), and markFailed
	// tells its parent in the same commit (the tree's TellParent).
	m.strategy = &supervision.Strategy{Budget: e.opts.TaskBudget, OnFailure: m.onFailure}
	return m
}

var _ actor.SupervisorStrategy = (*manager)(nil)

// HandleFailure supervises Task actors: restart from history within the
// budget, else stop and record the Task as failed.
func (m *manager) HandleFailure(system *actor.ActorSystem, sup actor.Supervisor, pid *actor.PID, rs *actor.RestartStatistics, reason interface{}, message interface{}) {
	m.strategy.HandleFailure(system, sup, pid, rs, reason, message)
}

// onFailure prepares what the decision about a crashed Task records: a
// restarted Task's next incarnation records its crash before it recovers;
// a stopped one is recorded as failed once it stopped (terminated).
func (m *manager) onFailure(pid *actor.PID, reason any, message any, recent int, d supervision.Decision) {
	id := taskIDOf(pid)
	m.env.log.Error().Str("task", id).Str("directive", d.Directive.String()).Int("crashes", recent).Interface("reason", reason).Msg("task actor crashed")
	m.env.noteDecision(pid, supervision.LevelTask, reason, d)
	if tc, ok := actor.UnwrapEnvelopeMessage(message).(*taskCommand); ok {
		replyTo(tc.reply, reply{err: ErrInterrupted})
	}
	c := m.children[id]
	if c == nil {
		return
	}
	f := crashFailure(reason, d, recent, m.env.opts.TaskBudget)
	if d.Directive == supervision.Restart {
		c.crash.Store(f)
		return
	}
	c.state = childStopping
	c.crashed, c.decision = f, d
}

func taskIDOf(pid *actor.PID) string {
	return pid.Id[strings.LastIndexByte(pid.Id, '/')+1:]
}

func (m *manager) Receive(ctx actor.Context) {
	switch msg := ctx.Message().(type) {
	case *taskCommand:
		m.route(ctx, msg)
	case *taskIdle:
		c := m.children[msg.taskID]
		if c != nil && c.state == childActive && c.forwarded == msg.received {
			c.state = childStopping
			ctx.Stop(c.pid)
		}
	case *liveEvicted:
		if c := m.children[msg.taskID]; c != nil && c.state == childActive {
			ctx.Send(c.pid, msg)
		}
	case *actor.Terminated:
		m.terminated(ctx, taskIDOf(msg.Who))
	case *failureRecorded:
		if msg.err != nil {
			m.env.log.Error().Err(msg.err).Str("task", msg.taskID).Msg("could not record the failure of a crashed task")
		}
		if c := m.children[msg.taskID]; c != nil && msg.err == nil {
			m.crashRecorded(ctx, msg, c.decision)
		}
		if msg.parent != "" {
			// A child recorded failed: its parent takes the news.
			m.route(ctx, &taskCommand{taskID: msg.parent, caller: Operator, cmd: &cmdInbox{}})
			ctx.Send(ctx.Self(), &childEnded{id: msg.taskID})
		}
		if c := m.children[msg.taskID]; c != nil {
			delete(m.children, msg.taskID)
			for _, p := range c.pending {
				m.route(ctx, p)
			}
		}
	case *diskFullNotice:
		for _, c := range m.children {
			if c.state == childActive {
				ctx.Send(c.pid, msg)
			}
		}
	case *childStart:
		queued := len(m.running) >= m.env.opts.MaxRunningChildren
		if queued {
			m.queued = append(m.queued, msg.id)
		} else {
			m.startChild(ctx, msg.id)
		}
		if msg.reply != nil {
			msg.reply(queued)
		}
	case *childEnded:
		if m.running[msg.id] {
			delete(m.running, msg.id)
			for len(m.queued) > 0 && len(m.running) < m.env.opts.MaxRunningChildren {
				id := m.queued[0]
				m.queued = m.queued[1:]
				m.startChild(ctx, id)
			}
		}
	case *childRunning:
		m.running[msg.id] = true
	case *shutdown:
		m.shutdown(ctx, msg)
	case *taskShutdownDone:
		delete(m.waiting, msg.taskID)
		m.shutdownProgress()
	}
}

func (m *manager) route(ctx actor.Context, cmd *taskCommand) {
	if m.stopping != nil {
		replyTo(cmd.reply, reply{err: ErrStopped})
		return
	}
	c := m.children[cmd.taskID]
	if c != nil && c.state != childActive {
		c.pending = append(c.pending, cmd)
		return
	}
	if c == nil {
		id := cmd.taskID
		received := new(atomic.Uint64)
		crash := new(atomic.Pointer[api.Failure])
		// A Task activated to be created has no history to read: its
		// first actor starts from an empty state (its creation is an
		// append at seq 1, which the store refuses if the id had a log).
		// An actor restarted after a crash reads the log as always.
		fresh := new(atomic.Bool)
		_, creating := cmd.cmd.(*cmdCreate)
		fresh.Store(creating)
		props := m.env.props("task", func() actor.Actor {
			t := newTask(m.env, id, received)
			t.crash = crash
			t.fresh = fresh.Swap(false)
			return t
		})
		pid, err := ctx.SpawnNamed(props, id)
		if err != nil {
			replyTo(cmd.reply, reply{err: fmt.Errorf("activate task %s: %w", id, err)})
			return
		}
		c = &child{pid: pid, received: received, crash: crash}
		m.children[id] = c
	}
	c.forwarded++
	ctx.Send(c.pid, cmd)
}

func (m *manager) terminated(ctx actor.Context, id string) {
	c := m.children[id]
	if c == nil {
		return
	}
	if m.waiting[id] {
		delete(m.waiting, id)
		m.shutdownProgress()
	}
	if c.crashed != nil && c.decision.Record == supervision.RecordTaskFailed && m.stopping == nil {
		c.state = childRecording
		f := c.crashed
		self, sys := ctx.Self(), ctx.ActorSystem()
		m.env.goroutine(func() {
			owner, parent, evs, err := markFailed(m.env.deps.Store, id, f, m.env.now())
			var anc []string
			if err == nil && parent != "" {
				anc = readAncestry(m.env.deps.Store, parent)
			}
			sys.Root.Send(self, &failureRecorded{taskID: id, owner: owner, parent: parent, ancestors: anc, events: evs, err: err})
		})
		return
	}
	delete(m.children, id)
	for _, p := range c.pending {
		m.route(ctx, p)
	}
}

func (m *manager) shutdown(ctx actor.Context, s *shutdown) {
	m.stopping = s
	m.waiting = make(map[string]bool)
	for id, c := range m.children {
		for _, p := range c.pending {
			replyTo(p.reply, reply{err: ErrStopped})
		}
		c.pending = nil
		if c.state == childActive {
			m.waiting[id] = true
			ctx.Send(c.pid, s)
		}
	}
	m.shutdownProgress()
}

func (m *manager) shutdownProgress() {
	if m.stopping != nil && len(m.waiting) == 0 {
		select {
		case <-m.stopping.done:
		default:
			close(m.stopping.done)
		}
	}
}

// crashRecorded runs once a Task that supervision stopped is recorded as
// failed (events: what was left open closed, its Failure with decision
// "stop", and the failed status). Its subscribers get the events, as any
// committed ones. This is where a child Task's parent is told
// (d.TellParent): markFailed put the child's end in the parent's inbox
// in the same commit, and the manager wakes the parent.
func (m *manager) crashRecorded(ctx actor.Context, r *failureRecorded, d supervision.Decision) {
	ctx.Send(m.env.hub, &hubEvents{owner: r.owner, ancestors: r.ancestors, events: r.events})
}

// startChild starts a spawned child and counts it among the running ones.
func (m *manager) startChild(ctx actor.Context, id string) {
	m.running[id] = true
	m.route(ctx, &taskCommand{taskID: id, caller: Operator, cmd: &cmdStart{}})
}
