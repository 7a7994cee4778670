package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/url"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	gomcp "github.com/modelcontextprotocol/go-sdk/mcp"

	"lemo/supervision"
	"lemo/tools"
)

// Approval modes of a server (ServerConfig.Approval).
const (
	// ApprovalAnnotations follows each tool's annotations: read-only tools
	// run unasked; destructive or open-world ones (the MCP defaults when a
	// tool says nothing) ask; the rest follow the approvals.* rules.
	ApprovalAnnotations = "annotations"
	// ApprovalAsk asks before every call.
	ApprovalAsk = "ask"
	// ApprovalAllow asks nothing itself (approvals.* rules still apply).
	ApprovalAllow = "allow"
)

// Tool is one tool of an MCP server offered as a Lemo tool.
type Tool struct {
	srv    *server
	name   string // mcp.<server>.<mapped>
	remote string // the server's name for it
	desc   string
	input  json.RawMessage
	output *tools.Schema // nil: the tool declares no output schema
	ann    *gomcp.ToolAnnotations
	// timeout bounds a call: the server's call timeout.
	timeout time.Duration
}

var (
	_ tools.Tool      = (*Tool)(nil)
	_ tools.Approver  = (*Tool)(nil)
	_ tools.Untrusted = (*Tool)(nil)
)

// Name is mcp.<server>.<tool>.
func (t *Tool) Name() string { return t.name }

// Description is the server's description on one bounded line, with the
// server named.
func (t *Tool) Description() string { return t.desc }

// InputSchema is the server's input schema.
func (t *Tool) InputSchema() json.RawMessage { return t.input }

// StateSchema is that of the progress notifications.
func (t *Tool) StateSchema() json.RawMessage { return stateSchema }

// ResultSchema is Output's.
func (t *Tool) ResultSchema() json.RawMessage { return resultSchema }

// View is the generic JSON view.
func (t *Tool) View() string { return "" }

// Untrusted: the output comes from outside the daemon.
func (t *Tool) Untrusted() bool { return true }

// Server names the tool's server; RemoteName is the server's name for it.
func (t *Tool) Server() string     { return t.srv.cfg.Name }
func (t *Tool) RemoteName() string { return t.remote }

// ServerState is the server's state now (StateRunning, ...).
func (t *Tool) ServerState() string { return t.srv.state() }

// Retain keeps what the server's retain mode says (RetainExcerpt: the
// text's head and tail within the server's retain bytes).
func (t *Tool) Retain(output, _ json.RawMessage) json.RawMessage {
	return retain(t.srv.cfg.Retain, t.srv.cfg.RetainBytes, output)
}

// Approval decides by the server's approval mode and the tool's
// annotations.
func (t *Tool) Approval(json.RawMessage) tools.Approval {
	return decideApproval(t.srv.cfg.Name, t.srv.cfg.Approval, t.ann)
}

// decideApproval is the approval a call of a tool with annotations ann
// needs under mode.
func decideApproval(server, mode string, ann *gomcp.ToolAnnotations) tools.Approval {
	switch mode {
	case ApprovalAllow:
		return tools.Approval{}
	case ApprovalAsk:
		return tools.Approval{Required: true, Reason: fmt.Sprintf("mcp.servers.%s.approval is ask", server)}
	}
	if ann != nil && ann.ReadOnlyHint {
		return tools.Approval{}
	}
	// MCP's defaults: a tool that does not say otherwise may destroy and
	// reaches the open world.
	destructive := ann == nil || ann.DestructiveHint == nil || *ann.DestructiveHint
	open := ann == nil || ann.OpenWorldHint == nil || *ann.OpenWorldHint
	switch {
	case destructive:
		return tools.Approval{Required: true, Reason: fmt.Sprintf("the MCP server %s marks this tool as possibly destructive (set mcp.servers.%s.approval to allow to run its tools unasked)", server, server)}
	case open:
		return tools.Approval{Required: true, Reason: fmt.Sprintf("the MCP server %s marks this tool as reaching outside (open world) (set mcp.servers.%s.approval to allow to run its tools unasked)", server, server)}
	}
	return tools.Approval{}
}

// Execute calls the tool on its server, starting the server when it is not
// running. Progress notifications become state updates. A call whose
// server ends while it runs, or that times out, fails as outcome unknown:
// the server may have done it, and it is never sent again. A stdio server
// whose call timed out or was cancelled is then stopped (afterCall).
func (t *Tool) Execute(ctx context.Context, call tools.Call, emit tools.Emit) (json.RawMessage, error) {
	s := t.srv
	out, outcome, err := t.execute(ctx, call, emit)
	s.m.observe(s.cfg.Name, outcome)
	return out, err
}

