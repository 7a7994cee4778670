package openaicompat

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"lemo/providers"
	"lemo/providers/retry"
)

// Model is one model of a Provider.
type Model struct {
	p    *Provider
	info providers.ModelInfo
}

var _ providers.Model = (*Model)(nil)

// Info describes the model.
func (m *Model) Info() providers.ModelInfo { return m.info }

// Stream runs one streamed chat completion, retrying transient and
// rate-limit failures that happen before any output.
func (m *Model) Stream(ctx context.Context, req *providers.Request, emit func(providers.Delta)) (*providers.Response, error) {
	p := m.p
	if req == nil {
		return nil, &providers.Error{Provider: p.opts.Name, Class: providers.ClassBadRequest, Message: "nil request"}
	}
	body := buildRequest(m.info.Name, req, p.opts.Hooks.EchoReasoningDetails)
	if p.opts.Hooks.Body != nil {
		p.opts.Hooks.Body(body, req, m.info)
	}
	payload, err := requestBody(body, req, &p.tools)
	releaseRequest(body)
	if err != nil {
		return nil, &providers.Error{Provider: p.opts.Name, Class: providers.ClassBadRequest, Message: "encode request", Err: err}
	}
	return p.opts.Retry.Do(ctx, p.opts.Log, p.opts.Name, emit, func(ctx context.Context, emit func(providers.Delta)) (*providers.Response, error) {
		return p.streamOnce(ctx, payload, emit)
	})
}

// streamOnce performs one HTTP attempt.
func (p *Provider) streamOnce(ctx context.Context, payload providers.Body, emit func(providers.Delta)) (*providers.Response, error) {
	req, err := payload.NewRequest(ctx, http.MethodPost, p.base+"/chat/completions")
	if err != nil {
		return nil, &providers.Error{Provider: p.opts.Name, Class: providers.ClassBadRequest, Message: "build request", Err: err}
	}
	p.setHeaders(req.Header)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "text/event-stream")
	resp, err := p.client.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return nil, providers.Cancelled(p.opts.Name, ctx.Err())
		}
		return nil, &providers.Error{Provider: p.opts.Name, Class: providers.ClassTransient, Message: retry.CleanMessage("request failed: "+cause(err), p.opts.APIKey), Err: err}
	}
	stream := providers.WatchIdle(resp.Body, p.opts.IdleTimeout)
	defer stream.Close()
	if resp.StatusCode >= 400 {
		body, _ := io.ReadAll(io.LimitReader(stream, maxErrorBody))
		if ctx.Err() != nil {
			return nil, providers.Cancelled(p.opts.Name, ctx.Err())
		}
		return nil, p.httpError(resp, body)
	}
	st := &state{p: p, emit: emit}
	if p.opts.Hooks.ThinkTags {
		st.think = &thinkSplitter{}
	}
	var r *providers.Response
	if ct := resp.Header.Get("Content-Type"); strings.HasPrefix(ct, "application/json") {
		r, err = st.whole(ctx, stream)
	} else {
		r, err = st.sse(ctx, stream)
	}
	if err == nil {
		// [DONE] may come before the end of the response: read to it, so
		// the connection serves the next call.
		stream.Drain(maxDrain, drainWait)
	}
	return r, err
}

// maxDrain and drainWait bound what is read after an answer's end.
const (
	maxDrain  = 64 << 10
	drainWait = 250 * time.Millisecond
)

// state assembles one streamed answer.
type state struct {
	p         *Provider
	emit      func(providers.Delta)
	text      strings.Builder
	reasoning strings.Builder
	details   []json.RawMessage
	calls     []*callAcc
	byIndex   map[int]*callAcc
	finish    string
	usage     providers.Usage
	output    bool
	think     *thinkSplitter // nil unless Hooks.ThinkTags
	size      int            // event bytes applied so far
}

type callAcc struct {
	id, name string
	args     strings.Builder
}

