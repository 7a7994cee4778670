package actors

import (
	"context"
	"errors"
	"strings"

	"github.com/asynkron/protoactor-go/actor"

	"lemo/actors/taskstate"
	"lemo/tools"
)

// loadTools is sent by a running tools.load call's Toolset to its Task.
type loadTools struct {
	callID string
	names  []string
	// done receives the result once the load is durable, or why nothing
	// was loaded.
	done chan loadAck
}

type loadAck struct {
	res taskstate.LoadResult
	err error
}

// toolsetBridge is the tools.Toolset of a call of a Task whose tools are
// discovered: a snapshot of the offered tools from the call's start, and
// loads recorded by the Task actor.
type toolsetBridge struct {
	sys     *actor.ActorSystem
	task    *actor.PID
	callID  string
	offered []tools.OfferedTool
	pending []tools.Pending
}

var (
	_ tools.Toolset       = (*toolsetBridge)(nil)
	_ tools.PendingSource = (*toolsetBridge)(nil)
)

// Offered implements tools.Toolset.
func (b *toolsetBridge) Offered() []tools.OfferedTool { return b.offered }

// Pending implements tools.PendingSource.
func (b *toolsetBridge) Pending() []tools.Pending { return b.pending }

// Load implements tools.Toolset.
func (b *toolsetBridge) Load(ctx context.Context, names []string) (tools.LoadResult, error) {
	m := &loadTools{callID: b.callID, names: names, done: make(chan loadAck, 1)}
	b.sys.Root.Send(b.task, m)
	select {
	case a := <-m.done:
		if a.err != nil {
			if errors.Is(a.err, taskstate.ErrInvalid) {
				return tools.LoadResult{}, &tools.ValidationError{What: "input", Detail: strings.TrimPrefix(a.err.Error(), taskstate.ErrInvalid.Error()+": ")}
			}
			return tools.LoadResult{}, a.err
		}
		return tools.LoadResult{Loaded: a.res.Loaded, Already: a.res.Already}, nil
	case <-ctx.Done():
		return tools.LoadResult{}, ctx.Err()
	}
}

// toolset returns the Toolset of a call of tool, nil unless the Task's
// tools are discovered and the tool is one of the discovery tools.
func (t *task) toolset(ctx actor.Context, callID, tool string) tools.Toolset {
	if !t.st.Discovery || (tool != taskstate.SearchTool && tool != taskstate.LoadTool) {
		return nil
	}
	set := t.toolSet()
	var offered []tools.OfferedTool
	for _, r := range t.env.deps.Tools.List() {
		name := r.Tool.Name()
		if loaded := set.Has(name); loaded || t.st.Offered(name, tools.MatchPattern) {
			offered = append(offered, tools.OfferedTool{Name: name, Description: r.Tool.Description(), Loaded: loaded})
		}
	}
	return &toolsetBridge{sys: ctx.ActorSystem(), task: ctx.Self(), callID: callID, offered: offered, pending: t.env.deps.Tools.Pending()}
}

// onLoadTools records a load a running tools.load call asks for and
// answers it once the load is durable.
func (t *task) onLoadTools(ctx actor.Context, m *loadTools) {
	bodies, res, err := t.st.LoadTools(taskstate.LoadInput{CallID: m.callID, Names: m.names, Registered: toolNames(t.env.deps.Tools),
		ModelName: tools.ModelName, Match: tools.MatchPattern})
	if err != nil {
		m.done <- loadAck{err: err}
		return
	}
	t.persist(ctx, bodies, nil, func(actor.Context) { m.done <- loadAck{res: res} })
}
