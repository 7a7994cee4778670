package openaicompat

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"lemo/providers"
	"lemo/providers/fake"
	"lemo/providers/retry"
)

var fastRetry = retry.Policy{MaxAttempts: 3, BaseDelay: time.Millisecond, MaxDelay: 2 * time.Millisecond, MaxRetryAfter: time.Second}

func newPlain(t testing.TB, p fake.ProviderParams) *Provider {
	t.Helper()
	prov, err := New(Options{Name: "plain", BaseURL: p.BaseURL, APIKey: p.APIKey, Models: p.Models, IdleTimeout: p.IdleTimeout, Retry: fastRetry,
		CacheTTL: -1, Hooks: Hooks{UnknownTools: true, Body: func(b *ChatRequest, _ *providers.Request, _ providers.ModelInfo) {
			b.StreamOptions = &StreamOptions{IncludeUsage: true}
		}}})
	if err != nil {
		t.Fatal(err)
	}
	return prov
}

func TestConformance(t *testing.T) {
	fake.RunConformance(t, fake.Conformance{Flavor: fake.FlavorOpenAI, Model: "local-model",
		New: func(t testing.TB, p fake.ProviderParams) providers.Provider { return newPlain(t, p) }})
}

func TestNewValidates(t *testing.T) {
	_, err := New(Options{Name: "a/b", BaseURL: "ftp://x", Timeout: -1, Retry: retry.Policy{MaxAttempts: -1}})
	if err == nil {
		t.Fatal("New() = nil error, want one")
	}
	for _, want := range []string{"Config.Name", "Config.BaseURL", "Config.Timeout", "Config.Retry.MaxAttempts"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("New() error %q does not name %s", err, want)
		}
	}
}

