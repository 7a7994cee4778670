package ollama

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"reflect"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ollama/ollama/api"

	"lemo/providers"
	"lemo/providers/retry"
)

// bodyModel returns a model whose /api/chat answers are made by answer
// (no network), and the requests it saw.
func bodyModel(t testing.TB, cfg Config, answer func(*http.Request) *http.Response) (*Model, func() []*http.Request) {
	t.Helper()
	var (
		mu   sync.Mutex
		seen []*http.Request
	)
	if cfg.Retry == (retry.Policy{}) {
		cfg.Retry = retry.Policy{MaxAttempts: 1}
	}
	cfg.HTTPClient = &http.Client{Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
		mu.Lock()
		seen = append(seen, r)
		mu.Unlock()
		resp := answer(r)
		resp.Request = r
		return resp, nil
	})}
	p := newProvider(t, cfg)
	return &Model{p: p, info: providers.ModelInfo{Name: "m", Window: 4096}}, func() []*http.Request {
		mu.Lock()
		defer mu.Unlock()
		return append([]*http.Request(nil), seen...)
	}
}

func ndjson(body string) func(*http.Request) *http.Response {
	return func(*http.Request) *http.Response {
		return &http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {"application/x-ndjson"}},
			Body: io.NopCloser(strings.NewReader(body))}
	}
}

var hi = &providers.Request{Messages: []providers.Message{{Role: providers.RoleUser, Content: "hi"}}}

const doneLine = `{"model":"m","message":{"role":"assistant","content":""},"done":true,"done_reason":"stop","prompt_eval_count":7,"eval_count":3}` + "\n"

// TestChatStreamShapes runs NDJSON bodies through the chat path.
func TestChatStreamShapes(t *testing.T) {
	for _, c := range []struct {
		name, body string
		want       providers.Response
		deltas     int
	}{
		{name: "crlf, blank lines, no final newline",
			body: "\r\n" + `{"message":{"role":"assistant","content":"a"},"done":false}` + "\r\n\n   \n" + strings.TrimSuffix(doneLine, "\n"),
			want: providers.Response{Text: "a", FinishReason: "stop", Usage: providers.Usage{PromptTokens: 7, CompletionTokens: 3}}, deltas: 1},
		{name: "lines after done are ignored",
			body: `{"message":{"role":"assistant","content":"a"},"done":false}` + "\n" + doneLine + `{"message":{"content":"late"},"done":false}` + "\nnot json\n",
			want: providers.Response{Text: "a", FinishReason: "stop", Usage: providers.Usage{PromptTokens: 7, CompletionTokens: 3}}, deltas: 1},
		{name: "reasoning then text; length kept",
			body: `{"message":{"role":"assistant","content":"","thinking":"hm"},"done":false}` + "\n" +
				`{"message":{"role":"assistant","content":"ok"},"done":true,"done_reason":"length","eval_count":2}` + "\n",
			want: providers.Response{Text: "ok", Reasoning: "hm", FinishReason: "length", Usage: providers.Usage{CompletionTokens: 2}}, deltas: 2},
		{name: "tool calls keep their ids and order; stop becomes tool_calls",
			body: `{"message":{"role":"assistant","content":"","tool_calls":[{"id":"call_ab12cd34","function":{"index":0,"name":"get_weather","arguments":{"city":"Tokyo","days":2}}}]},"done":false}` + "\n" +
				`{"message":{"role":"assistant","content":"","tool_calls":[{"function":{"index":1,"name":"now","arguments":{}}}]},"done":false}` + "\n" + doneLine,
			want: providers.Response{FinishReason: "tool_calls", Usage: providers.Usage{PromptTokens: 7, CompletionTokens: 3},
				ToolCalls: []providers.ToolCall{{ID: "call_ab12cd34", Name: "get_weather", Arguments: json.RawMessage(`{"city":"Tokyo","days":2}`)},
					{ID: "call_1", Name: "now", Arguments: json.RawMessage(`{}`)}}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			m, _ := bodyModel(t, Config{}, ndjson(c.body))
			n := 0
			got, err := m.Stream(context.Background(), hi, func(providers.Delta) { n++ })
			if err != nil {
				t.Fatalf("Stream() = %v", err)
			}
			gj, _ := json.Marshal(got)
			wj, _ := json.Marshal(c.want)
			if !bytes.Equal(gj, wj) || n != c.deltas {
				t.Fatalf("Stream() = %s with %d deltas\nwant %s with %d", gj, n, wj, c.deltas)
			}
		})
	}
}

