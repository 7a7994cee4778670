package actors

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"sync"

	"github.com/asynkron/protoactor-go/actor"

	"lemo/supervision"
	"lemo/tools"
)

// sessionInbox bounds the messages waiting for a session.
const sessionInbox = 64

var sessionName = regexp.MustCompile(`^[a-z0-9_.-]{1,64}$`)

// sessionActor hosts a tool's long-lived session (tools.Session) as a child
// of its Tool actor. Its lifetime bounds the session: when the actor stops,
// for any reason, the session's context ends. It is never restarted: a
// relaunch could repeat work the session already did.
type sessionActor struct {
	env    *env
	h      *sessionHandle
	s      tools.Session
	cancel context.CancelFunc
}

type sessionHandle struct {
	sys   *actor.ActorSystem
	pid   *actor.PID
	inbox chan any
	done  chan struct{}
	mu    sync.Mutex
	err   error
	ended bool
}

func (h *sessionHandle) Send(msg any) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.ended {
		return false
	}
	select {
	case h.inbox <- msg:
		return true
	default:
		return false
	}
}

func (h *sessionHandle) Done() <-chan struct{} { return h.done }

func (h *sessionHandle) Err() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.err
}

func (h *sessionHandle) Stop() { h.sys.Root.Stop(h.pid) }

func (h *sessionHandle) finish(err error) {
	h.mu.Lock()
	h.err, h.ended = err, true
	h.mu.Unlock()
	close(h.done)
}

// sessionEnded: the session's Run returned err (a *supervision.PanicError
// when it panicked).
type sessionEnded struct{ err error }

func (a *sessionActor) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		runCtx, cancel := context.WithCancel(context.Background())
		a.cancel = cancel
		h, self, sys := a.h, ctx.Self(), ctx.ActorSystem()
		s := a.s
		a.env.goroutine(func() {
			var err error
			func() {
				defer func() {
					if v := recover(); v != nil {
						err = supervision.Recovered(v)
					}
				}()
				err = s.Run(runCtx, h.inbox)
			}()
			h.finish(err)
			sys.Root.Send(self, &sessionEnded{err: err})
		})
	case *sessionEnded:
		if panicked(m.err) {
			// Its Tool's supervision decides (routePanic); the call
			// already sees the error through the handle.
			panic(m.err)
		}
		ctx.Stop(ctx.Self())
	case *actor.Stopping:
		a.cancel()
	}
}

// startSession is sent by a call's SessionHost to its Tool actor, which
// spawns the session as its child.
type startSession struct {
	name  string
	s     tools.Session
	reply chan startSessionReply
}

type startSessionReply struct {
	h   *sessionHandle
	err error
}

// sessionHost implements tools.SessionHost for one call.
type sessionHost struct {
	sys  *actor.ActorSystem
	tool *actor.PID
	// done ends with the call: a Start racing the call's end must not wait
	// for an answer its stopped Tool actor will never give.
	done <-chan struct{}
}

func (sh *sessionHost) Start(name string, s tools.Session) (tools.SessionHandle, error) {
	if !sessionName.MatchString(name) {
		return nil, fmt.Errorf("session name %q: want 1 to 64 characters of a-z, 0-9, '_', '.' or '-'", name)
	}
	m := &startSession{name: name, s: s, reply: make(chan startSessionReply, 1)}
	sh.sys.Root.Send(sh.tool, m)
	select {
	case r := <-m.reply:
		if r.err != nil {
			return nil, r.err
		}
		return r.h, nil
	case <-sh.done:
		return nil, errors.New("start session: the call has ended")
	}
}

// spawnSession runs in the Tool actor.
func spawnSession(ctx actor.Context, e *env, m *startSession) {
	h := &sessionHandle{sys: ctx.ActorSystem(), inbox: make(chan any, sessionInbox), done: make(chan struct{})}
	sa := &sessionActor{env: e, h: h, s: m.s}
	pid, err := ctx.SpawnNamed(e.props("session", func() actor.Actor { return sa }), "session-"+m.name)
	if err != nil {
		m.reply <- startSessionReply{err: fmt.Errorf("start session %s: %w", m.name, err)}
		return
	}
	h.pid = pid
	m.reply <- startSessionReply{h: h}
}