func TestDiscoveryWindowFromServer(t *testing.T) {
	s := fake.StartServer(t, fake.Options{Flavor: fake.FlavorOpenAI})
	p := newPlain(t, fake.ProviderParams{BaseURL: s.URL()})
	ms, err := p.Models(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	want := []providers.ModelInfo{
		{ID: "plain/local-model", Provider: "plain", Name: "local-model", Window: 32768, Tools: true},
		{ID: "plain/other-model", Provider: "plain", Name: "other-model", Window: 0, Tools: true},
	}
	if len(ms) != len(want) {
		t.Fatalf("Models() = %+v, want %+v", ms, want)
	}
	for i := range want {
		if ms[i] != want[i] {
			t.Errorf("Models()[%d] = %+v, want %+v", i, ms[i], want[i])
		}
	}
}

func TestDiscoveryCache(t *testing.T) {
	s := fake.StartServer(t, fake.Options{Flavor: fake.FlavorOpenAI})
	p, err := New(Options{Name: "plain", BaseURL: s.URL(), CacheTTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if _, err := p.Models(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	if n := len(s.Requests()); n != 1 {
		t.Fatalf("discovery requests = %d, want 1 (cached)", n)
	}
}

func TestHugeLineIsAClearError(t *testing.T) {
	s := fake.StartServer(t, fake.Options{Flavor: fake.FlavorOpenAI, Script: []fake.Scenario{{HugeLine: 200 << 10}}})
	p, err := New(Options{Name: "plain", BaseURL: s.URL(), MaxLineBytes: 64 << 10, Retry: retry.Policy{MaxAttempts: 1}})
	if err != nil {
		t.Fatal(err)
	}
	m, err := p.Model(context.Background(), "local-model")
	if err != nil {
		t.Fatal(err)
	}
	_, err = m.Stream(context.Background(), &providers.Request{Messages: []providers.Message{{Role: providers.RoleUser, Content: "x"}}}, nil)
	if !errors.Is(err, ErrLineTooLong) || !strings.Contains(err.Error(), "size limit") {
		t.Fatalf("Stream() = %v, want ErrLineTooLong with a clear message", err)
	}
}

func TestSSEReader(t *testing.T) {
	in := ": OPENROUTER PROCESSING\r\n\r\nevent: x\r\ndata: {\"a\":1}\r\n\r\n: ping\n\ndata: line1\ndata:line2\nid: 7\n\ndata: [DONE]\n\ndata: tail-without-blank"
	r := NewSSEReader(strings.NewReader(in), 1024)
	var got []string
	for {
		d, err := r.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, string(d))
	}
	want := []string{`{"a":1}`, "line1\nline2", "[DONE]", "tail-without-blank"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("events = %q, want %q", got, want)
	}
}

// A released reader serves the next stream from its start, with nothing
// of the previous one, and without allocating its buffers again.
func TestSSEReaderReused(t *testing.T) {
	first := NewSSEReader(strings.NewReader("data: one\n\ndata: left-over\n\n"), 1024)
	if d, err := first.Next(); err != nil || string(d) != "one" {
		t.Fatalf("Next() = %q, %v; want one", d, err)
	}
	first.Release()
	r := NewSSEReader(strings.NewReader("data: two\n\n"), 1024)
	if d, err := r.Next(); err != nil || string(d) != "two" {
		t.Fatalf("the next stream's Next() = %q, %v; want two (nothing left over)", d, err)
	}
	if d, err := r.Next(); err != io.EOF {
		t.Fatalf("then Next() = %q, %v; want EOF", d, err)
	}
	r.Release()
	var in strings.Reader
	allocs := testing.AllocsPerRun(50, func() {
		in.Reset("data: {\"a\":1}\n\ndata: [DONE]\n\n")
		r := NewSSEReader(&in, 0)
		for {
			if _, err := r.Next(); err != nil {
				break
			}
		}
		r.Release()
	})
	// A new reader, its bufio.Reader and its 32 KiB buffer were three
	// allocations a stream (the race detector drops some pooled ones).
	if allocs >= 2 {
		t.Fatalf("a stream allocated %.1f times, want its reader reused", allocs)
	}
}

func TestSSEReaderLineCap(t *testing.T) {
	for name, in := range map[string]string{
		"one line":   "data: " + strings.Repeat("x", 5000) + "\n\n",
		"many lines": strings.Repeat("data: "+strings.Repeat("x", 900)+"\n", 10) + "\n",
		"no newline": strings.Repeat("y", 5000),
	} {
		r := NewSSEReader(strings.NewReader(in), 4096)
		_, err := r.Next()
		if !errors.Is(err, ErrLineTooLong) {
			t.Errorf("%s: Next() = %v, want ErrLineTooLong", name, err)
		}
	}
}

// TestClassify covers every error status and body format of the notes.
func TestClassify(t *testing.T) {
	cases := []struct {
		name   string
		status int
		body   string
		want   providers.Class
	}{
		{"openrouter invalid model", 400, `{"error":{"code":400,"message":"acme/fake-1.0 is not a valid model ID"}}`, providers.ClassModelNotFound},
		{"openrouter availability", 400, `{"error":{"message":"acme/fake-1.0 is not a valid model ID","error_type":"invalid_request","http_status":400,"availability":{"code":"model_not_found","retryable":false}}}`, providers.ClassModelNotFound},
		{"openrouter 401", 401, `{"error":{"code":401,"message":"No auth credentials found"}}`, providers.ClassAuth},
		{"openrouter 402", 402, `{"error":{"code":402,"message":"Insufficient credits"}}`, providers.ClassQuota},
		{"openrouter 403 moderation", 403, `{"error":{"code":403,"message":"flagged","metadata":{"reasons":["violence"],"flagged_input":"x"}}}`, providers.ClassBadRequest},
		{"openrouter 404 tools", 404, `{"error":{"code":404,"message":"No endpoints found that support tool use"}}`, providers.ClassModelNotFound},
		{"openrouter 408", 408, `{"error":{"code":408,"message":"timeout"}}`, providers.ClassTransient},
		{"openrouter 429", 429, `{"error":{"code":429,"message":"Rate limit exceeded","metadata":{"error_type":"rate_limit_exceeded"}}}`, providers.ClassRateLimit},
		{"openrouter 502", 502, `{"error":{"code":502,"message":"provider down"}}`, providers.ClassTransient},
		{"openrouter 503", 503, `{"error":{"code":503,"message":"no provider"}}`, providers.ClassTransient},
		{"openrouter context", 400, `{"error":{"code":400,"message":"too long","metadata":{"error_type":"context_length_exceeded"}}}`, providers.ClassContextOverflow},
		{"nvidia 403 problem", 403, `{"status":403,"title":"Forbidden","detail":"Authorization failed"}`, providers.ClassAuth},
		{"nvidia 401", 401, `{"status":401,"title":"Unauthorized"}`, providers.ClassAuth},
		{"nvidia 404 text", 404, `404 page not found`, providers.ClassModelNotFound},
		{"nvidia 404 function", 404, `{"detail":"Function not found for account"}`, providers.ClassModelNotFound},
		{"nvidia 429", 429, `{"status":429,"title":"Too Many Requests"}`, providers.ClassRateLimit},
		{"nvidia vllm overflow", 400, `{"object":"error","message":"This model's maximum context length is 16384 tokens. However, you requested 16448 tokens (64 in the messages, 16384 in the completion).","type":"BadRequestError","param":null,"code":400}`, providers.ClassContextOverflow},
		{"nvidia 500 decode", 500, `failed to decode json body: unexpected EOF`, providers.ClassBadRequest},
		{"zen auth", 401, `{"type":"error","error":{"type":"AuthError","message":"Invalid API key."}}`, providers.ClassAuth},
		{"zen model", 401, `{"type":"error","error":{"type":"ModelError","message":"Model x not supported"}}`, providers.ClassModelNotFound},
		{"zen credits", 401, `{"type":"error","error":{"type":"CreditsError","message":"No credits"}}`, providers.ClassQuota},
		{"zen monthly", 401, `{"type":"error","error":{"type":"MonthlyLimitError","message":"limit"}}`, providers.ClassQuota},
		{"zen rate", 429, `{"type":"error","error":{"type":"RateLimitError","message":"slow down"},"metadata":{}}`, providers.ClassRateLimit},
		{"zen free usage", 429, `{"type":"error","error":{"type":"FreeUsageLimitError","message":"free limit"},"metadata":{}}`, providers.ClassQuota},
		{"zen region", 403, `{"type":"error","error":{"type":"RegionError","message":"region"}}`, providers.ClassAuth},
		{"zen 500", 500, `{"type":"error","error":{"type":"error","message":"Internal server error"}}`, providers.ClassTransient},
		{"zen upstream 400", 400, `{"error":{"message":"Error from provider (X): bad"}}`, providers.ClassBadRequest},
		{"openai not found", 404, `{"error":{"message":"The model 'x' does not exist","type":"invalid_request_error","code":"model_not_found"}}`, providers.ClassModelNotFound},
		{"openai key", 401, `{"error":{"message":"Incorrect API key provided","type":"invalid_request_error","code":"invalid_api_key"}}`, providers.ClassAuth},
		{"openai quota", 429, `{"error":{"message":"You exceeded your current quota","type":"insufficient_quota","code":"insufficient_quota"}}`, providers.ClassQuota},
		{"html 502", 502, `<html><body>Bad Gateway</body></html>`, providers.ClassTransient},
		{"413", 413, `request too large`, providers.ClassContextOverflow},
	}
	p := &Provider{opts: Options{Name: "x", APIKey: "sk-secret"}}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := p.httpError(&http.Response{StatusCode: c.status, Header: http.Header{}}, []byte(c.body))
			if e.Class != c.want || e.Status != c.status {
				t.Fatalf("class, status = %v, %d; want %v, %d (message %q)", e.Class, e.Status, c.want, c.status, e.Message)
			}
			if e.Message == "" {
				t.Fatal("empty message")
			}
		})
	}
}

