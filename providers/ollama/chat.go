package ollama

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/ollama/ollama/api"
	"github.com/ollama/ollama/version"

	"lemo/providers"
	"lemo/providers/retry"
)

// The chat stream is posted and read here instead of through
// api.Client.Chat: the client's stream() allocates an 8 MB line buffer
// (make([]byte, 0, maxBufferSize)) on every call, which made each model
// call cost 8 MB of garbage and its zeroing. The wire types stay the api
// package's own (api.ChatRequest marshalled as is, each line decoded into
// api.ChatResponse), so the wire format is Ollama's.

// errLineTooLong is wrapped when an NDJSON line exceeds the cap.
var errLineTooLong = errors.New("ollama: response line exceeds the size limit")

// errResponseTooLarge aborts an answer past MaxResponseBytes or
// MaxToolCalls.
var errResponseTooLarge = fmt.Errorf("ollama: answer exceeds %d bytes or %d tool calls", MaxResponseBytes, MaxToolCalls)

const (
	// maxErrorBody bounds how much of an HTTP error answer is read.
	maxErrorBody = 64 << 10
	// maxDrain bounds what is read after the done line, so that the
	// connection can be reused (net/http closes a connection whose body
	// was not read to its end).
	maxDrain = 64 << 10
	// readBufferSize is the line reader's buffer; a longer line is
	// assembled in a slice that grows up to the line cap.
	readBufferSize = 16 << 10
)

// userAgent is the header the api client sends, kept so that the server
// sees the same client on chat and discovery.
var userAgent = fmt.Sprintf("ollama/%s (%s %s) Go/%s", version.Version, runtime.GOARCH, runtime.GOOS, runtime.Version())

// readers recycles the line readers' buffers across calls.
var readers = sync.Pool{New: func() any { return bufio.NewReaderSize(nil, readBufferSize) }}

// lineReader reads NDJSON lines of at most max bytes (the line ending
// excluded). Memory is bounded by the cap: a line is only assembled in a
// slice when it is longer than the reader's buffer.
type lineReader struct {
	r    *bufio.Reader
	max  int
	line []byte
}

func newLineReader(r io.Reader, max int) *lineReader {
	br := readers.Get().(*bufio.Reader)
	br.Reset(r)
	return &lineReader{r: br, max: max}
}

// release returns the buffer to the pool; the reader is unusable after.
func (l *lineReader) release() {
	l.r.Reset(nil)
	readers.Put(l.r)
	l.r = nil
}

// next returns the next line without its "\n" or "\r\n"; the last line may
// lack its "\n". A line longer than max bytes ("\n" excluded, a "\r"
// included) fails with errLineTooLong. It returns io.EOF at the end of the
// stream. The slice is valid until the next call.
func (l *lineReader) next() ([]byte, error) {
	l.line = l.line[:0]
	for {
		frag, err := l.r.ReadSlice('\n')
		switch {
		case err == nil:
			if len(l.line)+len(frag)-1 > l.max {
				return nil, l.tooLong()
			}
			if len(l.line) == 0 {
				return trimEOL(frag), nil // fast path: no copy
			}
			l.line = append(l.line, frag...)
			return trimEOL(l.line), nil
		case len(l.line)+len(frag) > l.max:
			return nil, l.tooLong()
		case errors.Is(err, bufio.ErrBufferFull):
			l.line = append(l.line, frag...)
		case err == io.EOF && len(l.line)+len(frag) > 0:
			l.line = append(l.line, frag...)
			return trimEOL(l.line), nil
		default:
			return nil, err
		}
	}
}

func (l *lineReader) tooLong() error { return fmt.Errorf("%w (%d bytes)", errLineTooLong, l.max) }

// drain reads what follows, up to maxDrain bytes, so that the connection
// can be reused. Errors do not matter here.
func (l *lineReader) drain() { _, _ = io.CopyN(io.Discard, l.r, maxDrain) }

func trimEOL(b []byte) []byte {
	b = bytes.TrimSuffix(b, []byte{'\n'})
	return bytes.TrimSuffix(b, []byte{'\r'})
}

// chatLine is one line of the stream: a chat response or an error.
type chatLine struct {
	api.ChatResponse
	// Message shadows ChatResponse.Message: api.Message's UnmarshalJSON
	// decodes the object a second time (to lower-case the role), which
	// cost a third of the decoding and half its allocations. wireMessage
	// has the same fields and tags without the method; response()
	// converts it back. (Only a line repeating its "message" key decodes
	// differently: merged here, the last one alone in the api client.)
	Message wireMessage `json:"message"`
	Error   string      `json:"error"`
}

