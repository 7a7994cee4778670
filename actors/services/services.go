package services

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"lemo/api"
	"lemo/excerpt"
	"lemo/tools"
	"lemo/tools/system"
)

// Errors of the registry. Their messages are written for the model, which
// sees them as tool failures.
var (
	// ErrNotFound: no such Service or operation for the caller.
	ErrNotFound = errors.New("services: not found")
	// ErrConflict: another owner's program offers a Service of that name.
	ErrConflict = errors.New("services: name taken")
	// ErrInvalid: a spec or an input does not match what is accepted.
	ErrInvalid = errors.New("services: invalid")
	// ErrGone: the program went away (or replaced the Service) before it
	// answered.
	ErrGone = errors.New("services: the program went away")
	// ErrTimeout: the program did not answer before the deadline.
	ErrTimeout = errors.New("services: no answer before the deadline")
)

// Provider delivers calls to the program that registered a Service: the
// gateway's session of that program. Deliver must not block.
type Provider interface {
	Deliver(call *api.ServiceCall)
}

// Options tune the registry; zero values take the defaults.
type Options struct {
	// MaxResultBytes bounds a result: a larger one is replaced by a
	// labelled excerpt (default 64 KiB).
	MaxResultBytes int
	// DefaultTimeout applies when the caller's context has no deadline
	// (default 30s); MaxTimeout caps any deadline (default 5m).
	DefaultTimeout time.Duration
	MaxTimeout     time.Duration
	// Now is the clock (default time.Now).
	Now func() time.Time
}

// Registry holds the Services programs registered. It is safe for
// concurrent use: gateway sessions register and complete calls, tool calls
// execute operations.
type Registry struct {
	opts Options

	mu       sync.Mutex
	byName   map[string]*entry
	pending  map[uint64]*pendingCall
	nextCall uint64
}

var _ system.Services = (*Registry)(nil)

type entry struct {
	spec     *api.ServiceSpec
	owner    string
	everyone bool // registered by an operator: visible to every owner
	provider string
	p        Provider
	ops      map[string]*operation
}

type operation struct {
	spec   *api.ServiceOperation
	input  *tools.Schema
	result *tools.Schema
}

type pendingCall struct {
	provider string
	service  string
	done     chan *api.ServiceResult
	gone     chan struct{}
	once     sync.Once
}

func (c *pendingCall) fail() { c.once.Do(func() { close(c.gone) }) }

