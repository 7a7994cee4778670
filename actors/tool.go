package actors

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	"github.com/asynkron/protoactor-go/actor"

	"lemo/api"
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
// reports to its Task.
type toolActor struct {
	env  *env
	reg  *tools.Registered
	call tools.Call

	cancel context.CancelFunc
	done   bool
}

func (a *toolActor) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		runCtx, cancel := context.WithCancel(context.Background())
		a.cancel = cancel
		self, sys := ctx.Self(), ctx.ActorSystem()
		a.env.goroutine(func() {
			sys.Root.Send(self, a.run(runCtx, sys))
		})
	case *toolResult:
		a.finish(ctx, m)
	case *cancelTool:
		a.cancel()
		ctx.SetReceiveTimeout(a.env.opts.ToolGrace)
	case *actor.ReceiveTimeout:
		a.finish(ctx, &toolResult{callID: a.call.CallID, err: errStopTimeout})
	case *actor.Stopping:
		a.cancel()
	}
}

func (a *toolActor) finish(ctx actor.Context, r *toolResult) {
	if a.done {
		return
	}
	a.done = true
	ctx.Send(ctx.Parent(), r)
	ctx.Stop(ctx.Self())
}

// run executes the call; it recovers its own panics (and those of Retain).
func (a *toolActor) run(ctx context.Context, sys *actor.ActorSystem) (res *toolResult) {
	res = &toolResult{callID: a.call.CallID}
	defer func() {
		if v := recover(); v != nil {
			res.output, res.retained, res.err = nil, nil, supervision.Recovered(v)
		}
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
	out, err := a.reg.Tool.Execute(ctx, a.call, emit)
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
	res.output = out
	res.retained = a.reg.Tool.Retain(out, a.call.Input)
	if u, ok := a.reg.Tool.(tools.Untrusted); ok && u.Untrusted() {
		res.untrusted = true
	}
	return res
}
