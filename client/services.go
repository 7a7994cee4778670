package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"google.golang.org/protobuf/proto"

	"lemo/api"
	"lemo/excerpt"
)

// ServiceCall is one operation a Task asked a Service for.
type ServiceCall struct {
	Service, Operation string
	// Input is JSON, already validated against the operation's schema.
	Input json.RawMessage
	// The Task, tool call and owner on whose behalf it runs.
	TaskID, CallID, Owner string
	// Deadline is when the daemon stops waiting.
	Deadline time.Time
}

// Handler executes a Service's operations. It runs on its own goroutine;
// ctx ends at the call's deadline or when the Conn closes. The output must
// be JSON; an error is shown to the Task's model.
type Handler func(ctx context.Context, call ServiceCall) (json.RawMessage, error)

type service struct {
	spec    *api.ServiceSpec
	handler Handler
}

// RegisterService offers a Service to the Tasks the Conn's token may see
// (every owner's for an operator token) through the system tool. The
// registration lasts until UnregisterService, Close, or the program's
// exit; after a daemon restart the Conn registers it again.
func (c *Conn) RegisterService(ctx context.Context, spec *api.ServiceSpec, h Handler) error {
	if h == nil {
		return fmt.Errorf("%w: a service needs a handler", ErrInvalid)
	}
	spec = proto.Clone(spec).(*api.ServiceSpec)
	c.mu.Lock()
	c.services[spec.GetName()] = &service{spec: spec, handler: h}
	c.mu.Unlock()
	if _, err := c.call(ctx, &api.Request{Command: &api.Request_RegisterService{RegisterService: &api.RegisterServiceRequest{Service: spec}}}); err != nil {
		c.mu.Lock()
		delete(c.services, spec.GetName())
		c.mu.Unlock()
		return err
	}
	return nil
}

// UnregisterService withdraws a Service; calls in flight fail.
func (c *Conn) UnregisterService(ctx context.Context, name string) error {
	c.mu.Lock()
	delete(c.services, name)
	c.mu.Unlock()
	_, err := c.call(ctx, &api.Request{Command: &api.Request_UnregisterService{UnregisterService: &api.UnregisterServiceRequest{Name: name}}})
	return err
}

// serve runs one service call on a goroutine and sends its result.
func (c *Conn) serve(m *api.ServiceCall) {
	c.mu.Lock()
	s := c.services[m.GetService()]
	closed := c.closed
	c.mu.Unlock()
	if closed {
		return
	}
	answer := func(out json.RawMessage, err error) {
		res := &api.ServiceResult{Call: m.GetCall(), Output: out}
		if err != nil {
			res.Output, res.Error = nil, err.Error()
			if res.Error == "" {
				res.Error = "failed"
			}
		} else if !json.Valid(out) {
			res.Output, res.Error = nil, "the service returned something that is not JSON"
		} else if len(out) > maxRequestBytes-1024 {
			res.Output, res.Error = nil, fmt.Sprintf("the service's result of %d bytes is too large", len(out))
		}
		res.Error = excerpt.Head(api.CleanText(res.Error), maxServiceError)
		if err := c.tell(&api.Request{Command: &api.Request_ServiceResult{ServiceResult: res}}); err != nil && !errors.Is(err, ErrDisconnected) {
			// The call still gets an answer, never a timeout.
			_ = c.tell(&api.Request{Command: &api.Request_ServiceResult{ServiceResult: &api.ServiceResult{Call: m.GetCall(), Error: "the service's result cannot be sent: " + err.Error()}}})
		}
	}
	if s == nil {
		answer(nil, fmt.Errorf("this program does not offer service %q", m.GetService()))
		return
	}
	deadline := m.GetDeadline().AsTime()
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		ctx, cancel := context.WithDeadline(c.ctx, deadline)
		defer cancel()
		var out json.RawMessage
		var err error
		func() {
			defer func() {
				if v := recover(); v != nil {
					err = fmt.Errorf("the service panicked: %v", v)
				}
			}()
			out, err = s.handler(ctx, ServiceCall{Service: m.GetService(), Operation: m.GetOperation(), Input: m.GetInput(),
				TaskID: m.GetTaskId(), CallID: m.GetCallId(), Owner: m.GetOwner(), Deadline: deadline})
		}()
		answer(out, err)
	}()
}

// maxServiceError bounds a service's error text, as the daemon does.
const maxServiceError = 4096