func TestErrorMessageBoundedAndRedacted(t *testing.T) {
	p := &Provider{opts: Options{Name: "x", APIKey: "sk-secret-key"}}
	body := `{"error":{"message":"bad key sk-secret-key ` + strings.Repeat("z", 5000) + `"}}`
	e := p.httpError(&http.Response{StatusCode: 401, Header: http.Header{}}, []byte(body))
	if strings.Contains(e.Error(), "sk-secret-key") || len(e.Message) > retry.MaxMessageBytes+4 {
		t.Fatalf("message (%d bytes) leaks the key or is unbounded: %.80q", len(e.Message), e.Message)
	}
}

func TestRetryAfterOnStatus(t *testing.T) {
	p := &Provider{opts: Options{Name: "x"}}
	h := http.Header{}
	h.Set("Retry-After", time.Now().Add(30*time.Second).UTC().Format(http.TimeFormat))
	e := p.httpError(&http.Response{StatusCode: 503, Header: h}, []byte(`{"error":{"code":503,"message":"busy"}}`))
	if e.RetryAfter < 25*time.Second || e.RetryAfter > 31*time.Second {
		t.Fatalf("RetryAfter = %v, want about 30s", e.RetryAfter)
	}
}

// stream runs the decoder on a raw SSE body.
func stream(t testing.TB, body string) (*providers.Response, []providers.Delta, error) {
	t.Helper()
	var ds []providers.Delta
	st := &state{p: &Provider{opts: Options{Name: "x", MaxLineBytes: DefaultMaxLineBytes}}, emit: func(d providers.Delta) { ds = append(ds, d) }}
	resp, err := st.sse(context.Background(), strings.NewReader(body))
	return resp, ds, err
}