// sse reads the event stream until [DONE], EOF or an error.
func (st *state) sse(ctx context.Context, body io.Reader) (*providers.Response, error) {
	r := NewSSEReader(body, st.p.opts.MaxLineBytes)
	defer r.Release()
	var c chunk
	for {
		data, err := r.Next()
		if err != nil {
			if ctx.Err() != nil {
				return nil, st.cancelled(ctx)
			}
			if err == io.EOF && st.finish != "" {
				return st.response(), nil // clean EOF after finish_reason
			}
			return nil, st.truncated(err)
		}
		if len(data) == 0 {
			continue
		}
		if string(data) == "[DONE]" {
			if st.finish == "" {
				return nil, st.truncated(errors.New("[DONE] without finish_reason"))
			}
			// Stop here: Zen appends a cost frame after [DONE].
			return st.response(), nil
		}
		c.reset()
		if err := json.Unmarshal(data, &c); err != nil {
			return nil, &providers.Error{Provider: st.p.opts.Name, Class: providers.ClassTransient,
				Message: "malformed stream chunk", OutputStarted: st.output, Err: fmt.Errorf("%w: %v", providers.ErrTruncated, err)}
		}
		if err := st.apply(&c); err != nil {
			return nil, err
		}
		if err := st.checkSize(len(data)); err != nil {
			return nil, err
		}
	}
}

// checkSize fails an answer that grew past MaxResponseBytes or
// MaxToolCalls; n is the size of the event just applied.
func (st *state) checkSize(n int) error {
	st.size += n
	limit := st.p.opts.MaxResponseBytes
	if limit <= 0 {
		limit = DefaultMaxResponseBytes
	}
	if st.size <= limit && len(st.calls) <= MaxToolCalls {
		return nil
	}
	return &providers.Error{Provider: st.p.opts.Name, Class: providers.ClassTransient, OutputStarted: st.output,
		Message: fmt.Sprintf("answer exceeds %d bytes or %d tool calls", limit, MaxToolCalls),
		Err:     fmt.Errorf("%w: %w", providers.ErrTruncated, ErrResponseTooLarge)}
}

// whole handles a server that answered with one JSON completion.
func (st *state) whole(ctx context.Context, body io.Reader) (*providers.Response, error) {
	max := int64(st.p.opts.MaxLineBytes)
	data, err := io.ReadAll(io.LimitReader(body, max+1))
	if err != nil {
		if ctx.Err() != nil {
			return nil, st.cancelled(ctx)
		}
		return nil, st.truncated(err)
	}
	if int64(len(data)) > max {
		return nil, st.truncated(fmt.Errorf("%w (%d bytes)", ErrLineTooLong, max))
	}
	var c chunk
	if err := json.Unmarshal(data, &c); err != nil {
		return nil, st.truncated(fmt.Errorf("malformed completion: %v", err))
	}
	if err := st.apply(&c); err != nil {
		return nil, err
	}
	if st.finish == "" {
		return nil, st.truncated(errors.New("completion without finish_reason"))
	}
	return st.response(), nil
}

// apply folds one chunk into the state, emitting deltas.
func (st *state) apply(c *chunk) error {
	if len(c.Error) > 0 && string(c.Error) != "null" {
		return st.p.streamError(parseErrorObject(c.Error), st.output)
	}
	if c.Usage != nil {
		st.usage = providers.Usage{PromptTokens: c.Usage.PromptTokens, CompletionTokens: c.Usage.CompletionTokens}
		if d := c.Usage.PromptTokensDetails; d != nil {
			st.usage.CachedPromptTokens = d.CachedTokens
		}
	}
	for i := range c.Choices {
		ch := &c.Choices[i]
		d := &ch.Delta
		if ch.Message != nil {
			d = ch.Message
		}
		reasoning := d.Reasoning
		if reasoning == "" {
			reasoning = d.ReasoningContent
		}
		st.addReasoning(reasoning)
		if len(d.ReasoningDetails) > 0 && string(d.ReasoningDetails) != "null" {
			var items []json.RawMessage
			if json.Unmarshal(d.ReasoningDetails, &items) == nil {
				st.details = append(st.details, items...)
			}
		}
		if d.Content != "" {
			if st.think != nil {
				r, t := st.think.split(d.Content)
				st.addReasoning(r)
				st.addText(t)
			} else {
				st.addText(d.Content)
			}
		}
		for j := range d.ToolCalls {
			tc := &d.ToolCalls[j]
			st.output = true
			acc := st.callFor(tc.Index, tc.ID)
			if acc.id == "" {
				acc.id = tc.ID
			}
			if acc.name == "" {
				acc.name = tc.Function.Name
			}
			acc.args.WriteString(tc.Function.Arguments)
		}
		if ch.FinishReason != "" {
			if ch.FinishReason == "error" {
				info := ErrorInfo{Message: "finish_reason error"}
				if len(ch.Error) > 0 && string(ch.Error) != "null" {
					info = parseErrorObject(ch.Error)
				}
				return st.p.streamError(info, st.output)
			}
			st.finish = ch.FinishReason
		}
	}
	return nil
}