// TestChatLineDecodesLikeTheAPI checks that a line decodes into the same
// api.ChatResponse as json.Unmarshal gives (chatLine bypasses
// api.Message's UnmarshalJSON).
func TestChatLineDecodesLikeTheAPI(t *testing.T) {
	for _, line := range []string{
		`{"model":"qwen3","created_at":"2025-07-07T20:22:19.18Z","message":{"role":"Assistant","content":"","thinking":"Let me"},"done":false}`,
		`{"model":"qwen3","remote_model":"gpt-oss:120b","remote_host":"https://ollama.com:443","created_at":"2025-07-07T20:22:19.18Z","message":{"role":"assistant","content":"","tool_calls":[{"id":"call_ab12cd34","function":{"index":0,"name":"get_weather","arguments":{"city":"Tokyo","n":[1,{"b":null}]}}}]},"done":false}`,
		`{"model":"qwen3","created_at":"2025-07-07T20:22:19.18Z","message":{"role":"assistant","content":""},"done":true,"done_reason":"stop","total_duration":182242375,"load_duration":41295167,"prompt_eval_count":169,"prompt_eval_duration":24573166,"eval_count":15,"eval_duration":115959084}`,
		`{"message":null,"done":true}`,
		`{"MESSAGE":{"CONTENT":"upper-case keys"}}`,
		`{}`,
	} {
		var want api.ChatResponse
		if err := json.Unmarshal([]byte(line), &want); err != nil {
			t.Fatal(err)
		}
		var l chatLine
		if err := json.Unmarshal([]byte(line), &l); err != nil {
			t.Fatalf("chatLine %s: %v", line, err)
		}
		if got := l.response(); !reflect.DeepEqual(*got, want) {
			t.Errorf("chatLine %s\n = %+v\nwant %+v", line, *got, want)
		}
	}
}

// TestChatStreamFailures checks the class, ErrTruncated and message of
// each way a 200 stream can fail.
func TestChatStreamFailures(t *testing.T) {
	text := `{"message":{"role":"assistant","content":"a"},"done":false}` + "\n"
	for _, c := range []struct {
		name, body, msg string
		output          bool
	}{
		{"empty body", "", "stream ended without a done line", false},
		{"no done line", text, "stream ended without a done line", true},
		{"error line", text + `{"error":"an error was encountered while running the model"}` + "\n", "mid-stream: an error was encountered while running the model", true},
		{"error line first", `{"error":"boom"}` + "\n", "mid-stream: boom", false},
		{"not json", text + "<html><body>Bad Gateway</body></html>\n", "mid-stream: malformed line: Bad Gateway", true},
		{"not an object", "[1,2]\n", "mid-stream: malformed line: [1,2]", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			m, _ := bodyModel(t, Config{}, ndjson(c.body))
			_, err := m.Stream(context.Background(), hi, nil)
			var pe *providers.Error
			if !errors.As(err, &pe) || pe.Class != providers.ClassTransient || !errors.Is(err, providers.ErrTruncated) ||
				pe.Message != c.msg || pe.OutputStarted != c.output {
				t.Fatalf("Stream() = %#v\nwant transient ErrTruncated %q, output %v", err, c.msg, c.output)
			}
		})
	}
}