func TestToolCallAccumulator(t *testing.T) {
	body := strings.Join([]string{
		`data: {"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"a","type":"function","function":{"name":"f","arguments":""}}]}}]}`,
		`data: {"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"a","function":{"arguments":"{\"x\":"}}]}}]}`,
		`data: {"choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"id":"b","function":{"name":"g","arguments":"{\"y\":2}"}}]}}]}`,
		`data: {"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"1}"}}]}}]}`,
		`data: {"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"c","function":{"name":"h","arguments":"not json"}}]}}]}`,
		`data: {"choices":[{"index":0,"delta":{"tool_calls":[{"id":"d","function":{"name":"k","arguments":""}}]}}]}`,
		`data: {"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}`,
		`data: [DONE]`, ``,
	}, "\n\n")
	resp, _, err := stream(t, body)
	if err != nil {
		t.Fatal(err)
	}
	got := make([]string, 0, len(resp.ToolCalls))
	for _, c := range resp.ToolCalls {
		got = append(got, c.ID+" "+c.Name+" "+string(c.Arguments))
	}
	want := []string{`a f {"x":1}`, `b g {"y":2}`, `c h "not json"`, `d k {}`}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("tool calls = %q, want %q", got, want)
	}
}

func TestStreamShapes(t *testing.T) {
	cases := []struct {
		name      string
		body      string
		wantText  string
		wantErr   error
		wantClass providers.Class
	}{
		{"zen cost frame after done", "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"hi\"}}]}\n\ndata: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\ndata: {\"id\":\"\",\"choices\":[],\"cost\":\"0.0012\"}\n\n", "hi", nil, 0},
		{"clean EOF after finish", "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"hi\"},\"finish_reason\":\"stop\"}]}\n\n", "hi", nil, 0},
		{"converted same index", "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"a\"}},{\"index\":0,\"delta\":{\"content\":\"b\"}},{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n", "ab", nil, 0},
		{"no finish", "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"hi\"}}]}\n\n", "", providers.ErrTruncated, providers.ClassTransient},
		{"done without finish", "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"hi\"}}]}\n\ndata: [DONE]\n\n", "", providers.ErrTruncated, providers.ClassTransient},
		{"openrouter string code", "data: {\"error\":{\"code\":\"server_error\",\"message\":\"Provider disconnected unexpectedly\"},\"choices\":[{\"index\":0,\"delta\":{\"content\":\"\"},\"finish_reason\":\"error\"}]}\n\n", "", providers.ErrTruncated, providers.ClassTransient},
		{"openrouter 429 mid-stream", "data: {\"error\":{\"code\":429,\"message\":\"Rate limit exceeded\",\"metadata\":{\"error_type\":\"rate_limit_exceeded\"}},\"choices\":[{\"index\":0,\"delta\":{\"content\":\"\"},\"finish_reason\":\"error\"}]}\n\n", "", providers.ErrTruncated, providers.ClassRateLimit},
		{"choice error", "data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"error\",\"error\":{\"code\":502,\"message\":\"x\"}}]}\n\n", "", providers.ErrTruncated, providers.ClassTransient},
		{"malformed chunk", "data: {not json\n\n", "", providers.ErrTruncated, providers.ClassTransient},
		{"null content and reasoning", "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":null,\"reasoning\":null}}]}\n\ndata: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"ok\"},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n", "ok", nil, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			resp, _, err := stream(t, c.body)
			if c.wantErr == nil {
				if err != nil || resp.Text != c.wantText {
					t.Fatalf("stream = %+v, %v; want text %q", resp, err, c.wantText)
				}
				return
			}
			if !errors.Is(err, c.wantErr) || providers.ClassOf(err) != c.wantClass {
				t.Fatalf("stream error = %v (class %v), want %v class %v", err, providers.ClassOf(err), c.wantErr, c.wantClass)
			}
		})
	}
}