// callFor returns the accumulator for a tool-call fragment: keyed by
// index; a new non-empty id on a known index starts a new call; a missing
// index continues the last call unless a new id arrives.
func (st *state) callFor(index *int, id string) *callAcc {
	if index == nil {
		if n := len(st.calls); n > 0 && (id == "" || st.calls[n-1].id == id) {
			return st.calls[n-1]
		}
		return st.newCall(-1 - len(st.calls))
	}
	if acc, ok := st.byIndex[*index]; ok && (id == "" || acc.id == "" || acc.id == id) {
		return acc
	}
	return st.newCall(*index)
}

func (st *state) newCall(index int) *callAcc {
	if st.byIndex == nil {
		st.byIndex = make(map[int]*callAcc)
	}
	acc := &callAcc{}
	st.byIndex[index] = acc
	st.calls = append(st.calls, acc)
	return acc
}

func (st *state) addReasoning(s string) {
	if s != "" {
		st.reasoning.WriteString(s)
		st.output = true
		st.emit(providers.Delta{Kind: providers.DeltaReasoning, Text: s})
	}
}

func (st *state) addText(s string) {
	if s != "" {
		st.text.WriteString(s)
		st.output = true
		st.emit(providers.Delta{Kind: providers.DeltaText, Text: s})
	}
}

func (st *state) response() *providers.Response {
	if st.think != nil {
		r, t := st.think.flush()
		st.addReasoning(r)
		st.addText(t)
	}
	r := &providers.Response{
		Text:         st.text.String(),
		Reasoning:    st.reasoning.String(),
		Usage:        st.usage,
		FinishReason: st.finish,
	}
	for i, c := range st.calls {
		id := c.id
		if id == "" {
			id = "call_" + strconv.Itoa(i)
		}
		r.ToolCalls = append(r.ToolCalls, providers.ToolCall{ID: id, Name: c.name, Arguments: jsonArgs(c.args.String())})
	}
	if len(st.details) > 0 {
		all, _ := json.Marshal(st.details)
		r.ProviderMetadata, _ = json.Marshal(metadata{ReasoningDetails: all})
	}
	return r
}

// jsonArgs returns the arguments as JSON text: "{}" when empty, the text
// itself when it is valid JSON, else the text as a JSON string (so the
// tool's schema validation reports it to the model instead of Lemo
// storing invalid JSON).
func jsonArgs(s string) json.RawMessage {
	s = strings.TrimSpace(s)
	if s == "" {
		return json.RawMessage("{}")
	}
	if json.Valid([]byte(s)) {
		return json.RawMessage(s)
	}
	q, _ := json.Marshal(s)
	return q
}

func (st *state) cancelled(ctx context.Context) *providers.Error {
	e := providers.Cancelled(st.p.opts.Name, ctx.Err())
	e.OutputStarted = st.output
	return e
}

// truncated reports a stream that ended before its terminal marker.
func (st *state) truncated(cause error) *providers.Error {
	msg := "stream ended without its terminal marker"
	if errors.Is(cause, ErrLineTooLong) {
		msg = cause.Error()
	} else if errors.Is(cause, providers.ErrStreamIdle) {
		msg = providers.IdleMessage(st.p.opts.IdleTimeout)
	} else if cause != io.EOF && cause != nil {
		msg += ": " + cause.Error()
	}
	return &providers.Error{Provider: st.p.opts.Name, Class: providers.ClassTransient, Message: msg,
		OutputStarted: st.output, Err: fmt.Errorf("%w: %w", providers.ErrTruncated, cause)}
}