// TestChatHTTPErrorMessages checks the message kept from error bodies.
func TestChatHTTPErrorMessages(t *testing.T) {
	for _, c := range []struct {
		name, ctype, body, key, want string
		status                       int
		class                        providers.Class
	}{
		{"json error", "application/json", `{"error":"model 'm' not found"}`, "", "model 'm' not found", 404, providers.ClassModelNotFound},
		{"plain text", "text/plain", "404 page not found\n", "", "404 page not found", 404, providers.ClassModelNotFound},
		{"html first readable line", "text/html", "<html>\r\n<head><title>502 Bad Gateway</title></head>\r\n<body>nginx</body>\r\n</html>\r\n", "", "502 Bad Gateway", 502, providers.ClassTransient},
		{"empty body", "text/plain", "", "", "Service Unavailable", 503, providers.ClassTransient},
		{"json without error", "application/json", `{"detail":"x"}`, "", "Internal Server Error", 500, providers.ClassTransient},
		{"401 keeps the server text", "application/json", `{"error":"unauthorized","signin_url":"https://ollama.com/connect"}`, "", "unauthorized (no API key configured)", 401, providers.ClassAuth},
		{"401 with a key", "application/json", `{"error":"invalid key sk-secret"}`, "sk-secret", "invalid key [redacted]", 401, providers.ClassAuth},
		{"overflow", "application/json", `{"error":"the input length exceeds the context length"}`, "", "the input length exceeds the context length", 400, providers.ClassContextOverflow},
	} {
		t.Run(c.name, func(t *testing.T) {
			m, _ := bodyModel(t, Config{APIKey: c.key}, func(*http.Request) *http.Response {
				return &http.Response{StatusCode: c.status, Header: http.Header{"Content-Type": {c.ctype}}, Body: io.NopCloser(strings.NewReader(c.body))}
			})
			_, err := m.Stream(context.Background(), hi, nil)
			var pe *providers.Error
			if !errors.As(err, &pe) || pe.Class != c.class || pe.Status != c.status || pe.Message != c.want {
				t.Fatalf("Stream() = %#v\nwant class %v, status %d, message %q", err, c.class, c.status, c.want)
			}
		})
	}
}

// TestChatWireRequest checks that the body is api.ChatRequest as the api
// package marshals it, with the client's headers, sent to BaseURL.
func TestChatWireRequest(t *testing.T) {
	var body []byte
	m, seen := bodyModel(t, Config{BaseURL: "http://gpu-box:11434/prefix", APIKey: "k"}, func(r *http.Request) *http.Response {
		body, _ = io.ReadAll(r.Body)
		return ndjson(doneLine)(r)
	})
	req := &providers.Request{System: "be brief", Think: true, Messages: []providers.Message{
		{Role: providers.RoleUser, Content: "weather?"},
		{Role: providers.RoleAssistant, ToolCalls: []providers.ToolCall{{ID: "lemo-1", Name: "get_weather", Arguments: json.RawMessage(`{"city":"Tokyo"}`)}}},
		{Role: providers.RoleTool, ToolCallID: "lemo-1", Content: "22C"}},
		Tools: []providers.ToolSpec{{Name: "get_weather", Description: "weather", Parameters: json.RawMessage(`{"type":"object","required":["city"],"properties":{"city":{"type":"string"}}}`)}}}
	if _, err := m.Stream(context.Background(), req, nil); err != nil {
		t.Fatal(err)
	}
	// The body is the chat with its tools (added to the encoded chat,
	// so compared after a round trip that orders the fields).
	chat, err := buildChat(m.info, req)
	if err != nil {
		t.Fatal(err)
	}
	tools, err := encodeTools(req.Tools)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(tools, &chat.Tools); err != nil {
		t.Fatal(err)
	}
	want, _ := json.Marshal(chat)
	var sent api.ChatRequest
	if err := json.Unmarshal(body, &sent); err != nil {
		t.Fatalf("wire body %s: %v", body, err)
	}
	if got, _ := json.Marshal(&sent); !bytes.Equal(got, want) {
		t.Fatalf("wire body\n%s\nwant\n%s", got, want)
	}
	for _, s := range []string{`"options":{"num_ctx":4096}`, `"tool_call_id":"lemo-1"`, `"tool_name":"get_weather"`, `"arguments":{"city":"Tokyo"}`, `"stream":true`} {
		if !bytes.Contains(body, []byte(s)) {
			t.Errorf("wire body lacks %s", s)
		}
	}
	r := seen()[0]
	for k, v := range map[string]string{"Content-Type": "application/json", "Accept": "application/x-ndjson",
		"User-Agent": userAgent, "Authorization": "Bearer k"} {
		if got := r.Header.Get(k); got != v {
			t.Errorf("%s = %q, want %q", k, got, v)
		}
	}
	if got := r.URL.String(); got != "http://gpu-box:11434/prefix/api/chat" || r.Method != http.MethodPost {
		t.Errorf("request = %s %s, want POST http://gpu-box:11434/prefix/api/chat", r.Method, got)
	}
}