type wireMessage api.Message

// response returns the line as the api client would have decoded it.
func (l *chatLine) response() *api.ChatResponse {
	l.ChatResponse.Message = api.Message(l.Message)
	l.ChatResponse.Message.Role = strings.ToLower(l.Message.Role)
	return &l.ChatResponse
}

// chatOnce is one attempt: it posts payload (an api.ChatRequest as JSON)
// to /api/chat and reads the NDJSON answer.
func (p *Provider) chatOnce(ctx context.Context, payload providers.Body, emit func(providers.Delta)) (*providers.Response, error) {
	req, err := payload.NewRequest(ctx, http.MethodPost, p.chatURL)
	if err != nil {
		return nil, &providers.Error{Provider: p.cfg.Name, Class: providers.ClassBadRequest, Message: "build request", Err: err}
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/x-ndjson")
	req.Header.Set("User-Agent", userAgent)
	resp, err := p.hc.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return nil, providers.Cancelled(p.cfg.Name, ctx.Err())
		}
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return nil, &providers.Error{Provider: p.cfg.Name, Class: providers.ClassTransient, Message: retry.CleanMessage("request failed: "+err.Error(), p.cfg.APIKey), Err: err}
	}
	stream := providers.WatchIdle(resp.Body, p.cfg.IdleTimeout)
	defer stream.Close()
	if resp.StatusCode >= http.StatusBadRequest {
		body, _ := io.ReadAll(io.LimitReader(stream, maxErrorBody))
		if ctx.Err() != nil {
			return nil, providers.Cancelled(p.cfg.Name, ctx.Err())
		}
		return nil, p.httpError(resp, body)
	}
	st := chatState{p: p, emit: emit}
	return st.read(ctx, stream)
}

// httpError classifies an error answer by its status and message (the
// "error" member of a JSON body, else the first line of the body that
// reads as text once markup is dropped), with Retry-After.
func (p *Provider) httpError(resp *http.Response, body []byte) *providers.Error {
	status := resp.StatusCode
	msg := errorText(body, p.cfg.APIKey)
	e := &providers.Error{Provider: p.cfg.Name, Status: status}
	if status == http.StatusUnauthorized {
		e.Class = providers.ClassAuth
		if msg == "" {
			msg = "unauthorized"
		}
		if p.cfg.APIKey == "" {
			msg += " (no API key configured)"
		}
	} else {
		e.Class = retry.ClassForStatus(status, msg)
		if e.Class == providers.ClassRateLimit || e.Class == providers.ClassTransient || e.Class == providers.ClassQuota {
			e.RetryAfter = retry.ParseRetryAfter(resp.Header, time.Now())
		}
	}
	e.Message = retry.CleanMessage(msg, p.cfg.APIKey)
	if e.Message == "" {
		e.Message = http.StatusText(status)
	}
	if e.Message == "" {
		e.Message = "HTTP " + strconv.Itoa(status)
	}
	return e
}

// errorText returns the explanation in an error body: Ollama's
// {"error":"..."}, else the first line of a non-JSON body that still says
// something once cleaned (an HTML page's first line is "<html>").
func errorText(body []byte, secret string) string {
	body = bytes.TrimSpace(body)
	if len(body) > 0 && body[0] == '{' {
		var env struct {
			Error string `json:"error"`
		}
		if json.Unmarshal(body, &env) == nil {
			return env.Error
		}
	}
	for line := range bytes.Lines(body) {
		if s := retry.CleanMessage(string(line), secret); s != "" {
			return s
		}
	}
	return ""
}

// chatState assembles one streamed answer.
type chatState struct {
	p               *Provider
	emit            func(providers.Delta)
	text, reasoning strings.Builder
	calls           []providers.ToolCall
	resp            providers.Response
	output          bool
	size            int // text, reasoning and tool call bytes so far
}

// read decodes the NDJSON stream until its done line, fixing what the
// api client got wrong (notes §1.4): a stream without a done line and a
// mid-stream cancel are errors, not success.
func (st *chatState) read(ctx context.Context, body io.Reader) (*providers.Response, error) {
	lr := newLineReader(body, st.p.cfg.MaxLineBytes)
	defer lr.release()
	var line chatLine
	for {
		b, err := lr.next()
		if ctx.Err() != nil {
			return nil, st.cancelled(ctx)
		}
		if err != nil {
			return nil, st.truncated(err)
		}
		if len(bytes.TrimSpace(b)) == 0 {
			continue
		}
		line = chatLine{}
		if err := json.Unmarshal(b, &line); err != nil {
			return nil, st.malformed(b, err)
		}
		if line.Error != "" {
			return nil, st.midStream(line.Error)
		}
		if err := st.apply(line.response()); err != nil {
			return nil, err
		}
		if line.Done {
			lr.drain()
			return st.response(), nil
		}
	}
}

