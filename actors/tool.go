package actors

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"lemo/actors/live"
	"lemo/api"
	"lemo/excerpt"
	"lemo/supervision"
	"lemo/tools"
)

// errStopTimeout: a cancelled tool did not stop within the grace period.
var errStopTimeout = fmt.Errorf("%w: the tool did not stop within its grace period after cancellation", supervision.ErrOutcomeUnknown)

// cancelledError is a tool error returned after its context was cancelled.
type cancelledError struct{ err error }

func (e cancelledError) Error() string   { return "cancelled: " + e.err.Error() }
func (e cancelledError) Unwrap() []error { return []error{context.Canceled, e.err} }

// toolActor runs one tool call on a goroutine with a cancellable context,
// validates its state updates and output, computes what it retains and
// reports to its Task. A panic of the tool (or of Retain) is recovered on
// the call's goroutine and fails the actor in Receive (routePanic), so that
// the Task's supervision decides.
type toolActor struct {
	env  *env
	reg  *tools.Registered
	call tools.Call

	cancel context.CancelFunc
	done   bool
	steer  chan tools.Steering
	// wsOwner is the Task whose folder of the workspace root the call's
	// workspace is ("": the call's Task): a child Task's inherited one.
	wsOwner string
}

func (a *toolActor) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		runCtx, cancel := context.WithCancel(context.Background())
		a.cancel = cancel
		if a.reg.Steerable() {
			a.steer = make(chan tools.Steering, 8)
			a.call.Steer = a.steer
		}
		a.call.Sessions = &sessionHost{sys: ctx.ActorSystem(), tool: ctx.Self(), done: runCtx.Done()}
		a.env.inspector.setState(ctx.Self().Id, "running "+a.reg.Tool.Name(), a.env.now())
		self, sys := ctx.Self(), ctx.ActorSystem()
		a.env.goroutine(func() {
			sys.Root.Send(self, a.run(runCtx, sys))
		})
	case *toolResult:
		if !a.done && panicked(m.err) {
			a.done = true
			// The Task's supervision decides (routePanic).
			panic(m.err)
		}
		a.finish(ctx, m)
		// The call's goroutine ended: what it was given goes (as a
		// Cycle's, see cycleActor.release).
		a.call.Input, a.call.Live, a.call.Memory, a.call.Approvals, a.call.Toolset, a.call.Tree = nil, nil, nil, nil, nil, nil
	case *startSession:
		if a.done {
			m.reply <- startSessionReply{err: errors.New("the call has ended")}
			return
		}
		spawnSession(ctx, a.env, m)
	case *steerCall:
		if a.steer == nil {
			replyTo(m.reply, reply{err: fmt.Errorf("%w: this tool does not accept steering", ErrInvalid)})
			return
		}
		r := m.reply
		select {
		case a.steer <- tools.Steering{Input: m.input, Reply: func(err error) { replyTo(r, reply{err: err}) }}:
		default:
			replyTo(r, reply{err: fmt.Errorf("the call has %d steering inputs waiting; try again later", cap(a.steer))})
		}
	case *cancelTool:
		a.cancel()
		ctx.SetReceiveTimeout(a.env.opts.ToolGrace)
	case *actor.ReceiveTimeout:
		a.finish(ctx, &toolResult{callID: a.call.CallID, err: errStopTimeout})
	case *actor.Stopping:
		a.cancel()
	}
}

var _ actor.SupervisorStrategy = (*toolActor)(nil)

// HandleFailure stops a session that crashed (supervision.LevelSession);
// sessions are never restarted and the call goes on.
func (a *toolActor) HandleFailure(sys *actor.ActorSystem, sup actor.Supervisor, child *actor.PID, rs *actor.RestartStatistics, reason interface{}, message interface{}) {
	d := supervision.Decide(a.env.opts.TaskBudget, supervision.Failure{Level: supervision.LevelSession, Reason: reason})
	a.env.log.Error().Str("session", child.Id).Str("directive", d.Directive.String()).Interface("reason", reason).Msg("tool session crashed")
	a.env.noteDecision(child, supervision.LevelSession, reason, d)
	sup.StopChildren(child)
}

func (a *toolActor) finish(ctx actor.Context, r *toolResult) {
	if a.done {
		return
	}
	a.done = true
	ctx.Send(ctx.Parent(), r)
	ctx.Stop(ctx.Self())
}

