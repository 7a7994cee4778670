package tools

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"sort"
	"strings"
	"sync"
	"unicode"

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
	// params is the input schema the model sees: the tool's own with the
	// request_approval property added.
	params json.RawMessage
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

// Spec returns what the model is offered for this tool: its input schema
// carries the optional RequestApproval property besides the tool's own.
func (r *Registered) Spec() providers.ToolSpec {
	return providers.ToolSpec{Name: r.ModelName, Description: r.Tool.Description(), Parameters: r.params}
}

// Registry holds the tools a daemon offers. It is safe for concurrent use.
type Registry struct {
	mu      sync.RWMutex
	byName  map[string]*Registered
	byModel map[string]*Registered
	pending func() []Pending
}

// Pending is a source of tools whose tools are not registered yet, such as
// an MCP server whose tools could not be listed (tried again in the
// background): its tools' names start with Prefix, Source names it for
// people ("mcp server fs") and State says why they are missing.
type Pending struct {
	Source, Prefix, State string
}

// SetPending sets what says which sources of tools are pending (nil:
// none); f must be safe for concurrent use.
func (r *Registry) SetPending(f func() []Pending) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.pending = f
}

// Pending returns the sources of tools that are not registered yet.
func (r *Registry) Pending() []Pending {
	r.mu.RLock()
	f := r.pending
	r.mu.RUnlock()
	if f == nil {
		return nil
	}
	return f()
}

// PendingFor returns the pending source whose tools name would be one of,
// if any.
func (r *Registry) PendingFor(name string) (Pending, bool) {
	for _, p := range r.Pending() {
		if p.Prefix != "" && strings.HasPrefix(name, p.Prefix) {
			return p, true
		}
	}
	return Pending{}, false
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
	if reg.params, err = withRequestApproval(name, t.InputSchema()); err != nil {
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
		// A tool of a source that has not listed its tools yet: say why.
		var why []string
		for _, n := range unknown {
			if p, ok := r.PendingFor(n); ok {
				why = append(why, fmt.Sprintf("%s is not offered yet: the %s has not listed its tools (%s)", n, p.Source, p.State))
			}
		}
		if len(why) > 0 {
			return nil, fmt.Errorf("%w: %q: %s; registered tools: %s", ErrUnknownTool, unknown, strings.Join(why, "; "), r.names())
		}
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

// RequestApproval is the input property every tool offers the model: set, it
// asks for a person's approval before the call runs, and says why. It is not
// part of the tool's own input: SplitApprovalRequest removes it before the
// input is validated and given to the tool.
const RequestApproval = "request_approval"

// MaxApprovalRequest bounds the model's reason, in characters.
const MaxApprovalRequest = 500

var requestApprovalSchema = json.RawMessage(`{"type":"string","description":"Set only when a person should approve this call before it runs; say why."}`)

// withRequestApproval returns the input schema with the RequestApproval
// property added (appended to the tool's properties, whose order it keeps).
// A tool whose schema already defines the property is refused.
func withRequestApproval(name string, schema json.RawMessage) (json.RawMessage, error) {
	top, err := objectMembers(schema)
	if err != nil {
		return nil, fmt.Errorf("tools: tool %q: input schema: %w", name, err)
	}
	found := false
	for i, m := range top {
		if m.key != "properties" {
			continue
		}
		found = true
		props, err := objectMembers(m.value)
		if err != nil {
			return nil, fmt.Errorf("tools: tool %q: input schema properties: %w", name, err)
		}
		for _, p := range props {
			if p.key == RequestApproval {
				return nil, fmt.Errorf("tools: tool %q: its input schema defines %q, which Lemo reserves for the model to ask for approval; rename the property", name, RequestApproval)
			}
		}
		top[i].value = encodeMembers(append(props, member{key: RequestApproval, value: requestApprovalSchema}))
	}
	if !found {
		top = append(top, member{key: "properties", value: encodeMembers([]member{{key: RequestApproval, value: requestApprovalSchema}})})
	}
	return encodeMembers(top), nil
}

// SplitApprovalRequest separates the RequestApproval property from a call's
// arguments as the model sent them. It returns the tool's input (args
// unchanged when the property is absent) and the model's reason, sanitised
// (control characters and runs of white space become one space) and bounded
// to MaxApprovalRequest characters; "" when the model asked for nothing.
// Arguments that are not a JSON object are returned as they are, for the
// input validation to refuse; a property that is not a string is an error.
func SplitApprovalRequest(args json.RawMessage) (input json.RawMessage, reason string, err error) {
	// Most calls carry no request: spare them decoding (a file's content
	// can be megabytes). A key spelled with escapes is not seen here; it
	// then stays in the input, which the tool's schema judges.
	if !bytes.Contains(args, []byte(`"`+RequestApproval+`"`)) {
		return args, "", nil
	}
	members, perr := objectMembers(args)
	if perr != nil {
		return args, "", nil
	}
	at := -1
	for i, m := range members {
		if m.key == RequestApproval {
			at = i
		}
	}
	if at < 0 {
		return args, "", nil
	}
	v := members[at].value
	members = append(members[:at:at], members[at+1:]...)
	input = encodeMembers(members)
	if string(bytes.TrimSpace(v)) == "null" {
		return input, "", nil
	}
	var s string
	if err := json.Unmarshal(v, &s); err != nil {
		return nil, "", &ValidationError{What: "input", Detail: fmt.Sprintf("at /%s: want a string (why a person should approve this call), got %s", RequestApproval, clipJSON(v))}
	}
	return input, SanitiseReason(s, MaxApprovalRequest), nil
}

// SanitiseReason makes text from outside the daemon fit one line: control
// and format characters become spaces, runs of white space one space, and
// the result is at most max characters (an ellipsis marks a cut).
func SanitiseReason(s string, max int) string {
	var b strings.Builder
	space := false
	n := 0
	for _, r := range s {
		if unicode.IsSpace(r) || unicode.IsControl(r) || unicode.Is(unicode.Cf, r) {
			space = b.Len() > 0
			continue
		}
		if n >= max {
			b.WriteString("…")
			return b.String()
		}
		if space {
			if n+1 >= max {
				b.WriteString("…")
				return b.String()
			}
			b.WriteByte(' ')
			n++
			space = false
		}
		b.WriteRune(r)
		n++
	}
	return b.String()
}

func clipJSON(v json.RawMessage) string {
	s := string(bytes.TrimSpace(v))
	if len(s) > 40 {
		return s[:37] + "..."
	}
	return s
}

// member is one member of a JSON object, its value kept as written.
type member struct {
	key   string
	value json.RawMessage
}

// objectMembers returns the members of a JSON object in their order.
func objectMembers(doc json.RawMessage) ([]member, error) {
	dec := json.NewDecoder(bytes.NewReader(doc))
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return nil, errors.New("not a JSON object")
	}
	var out []member
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, err
		}
		key, ok := tok.(string)
		if !ok {
			return nil, errors.New("not a JSON object")
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, err
		}
		out = append(out, member{key: key, value: v})
	}
	if _, err := dec.Token(); err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err == nil {
		return nil, errors.New("data after the JSON object")
	}
	return out, nil
}

