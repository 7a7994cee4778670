package providers

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
)

func specs(schema string, names ...string) []ToolSpec {
	out := make([]ToolSpec, len(names))
	for i, n := range names {
		out[i] = ToolSpec{Name: n, Description: "does " + n, Parameters: json.RawMessage(schema)}
	}
	return out
}

// A tool set is encoded once, found again by its content (not its slice),
// and encoded again when anything in it changes.
func TestToolCacheEncodesEachSetOnce(t *testing.T) {
	var c ToolCache
	calls := 0
	encode := func(ts []ToolSpec) (json.RawMessage, error) {
		calls++
		return json.Marshal(ts)
	}
	const schema = `{"type":"object"}`
	steps := []struct {
		name  string
		set   []ToolSpec
		calls int
	}{
		{"first use", specs(schema, "a", "b"), 1},
		{"the same set again, another slice", specs(schema, "a", "b"), 1},
		{"a changed schema", specs(`{"type":"object","properties":{}}`, "a", "b"), 2},
		{"another order", specs(schema, "b", "a"), 3},
		{"one tool fewer", specs(schema, "a"), 4},
		{"the first set again", specs(schema, "a", "b"), 4},
	}
	for _, s := range steps {
		got, err := c.Encoded(s.set, encode)
		if err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		want, _ := json.Marshal(s.set)
		if string(got) != string(want) {
			t.Fatalf("%s: Encoded() = %s, want %s", s.name, got, want)
		}
		if calls != s.calls {
			t.Fatalf("%s: encoded %d times, want %d", s.name, calls, s.calls)
		}
	}
	// The cache keeps its own copy: changing the caller's schema after the
	// call changes nothing cached.
	set := specs(schema, "z")
	if _, err := c.Encoded(set, encode); err != nil {
		t.Fatal(err)
	}
	set[0].Parameters[2] = 'X'
	if _, err := c.Encoded(specs(schema, "z"), encode); err != nil || calls != 5 {
		t.Fatalf("after the caller changed its copy: encoded %d times (%v), want 5", calls, err)
	}
}

// An encoding error is returned and not kept; the oldest set falls out
// once toolSetsKept others were used after it.
func TestToolCacheErrorsAndBound(t *testing.T) {
	var c ToolCache
	fail := errors.New("bad schema")
	if _, err := c.Encoded(specs(`{}`, "a"), func([]ToolSpec) (json.RawMessage, error) { return nil, fail }); !errors.Is(err, fail) {
		t.Fatalf("Encoded() error = %v, want %v", err, fail)
	}
	calls := 0
	encode := func(ts []ToolSpec) (json.RawMessage, error) { calls++; return json.Marshal(ts) }
	if _, err := c.Encoded(specs(`{}`, "a"), encode); err != nil || calls != 1 {
		t.Fatalf("after an error: encoded %d times (%v), want 1", calls, err)
	}
	for i := 0; i < toolSetsKept; i++ {
		if _, err := c.Encoded(specs(`{}`, fmt.Sprint("t", i)), encode); err != nil {
			t.Fatal(err)
		}
	}
	if len(c.sets) != toolSetsKept {
		t.Fatalf("kept %d sets, want at most %d", len(c.sets), toolSetsKept)
	}
	if _, err := c.Encoded(specs(`{}`, "a"), encode); err != nil || calls != toolSetsKept+2 {
		t.Fatalf("the evicted set: encoded %d times in all (%v), want %d", calls, err, toolSetsKept+2)
	}
	// The most recent set is still kept.
	if _, err := c.Encoded(specs(`{}`, fmt.Sprint("t", toolSetsKept-1)), encode); err != nil || calls != toolSetsKept+2 {
		t.Fatalf("a recent set: encoded %d times in all (%v), want %d", calls, err, toolSetsKept+2)
	}
}

