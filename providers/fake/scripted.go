package fake

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"

	"lemo/providers"
)

// Scripted is a deterministic in-process provider whose models answer from
// a script. It is the model of tests and demos: no network, no timing.
type Scripted struct {
	name   string
	mu     sync.Mutex
	models map[string]*ScriptedModel
	order  []string
}

var _ providers.Provider = (*Scripted)(nil)

// NewScripted returns a provider called name offering models.
func NewScripted(name string, models ...*ScriptedModel) *Scripted {
	p := &Scripted{name: name, models: make(map[string]*ScriptedModel)}
	for _, m := range models {
		p.Add(m)
	}
	return p
}

// Add offers another model.
func (p *Scripted) Add(m *ScriptedModel) {
	p.mu.Lock()
	defer p.mu.Unlock()
	m.info.Provider = p.name
	m.info.ID = p.name + "/" + m.info.Name
	if _, ok := p.models[m.info.Name]; !ok {
		p.order = append(p.order, m.info.Name)
	}
	p.models[m.info.Name] = m
}

// Name implements providers.Provider.
func (p *Scripted) Name() string { return p.name }

// Models implements providers.Provider.
func (p *Scripted) Models(ctx context.Context) ([]providers.ModelInfo, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]providers.ModelInfo, 0, len(p.order))
	for _, n := range p.order {
		out = append(out, p.models[n].info)
	}
	return out, nil
}

// Model implements providers.Provider.
func (p *Scripted) Model(ctx context.Context, name string) (providers.Model, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	m, ok := p.models[name]
	if !ok {
		return nil, &providers.Error{Provider: p.name, Class: providers.ClassModelNotFound, Message: fmt.Sprintf("model %q not found", name)}
	}
	return m, nil
}

// Turn is one scripted answer.
type Turn struct {
	// Text and Reasoning are streamed in Chunks pieces (default: by word).
	Text      string
	Reasoning string
	ToolCalls []providers.ToolCall
	Usage     providers.Usage
	// NoUsage answers without any usage (a provider that reports none);
	// otherwise unset usage fields are filled with estimates.
	NoUsage bool
	// Err fails the call: before any output, or after FailAfter text
	// deltas when FailAfter > 0 (a mid-stream failure).
	Err       error
	FailAfter int
	// Wait, when set, is waited on before answering (or until ctx ends):
	// tests use it to hold a model call open.
	Wait <-chan struct{}
	// Panic makes the call panic (a bug in a provider).
	Panic string
}

// Plan decides the answer to the n-th call (from 0) given its request.
type Plan func(n int, req *providers.Request) Turn

// Sequence answers the calls with turns in order; a call beyond the last
// fails with a bad-request error that says so.
func Sequence(turns ...Turn) Plan {
	return func(n int, req *providers.Request) Turn {
		if n >= len(turns) {
			return Turn{Err: &providers.Error{Provider: "fake", Class: providers.ClassBadRequest, Message: fmt.Sprintf("script has %d turns, call %d has none", len(turns), n+1)}}
		}
		return turns[n]
	}
}

// Echo answers every call with "echo: " and the last user message.
func Echo() Plan {
	return func(n int, req *providers.Request) Turn {
		last := ""
		for _, m := range req.Messages {
			if m.Role == providers.RoleUser {
				last = m.Content
			}
		}
		return Turn{Text: "echo: " + last}
	}
}

// ToolCall builds a tool call with JSON arguments.
func ToolCall(id, name string, args any) providers.ToolCall {
	b, err := json.Marshal(args)
	if err != nil {
		panic(fmt.Sprintf("fake.ToolCall: %v", err))
	}
	return providers.ToolCall{ID: id, Name: name, Arguments: b}
}

// ScriptedModel is one scripted model. It records every request.
type ScriptedModel struct {
	info   providers.ModelInfo
	script Plan

	mu       sync.Mutex
	requests []*providers.Request
}

var _ providers.Model = (*ScriptedModel)(nil)

