package actors

import (
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"lemo/actors/taskstate"
	"lemo/tools"
)

// A held step: when a Cycle's answer (or a result) starts only calls that
// read (taskstate.Holds, tools.Reader), the Task runs them at once and
// holds the append that records their start, so that their results and
// the step that follows them (the next Cycle's start) join it: a step of
// the agent loop is then one commit instead of two. The hold ends, and
// its events are appended as they are, at the first of: the held calls
// done (everything is appended together), Options.HoldFor
// (tasks.read_hold) since the hold began, holdBytes of results, or any
// other message for the Task (a command, a stop), which is then handled
// once the append is durable, as it would have been behind any append.
// Nothing is applied or published before it is durable: a client sees the
// answer when the append is.
const (
	// defaultHoldFor bounds how long clients wait to see an answer whose
	// read-only calls are still running.
	defaultHoldFor = 100 * time.Millisecond
	// holdBytes bounds what one held append records (well within a
	// commit's size).
	holdBytes = 256 << 10
)

// held is the append a Task holds while read-only calls run.
type held struct {
	// bodies are the events the append records so far, and st the Task's
	// state with them applied (what the calls' results are decided on).
	bodies []proto.Message
	st     *taskstate.State
	bytes  int
	// at is when each of bodies was decided: the append records those
	// times, not its own (a held answer is not an hour late).
	at []*timestamppb.Timestamp
	// actions run, in order, once the append is durable.
	actions []func(ctx actor.Context)
	// running are the held calls not reported yet.
	running map[string]bool
	timer   *time.Timer
}

// holdExpired ends the hold it names, if it still holds.
type holdExpired struct{ h *held }

// readOnly reports whether a call may run before its start is durable:
// its tool only reads with this input and streams no state (a state
// update would reach clients before the call's start).
func (t *task) readOnly(c *taskstate.Call) bool {
	reg, ok := t.env.deps.Tools.Get(c.Tool)
	if !ok || reg.Tool.StateSchema() != nil {
		return false
	}
	r, ok := reg.Tool.(tools.Reader)
	if !ok {
		return false
	}
	input, asked, err := tools.SplitApprovalRequest(c.Args)
	return err == nil && asked == "" && r.ReadOnly(input)
}

// holding handles m while the Task holds an append: a held call's result
// joins it; anything else ends the hold (the append goes to the store) and
// waits for it. It reports whether m was taken.
func (t *task) holding(ctx actor.Context, m any) bool {
	h := t.hold
	if h == nil {
		if _, ok := m.(*holdExpired); ok {
			return true // a hold that already ended
		}
		return false
	}
	switch m := m.(type) {
	case *holdExpired:
		if m.h == h {
			t.release(ctx)
		}
		return true
	case *toolResult:
		// A rough bound before the result is taken (toolOutcome changes
		// the Task's bookkeeping): a result that would not fit ends the
		// hold and is recorded after it. holdable checks the exact sizes
		// of what is then chained.
		if h.running[m.callID] && h.bytes+len(m.retained)+1024 <= holdBytes {
			delete(h.running, m.callID)
			bodies, then := t.toolOutcome(h.st, m)
			if bodies == nil {
				if len(h.running) == 0 {
					t.release(ctx)
				}
				return true
			}
			t.chainStep(ctx, bodies, nil, then)
			return true
		}
	}
	t.release(ctx)
	return false
}

// release ends the hold: its events are appended as they are, and its
// actions run once they are durable. Calls still running report as any
// call does, after it.
func (t *task) release(ctx actor.Context) {
	h := t.hold
	t.endHold()
	actions := h.actions
	t.persistFull(ctx, &inflight{then: func(ctx actor.Context) { runAll(ctx, actions) }, held: h.at}, h.bodies)
}

// holdStep adds fresh to what the Task holds (starting a hold if it holds
// nothing); after is the state with all of it applied, actions what runs
// once it is durable. The read-only calls steps start run now.
func (t *task) holdStep(ctx actor.Context, fresh []proto.Message, size int, after *taskstate.State, steps []taskstate.Step, actions []func(ctx actor.Context)) {
	h := t.hold
	if h == nil {
		h = &held{running: make(map[string]bool)}
		self, sys := ctx.Self(), ctx.ActorSystem()
		h.timer = time.AfterFunc(t.env.opts.HoldFor, func() { sys.Root.Send(self, &holdExpired{h: h}) })
		t.hold = h
	}
	h.bodies, h.st, h.actions, h.bytes = append(h.bodies, fresh...), after, actions, h.bytes+size
	now := timestamppb.New(t.env.now())
	for range fresh {
		h.at = append(h.at, now)
	}
	for _, st := range steps {
		for _, c := range st.Calls {
			h.running[c.ID] = true
			t.startTool(ctx, c)
		}
	}
}

// holdable returns the size of fresh when the Task may hold it with what
// it holds, within holdBytes; -1 when it may not.
func (t *task) holdable(fresh []proto.Message) int {
	held := 0
	if t.hold != nil {
		held = t.hold.bytes
	}
	size := 0
	for _, b := range fresh {
		if size += proto.Size(b); held+size > holdBytes {
			return -1
		}
	}
	return size
}

// endHold ends the hold without appending it: the caller appends its
// events with more.
func (t *task) endHold() {
	if t.hold != nil {
		t.hold.timer.Stop()
		t.hold = nil
	}
}

func runAll(ctx actor.Context, actions []func(ctx actor.Context)) {
	for _, a := range actions {
		a(ctx)
	}
}