func TestWithFields(t *testing.T) {
	tools := Field{Name: "tools", Value: json.RawMessage(`[1]`)}
	auto := Field{Name: "tool_choice", Value: json.RawMessage(`"auto"`)}
	cases := []struct {
		obj    string
		fields []Field
		want   string
	}{
		{`{"model":"m"}`, []Field{tools}, `{"model":"m","tools":[1]}`},
		{`{"model":"m"}`, []Field{tools, auto}, `{"model":"m","tools":[1],"tool_choice":"auto"}`},
		{`{}`, []Field{tools, auto}, `{"tools":[1],"tool_choice":"auto"}`},
		{"{\"a\":{\"b\":1}}\n", []Field{tools}, "{\"a\":{\"b\":1},\"tools\":[1]}\n"},
		{`{"model":"m"}`, nil, `{"model":"m"}`},
	}
	for _, c := range cases {
		b := WithFields([]byte(c.obj), c.fields...)
		got := b.Bytes()
		if string(got) != c.want {
			t.Errorf("WithFields(%q) = %q, want %q", c.obj, got, c.want)
		}
		if !json.Valid(got) {
			t.Errorf("WithFields(%q) = %q: not JSON", c.obj, got)
		}
		if b.Len() != int64(len(c.want)) {
			t.Errorf("WithFields(%q).Len() = %d, want %d", c.obj, b.Len(), len(c.want))
		}
		read, err := io.ReadAll(b.Reader())
		if err != nil || string(read) != c.want {
			t.Errorf("WithFields(%q).Reader() read %q, %v; want %q", c.obj, read, err, c.want)
		}
	}
}

// A Body's reader fills each read across parts, as one joined slice
// would: a request's body goes out in as few writes.
func TestBodyReaderFillsAcrossParts(t *testing.T) {
	b := Body{[]byte("ab"), []byte(""), []byte("cde"), []byte("f")}
	r := b.Reader()
	buf := make([]byte, 4)
	var reads []string
	for {
		n, err := r.Read(buf)
		if n > 0 {
			reads = append(reads, string(buf[:n]))
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if got := fmt.Sprint(reads); got != "[abcd ef]" {
		t.Fatalf("reads = %s, want [abcd ef]", got)
	}
}

// A request of a Body carries its length and can be read again (GetBody),
// as the transport does to resend it on a fresh connection: a small body
// joined (an in-memory reader, sent with its headers), one past
// WriteBuffer in its parts.
func TestBodyRequest(t *testing.T) {
	small := WithFields([]byte(`{"model":"m"}`), Field{Name: "tools", Value: json.RawMessage(`[1]`)})
	large := WithFields([]byte(`{"model":"`+strings.Repeat("m", WriteBuffer)+`"}`), Field{Name: "tools", Value: json.RawMessage(`[1]`)})
	for _, tc := range []struct {
		name   string
		b      Body
		joined bool
	}{{"small", small, true}, {"large", large, false}} {
		t.Run(tc.name, func(t *testing.T) {
			b := tc.b
			req, err := b.NewRequest(context.Background(), http.MethodPost, "http://127.0.0.1:1/x")
			if err != nil {
				t.Fatal(err)
			}
			if req.ContentLength != b.Len() {
				t.Fatalf("ContentLength = %d, want %d", req.ContentLength, b.Len())
			}
			// (A joined body is a bytes.Reader: a WriterTo through the
			// transport's NopCloser; the parts' reader is not.)
			if _, joined := req.Body.(io.WriterTo); joined != tc.joined {
				t.Fatalf("body %T: joined = %v, want %v", req.Body, joined, tc.joined)
			}
			for i := 0; i < 2; i++ {
				body := req.Body
				if i == 1 {
					if body, err = req.GetBody(); err != nil {
						t.Fatal(err)
					}
				}
				got, err := io.ReadAll(body)
				if err != nil || string(got) != string(b.Bytes()) {
					t.Fatalf("read %d: %d bytes, %v; want %d", i, len(got), err, b.Len())
				}
			}
		})
	}
}