// NewScriptedModel returns a model called name with a context window of
// window tokens (0: unknown) that supports tools.
func NewScriptedModel(name string, window int, script Plan) *ScriptedModel {
	return &ScriptedModel{info: providers.ModelInfo{Name: name, Window: window, Tools: true, Reasoning: true}, script: script}
}

// Info implements providers.Model.
func (m *ScriptedModel) Info() providers.ModelInfo { return m.info }

// Requests returns the requests received so far.
func (m *ScriptedModel) Requests() []*providers.Request {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]*providers.Request(nil), m.requests...)
}

// ForgetRequests drops the requests received so far (a test measuring the
// daemon's memory keeps them out of it).
func (m *ScriptedModel) ForgetRequests() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.requests = nil
}

// Stream implements providers.Model.
func (m *ScriptedModel) Stream(ctx context.Context, req *providers.Request, emit func(providers.Delta)) (*providers.Response, error) {
	m.mu.Lock()
	n := len(m.requests)
	m.requests = append(m.requests, cloneRequest(req))
	m.mu.Unlock()

	turn := m.script(n, req)
	if turn.Panic != "" {
		panic(turn.Panic)
	}
	if turn.Wait != nil {
		select {
		case <-turn.Wait:
		case <-ctx.Done():
			return nil, providers.Cancelled(m.info.Provider, ctx.Err())
		}
	}
	if err := ctx.Err(); err != nil {
		return nil, providers.Cancelled(m.info.Provider, err)
	}
	if turn.Err != nil && turn.FailAfter == 0 {
		return nil, turn.Err
	}
	for _, piece := range chunks(turn.Reasoning) {
		emit(providers.Delta{Kind: providers.DeltaReasoning, Text: piece})
	}
	sent := 0
	for _, piece := range chunks(turn.Text) {
		if turn.Err != nil && sent == turn.FailAfter {
			break
		}
		if err := ctx.Err(); err != nil {
			return nil, providers.Cancelled(m.info.Provider, err)
		}
		emit(providers.Delta{Kind: providers.DeltaText, Text: piece})
		sent++
	}
	if turn.Err != nil {
		if e, ok := turn.Err.(*providers.Error); ok {
			c := *e
			c.OutputStarted = sent > 0
			return nil, &c
		}
		return nil, turn.Err
	}
	usage := turn.Usage
	if usage.PromptTokens == 0 && !turn.NoUsage {
		usage.PromptTokens = promptSize(req)
	}
	if usage.CompletionTokens == 0 && !turn.NoUsage {
		usage.CompletionTokens = (len(turn.Text) + len(turn.Reasoning) + 3) / 4
	}
	finish := "stop"
	if len(turn.ToolCalls) > 0 {
		finish = "tool_calls"
	}
	return &providers.Response{
		Text:         turn.Text,
		Reasoning:    turn.Reasoning,
		ToolCalls:    append([]providers.ToolCall(nil), turn.ToolCalls...),
		Usage:        usage,
		FinishReason: finish,
	}, nil
}

// chunks splits s after each space, keeping the spaces.
func chunks(s string) []string {
	if s == "" {
		return nil
	}
	var out []string
	for len(s) > 0 {
		i := strings.IndexByte(s, ' ')
		if i < 0 {
			out = append(out, s)
			break
		}
		out = append(out, s[:i+1])
		s = s[i+1:]
	}
	return out
}

// promptSize is a deterministic stand-in for a provider's prompt count.
func promptSize(req *providers.Request) int {
	n := len(req.System)
	for _, m := range req.Messages {
		n += len(m.Content) + len(m.Reasoning) + 4
		for _, c := range m.ToolCalls {
			n += len(c.Name) + len(c.Arguments)
		}
	}
	for _, t := range req.Tools {
		n += len(t.Name) + len(t.Description) + len(t.Parameters)
	}
	return n / 4
}

func cloneRequest(r *providers.Request) *providers.Request {
	c := *r
	c.Messages = append([]providers.Message(nil), r.Messages...)
	c.Tools = append([]providers.ToolSpec(nil), r.Tools...)
	return &c
}