// New returns an empty registry.
func New(o Options) *Registry {
	if o.MaxResultBytes <= 0 {
		o.MaxResultBytes = 64 << 10
	}
	if o.DefaultTimeout <= 0 {
		o.DefaultTimeout = 30 * time.Second
	}
	if o.MaxTimeout <= 0 {
		o.MaxTimeout = 5 * time.Minute
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return &Registry{opts: o, byName: make(map[string]*entry), pending: make(map[uint64]*pendingCall)}
}

// Register adds a Service offered by provider (a session id) on behalf of
// owner; an operator's Service is visible to every owner. A program of the
// same owner may replace its earlier registration (a restarted program):
// the calls the old one had not answered fail with ErrGone.
func (r *Registry) Register(owner string, operator bool, provider string, spec *api.ServiceSpec, p Provider) error {
	e := &entry{spec: spec, owner: owner, everyone: operator, provider: provider, p: p, ops: make(map[string]*operation)}
	for _, op := range spec.GetOperations() {
		o := &operation{spec: op}
		var err error
		if s := op.GetInputSchema(); len(s) > 0 {
			if o.input, err = tools.CompileSchema(spec.GetName()+"."+op.GetName()+" input", s); err != nil {
				return fmt.Errorf("%w: %v", ErrInvalid, err)
			}
		}
		if s := op.GetResultSchema(); len(s) > 0 {
			if o.result, err = tools.CompileSchema(spec.GetName()+"."+op.GetName()+" result", s); err != nil {
				return fmt.Errorf("%w: %v", ErrInvalid, err)
			}
		}
		e.ops[op.GetName()] = o
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if old := r.byName[spec.GetName()]; old != nil {
		if old.owner != owner || old.everyone != operator {
			return fmt.Errorf("%w: service %q is offered by another owner's program", ErrConflict, spec.GetName())
		}
		r.failLocked(old.provider, spec.GetName())
	}
	r.byName[spec.GetName()] = e
	return nil
}

// Unregister removes a Service that provider registered.
func (r *Registry) Unregister(provider, name string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	e := r.byName[name]
	if e == nil || e.provider != provider {
		return fmt.Errorf("%w: service %q is not registered by this client", ErrNotFound, name)
	}
	delete(r.byName, name)
	r.failLocked(provider, name)
	return nil
}

// UnregisterProvider removes every Service of provider (its program went
// away) and fails its unanswered calls with ErrGone.
func (r *Registry) UnregisterProvider(provider string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for name, e := range r.byName {
		if e.provider == provider {
			delete(r.byName, name)
		}
	}
	r.failLocked(provider, "")
}

// failLocked fails the pending calls of provider (to service, or all).
func (r *Registry) failLocked(provider, service string) {
	for id, c := range r.pending {
		if c.provider == provider && (service == "" || c.service == service) {
			c.fail()
			delete(r.pending, id)
		}
	}
}

func (e *entry) visible(owner string) bool { return e.everyone || e.owner == owner }

// List returns the Services visible to owner, sorted by name.
func (r *Registry) List(owner string) []system.Service {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []system.Service
	for _, e := range r.byName {
		if !e.visible(owner) {
			continue
		}
		s := system.Service{Name: e.spec.GetName(), Description: e.spec.GetDescription()}
		for _, op := range e.spec.GetOperations() {
			s.Operations = append(s.Operations, system.Operation{Name: op.GetName(), Description: op.GetDescription(),
				InputSchema: rawOrNil(op.GetInputSchema()), ResultSchema: rawOrNil(op.GetResultSchema())})
		}
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

func rawOrNil(b []byte) json.RawMessage {
	if len(b) == 0 {
		return nil
	}
	return json.RawMessage(b)
}

// names lists the Services visible to owner, for error messages.
func (r *Registry) namesLocked(owner string) string {
	var ns []string
	for n, e := range r.byName {
		if e.visible(owner) {
			ns = append(ns, n)
		}
	}
	if len(ns) == 0 {
		return "none"
	}
	sort.Strings(ns)
	return strings.Join(ns, ", ")
}

// Execute validates the input, sends the call to the program and waits for
// its answer until the deadline: ctx's, else DefaultTimeout, at most
// MaxTimeout.
func (r *Registry) Execute(ctx context.Context, q system.Request) (json.RawMessage, error) {
	if len(q.Input) == 0 {
		q.Input = json.RawMessage(`{}`)
	}
	start := r.opts.Now()
	deadline := start.Add(r.opts.DefaultTimeout)
	if d, ok := ctx.Deadline(); ok {
		deadline = d
	}
	if limit := start.Add(r.opts.MaxTimeout); deadline.After(limit) {
		deadline = limit
	}
	ctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()

	r.mu.Lock()
	e := r.byName[q.Service]
	if e == nil || !e.visible(q.Owner) {
		names := r.namesLocked(q.Owner)
		r.mu.Unlock()
		return nil, fmt.Errorf("%w: service %q is not available: no attached program offers it now (it may have gone away); available services: %s", ErrNotFound, q.Service, names)
	}
	op := e.ops[q.Operation]
	if op == nil {
		var ops []string
		for n := range e.ops {
			ops = append(ops, n)
		}
		sort.Strings(ops)
		r.mu.Unlock()
		return nil, fmt.Errorf("%w: service %q has no operation %q; its operations: %s", ErrNotFound, q.Service, q.Operation, strings.Join(ops, ", "))
	}
	if op.input != nil {
		if err := op.input.Validate("input", q.Input); err != nil {
			r.mu.Unlock()
			return nil, fmt.Errorf("%w: %s.%s: %v", ErrInvalid, q.Service, q.Operation, err)
		}
	}
	r.nextCall++
	id := r.nextCall
	pc := &pendingCall{provider: e.provider, service: q.Service, done: make(chan *api.ServiceResult, 1), gone: make(chan struct{})}
	r.pending[id] = pc
	p := e.p
	r.mu.Unlock()
	defer func() {
		r.mu.Lock()
		delete(r.pending, id)
		r.mu.Unlock()
	}()

	p.Deliver(&api.ServiceCall{Call: id, Service: q.Service, Operation: q.Operation, Input: q.Input,
		Deadline: timestamppb.New(deadline), TaskId: q.TaskID, CallId: q.CallID, Owner: q.Owner})
	select {
	case res := <-pc.done:
		return r.result(q, op, res)
	case <-pc.gone:
		return nil, fmt.Errorf("%w: the program offering service %q went away before it answered", ErrGone, q.Service)
	case <-ctx.Done():
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return nil, fmt.Errorf("%w: service %q did not answer %s within %s", ErrTimeout, q.Service, q.Operation, deadline.Sub(start).Round(time.Millisecond))
		}
		return nil, ctx.Err()
	}
}

// result checks and bounds a program's answer.
func (r *Registry) result(q system.Request, op *operation, res *api.ServiceResult) (json.RawMessage, error) {
	if msg := res.GetError(); msg != "" {
		return nil, fmt.Errorf("service %s.%s failed: %s", q.Service, q.Operation, excerpt.Clip(msg, 4096))
	}
	out := json.RawMessage(res.GetOutput())
	if !json.Valid(out) {
		return nil, fmt.Errorf("%w: service %s.%s answered with something that is not JSON", ErrInvalid, q.Service, q.Operation)
	}
	if op.result != nil {
		if err := op.result.Validate("output", out); err != nil {
			return nil, fmt.Errorf("%w: service %s.%s: %v", ErrInvalid, q.Service, q.Operation, err)
		}
	}
	if len(out) > r.opts.MaxResultBytes {
		half := r.opts.MaxResultBytes / 2
		ex, _ := json.Marshal(map[string]any{
			"excerpt": excerpt.Ends(string(out), half, half/2),
			"bytes":   len(out),
			"note":    fmt.Sprintf("the result exceeded %d bytes; only its head and tail are shown", r.opts.MaxResultBytes),
		})
		out = ex
	}
	return out, nil
}

// Complete delivers a program's answer to the call it names. An answer to
// a call that is no longer awaited (it timed out) or that another program
// was asked is refused.
func (r *Registry) Complete(provider string, res *api.ServiceResult) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	pc := r.pending[res.GetCall()]
	if pc == nil || pc.provider != provider {
		return fmt.Errorf("%w: call %d is not awaited (it may have timed out)", ErrNotFound, res.GetCall())
	}
	delete(r.pending, res.GetCall())
	pc.done <- res
	return nil
}
