package actors

import (
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
)

// ActorInfo describes one live actor of the internal tree, for the
// inspection console.
type ActorInfo struct {
	// ID is the actor's path ("daemon/tasks/<task>/cycle-3").
	ID string
	// Kind is daemon, hub, tasks, task, cycle, tool or session.
	Kind string
	// State is what the actor says it is doing (a Task's status), with
	// the time it entered it.
	State      string
	StateSince time.Time
	Started    time.Time
	// Mailbox is the number of user messages waiting.
	Mailbox int
	// Processed counts the messages it handled; Restarts its restarts.
	Processed   uint64
	Restarts    uint32
	LastFailure string
	// StoppedChildren counts the children its supervision stopped after
	// they failed; LastDecision is its last supervision decision.
	StoppedChildren uint32
	LastDecision    string
}

// actorRecord is the live bookkeeping of one actor.
type actorRecord struct {
	id, kind    string
	started     time.Time
	mb          actor.Mailbox
	processed   atomic.Uint64
	restarts    atomic.Uint32
	state       atomic.Pointer[string]
	stateSince  atomic.Int64
	lastFailure atomic.Pointer[string]
	stopped     atomic.Uint32
	decision    atomic.Pointer[string]
}

func (r *actorRecord) setState(s string, now time.Time) {
	if old := r.state.Load(); old != nil && *old == s {
		return
	}
	r.state.Store(&s)
	r.stateSince.Store(now.UnixNano())
}

// inspector tracks every actor spawned through env.props: a wrapping
// mailbox registers it (with its queue), a receiver middleware counts its
// messages and restarts and removes it when it stops (notes/protoactor.md
// §7: protoactor has no API listing the tree).
type inspector struct {
	mu   sync.RWMutex
	recs map[string]*actorRecord
}

func newInspector() *inspector { return &inspector{recs: make(map[string]*actorRecord)} }

func (in *inspector) get(id string) *actorRecord {
	in.mu.RLock()
	defer in.mu.RUnlock()
	return in.recs[id]
}

type trackedMailbox struct {
	actor.Mailbox
	in   *inspector
	kind string
}

func (t *trackedMailbox) RegisterHandlers(inv actor.MessageInvoker, d actor.Dispatcher) {
	if c, ok := inv.(interface{ Self() *actor.PID }); ok {
		rec := &actorRecord{id: c.Self().Id, kind: t.kind, started: time.Now(), mb: t.Mailbox}
		t.in.mu.Lock()
		t.in.recs[rec.id] = rec
		t.in.mu.Unlock()
	}
	t.Mailbox.RegisterHandlers(inv, d)
}

func (in *inspector) middleware(next actor.ReceiverFunc) actor.ReceiverFunc {
	return func(c actor.ReceiverContext, env *actor.MessageEnvelope) {
		id := c.Self().Id
		switch env.Message.(type) {
		case *actor.Restarting:
			if rec := in.get(id); rec != nil {
				rec.restarts.Add(1)
			}
		case *actor.Stopped:
			next(c, env)
			in.mu.Lock()
			delete(in.recs, id)
			in.mu.Unlock()
			return
		}
		if rec := in.get(id); rec != nil {
			rec.processed.Add(1)
		}
		next(c, env)
	}
}

// failed records the last failure of an actor (called by its supervisor).
func (in *inspector) failed(id, why string) {
	if rec := in.get(id); rec != nil {
		rec.lastFailure.Store(&why)
	}
}

// decided records a supervision decision taken by the actor id about one of
// its children; stopped: the child was stopped.
func (in *inspector) decided(id, decision string, stopped bool) {
	if rec := in.get(id); rec != nil {
		rec.decision.Store(&decision)
		if stopped {
			rec.stopped.Add(1)
		}
	}
}

// setState records what an actor is doing.
func (in *inspector) setState(id, state string, now time.Time) {
	if rec := in.get(id); rec != nil {
		rec.setState(state, now)
	}
}

// props builds the Props of an actor of kind, tracked by the inspector.
func (e *env) props(kind string, produce func() actor.Actor) *actor.Props {
	in := e.inspector
	return actor.PropsFromProducer(produce,
		actor.WithMailbox(func() actor.Mailbox {
			return &trackedMailbox{Mailbox: actor.Unbounded()(), in: in, kind: kind}
		}),
		actor.WithReceiverMiddleware(in.middleware),
		actor.WithDispatcher(e.workers))
}

// Inspect returns the live actors of the internal tree, sorted by path.
func (d *Daemon) Inspect() []ActorInfo {
	in := d.env.inspector
	in.mu.RLock()
	recs := make([]*actorRecord, 0, len(in.recs))
	for _, r := range in.recs {
		recs = append(recs, r)
	}
	in.mu.RUnlock()
	out := make([]ActorInfo, len(recs))
	for i, r := range recs {
		ai := ActorInfo{ID: r.id, Kind: r.kind, Started: r.started, Mailbox: r.mb.UserMessageCount(),
			Processed: r.processed.Load(), Restarts: r.restarts.Load(), StoppedChildren: r.stopped.Load()}
		if dec := r.decision.Load(); dec != nil {
			ai.LastDecision = *dec
		}
		if s := r.state.Load(); s != nil {
			ai.State, ai.StateSince = *s, time.Unix(0, r.stateSince.Load())
		}
		if f := r.lastFailure.Load(); f != nil {
			ai.LastFailure = *f
		}
		out[i] = ai
	}
	sort.Slice(out, func(i, j int) bool { return pathLess(out[i].ID, out[j].ID) })
	return out
}

// pathLess orders paths so that a parent comes right before its children.
func pathLess(a, b string) bool {
	return strings.ReplaceAll(a, "/", "\x00") < strings.ReplaceAll(b, "/", "\x00")
}
