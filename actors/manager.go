package actors

import (
	"strings"

	"github.com/asynkron/protoactor-go/actor"

	"lemo/actors/taskstate"
	"lemo/api"
	"lemo/supervision"
)

// childState is the manager's view of one activation of a Task.
type childState int

const (
	childLocating childState = iota // its parent link is read, or its parent's actor awaited
	childSpawning                   // its parent's actor is spawning it
	childActive
	childStopping  // passivating or stopped by supervision
	childRecording // its failure is being recorded after repeated crashes
)

type child struct {
	slot      *taskSlot
	pid       *actor.PID // nil until its actor runs
	state     childState
	forwarded uint64 // commands forwarded to the child
	// pending holds commands that arrived before its actor ran or while
	// it was stopping.
	pending []*taskCommand
	// parent is the Task whose actor its actor is a child of ("": the
	// manager); kids counts its child Task actors (spawned or being
	// spawned): it is not passivated while it has any; waiting are the
	// Tasks waiting for its actor to run to be placed under it.
	parent  string
	kids    int
	waiting []string
}

// manager activates Tasks on demand, routes commands to them, passivates
// idle ones and supervises the root ones (placement.go: where each
// Task's actor lives).
type manager struct {
	env      *env
	children map[string]*child
	strategy *supervision.Strategy
	// stopping is set once shutdown started; waiting are the Tasks that have
	// not answered it yet.
	stopping *shutdown
	waiting  map[string]bool
	// admission decides which child Tasks run (admission.go).
	admission *taskstate.Admission
}

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
	m := &manager{env: e, children: make(map[string]*child), admission: e.admission}
	// Strategy.Level stays nil: the manager supervises the actors of root
	// Tasks (a child Task's actor is supervised by its parent's, with the
	// same budget: task.superviseKid).
	m.strategy = &supervision.Strategy{Budget: e.opts.TaskBudget, OnFailure: m.onFailure}
	return m
}

var _ actor.SupervisorStrategy = (*manager)(nil)

// HandleFailure supervises Task actors: restart from history within the
// budget, else stop and record the Task as failed.
func (m *manager) HandleFailure(system *actor.ActorSystem, sup actor.Supervisor, pid *actor.PID, rs *actor.RestartStatistics, reason interface{}, message interface{}) {
	m.strategy.HandleFailure(system, sup, pid, rs, reason, message)
}

// onFailure prepares what the decision about a crashed Task records
// (env.taskCrashed); commands for a stopped one wait for its record.
func (m *manager) onFailure(pid *actor.PID, reason any, message any, recent int, d supervision.Decision) {
	c := m.children[taskIDOf(pid)]
	if c == nil {
		m.env.noteDecision(pid, supervision.LevelTask, reason, d)
		return
	}
	m.env.taskCrashed(c.slot, pid, supervision.LevelTask, reason, message, recent, d)
	if d.Directive == supervision.Stop {
		c.state = childStopping
	}
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
		if c != nil && c.state == childActive && c.kids == 0 && c.forwarded == msg.received {
			c.state = childStopping
			ctx.Stop(c.pid)
		}
	case *liveEvicted:
		if c := m.children[msg.taskID]; c != nil && c.state == childActive {
			ctx.Send(c.pid, msg)
		}
	case *actor.Terminated:
		m.terminated(ctx, msg.Who)
	case *parentRead:
		m.onParentRead(ctx, msg)
	case *taskSpawned:
		m.onTaskSpawned(ctx, msg)
	case *taskStopping:
		if c := m.children[msg.id]; c != nil && c.state == childActive && c.pid.Equal(msg.pid) {
			c.state = childStopping
		}
	case *failureRecorded:
		if msg.err != nil {
			m.env.log.Error().Err(msg.err).Str("task", msg.taskID).Msg("could not record the failure of a crashed task")
		}
		if c := m.children[msg.taskID]; c != nil && msg.err == nil && c.slot.stopped.Load() != nil {
			m.crashRecorded(ctx, msg, c.slot.stopped.Load().decision)
		}
		if msg.parent != "" {
			// A child recorded failed: its parent takes the news.
			m.route(ctx, &taskCommand{taskID: msg.parent, caller: Operator, cmd: &cmdInbox{}})
			ctx.Send(ctx.Self(), &childEnded{id: msg.taskID})
		}
		m.forget(ctx, msg.taskID)
	case *diskFullNotice:
		for _, c := range m.children {
			if c.state == childActive {
				ctx.Send(c.pid, msg)
			}
		}
	case *childStart:
		m.onChildStart(ctx, msg)
	case *childEnded:
		m.startChildren(ctx, m.admission.Ended(msg.id))
	case *childRunning:
		m.admission.Reopened(msg.id)
	case *shutdown:
		m.shutdown(ctx, msg)
	case *taskShutdownDone:
		delete(m.waiting, msg.taskID)
		m.shutdownProgress()
	}
}

// route forwards cmd to its Task's actor, activating a dormant Task
// (placement.go); commands wait while its actor is placed or stopping.
func (m *manager) route(ctx actor.Context, cmd *taskCommand) {
	m.routeUnder(ctx, cmd, "")
}

// routeUnder is route for a Task whose parent is known ("": read it when
// the Task is dormant).
func (m *manager) routeUnder(ctx actor.Context, cmd *taskCommand, parent string) {
	if m.stopping != nil {
		replyTo(cmd.reply, reply{err: ErrStopped})
		return
	}
	c := m.children[cmd.taskID]
	if c == nil {
		_, creating := cmd.cmd.(*cmdCreate)
		var err error
		if c, err = m.activate(ctx, cmd.taskID, creating, parent); err != nil {
			replyTo(cmd.reply, reply{err: err})
			return
		}
	}
	if c.state != childActive {
		c.pending = append(c.pending, cmd)
		return
	}
	c.forwarded++
	ctx.Send(c.pid, cmd)
}

// terminated handles the end of a Task's actor: passivated, stopped by
// supervision (recorded failed when the decision says so), or stopped
// with its parent's actor (activated again under the parent's next one).
func (m *manager) terminated(ctx actor.Context, who *actor.PID) {
	id := taskIDOf(who)
	c := m.children[id]
	if c == nil || c.pid == nil || !c.pid.Equal(who) {
		return
	}
	m.unplace(c)
	m.orphans(id, c)
	if m.waiting[id] {
		delete(m.waiting, id)
		m.shutdownProgress()
	}
	if m.stopping != nil {
		delete(m.children, id)
		return
	}
	if st := c.slot.stopped.Load(); st != nil && st.decision.Record == supervision.RecordTaskFailed {
		c.state = childRecording
		f := st.failure
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
	if c.state == childActive && c.parent != "" && c.slot.stopped.Load() == nil {
		// Stopped with its parent's actor, not by the manager.
		m.reactivate(ctx, id, c)
		return
	}
	m.forget(ctx, id)
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
		c.waiting = nil
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