func TestNonStreamedCompletion(t *testing.T) {
	st := &state{p: &Provider{opts: Options{Name: "x", MaxLineBytes: 1 << 20}}, emit: func(providers.Delta) {}}
	resp, err := st.whole(context.Background(), strings.NewReader(`{"choices":[{"index":0,"message":{"content":"whole","tool_calls":[{"index":0,"id":"t","function":{"name":"f","arguments":"{}"}}]},"finish_reason":"tool_calls"}],"usage":{"prompt_tokens":3,"completion_tokens":4}}`))
	if err != nil || resp.Text != "whole" || len(resp.ToolCalls) != 1 || resp.Usage.CompletionTokens != 4 {
		t.Fatalf("whole = %+v, %v", resp, err)
	}
	st = &state{p: st.p, emit: func(providers.Delta) {}}
	_, err = st.whole(context.Background(), strings.NewReader(`{"choices":[{"index":0,"message":{"content":"part"},"finish_reason":"error","error":{"code":502,"message":"upstream died"}}]}`))
	if !errors.Is(err, providers.ErrTruncated) || !strings.Contains(err.Error(), "upstream died") {
		t.Fatalf("whole with finish_reason error = %v", err)
	}
}

func TestReasoningDetailsMetadata(t *testing.T) {
	body := "data: {\"choices\":[{\"index\":0,\"delta\":{\"reasoning\":\"r\",\"reasoning_details\":[{\"type\":\"reasoning.text\",\"text\":\"r\",\"index\":0}]}}]}\n\n" +
		"data: {\"choices\":[{\"index\":0,\"delta\":{\"reasoning_details\":[{\"type\":\"reasoning.encrypted\",\"data\":\"QUJD\",\"index\":1}]}}]}\n\n" +
		"data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"x\"},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n"
	resp, ds, err := stream(t, body)
	if err != nil {
		t.Fatal(err)
	}
	if len(ds) != 2 || ds[0].Kind != providers.DeltaReasoning {
		t.Fatalf("deltas = %+v, want reasoning then text", ds)
	}
	want := `{"reasoning_details":[{"type":"reasoning.text","text":"r","index":0},{"type":"reasoning.encrypted","data":"QUJD","index":1}]}`
	if string(resp.ProviderMetadata) != want {
		t.Fatalf("ProviderMetadata = %s, want %s", resp.ProviderMetadata, want)
	}
	// Echoed unchanged on the next request.
	req := buildRequest("m", &providers.Request{Messages: []providers.Message{{Role: providers.RoleAssistant, Content: "x", ProviderMetadata: resp.ProviderMetadata}}}, true)
	b, _ := json.Marshal(req)
	if !bytes.Contains(b, []byte(`"reasoning_details":[{"type":"reasoning.text","text":"r","index":0},{"type":"reasoning.encrypted","data":"QUJD","index":1}]`)) {
		t.Fatalf("request = %s, want reasoning_details echoed", b)
	}
}

