package actors

import (
	"fmt"
	"strings"
	"sync/atomic"

	"github.com/asynkron/protoactor-go/actor"

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
	crashed  string // why supervision stopped it, "" otherwise
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
}

type failureRecorded struct {
	taskID string
	err    error
}

func newManager(e *env) *manager {
	m := &manager{env: e, children: make(map[string]*child)}
	m.strategy = &supervision.Strategy{Budget: e.opts.TaskBudget, OnFailure: m.onFailure}
	return m
}

var _ actor.SupervisorStrategy = (*manager)(nil)

// HandleFailure supervises Task actors: restart from history within the
// budget, else stop and record the Task as failed.
func (m *manager) HandleFailure(system *actor.ActorSystem, sup actor.Supervisor, pid *actor.PID, rs *actor.RestartStatistics, reason interface{}, message interface{}) {
	m.strategy.HandleFailure(system, sup, pid, rs, reason, message)
}

func (m *manager) onFailure(pid *actor.PID, reason any, message any, d supervision.Directive) {
	id := taskIDOf(pid)
	m.env.log.Error().Str("task", id).Str("directive", d.String()).Interface("reason", reason).Msg("task actor crashed")
	m.env.deps.Observer.TaskCrashed(d.String())
	m.env.inspector.failed(pid.Id, fmt.Sprint(reason))
	if tc, ok := message.(*taskCommand); ok {
		replyTo(tc.reply, reply{err: ErrInterrupted})
	}
	if d == supervision.Stop {
		if c := m.children[id]; c != nil {
			c.state = childStopping
			c.crashed = fmt.Sprint(reason)
		}
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
		// A Task activated to be created has no history to read: its
		// first actor starts from an empty state (its creation is an
		// append at seq 1, which the store refuses if the id had a log).
		// An actor restarted after a crash reads the log as always.
		fresh := new(atomic.Bool)
		_, creating := cmd.cmd.(*cmdCreate)
		fresh.Store(creating)
		props := m.env.props("task", func() actor.Actor {
			t := newTask(m.env, id, received)
			t.fresh = fresh.Swap(false)
			return t
		})
		pid, err := ctx.SpawnNamed(props, id)
		if err != nil {
			replyTo(cmd.reply, reply{err: fmt.Errorf("activate task %s: %w", id, err)})
			return
		}
		c = &child{pid: pid, received: received}
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
	if c.crashed != "" && m.stopping == nil {
		c.state = childRecording
		why := c.crashed
		self, sys := ctx.Self(), ctx.ActorSystem()
		m.env.goroutine(func() {
			err := markFailed(m.env.deps.Store, id, why, m.env.now())
			sys.Root.Send(self, &failureRecorded{taskID: id, err: err})
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
