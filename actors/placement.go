package actors

import (
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/asynkron/protoactor-go/actor"

	"lemo/actors/taskstate"
	"lemo/api"
	"lemo/persistence"
	"lemo/supervision"
)

// Where a Task's actor lives. A root Task's actor is a child of the task
// manager (daemon/tasks/<id>); a child Task's actor is a child of its
// parent Task's actor (daemon/tasks/<root>/<child>/...), so the actor tree
// is the Task tree while its Tasks run, and the parent's supervision
// decides on the child's crashes. The manager stays the registry: it
// routes every command by id, and activates a dormant Task where it
// belongs:
//  1. it reads the Task's parent link from the store (on a goroutine);
//  2. a child waits for its parent's actor, which the manager activates
//     first when the parent is dormant (from its history, as any
//     activation): a running child is never shown outside its parent;
//  3. the parent's actor spawns the child's (spawnTask) and the manager
//     watches it, forwarding the commands that waited.
// A parent with child Task actors is never passivated (passivateAfter,
// and the manager counts them: child.kids). A parent's restart or stop
// stops its children's actors with it (protoactor stops a failing actor's
// children); the manager activates them again under the parent's next
// incarnation, and each recovers from its history as after any stop
// (running: paused as interrupted; a continue of the parent continues it).

// taskSlot is what one activation of a Task shares between the manager,
// each incarnation of the Task's actor, and the supervisor that decides
// about its crashes (the manager for a root, the parent Task's actor for a
// child).
type taskSlot struct {
	id string
	// received counts the commands the actor's incarnations received.
	received atomic.Uint64
	// crash is the Failure that restarted the actor, which its next
	// incarnation records before it recovers.
	crash atomic.Pointer[api.Failure]
	// stopped is set when supervision stopped the actor: the manager
	// records the Task failed once it terminated (per the decision).
	stopped atomic.Pointer[crashStop]
	// fresh: the first incarnation creates the Task (no history to read).
	fresh atomic.Bool
}

// crashStop is the crash supervision stopped a Task actor for.
type crashStop struct {
	failure  *api.Failure
	decision supervision.Decision
}

// spawnTask asks a parent Task's actor to spawn its child's actor.
type spawnTask struct {
	slot  *taskSlot
	props *actor.Props
}

// taskSpawned answers spawnTask to the manager.
type taskSpawned struct {
	id  string
	pid *actor.PID
	err error
}

// parentRead carries a Task's parent link, read to place its actor.
type parentRead struct {
	id, parent string
}

// taskStopping tells the manager that a parent's supervision stopped a
// child Task's actor (commands for it wait for the record of its end).
type taskStopping struct {
	id  string
	pid *actor.PID
}

// taskProps are the Props of an activation of Task slot.id.
func (m *manager) taskProps(slot *taskSlot) *actor.Props {
	return m.env.props("task", func() actor.Actor {
		t := newTask(m.env, slot.id, &slot.received)
		t.crash = &slot.crash
		t.fresh = slot.fresh.Swap(false)
		return t
	})
}

// activate starts the activation of Task id: a Task being created is a
// root (children are created by their parent's spawn) and its actor is
// spawned at once; parent, when known, places it under that Task;
// otherwise its parent link is read first. Commands wait in the entry's
// pending until its actor runs.
func (m *manager) activate(ctx actor.Context, id string, creating bool, parent string) (*child, error) {
	slot := &taskSlot{id: id}
	slot.fresh.Store(creating)
	c := &child{slot: slot, state: childLocating}
	m.children[id] = c
	switch {
	case creating:
		return c, m.spawnTop(ctx, id, c)
	case parent != "":
		m.place(ctx, id, parent)
	default:
		store, self, sys := m.env.deps.Store, ctx.Self(), ctx.ActorSystem()
		m.env.goroutine(func() {
			meta, err := store.Meta(id)
			if err != nil && !errors.Is(err, persistence.ErrNotFound) {
				m.env.log.Error().Err(err).Str("task", id).Msg("read the task's parent link; its actor runs under the manager")
			}
			sys.Root.Send(self, &parentRead{id: id, parent: meta.GetParentId()})
		})
	}
	return c, nil
}