func FuzzSSEStream(f *testing.F) {
	f.Add([]byte("data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"hi\"},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n"))
	f.Add([]byte(": c\n\ndata: {\"choices\":[{\"delta\":{\"tool_calls\":[{\"index\":0,\"id\":\"a\",\"function\":{\"name\":\"f\",\"arguments\":\"{\"}}]}}]}\n\n"))
	f.Add([]byte("data: {\"error\":{\"code\":\"x\"},\"choices\":[{\"finish_reason\":\"error\"}]}\n\n"))
	f.Add([]byte("data: a\ndata: b\r\n\r\nevent: e\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		st := &state{p: &Provider{opts: Options{Name: "x", MaxLineBytes: 4096}}, emit: func(providers.Delta) {}}
		resp, err := st.sse(context.Background(), bytes.NewReader(data))
		if err == nil && resp == nil {
			t.Fatal("nil response without error")
		}
		if err != nil {
			var pe *providers.Error
			if !errors.As(err, &pe) {
				t.Fatalf("error %v is not a *providers.Error", err)
			}
		}
	})
}

// TestStopsAtDone: after [DONE] nothing more is read, so a connection the
// server keeps open (or a Zen cost frame) cannot hold the answer back.
func TestStopsAtDone(t *testing.T) {
	pr, pw := io.Pipe()
	defer pw.Close()
	go func() {
		_, _ = io.WriteString(pw, "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"hi\"},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n")
	}()
	done := make(chan error, 1)
	go func() {
		st := &state{p: &Provider{opts: Options{Name: "x", MaxLineBytes: 1 << 20}}, emit: func(providers.Delta) {}}
		_, err := st.sse(context.Background(), pr)
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(2 * time.Second):
		pw.CloseWithError(errors.New("test timed out"))
		<-done
		t.Fatal("sse kept reading after [DONE]")
	}
}

// TestJSONAnswerOverHTTP: a server that ignores stream:true and answers
// with one JSON completion, including the embedded error form.
func TestJSONAnswerOverHTTP(t *testing.T) {
	s := fake.StartServer(t, fake.Options{Flavor: fake.FlavorOpenAI, Script: []fake.Scenario{
		{Match: "ok", JSONAnswer: true, Reasoning: []string{"r"}, Text: []string{"whole"}},
		{Match: "bad", JSONAnswer: true, Text: []string{"part"}, MidStreamError: "upstream died"},
	}})
	p := newPlain(t, fake.ProviderParams{BaseURL: s.URL()})
	m, err := p.Model(context.Background(), "local-model")
	if err != nil {
		t.Fatal(err)
	}
	resp, err := m.Stream(context.Background(), &providers.Request{Messages: []providers.Message{{Role: providers.RoleUser, Content: "ok"}}}, nil)
	if err != nil || resp.Text != "whole" || resp.Reasoning != "r" || resp.Usage.PromptTokens != 10 {
		t.Fatalf("Stream(ok) = %+v, %v", resp, err)
	}
	_, err = m.Stream(context.Background(), &providers.Request{Messages: []providers.Message{{Role: providers.RoleUser, Content: "bad"}}}, nil)
	if !errors.Is(err, providers.ErrTruncated) || !strings.Contains(err.Error(), "upstream died") {
		t.Fatalf("Stream(bad) = %v", err)
	}
	if n := len(s.ChatRequests()); n != 2 {
		t.Fatalf("requests = %d, want 2 (no retry after output)", n)
	}
}

func TestAnswerSizeIsBounded(t *testing.T) {
	pr, pw := io.Pipe()
	go func() {
		chunk := []byte("data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"" + strings.Repeat("x", 1<<20) + "\"}}]}\n\n")
		for {
			if _, err := pw.Write(chunk); err != nil {
				return
			}
		}
	}()
	defer pr.Close()
	st := &state{p: &Provider{opts: Options{Name: "x", MaxLineBytes: 2 << 20, MaxResponseBytes: 4 << 20}}, emit: func(providers.Delta) {}}
	_, err := st.sse(context.Background(), pr)
	if !errors.Is(err, ErrResponseTooLarge) || !errors.Is(err, providers.ErrTruncated) {
		t.Fatalf("sse(endless stream) = %v, want ErrResponseTooLarge", err)
	}
}

