package tools

import (
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"sort"
	"sync"

	"lemo/providers"
)

// ErrUnknownTool is wrapped when a name resolves to no registered tool.
var ErrUnknownTool = errors.New("tools: unknown tool")

// MaxNameLen is the longest tool name accepted (provider function names are
// limited to 64 characters).
const MaxNameLen = 64

var validName = regexp.MustCompile(`^[a-z0-9_.-]+$`)

// ModelName maps a tool name to the function name models see: provider
// function names allow no dots, so "." becomes "_".
func ModelName(name string) string {
	b := []byte(name)
	for i, c := range b {
		if c == '.' {
			b[i] = '_'
		}
	}
	return string(b)
}

// Registered is a tool with its compiled schemas.
type Registered struct {
	Tool      Tool
	ModelName string
	input     *Schema
	state     *Schema
	result    *Schema
	steer     *Schema
}

// Steerable reports whether the tool's running calls accept steering.
func (r *Registered) Steerable() bool { return r.steer != nil }

// ValidateSteer checks a steering input against the tool's steer schema.
func (r *Registered) ValidateSteer(input json.RawMessage) error {
	if r.steer == nil {
		return &ValidationError{What: "steering input", Detail: "this tool does not accept steering"}
	}
	return r.steer.Validate("steering input", input)
}

// ValidateInput checks a call's arguments against the input schema.
func (r *Registered) ValidateInput(input json.RawMessage) error {
	return r.input.Validate("input", input)
}

// ValidateState checks a state update; a tool without a state schema emits
// none, so any update is invalid.
func (r *Registered) ValidateState(state json.RawMessage) error {
	if r.state == nil {
		return &ValidationError{What: "state", Detail: "this tool declares no state schema"}
	}
	return r.state.Validate("state", state)
}

// ValidateOutput checks a result against the result schema.
func (r *Registered) ValidateOutput(output json.RawMessage) error {
	return r.result.Validate("output", output)
}

// Spec returns what the model is offered for this tool.
func (r *Registered) Spec() providers.ToolSpec {
	return providers.ToolSpec{Name: r.ModelName, Description: r.Tool.Description(), Parameters: r.Tool.InputSchema()}
}

// Registry holds the tools a daemon offers. It is safe for concurrent use.
type Registry struct {
	mu      sync.RWMutex
	byName  map[string]*Registered
	byModel map[string]*Registered
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry {
	return &Registry{byName: make(map[string]*Registered), byModel: make(map[string]*Registered)}
}

// Register validates t's name and schemas and adds it.
func (r *Registry) Register(t Tool) error {
	name := t.Name()
	switch {
	case len(name) == 0 || len(name) > MaxNameLen:
		return fmt.Errorf("tools: tool name %q: want 1 to %d characters", name, MaxNameLen)
	case !validName.MatchString(name):
		return fmt.Errorf("tools: tool name %q: only a-z, 0-9, '_', '.' and '-' are allowed", name)
	}
	reg := &Registered{Tool: t, ModelName: ModelName(name)}
	var err error
	if reg.input, err = CompileSchema(name+" input", t.InputSchema()); err != nil {
		return err
	}
	if err := objectSchema(name, t.InputSchema()); err != nil {
		return err
	}
	if reg.result, err = CompileSchema(name+" result", t.ResultSchema()); err != nil {
		return err
	}
	if s := t.StateSchema(); len(s) > 0 {
		if reg.state, err = CompileSchema(name+" state", s); err != nil {
			return err
		}
	}
	if st, ok := t.(Steerable); ok {
		if reg.steer, err = CompileSchema(name+" steer", st.SteerSchema()); err != nil {
			return err
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, dup := r.byName[name]; dup {
		return fmt.Errorf("tools: tool %q registered twice", name)
	}
	if other, dup := r.byModel[reg.ModelName]; dup {
		return fmt.Errorf("tools: tool %q collides with %q: both are %q for the model", name, other.Tool.Name(), reg.ModelName)
	}
	r.byName[name] = reg
	r.byModel[reg.ModelName] = reg
	return nil
}

// objectSchema checks that an input schema describes a JSON object, as
// every provider's function calling requires.
func objectSchema(name string, doc json.RawMessage) error {
	var s struct {
		Type any `json:"type"`
	}
	if err := json.Unmarshal(doc, &s); err != nil || s.Type != "object" {
		return fmt.Errorf("tools: tool %q: input schema must have \"type\": \"object\"", name)
	}
	return nil
}

// Get returns the tool registered as name.
func (r *Registry) Get(name string) (*Registered, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	t, ok := r.byName[name]
	return t, ok
}

// ByModelName resolves the function name a model used.
func (r *Registry) ByModelName(name string) (*Registered, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	t, ok := r.byModel[name]
	return t, ok
}

// List returns every registered tool sorted by name.
func (r *Registry) List() []*Registered {
	r.mu.RLock()
	defer r.mu.RUnlock()
	out := make([]*Registered, 0, len(r.byName))
	for _, t := range r.byName {
		out = append(out, t)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Tool.Name() < out[j].Tool.Name() })
	return out
}

// Select returns the tools a Task may use: all of them when restricted is
// false, else those named in allow. Unknown names are an error naming them.
func (r *Registry) Select(allow []string, restricted bool) ([]*Registered, error) {
	if !restricted {
		return r.List(), nil
	}
	out := make([]*Registered, 0, len(allow))
	var unknown []string
	seen := make(map[string]bool)
	for _, n := range allow {
		if seen[n] {
			continue
		}
		seen[n] = true
		t, ok := r.Get(n)
		if !ok {
			unknown = append(unknown, n)
			continue
		}
		out = append(out, t)
	}
	if len(unknown) > 0 {
		return nil, fmt.Errorf("%w: %q; registered tools: %s", ErrUnknownTool, unknown, r.names())
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Tool.Name() < out[j].Tool.Name() })
	return out, nil
}

func (r *Registry) names() []string {
	var ns []string
	for _, t := range r.List() {
		ns = append(ns, t.Tool.Name())
	}
	return ns
}