// onParentRead places an activation once its parent link is known.
func (m *manager) onParentRead(ctx actor.Context, r *parentRead) {
	c := m.children[r.id]
	if c == nil || c.state != childLocating || m.stopping != nil {
		return
	}
	if r.parent == "" {
		if err := m.spawnTop(ctx, r.id, c); err != nil {
			m.failPending(c, err)
		}
		return
	}
	m.place(ctx, r.id, r.parent)
}

// spawnTop spawns Task id's actor under the manager.
func (m *manager) spawnTop(ctx actor.Context, id string, c *child) error {
	c.parent = ""
	pid, err := ctx.SpawnNamed(m.taskProps(c.slot), id)
	if err != nil {
		delete(m.children, id)
		return fmt.Errorf("activate task %s: %w", id, err)
	}
	m.actorRuns(ctx, id, c, pid)
	return nil
}

// place puts Task id's actor under its parent's: at once when the
// parent's actor runs, else once it does (activating a dormant parent).
// A parent link that loops (a damaged record) places it under the manager.
func (m *manager) place(ctx actor.Context, id, parent string) {
	c := m.children[id]
	c.parent, c.state = parent, childLocating
	for cur, n := parent, 0; cur != ""; n++ {
		pc := m.children[cur]
		if cur == id || n > taskstate.MaxAncestry {
			if err := m.spawnTop(ctx, id, c); err != nil {
				m.failPending(c, err)
			}
			return
		}
		if pc == nil {
			break
		}
		cur = pc.parent
	}
	p := m.children[parent]
	if p == nil {
		p, _ = m.activate(ctx, parent, false, "")
	}
	if p.state != childActive {
		p.waiting = append(p.waiting, id)
		return
	}
	c.state = childSpawning
	p.kids++
	ctx.Send(p.pid, &spawnTask{slot: c.slot, props: m.taskProps(c.slot)})
}

// onTaskSpawned takes the actor a parent spawned for its child.
func (m *manager) onTaskSpawned(ctx actor.Context, s *taskSpawned) {
	c := m.children[s.id]
	if c == nil || c.state != childSpawning {
		if s.pid != nil {
			ctx.Stop(s.pid) // no one waits for it any more
		}
		return
	}
	if s.err != nil {
		m.unplace(c)
		delete(m.children, s.id)
		m.failPending(c, fmt.Errorf("activate task %s: %w", s.id, s.err))
		return
	}
	ctx.Watch(s.pid)
	m.actorRuns(ctx, s.id, c, s.pid)
}

// actorRuns marks an activation's actor as running: the commands that
// waited are forwarded and the children waiting for it are placed.
func (m *manager) actorRuns(ctx actor.Context, id string, c *child, pid *actor.PID) {
	c.pid, c.state = pid, childActive
	if m.stopping != nil {
		// Activated as the daemon stops: it pauses like the others.
		m.waiting[id] = true
		ctx.Send(pid, m.stopping)
		return
	}
	pending, waiting := c.pending, c.waiting
	c.pending, c.waiting = nil, nil
	for _, p := range pending {
		m.route(ctx, p)
	}
	for _, kid := range waiting {
		if k := m.children[kid]; k != nil && k.state == childLocating && k.parent == id {
			m.place(ctx, kid, id)
		}
	}
}

// unplace uncounts c from its parent's child actors.
func (m *manager) unplace(c *child) {
	if c.parent == "" || c.state < childSpawning {
		return
	}
	if p := m.children[c.parent]; p != nil && p.kids > 0 {
		p.kids--
	}
}

// failPending answers the commands that waited for an activation that
// failed.
func (m *manager) failPending(c *child, err error) {
	for _, p := range c.pending {
		replyTo(p.reply, reply{err: err})
	}
	c.pending = nil
}

// orphans moves the children being spawned under id's actor, which ended
// before it spawned them, back to waiting for its next activation.
func (m *manager) orphans(id string, c *child) {
	for kid, k := range m.children {
		if k.parent == id && k.state == childSpawning {
			k.state = childLocating
			c.waiting = append(c.waiting, kid)
		}
	}
}