// A Task's budget caps the answer: max_tokens is sent when set and left
// out otherwise; cached prompt tokens are read from the usage details.
func TestMaxTokensAndCachedUsage(t *testing.T) {
	b, _ := json.Marshal(buildRequest("m", &providers.Request{MaxOutputTokens: 512}, false))
	if !bytes.Contains(b, []byte(`"max_tokens":512`)) {
		t.Fatalf("request = %s, want max_tokens 512", b)
	}
	b, _ = json.Marshal(buildRequest("m", &providers.Request{}, false))
	if bytes.Contains(b, []byte(`max_tokens`)) {
		t.Fatalf("request = %s, want no max_tokens", b)
	}
	body := "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"x\"},\"finish_reason\":\"stop\"}]}\n\n" +
		"data: {\"choices\":[],\"usage\":{\"prompt_tokens\":120,\"completion_tokens\":7,\"prompt_tokens_details\":{\"cached_tokens\":100}}}\n\ndata: [DONE]\n\n"
	resp, _, err := stream(t, body)
	if err != nil {
		t.Fatal(err)
	}
	if u := resp.Usage; u.PromptTokens != 120 || u.CompletionTokens != 7 || u.CachedPromptTokens != 100 {
		t.Fatalf("usage = %+v, want 120 prompt (100 cached), 7 completion", u)
	}
}

// requestBody encodes into one slice exactly what encoding the body with
// json.Marshal and adding the tool fields gives, with and without tools,
// texts that need escaping included.
func TestRequestBodyIsTheBodyWithTools(t *testing.T) {
	withTools := benchRequest()
	withTools.Messages = append(withTools.Messages, providers.Message{Role: providers.RoleUser, Content: "<b>&\"quoted\"\n\t\\</b>"},
		providers.Message{Role: providers.RoleTool, ToolCallID: "c", Content: strings.Repeat(`{"a":"b","c":["d","e"],"f":{"g":"<h>"}}`, 50)})
	noTools := benchRequest()
	noTools.Tools = nil
	for _, tc := range []struct {
		name string
		req  *providers.Request
	}{{"tools", withTools}, {"no tools", noTools}, {"empty", &providers.Request{}}, {"a long JSON result", &providers.Request{Messages: []providers.Message{
		{Role: providers.RoleUser, Content: "list"},
		{Role: providers.RoleAssistant, ToolCalls: []providers.ToolCall{{ID: "c", Name: "system", Arguments: json.RawMessage(`{"action":"list"}`)}}},
		{Role: providers.RoleTool, ToolCallID: "c", Content: strings.Repeat(`{"a":"b","c":["d","e"],"f":{"g":"<h>"}},`, 200)},
	}}}} {
		t.Run(tc.name, func(t *testing.T) {
			var cache providers.ToolCache
			body := buildRequest("m", tc.req, false)
			got, err := requestBody(body, tc.req, &cache)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != 1 {
				t.Fatalf("body in %d parts, want 1", len(got))
			}
			payload, err := json.Marshal(body)
			if err != nil {
				t.Fatal(err)
			}
			want := providers.Body{payload}
			if len(tc.req.Tools) > 0 {
				tools, err := encodeTools(tc.req.Tools)
				if err != nil {
					t.Fatal(err)
				}
				want = providers.WithFields(payload, providers.Field{Name: "tools", Value: tools}, providers.Field{Name: "tool_choice", Value: toolChoiceAuto})
			}
			if !bytes.Equal(got.Bytes(), want.Bytes()) {
				t.Fatalf("body:\n%s\nwant:\n%s", got.Bytes(), want.Bytes())
			}
			// The buffer was allocated once: the estimate covers the body
			// (the tools are added as they are).
			if est := encodedSize(body); len(payload) > est {
				t.Fatalf("body of %d bytes without its tools, estimated %d", len(payload), est)
			}
			if !json.Valid(got.Bytes()) {
				t.Fatalf("body is not JSON: %s", got.Bytes())
			}
		})
	}
}