// run executes the call; it recovers its own panics (and those of Retain)
// and returns them as the result's error, which fails the actor.
func (a *toolActor) run(ctx context.Context, sys *actor.ActorSystem) (res *toolResult) {
	res = &toolResult{callID: a.call.CallID}
	start := time.Now()
	defer func() {
		if v := recover(); v != nil {
			res.output, res.retained, res.err = nil, nil, supervision.Recovered(v)
		}
		res.took = time.Since(start)
	}()
	var mu sync.Mutex
	var stateErr error
	emit := func(state json.RawMessage) error {
		if err := a.reg.ValidateState(state); err != nil {
			mu.Lock()
			if stateErr == nil {
				stateErr = err
			}
			mu.Unlock()
			return err
		}
		sys.Root.Send(a.env.hub, &hubDelta{owner: a.call.Owner, delta: &api.Delta{TaskId: a.call.TaskID, Kind: api.DeltaKind_DELTA_KIND_TOOL_STATE, CallId: a.call.CallID, Data: state}})
		return nil
	}
	// The workspace is checked again for a tool that uses it: a folder
	// replaced by a symlink since the Task was created must not lead a
	// tool into the data folder. Other tools never see it.
	call := a.call
	if wu, ok := a.reg.Tool.(tools.WorkspaceUser); ok && wu.UsesWorkspace() {
		owner := a.wsOwner
		if owner == "" {
			owner = a.call.TaskID
		}
		if err := a.env.workspaces.checkInUse(owner, a.call.Workspace); err != nil {
			res.err = err
			return res
		}
	} else {
		call.Workspace = ""
	}
	out, err := a.reg.Tool.Execute(ctx, call, emit)
	if err != nil {
		if ctx.Err() != nil && !errors.Is(err, context.Canceled) {
			err = cancelledError{err}
		}
		res.err = err
		return res
	}
	mu.Lock()
	serr := stateErr
	mu.Unlock()
	if serr != nil {
		res.err = serr
		return res
	}
	if err := a.reg.ValidateOutput(out); err != nil {
		res.err = err
		return res
	}
	res.output, res.presented = out, out
	if p, ok := a.reg.Tool.(tools.Presenter); ok {
		res.presented = p.Present(out)
	}
	if w, ok := a.call.Live.(*live.Result); ok {
		res.presented = boundPresented(res.presented, a.env.deps.Live.Limits().CallBytes, w, a.call.TaskID, a.call.CallID)
	}
	res.retained = a.reg.Tool.Retain(out, a.call.Input)
	if u, ok := a.reg.Tool.(tools.Untrusted); ok && u.Untrusted() {
		res.untrusted = true
	}
	return res
}

// approvalBridge lets a running call ask its Task for approvals.
type approvalBridge struct {
	sys    *actor.ActorSystem
	task   *actor.PID
	callID string
}

// Ask implements tools.Approvals.
func (b *approvalBridge) Ask(ctx context.Context, reason string, deadline time.Duration) (tools.Decision, error) {
	m := &askApproval{callID: b.callID, reason: reason, deadline: deadline, requested: make(chan askAck, 1), decided: make(chan tools.Decision, 1)}
	b.sys.Root.Send(b.task, m)
	var ack askAck
	select {
	case ack = <-m.requested:
	case <-ctx.Done():
		// The Task checks this before and after recording the request; one
		// it records anyway is cancelled when the call ends.
		m.abandoned.Store(true)
		return tools.Decision{}, ctx.Err()
	}
	if ack.err != nil {
		return tools.Decision{}, ack.err
	}
	select {
	case d := <-m.decided:
		return d, nil
	case <-ctx.Done():
		b.sys.Root.Send(b.task, &abandonApproval{approvalID: ack.id})
		return tools.Decision{}, ctx.Err()
	}
}

// boundPresented keeps the model's view of an output within the per-call
// bound of live results: a longer one becomes the call's live output
// (stream "result", in memory and spilled within the bounds) and the view
// its head and tail, with the tasks.read_block call that reads it whole.
func boundPresented(p json.RawMessage, limit int64, w *live.Result, task, call string) json.RawMessage {
	if int64(len(p)) <= limit || !w.Empty() {
		return p
	}
	_, _ = w.Stream("result").Write(p)
	half := int(limit / 4)
	v, _ := json.Marshal(struct {
		Head  string `json:"head"`
		Tail  string `json:"tail"`
		Bytes int    `json:"bytes"`
		Note  string `json:"note"`
	}{excerpt.Head(string(p), half), excerpt.Tail(string(p), half), len(p),
		fmt.Sprintf("the result is %d bytes: only its head and tail are shown; read it whole with tasks.read_block {\"task\":%q,\"call_id\":%q,\"part\":\"result\"} while this task holds it", len(p), task, call)})
	return v
}
