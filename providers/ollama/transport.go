package ollama

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sync"
)

// aliasHost is the host the api client is given. It is never ollama.com,
// so the client never tries to sign requests with ~/.ollama/id_ed25519;
// transport rewrites every request to the real host (notes §1.5).
const aliasHost = "ollama.lemo.invalid"

// errLineTooLong is recorded when an NDJSON line exceeds the cap.
var errLineTooLong = errors.New("ollama: response line exceeds the size limit")

// errResponseTooLarge aborts an answer past MaxResponseBytes or
// MaxToolCalls.
var errResponseTooLarge = fmt.Errorf("ollama: answer exceeds %d bytes or %d tool calls", MaxResponseBytes, MaxToolCalls)

// transport sends the api client's requests to the real server, adds
// Bearer auth, and records each response's status, headers and body read
// errors in the call's capture (the client drops them).
type transport struct {
	base    http.RoundTripper
	target  *url.URL
	key     string
	maxLine int
}

func (t *transport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.URL.Scheme, r.URL.Host, r.Host = t.target.Scheme, t.target.Host, ""
	if t.key != "" {
		r.Header.Set("Authorization", "Bearer "+t.key)
	}
	resp, err := t.base.RoundTrip(r)
	if err != nil {
		return nil, err
	}
	if c, ok := r.Context().Value(captureKey{}).(*capture); ok {
		c.mu.Lock()
		c.status, c.header = resp.StatusCode, resp.Header.Clone()
		c.mu.Unlock()
		resp.Body = &guardedBody{rc: resp.Body, c: c, max: t.maxLine}
	}
	return resp, nil
}

type captureKey struct{}

// capture holds what the api client does not report for one call.
type capture struct {
	mu      sync.Mutex
	status  int
	header  http.Header
	bodyErr error
}

func withCapture(ctx context.Context) (context.Context, *capture) {
	c := &capture{}
	return context.WithValue(ctx, captureKey{}, c), c
}

func (c *capture) get() (int, http.Header, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.status, c.header, c.bodyErr
}

// guardedBody bounds line length and records read errors, which the api
// client's scanner swallows (it returns nil on a read error).
type guardedBody struct {
	rc   io.ReadCloser
	c    *capture
	max  int
	line int
	err  error
}

func (b *guardedBody) Read(p []byte) (int, error) {
	if b.err != nil {
		return 0, b.err
	}
	n, err := b.rc.Read(p)
	for _, ch := range p[:n] {
		if ch == '\n' {
			b.line = 0
			continue
		}
		b.line++
		if b.line > b.max {
			b.fail(fmt.Errorf("%w (%d bytes)", errLineTooLong, b.max))
			return 0, b.err
		}
	}
	if err != nil && err != io.EOF {
		b.fail(err)
	}
	return n, err
}

func (b *guardedBody) fail(err error) {
	b.err = err
	b.c.mu.Lock()
	b.c.bodyErr = err
	b.c.mu.Unlock()
}

func (b *guardedBody) Close() error { return b.rc.Close() }