// encodeMembers writes members as a JSON object, in their order.
func encodeMembers(ms []member) json.RawMessage {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, m := range ms {
		if i > 0 {
			b.WriteByte(',')
		}
		k, _ := json.Marshal(m.key)
		b.Write(k)
		b.WriteByte(':')
		b.Write(m.value)
	}
	b.WriteByte('}')
	return b.Bytes()
}

// validPattern is a tool name pattern: a name, or one with "*" standing for
// any run of characters ("files.*", "*").
var validPattern = regexp.MustCompile(`^[a-z0-9_.*-]+$`)

// CheckPattern reports whether pattern is a tool name or a pattern with "*";
// its error says what is accepted.
func CheckPattern(pattern string) error {
	if len(pattern) == 0 || len(pattern) > MaxNameLen || !validPattern.MatchString(pattern) {
		return fmt.Errorf("tool pattern %q: want a tool name (1 to %d characters of a-z, 0-9, '_', '.', '-') or a pattern with '*' such as \"files.*\" or \"*\"", pattern, MaxNameLen)
	}
	return nil
}

// IsPattern reports whether a tool name pattern has a wildcard.
func IsPattern(pattern string) bool { return strings.Contains(pattern, "*") }

// MatchPattern reports whether the tool name matches pattern, where "*"
// stands for any run of characters (dots included).
func MatchPattern(pattern, name string) bool {
	parts := strings.Split(pattern, "*")
	if len(parts) == 1 {
		return pattern == name
	}
	if !strings.HasPrefix(name, parts[0]) {
		return false
	}
	rest := name[len(parts[0]):]
	last := parts[len(parts)-1]
	for _, p := range parts[1 : len(parts)-1] {
		i := strings.Index(rest, p)
		if i < 0 {
			return false
		}
		rest = rest[i+len(p):]
	}
	return len(rest) >= len(last) && strings.HasSuffix(rest, last)
}
