package ollama

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sync"
)

// aliasHost is the host the api client (and the chat request) is given.
// It is never ollama.com, so the client never tries to sign requests with
// ~/.ollama/id_ed25519; transport rewrites every request to the real host
// (notes §1.5).
const aliasHost = "ollama.lemo.invalid"

// maxDiscoveryBytes bounds one discovery answer (/api/tags, /api/show),
// which the api client reads whole.
const maxDiscoveryBytes = 8 << 20

// transport sends every request to the real server and adds Bearer auth.
// For discovery calls (those whose context carries a capture) it records
// the response headers, which the api client drops on errors, and bounds
// the body.
type transport struct {
	base   http.RoundTripper
	target *url.URL
	key    string
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
		c.header = resp.Header.Clone()
		c.mu.Unlock()
		limit := int64(maxDiscoveryBytes)
		if c.max > 0 {
			limit = c.max
		}
		resp.Body = &boundedBody{rc: resp.Body, max: limit}
	}
	return resp, nil
}

type captureKey struct{}

// capture holds the response headers of one discovery call, for
// Retry-After.
type capture struct {
	mu     sync.Mutex
	header http.Header
	// max bounds the answer (0: maxDiscoveryBytes).
	max int64
}

func withCapture(ctx context.Context) (context.Context, *capture) {
	c := &capture{}
	return context.WithValue(ctx, captureKey{}, c), c
}

func (c *capture) get() http.Header {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.header
}

// boundedBody fails a body longer than max bytes.
type boundedBody struct {
	rc   io.ReadCloser
	max  int64
	read int64
}

func (b *boundedBody) Read(p []byte) (int, error) {
	n, err := b.rc.Read(p)
	b.read += int64(n)
	if b.read > b.max {
		return 0, fmt.Errorf("ollama: answer exceeds %d bytes", b.max)
	}
	return n, err
}

func (b *boundedBody) Close() error { return b.rc.Close() }