// TestCancelWithBufferedLines cancels from emit while later lines (and the
// done line) are already buffered: nothing more is emitted and the call
// is cancelled, not successful.
func TestCancelWithBufferedLines(t *testing.T) {
	var body strings.Builder
	for range 10 {
		body.WriteString(`{"message":{"role":"assistant","content":"x"},"done":false}` + "\n")
	}
	body.WriteString(doneLine)
	m, _ := bodyModel(t, Config{}, ndjson(body.String()))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	n := 0
	_, err := m.Stream(ctx, hi, func(providers.Delta) { n++; cancel() })
	var pe *providers.Error
	if !errors.As(err, &pe) || pe.Class != providers.ClassCancelled || !pe.OutputStarted || n != 1 {
		t.Fatalf("Stream() = %v after %d deltas, want cancelled after 1", err, n)
	}
}

// TestConnectionReused checks that the answer is read to its end, so the
// next call reuses the connection. The server flushes the done line and
// ends the response a little later, as a real Ollama may (it flushes every
// line, the end of the chunked body follows in another write).
func TestConnectionReused(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/x-ndjson")
		_, _ = io.WriteString(w, `{"message":{"role":"assistant","content":"a"},"done":false}`+"\n")
		w.(http.Flusher).Flush()
		_, _ = io.WriteString(w, doneLine)
		w.(http.Flusher).Flush()
		time.Sleep(20 * time.Millisecond) // the end of the body comes late
	}))
	t.Cleanup(srv.Close)
	p := newProvider(t, Config{BaseURL: srv.URL})
	m := &Model{p: p, info: providers.ModelInfo{Name: "m", Window: 4096}}
	var reused []bool
	ctx := httptrace.WithClientTrace(context.Background(), &httptrace.ClientTrace{
		GotConn: func(i httptrace.GotConnInfo) { reused = append(reused, i.Reused) }})
	for range 3 {
		if _, err := m.Stream(ctx, hi, nil); err != nil {
			t.Fatal(err)
		}
	}
	if len(reused) != 3 || !reused[1] || !reused[2] {
		t.Fatalf("GotConn reused = %v, want the connection reused by calls 2 and 3", reused)
	}
}

// TestNoPerCallLineBuffer bounds the bytes one streamed call allocates:
// api.Client.Chat allocated an 8 MB line buffer per call.
func TestNoPerCallLineBuffer(t *testing.T) {
	var body strings.Builder
	for range 100 {
		body.WriteString(`{"model":"m","created_at":"2026-01-01T00:00:00Z","message":{"role":"assistant","content":"token "},"done":false}` + "\n")
	}
	body.WriteString(doneLine)
	m, _ := bodyModel(t, Config{}, ndjson(body.String()))
	call := func() {
		if _, err := m.Stream(context.Background(), hi, nil); err != nil {
			t.Fatal(err)
		}
	}
	call() // warm the reader pool and the json caches
	const runs = 20
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for range runs {
		call()
	}
	runtime.ReadMemStats(&after)
	const limit = 512 << 10
	if perCall := (after.TotalAlloc - before.TotalAlloc) / runs; perCall > limit {
		t.Fatalf("one call of 100 deltas allocates %d bytes, want at most %d", perCall, limit)
	}
	if allocs := testing.AllocsPerRun(runs, call); allocs > 3000 {
		t.Fatalf("one call of 100 deltas makes %.0f allocations, want at most 3000", allocs)
	}
}