func (t *Tool) execute(ctx context.Context, call tools.Call, emit tools.Emit) (json.RawMessage, string, error) {
	s := t.srv
	ctx, cancel := context.WithTimeoutCause(ctx, t.timeout, errCallTimeout)
	defer cancel()
	c, err := s.session(ctx, true)
	if err != nil {
		if ctx.Err() != nil {
			return nil, outcomeOf(ctx), t.ctxError(ctx, false)
		}
		return nil, OutcomeUnavailable, fmt.Errorf("%s was not called: %w", t.name, err)
	}
	token, done := s.watchProgress(func(p Progress) {
		b, _ := json.Marshal(p)
		_ = emit(b)
	})
	defer done()
	end := endDone
	defer func() { s.finish(c, end, token, t.name) }()
	params := &gomcp.CallToolParams{Name: t.remote, Arguments: call.Input}
	params.SetProgressToken(token)
	res, err := c.cs.CallTool(ctx, params)
	if err != nil {
		var rpc *jsonrpc.Error
		var httpErr *url.Error
		switch {
		case ctx.Err() != nil:
			end = endCancelled
			if errors.Is(context.Cause(ctx), errCallTimeout) {
				end = endTimedOut
			}
			return nil, outcomeOf(ctx), t.ctxError(ctx, true)
		case errors.As(err, &httpErr):
			// The request over HTTP failed (the SDK reports it as
			// rejected by the transport and keeps the session).
			if !reachedServer(err) {
				return nil, OutcomeUnavailable, fmt.Errorf("%s was not called: the MCP server %s could not be reached: %s", t.name, s.cfg.Name, sanitize(httpErr.Err.Error(), 300))
			}
			return nil, OutcomeUnknown, fmt.Errorf("%w: the connection to the MCP server %s failed while %s was sent (%s); it may have done it, and the call is not sent again", supervision.ErrOutcomeUnknown, s.cfg.Name, t.name, sanitize(httpErr.Err.Error(), 300))
		case errors.As(err, &rpc):
			// The server answered: the call failed there.
			return nil, OutcomeError, fmt.Errorf("the MCP server %s refused %s: %s", s.cfg.Name, t.remote, sanitize(rpc.Message, 1000))
		default:
			// The connection failed: it is ending (the watcher says how
			// once the process or the session is gone), or the daemon
			// stopped it as hung (its verdict says so).
			why := "its connection failed: " + sanitize(err.Error(), 300)
			if v := c.verdict.Load(); v != nil {
				why = *v
			} else {
				wait := time.NewTimer(2 * time.Second)
				select {
				case <-c.dead:
				case <-wait.C:
				}
				wait.Stop()
				if !c.alive() {
					why = c.why()
				}
			}
			return nil, OutcomeUnknown, fmt.Errorf("%w: the MCP server %s ended while %s ran (%s); it may have done it, and the call is not sent again", supervision.ErrOutcomeUnknown, s.cfg.Name, t.name, why)
		}
	}
	if t.output != nil && !res.IsError {
		if res.StructuredContent == nil {
			return nil, OutcomeInvalid, &tools.ValidationError{What: "output", Detail: fmt.Sprintf("the MCP server %s declares an output schema for %s but sent no structured content", s.cfg.Name, t.remote)}
		}
		b, err := json.Marshal(res.StructuredContent)
		if err != nil {
			return nil, OutcomeInvalid, &tools.ValidationError{What: "output", Detail: err.Error()}
		}
		if err := t.output.Validate("output", b); err != nil {
			var ve *tools.ValidationError
			if errors.As(err, &ve) {
				ve.Detail = fmt.Sprintf("the MCP server %s sent structured content that does not match %s's output schema: %s", s.cfg.Name, t.remote, ve.Detail)
			}
			return nil, OutcomeInvalid, err
		}
	}
	out, err := json.Marshal(mapResult(s.cfg.Name, t.remote, res, s.cfg.MaxOutputBytes))
	if err != nil {
		return nil, OutcomeError, err
	}
	if res.IsError {
		return out, OutcomeToolError, nil
	}
	return out, OutcomeOK, nil
}

var errCallTimeout = errors.New("mcp: call timeout")

// reachedServer reports whether a failed HTTP request may have reached the
// server: all but a failure to connect may have (the request was written,
// the answer lost), so that its outcome is unknown.
func reachedServer(err error) bool {
	var op *net.OpError
	return !errors.As(err, &op) || op.Op != "dial"
}

// Outcomes counted by server (Observer).
const (
	OutcomeOK          = "ok"
	OutcomeToolError   = "tool_error"  // the server's result says the call failed
	OutcomeError       = "error"       // the server refused the call
	OutcomeUnknown     = "unknown"     // the server ended while the call ran
	OutcomeTimeout     = "timeout"     // the call timed out
	OutcomeCancelled   = "cancelled"   // the call was cancelled
	OutcomeInvalid     = "invalid"     // its result failed the output schema
	OutcomeUnavailable = "unavailable" // the server could not be started or failed
)

func outcomeOf(ctx context.Context) string {
	if errors.Is(context.Cause(ctx), errCallTimeout) {
		return OutcomeTimeout
	}
	return OutcomeCancelled
}

// ctxError is the error of a call whose context ended; sent says whether
// the request had reached the server (it was then sent MCP's
// cancellation).
func (t *Tool) ctxError(ctx context.Context, sent bool) error {
	if errors.Is(context.Cause(ctx), errCallTimeout) {
		if !sent {
			return fmt.Errorf("%s timed out after %s (mcp.servers.%s.timeout) before its server was ready; it was not sent", t.name, t.timeout, t.srv.cfg.Name)
		}
		stopped := ""
		if t.srv.cfg.Command != "" {
			stopped = ", then stopped as hung (it starts again on the next call)"
		}
		return fmt.Errorf("%w: %s timed out after %s (mcp.servers.%s.timeout); the server was sent MCP's cancellation%s, and may have done it", supervision.ErrOutcomeUnknown, t.name, t.timeout, t.srv.cfg.Name, stopped)
	}
	return ctx.Err()
}
