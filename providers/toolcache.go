package providers

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"sync"
)

// toolSetsKept bounds the tool sets a ToolCache keeps: a daemon offers few
// distinct sets (one per allow-list in use), and a set falls out once
// toolSetsKept others were used after it.
const toolSetsKept = 16

// ToolCache keeps the wire encoding of the tool sets a provider was asked
// to offer, so that a request encodes its tool schemas (most of its bytes
// after a few turns, and the same on every call of a Task) once per tool
// set instead of on every call. A set is found by comparing the specs
// themselves (names, descriptions and schemas byte for byte), so a tool
// whose schema changed is encoded again. The zero value is ready; it is
// safe for concurrent use.
type ToolCache struct {
	mu   sync.Mutex
	sets []toolSet // most recently used first
}

type toolSet struct {
	specs   []ToolSpec
	encoded json.RawMessage
}

// Encoded returns encode(tools), from the cache when the same set was
// encoded before. An encoding error is returned and not kept. The result
// is shared: callers must not change it.
func (c *ToolCache) Encoded(tools []ToolSpec, encode func([]ToolSpec) (json.RawMessage, error)) (json.RawMessage, error) {
	c.mu.Lock()
	for i, s := range c.sets {
		if sameSpecs(s.specs, tools) {
			copy(c.sets[1:i+1], c.sets[:i])
			c.sets[0] = s
			c.mu.Unlock()
			return s.encoded, nil
		}
	}
	c.mu.Unlock()
	enc, err := encode(tools)
	if err != nil {
		return nil, err
	}
	kept := make([]ToolSpec, len(tools))
	for i, t := range tools {
		kept[i] = ToolSpec{Name: t.Name, Description: t.Description, Parameters: bytes.Clone(t.Parameters)}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, s := range c.sets {
		if sameSpecs(s.specs, tools) {
			return s.encoded, nil // encoded meanwhile by another call
		}
	}
	if len(c.sets) < toolSetsKept {
		c.sets = append(c.sets, toolSet{})
	}
	copy(c.sets[1:], c.sets[:len(c.sets)-1])
	c.sets[0] = toolSet{specs: kept, encoded: enc}
	return enc, nil
}

func sameSpecs(a, b []ToolSpec) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].Name != b[i].Name || a[i].Description != b[i].Description || !bytes.Equal(a[i].Parameters, b[i].Parameters) {
			return false
		}
	}
	return true
}

// Body is a request body in parts, sent one after another without being
// joined: a request's encoded tool set is shared by every request that
// offers it, not copied into each.
type Body [][]byte

// Len is the body's size in bytes.
func (b Body) Len() int64 {
	n := 0
	for _, p := range b {
		n += len(p)
	}
	return int64(n)
}

// Reader reads the body from its start. Each Read fills as much of its
// buffer as the parts hold, across parts, so a body is written in as few
// writes as one joined slice would be.
func (b Body) Reader() io.Reader { return &bodyReader{parts: b} }

type bodyReader struct {
	parts Body
	off   int // in parts[0]
}

func (r *bodyReader) Read(p []byte) (int, error) {
	n := 0
	for n < len(p) && len(r.parts) > 0 {
		c := copy(p[n:], r.parts[0][r.off:])
		n += c
		r.off += c
		if r.off == len(r.parts[0]) {
			r.parts, r.off = r.parts[1:], 0
		}
	}
	if n == 0 && len(p) > 0 {
		return 0, io.EOF
	}
	return n, nil
}

// Bytes returns the body joined.
func (b Body) Bytes() []byte { return bytes.Join(b, nil) }

// WriteBuffer is the write buffer a provider's HTTP connections should
// have (see openaicompat.HTTPClient): a request of up to about this size,
// headers and body, then leaves in one write.
const WriteBuffer = 64 << 10

// NewRequest returns a request that sends b, with its length and GetBody
// (so that the transport may send it again on a fresh connection). A body
// that fits in WriteBuffer is joined into one slice first: the transport
// sends an in-memory body with its headers, in one write, where it flushes
// the headers of any other body apart and then copies the body through a
// buffer it allocates for each request. Joining copies what that buffer
// would have held, and saves the write; a body of one part is not copied.
func (b Body) NewRequest(ctx context.Context, method, url string) (*http.Request, error) {
	if b.Len() <= WriteBuffer-4<<10 { // room for the headers
		var joined []byte
		if len(b) == 1 {
			joined = b[0] // read only
		} else {
			joined = b.Bytes()
		}
		return http.NewRequestWithContext(ctx, method, url, bytes.NewReader(joined))
	}
	req, err := http.NewRequestWithContext(ctx, method, url, b.Reader())
	if err != nil {
		return nil, err
	}
	req.ContentLength = b.Len()
	req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(b.Reader()), nil }
	return req, nil
}

// Field is a JSON object's field: its name and its value as JSON text.
type Field struct {
	Name  string
	Value json.RawMessage
}

// WithFields returns the JSON object obj with fields added at its end
// (their values as they are), as a Body that shares obj and the values.
// obj must end with '}'; an empty object gets the fields alone.
func WithFields(obj []byte, fields ...Field) Body {
	end := bytes.LastIndexByte(obj, '}')
	if end < 0 || len(fields) == 0 {
		return Body{obj}
	}
	b := Body{obj[:end]}
	sep := len(bytes.TrimSpace(obj[:end])) > 1
	for _, f := range fields {
		head := make([]byte, 0, len(f.Name)+4)
		if sep {
			head = append(head, ',')
		}
		head = append(head, '"')
		head = append(head, f.Name...)
		head = append(head, '"', ':')
		b = append(b, head, f.Value)
		sep = true
	}
	return append(b, obj[end:])
}