// apply adds one response line to the answer, emitting its deltas.
func (st *chatState) apply(r *api.ChatResponse) error {
	st.size += len(r.Message.Thinking) + len(r.Message.Content)
	if t := r.Message.Thinking; t != "" {
		st.reasoning.WriteString(t)
		st.output = true
		st.emit(providers.Delta{Kind: providers.DeltaReasoning, Text: t})
	}
	if t := r.Message.Content; t != "" {
		st.text.WriteString(t)
		st.output = true
		st.emit(providers.Delta{Kind: providers.DeltaText, Text: t})
	}
	for _, tc := range r.Message.ToolCalls {
		st.output = true
		id := tc.ID
		if id == "" {
			id = "call_" + strconv.Itoa(len(st.calls))
		}
		args := tc.Function.Arguments.String()
		st.size += len(tc.Function.Name) + len(args)
		st.calls = append(st.calls, providers.ToolCall{ID: id, Name: tc.Function.Name, Arguments: json.RawMessage(args)})
	}
	if st.size > st.p.maxResponse || len(st.calls) > MaxToolCalls {
		return &providers.Error{Provider: st.p.cfg.Name, Class: providers.ClassTransient, OutputStarted: st.output,
			Message: errResponseTooLarge.Error(), Err: fmt.Errorf("%w: %w", providers.ErrTruncated, errResponseTooLarge)}
	}
	if r.Done {
		st.resp.FinishReason = r.DoneReason
		st.resp.Usage = providers.Usage{PromptTokens: r.PromptEvalCount, CompletionTokens: r.EvalCount}
	}
	return nil
}

func (st *chatState) response() *providers.Response {
	resp := st.resp
	resp.Text, resp.Reasoning, resp.ToolCalls = st.text.String(), st.reasoning.String(), st.calls
	if len(st.calls) > 0 && (resp.FinishReason == "stop" || resp.FinishReason == "") {
		resp.FinishReason = "tool_calls" // Ollama says stop even after tool calls
	}
	return &resp
}

func (st *chatState) cancelled(ctx context.Context) *providers.Error {
	e := providers.Cancelled(st.p.cfg.Name, ctx.Err())
	e.OutputStarted = st.output
	return e
}

// truncated reports a stream that ended, or failed, before its done line.
func (st *chatState) truncated(err error) *providers.Error {
	msg, cause := "stream ended without a done line", error(providers.ErrTruncated)
	if err != io.EOF {
		msg += ": " + err.Error()
		if errors.Is(err, errLineTooLong) {
			msg = err.Error()
		}
		if errors.Is(err, providers.ErrStreamIdle) {
			msg = providers.IdleMessage(st.p.cfg.IdleTimeout)
		}
		cause = fmt.Errorf("%w: %w", providers.ErrTruncated, err)
	}
	return &providers.Error{Provider: st.p.cfg.Name, Class: providers.ClassTransient, Message: msg, OutputStarted: st.output, Err: cause}
}

// midStream reports an {"error":"..."} line inside a 200 stream: the
// answer is incomplete.
func (st *chatState) midStream(msg string) *providers.Error {
	return &providers.Error{Provider: st.p.cfg.Name, Class: providers.ClassTransient, OutputStarted: st.output,
		Message: retry.CleanMessage("mid-stream: "+msg, st.p.cfg.APIKey),
		Err:     fmt.Errorf("%w: the server reported an error mid-stream", providers.ErrTruncated)}
}

// malformed reports a line that is not a JSON object.
func (st *chatState) malformed(line []byte, err error) *providers.Error {
	const show = 200
	text := retry.CleanMessage(string(line[:min(len(line), show)]), st.p.cfg.APIKey)
	msg := "mid-stream: malformed line"
	if text != "" {
		msg += ": " + text
	}
	return &providers.Error{Provider: st.p.cfg.Name, Class: providers.ClassTransient, OutputStarted: st.output,
		Message: msg, Err: fmt.Errorf("%w: %w", providers.ErrTruncated, err)}
}