// TestLineReader checks line endings, the cap (a line's bytes without its
// "\n"; a "\r" counts) and lines longer than the reader's buffer.
func TestLineReader(t *testing.T) {
	long := strings.Repeat("x", 100)
	for _, c := range []struct {
		name, in string
		max      int
		want     []string
		tooLong  bool
	}{
		{"lf and crlf", "a\nb\r\nc", 10, []string{"a", "b", "c"}, false},
		{"blank lines kept", "\n\r\nx\n", 10, []string{"", "", "x"}, false},
		{"at the cap", "abc\r\nabcd\n", 4, []string{"abc", "abcd"}, false},
		{"over the cap", "abcd\nabcde\n", 4, []string{"abcd"}, true},
		{"over the cap at eof", "abcde", 4, nil, true},
		{"longer than the buffer", long + "\n" + long + "\r\n" + long, 101, []string{long, long, long}, false},
		{"over the cap beyond the buffer", long + "\n", 99, nil, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			l := &lineReader{r: bufio.NewReaderSize(strings.NewReader(c.in), 16), max: c.max}
			var got []string
			var err error
			for {
				var b []byte
				if b, err = l.next(); err != nil {
					break
				}
				got = append(got, string(b))
			}
			if strings.Join(got, "|") != strings.Join(c.want, "|") || errors.Is(err, errLineTooLong) != c.tooLong ||
				(!c.tooLong && err != io.EOF) {
				t.Fatalf("lines = %q, %v; want %q, too long %v", got, err, c.want, c.tooLong)
			}
		})
	}
}

// FuzzLineReader compares the reader with a plain split on "\n" (one
// trailing "\r" dropped, a last line without "\n" kept), for any buffer
// size and cap.
func FuzzLineReader(f *testing.F) {
	f.Add([]byte("a\nb\r\n\nccc"), uint8(0), uint16(3))
	f.Add([]byte(strings.Repeat("y", 40)+"\n"), uint8(4), uint16(40))
	f.Fuzz(func(t *testing.T, data []byte, buf uint8, max uint16) {
		l := &lineReader{r: bufio.NewReaderSize(bytes.NewReader(data), 16+int(buf)), max: int(max)}
		parts := bytes.Split(data, []byte{'\n'})
		if len(parts[len(parts)-1]) == 0 {
			parts = parts[:len(parts)-1]
		}
		for i, want := range parts {
			got, err := l.next()
			if len(want) > int(max) {
				if !errors.Is(err, errLineTooLong) {
					t.Fatalf("line %d (%d bytes, cap %d) = %q, %v; want errLineTooLong", i, len(want), max, got, err)
				}
				return
			}
			want = bytes.TrimSuffix(want, []byte{'\r'})
			if err != nil || !bytes.Equal(got, want) {
				t.Fatalf("line %d = %q, %v; want %q", i, got, err, want)
			}
		}
		if got, err := l.next(); err != io.EOF {
			t.Fatalf("after the last line: %q, %v; want io.EOF", got, err)
		}
	})
}

// Many Tasks calling one Ollama at once reuse their connections: a second
// round of concurrent calls opens none (the transport keeps
// openaicompat.MaxIdleConnsPerHost idle connections, Go's default 2).
func TestConcurrentCallsReuseConnections(t *testing.T) {
	const calls = 20
	var (
		mu      sync.Mutex
		arrived int
		all     = make(chan struct{})
	)
	var opened atomic.Int64
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// Each call waits until the round's every call has arrived, so a
		// round really holds calls connections at once.
		mu.Lock()
		arrived++
		if arrived == calls {
			close(all)
		}
		round := all
		mu.Unlock()
		select {
		case <-round:
		case <-r.Context().Done():
			return
		}
		w.Header().Set("Content-Type", "application/x-ndjson")
		_, _ = io.WriteString(w, doneLine)
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			opened.Add(1)
		}
	}
	srv.Start()
	t.Cleanup(srv.Close)
	p := newProvider(t, Config{BaseURL: srv.URL})
	m := &Model{p: p, info: providers.ModelInfo{Name: "m", Window: 4096}}
	round := func() {
		t.Helper()
		var wg sync.WaitGroup
		errs := make(chan error, calls)
		for range calls {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if _, err := m.Stream(context.Background(), hi, nil); err != nil {
					errs <- err
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
	}
	round()
	first := opened.Load()
	mu.Lock()
	arrived, all = 0, make(chan struct{})
	mu.Unlock()
	round()
	if got := opened.Load(); got != first {
		t.Fatalf("the second round of %d concurrent calls opened %d new connections (%d in the first); want none", calls, got-first, first)
	}
}
