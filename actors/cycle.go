package actors

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"lemo/api"
	"lemo/memory"
	"lemo/prompt"
	"lemo/providers"
	"lemo/supervision"
)

// cycleActor runs one model call: it rebuilds the input from the Task's
// durable history and the live results it was given, streams the answer
// (publishing deltas) and reports the outcome to its Task. The call runs on
// a goroutine whose context is cancelled when the actor stops.
type cycleActor struct {
	env   *env
	task  string
	owner string
	n     uint32
	model string
	specs []providers.ToolSpec
	live  map[string]json.RawMessage
	// history is the Task's history when the Task holds it, nil when the
	// Cycle must read it from the store.
	history []*api.Event
	// maxOutput caps the answer's tokens (the reserved output); 0: none.
	maxOutput int

	cancel context.CancelFunc
	done   bool
}

func (c *cycleActor) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		runCtx, cancel := context.WithCancel(context.Background())
		c.cancel = cancel
		self, sys := ctx.Self(), ctx.ActorSystem()
		c.env.inspector.setState(self.Id, "calling "+c.model, c.env.now())
		c.env.goroutine(func() {
			sys.Root.Send(self, c.run(runCtx, sys))
		})
	case *cycleResult:
		if !c.done {
			c.done = true
			if panicked(m.err) {
				// The Task's supervision decides (routePanic).
				panic(m.err)
			}
			ctx.Send(ctx.Parent(), m)
			ctx.Stop(ctx.Self())
			c.release()
		}
	case *actor.Stopping:
		c.cancel()
	}
}

// release drops what the Cycle read, once its call (its goroutine) ended: a
// stopped actor can outlive its stop (protoactor keeps the last child's
// PID, with its process, in its parent's set of children until another
// child comes), and its Task's whole history with it.
func (c *cycleActor) release() {
	c.history, c.live, c.specs = nil, nil, nil
}

// run performs the call; it recovers its own panics and returns them as
// the result's error (a *supervision.PanicError), which fails the actor.
func (c *cycleActor) run(ctx context.Context, sys *actor.ActorSystem) (res *cycleResult) {
	res = &cycleResult{cycle: c.n}
	start := time.Now()
	defer func() {
		if v := recover(); v != nil {
			res.err = supervision.Recovered(v)
		}
		res.took = time.Since(start)
	}()
	history := c.history
	if history == nil {
		if err := c.env.deps.Store.Events(c.task, 1, 0, func(ev *api.Event) error {
			history = append(history, ev)
			return nil
		}); err != nil {
			res.err = err
			return res
		}
		// The Task adopts what was read, so later Cycles need no read.
		res.history = history
	}
	var after uint64
	if len(history) > 0 {
		after = history[len(history)-1].GetSeq()
	}
	model, err := c.env.deps.Providers.Model(ctx, c.model)
	if err != nil {
		res.err = err
		return res
	}
	info := model.Info()
	var recall []prompt.Evidence
	if m := c.env.deps.Memory; m != nil {
		recall, err = m.Recall(ctx, memory.RecallQuery{Owner: c.owner, TaskID: c.task, History: history})
		if err != nil {
			// Recall is help, not a requirement: the Cycle goes on without
			// it (the input summary then lists nothing recalled).
			if ctx.Err() != nil {
				res.err = ctx.Err()
				return res
			}
			c.env.log.Warn().Err(err).Str("task", c.task).Msg("recall failed; the model call goes on without recalled evidence")
			recall = nil
		}
	}
	req, sum, err := prompt.Build(prompt.Input{
		Recall:       recall,
		History:      history,
		Live:         c.live,
		Instructions: c.env.opts.Instructions,
		Tools:        c.specs,
		Window:       info.Window,
		Think:        c.env.opts.Think,
	})
	res.summary = sum
	if req != nil {
		req.MaxOutputTokens = c.maxOutput
	}
	c.delta(sys, &api.Delta{Kind: api.DeltaKind_DELTA_KIND_INPUT, Input: sum, AfterSeq: after})
	if err != nil {
		res.err = err
		return res
	}
	resp, err := model.Stream(ctx, req, func(d providers.Delta) {
		kind := api.DeltaKind_DELTA_KIND_TEXT
		switch d.Kind {
		case providers.DeltaReasoning:
			kind = api.DeltaKind_DELTA_KIND_REASONING
		case providers.DeltaNotice:
			kind = api.DeltaKind_DELTA_KIND_NOTICE
		}
		c.delta(sys, &api.Delta{Kind: kind, Text: d.Text, AfterSeq: after})
	})
	if err == nil && resp == nil {
		err = &providers.Error{Provider: model.Info().Provider, Class: providers.ClassTransient, Message: "provider returned no answer and no error"}
	}
	res.resp, res.err = resp, err
	return res
}

func (c *cycleActor) delta(sys *actor.ActorSystem, d *api.Delta) {
	d.TaskId, d.Cycle = c.task, c.n
	sys.Root.Send(c.env.hub, &hubDelta{owner: c.owner, delta: d})
}

// panicked reports whether err is a panic that a goroutine of an actor
// recovered (a *supervision.PanicError).
//
// routePanic: protoactor only sees panics inside Receive, so an actor whose
// goroutine reported a panic panics again with it in Receive. Its
// supervisor then decides (supervision.Decide), and is given the message
// being processed (the result carrying the panic), so that what it records
// keeps the result's details.
func panicked(err error) bool {
	var pe *supervision.PanicError
	return errors.As(err, &pe)
}