// forget drops the entry of a Task whose actor ended; the commands that
// waited for it and the children waiting to be placed under it activate
// it again.
func (m *manager) forget(ctx actor.Context, id string) {
	c := m.children[id]
	if c == nil {
		return
	}
	delete(m.children, id)
	if m.stopping != nil {
		return
	}
	if len(c.waiting) > 0 {
		n, _ := m.activate(ctx, id, false, c.parent)
		n.waiting = c.waiting
	}
	for _, p := range c.pending {
		m.route(ctx, p)
	}
}

// reactivate activates again a child Task whose actor its parent's
// restart or stop ended: it recovers from its history under the parent's
// next incarnation.
func (m *manager) reactivate(ctx actor.Context, id string, c *child) {
	delete(m.children, id)
	n, _ := m.activate(ctx, id, false, c.parent)
	if f := c.slot.crash.Load(); f != nil {
		n.slot.crash.Store(f)
	}
	n.pending, n.waiting = append(n.pending, c.pending...), append(n.waiting, c.waiting...)
}

// onSpawnTask spawns a child Task's actor under this Task's.
func (t *task) onSpawnTask(ctx actor.Context, s *spawnTask) {
	pid, err := ctx.SpawnNamed(s.props, s.slot.id)
	if err == nil {
		t.kids[pid.Id] = s.slot
	}
	ctx.Send(t.env.tasks, &taskSpawned{id: s.slot.id, pid: pid, err: err})
}

// kidTerminated forgets a child Task's actor that stopped; a Task that
// has nothing left may passivate again.
func (t *task) kidTerminated(ctx actor.Context, who *actor.PID) bool {
	if _, ok := t.kids[who.Id]; !ok {
		return false
	}
	delete(t.kids, who.Id)
	if len(t.kids) == 0 && t.st != nil && !t.busy() && t.stopping == nil {
		if d, ok := t.passivation(); ok {
			ctx.SetReceiveTimeout(d)
		}
	}
	return true
}

// superviseKid decides about a child Task's actor that failed, as the
// manager does about a root's (supervision.Strategy, level child_task):
// restart from its history within the budget, else stop and let the
// manager record it failed, which tells this Task.
func (t *task) superviseKid(sys *actor.ActorSystem, sup actor.Supervisor, child *actor.PID, rs *actor.RestartStatistics, reason, message any) {
	slot := t.kids[child.Id]
	if slot == nil {
		// A child of an earlier incarnation, stopping with it.
		sup.StopChildren(child)
		return
	}
	s := &supervision.Strategy{Budget: t.env.opts.TaskBudget,
		Level: func(*actor.PID) supervision.Level { return supervision.LevelChildTask },
		OnFailure: func(pid *actor.PID, reason, message any, recent int, d supervision.Decision) {
			t.env.taskCrashed(slot, pid, supervision.LevelChildTask, reason, message, recent, d)
			if d.Directive == supervision.Stop {
				sys.Root.Send(t.env.tasks, &taskStopping{id: slot.id, pid: pid})
			}
		}}
	s.HandleFailure(sys, sup, child, rs, reason, message)
}

// taskCrashed prepares what a decision about a crashed Task actor
// records: a restarted Task's next incarnation records its crash before
// it recovers; a stopped one is recorded once it stopped (manager).
func (e *env) taskCrashed(slot *taskSlot, pid *actor.PID, level supervision.Level, reason, message any, recent int, d supervision.Decision) {
	e.log.Error().Str("task", slot.id).Str("level", level.String()).Str("directive", d.Directive.String()).Int("crashes", recent).Interface("reason", reason).Msg("task actor crashed")
	e.noteDecision(pid, level, reason, d)
	if tc, ok := actor.UnwrapEnvelopeMessage(message).(*taskCommand); ok {
		replyTo(tc.reply, reply{err: ErrInterrupted})
	}
	f := crashFailure(reason, d, recent, e.opts.TaskBudget)
	if d.Directive == supervision.Restart {
		slot.crash.Store(f)
		return
	}
	slot.stopped.Store(&crashStop{failure: f, decision: d})
}
