package ollama

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"lemo/providers"
	"lemo/providers/fake"
	"lemo/providers/retry"
)

var fastRetry = retry.Policy{MaxAttempts: 3, BaseDelay: time.Millisecond, MaxDelay: 2 * time.Millisecond, MaxRetryAfter: time.Second}

func newProvider(t testing.TB, cfg Config) *Provider {
	t.Helper()
	if cfg.Retry == (retry.Policy{}) {
		cfg.Retry = fastRetry
	}
	p, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestConformance(t *testing.T) {
	fake.RunConformance(t, fake.Conformance{Flavor: fake.FlavorOllama, Model: "qwen3:8b",
		New: func(t testing.TB, p fake.ProviderParams) providers.Provider {
			return newProvider(t, Config{BaseURL: p.BaseURL, APIKey: p.APIKey, Models: p.Models, IdleTimeout: p.IdleTimeout, CacheTTL: -1})
		}})
}

func TestDiscovery(t *testing.T) {
	s := fake.StartServer(t, fake.Options{Flavor: fake.FlavorOllama})
	p := newProvider(t, Config{Name: "ollama-cloud", BaseURL: s.URL(), NumCtxCap: 65536})
	ms, err := p.Models(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	want := []providers.ModelInfo{
		{ID: "ollama-cloud/gpt-oss:120b-cloud", Provider: "ollama-cloud", Name: "gpt-oss:120b-cloud", Window: 65536, Tools: true, Reasoning: true},
		{ID: "ollama-cloud/llama3.2:latest", Provider: "ollama-cloud", Name: "llama3.2:latest", Window: 65536, Tools: true},
		{ID: "ollama-cloud/mystery:latest", Provider: "ollama-cloud", Name: "mystery:latest", Window: 65536},
		{ID: "ollama-cloud/qwen3:8b", Provider: "ollama-cloud", Name: "qwen3:8b", Window: 40960, Tools: true, Reasoning: true},
	}
	if len(ms) != len(want) {
		t.Fatalf("Models() = %+v\nwant %+v", ms, want)
	}
	for i := range want {
		if ms[i] != want[i] {
			t.Errorf("Models()[%d] = %+v, want %+v", i, ms[i], want[i])
		}
	}
	m, err := p.Model(context.Background(), "llama3.2")
	if err != nil || m.Info().Name != "llama3.2:latest" {
		t.Fatalf("Model(llama3.2) = %v, %v; want llama3.2:latest", m, err)
	}
}

func TestNumCtxAndThinkAlwaysSent(t *testing.T) {
	s := fake.StartServer(t, fake.Options{Flavor: fake.FlavorOllama})
	p := newProvider(t, Config{BaseURL: s.URL()})
	for _, c := range []struct {
		model     string
		think     bool
		wantCtx   float64
		wantThink any
	}{
		{"qwen3:8b", false, 32768, false},
		{"qwen3:8b", true, 32768, true},
		{"llama3.2:latest", true, 32768, nil},
		{"mystery:latest", false, 32768, nil},
	} {
		m, err := p.Model(context.Background(), c.model)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := m.Stream(context.Background(), &providers.Request{Think: c.think,
			Messages: []providers.Message{{Role: providers.RoleUser, Content: "hi"}}}, nil); err != nil {
			t.Fatalf("%s: Stream() = %v", c.model, err)
		}
		reqs := s.ChatRequests()
		body := reqs[len(reqs)-1].JSON()
		opts, _ := body["options"].(map[string]any)
		if opts["num_ctx"] != c.wantCtx {
			t.Errorf("%s: options = %v, want num_ctx %v", c.model, body["options"], c.wantCtx)
		}
		if body["think"] != c.wantThink {
			t.Errorf("%s think=%v: wire think = %v, want %v", c.model, c.think, body["think"], c.wantThink)
		}
	}
}

// TestErrors maps every Ollama error status and body of the notes.
func TestErrors(t *testing.T) {
	cases := []struct {
		name       string
		sc         fake.Scenario
		want       providers.Class
		retryAfter time.Duration
	}{
		{"no thinking", fake.Scenario{Status: 400, Message: `"llama3.2" does not support thinking`}, providers.ClassBadRequest, 0},
		{"no tools", fake.Scenario{Status: 400, Message: "registry.ollama.ai/library/x:latest does not support tools"}, providers.ClassBadRequest, 0},
		{"think level", fake.Scenario{Status: 400, Message: `think value "high" is not supported for this model`}, providers.ClassBadRequest, 0},
		{"input too long", fake.Scenario{Status: 400, Message: "the input length exceeds the context length"}, providers.ClassContextOverflow, 0},
		{"unauthorized", fake.Scenario{Status: 401}, providers.ClassAuth, 0},
		{"cloud disabled", fake.Scenario{Status: 403, Message: "cloud models are disabled"}, providers.ClassAuth, 0},
		{"not found", fake.Scenario{Status: 404}, providers.ClassModelNotFound, 0},
		{"rate limit seconds", fake.Scenario{Status: 429, Headers: map[string]string{"Retry-After": "75"}}, providers.ClassRateLimit, 75 * time.Second},
		{"weekly quota", fake.Scenario{Status: 429, Message: "you've reached your weekly usage limit, please upgrade to continue", Headers: map[string]string{"Retry-After": "3600"}}, providers.ClassQuota, time.Hour},
		{"500 html", fake.Scenario{Status: 500}, providers.ClassTransient, 0},
		{"502 html", fake.Scenario{Status: 502}, providers.ClassTransient, 0},
		{"503 queue", fake.Scenario{Status: 503, Headers: map[string]string{"Retry-After": "90"}}, providers.ClassTransient, 90 * time.Second},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := fake.StartServer(t, fake.Options{Flavor: fake.FlavorOllama, Script: []fake.Scenario{c.sc}})
			p := newProvider(t, Config{BaseURL: s.URL(), Retry: retry.Policy{MaxAttempts: 1}})
			m, err := p.Model(context.Background(), "qwen3:8b")
			if err != nil {
				t.Fatal(err)
			}
			_, err = m.Stream(context.Background(), &providers.Request{Messages: []providers.Message{{Role: providers.RoleUser, Content: "x"}}}, nil)
			var pe *providers.Error
			if !errors.As(err, &pe) || pe.Class != c.want || pe.Status != c.sc.Status || pe.Provider != "ollama" {
				t.Fatalf("Stream() = %v, want class %v status %d", err, c.want, c.sc.Status)
			}
			if pe.Message == "" || strings.Contains(pe.Message, "<") {
				t.Fatalf("Message = %q, want readable text", pe.Message)
			}
			if d := pe.RetryAfter - c.retryAfter; d < -time.Second || d > time.Second {
				t.Fatalf("RetryAfter = %v, want %v", pe.RetryAfter, c.retryAfter)
			}
		})
	}
}

func TestRetryAfterHTTPDate(t *testing.T) {
	date := time.Now().Add(45 * time.Second).UTC().Format(http.TimeFormat)
	s := fake.StartServer(t, fake.Options{Flavor: fake.FlavorOllama, Script: []fake.Scenario{{Status: 429, Headers: map[string]string{"Retry-After": date}}}})
	p := newProvider(t, Config{BaseURL: s.URL()})
	m, _ := p.Model(context.Background(), "qwen3:8b")
	_, err := m.Stream(context.Background(), &providers.Request{Messages: []providers.Message{{Role: providers.RoleUser, Content: "x"}}}, nil)
	var pe *providers.Error
	if !errors.As(err, &pe) || pe.Class != providers.ClassRateLimit || pe.RetryAfter < 40*time.Second || pe.RetryAfter > 46*time.Second {
		t.Fatalf("Stream() = %#v, want rate_limit with RetryAfter about 45s", err)
	}
	if n := len(s.ChatRequests()); n != 1 {
		t.Fatalf("chat requests = %d, want 1 (Retry-After beyond the cap)", n)
	}
}

// redirect sends every request to the fake, whatever its host.
type redirect struct{ to *url.URL }

func (r redirect) RoundTrip(req *http.Request) (*http.Response, error) {
	req = req.Clone(req.Context())
	req.URL.Scheme, req.URL.Host = r.to.Scheme, r.to.Host
	return http.DefaultTransport.RoundTrip(req)
}

// TestCloudBearerWithoutSigning configures Ollama Cloud as cmd/lemo would
// (https://ollama.com and a key) with no ~/.ollama key file: requests
// carry the Bearer key and no signature.
func TestCloudBearerWithoutSigning(t *testing.T) {
	t.Setenv("HOME", t.TempDir())
	t.Setenv("OLLAMA_AUTH", "")
	const key = "ollama-cloud-secret-key"
	s := fake.StartServer(t, fake.Options{Flavor: fake.FlavorOllama, APIKey: key})
	to, _ := url.Parse(s.URL())
	var (
		mu    sync.Mutex
		hosts []string
	)
	p := newProvider(t, Config{Name: "ollama-cloud", BaseURL: CloudBaseURL, APIKey: key,
		HTTPClient: &http.Client{Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
			mu.Lock()
			hosts = append(hosts, r.URL.Scheme+"://"+r.URL.Host)
			mu.Unlock()
			return redirect{to}.RoundTrip(r)
		})}})
	m, err := p.Model(context.Background(), "gpt-oss:120b-cloud")
	if err != nil {
		t.Fatalf("Model() = %v", err)
	}
	resp, err := m.Stream(context.Background(), &providers.Request{Messages: []providers.Message{{Role: providers.RoleUser, Content: "hi"}}}, nil)
	if err != nil || resp.Text == "" {
		t.Fatalf("Stream() = %+v, %v", resp, err)
	}
	mu.Lock()
	defer mu.Unlock()
	for _, h := range hosts {
		if h != "https://ollama.com" {
			t.Fatalf("request went to %s, want https://ollama.com", h)
		}
	}
	for _, r := range s.Requests() {
		if got := r.Header.Get("Authorization"); got != "Bearer "+key {
			t.Fatalf("%s Authorization = %q, want the Bearer key", r.Path, got)
		}
	}
	// A wrong key is auth, and the key never shows in the error.
	p = newProvider(t, Config{BaseURL: s.URL(), APIKey: "wrong-secret"})
	_, err = p.Models(context.Background())
	if providers.ClassOf(err) != providers.ClassAuth || strings.Contains(err.Error(), "wrong-secret") {
		t.Fatalf("Models() with a wrong key = %v, want class auth without the key", err)
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

func TestHugeLineIsAClearError(t *testing.T) {
	s := fake.StartServer(t, fake.Options{Flavor: fake.FlavorOllama, Script: []fake.Scenario{{HugeLine: 300 << 10}}})
	p := newProvider(t, Config{BaseURL: s.URL(), MaxLineBytes: 64 << 10, Retry: retry.Policy{MaxAttempts: 1}})
	m, _ := p.Model(context.Background(), "qwen3:8b")
	_, err := m.Stream(context.Background(), &providers.Request{Messages: []providers.Message{{Role: providers.RoleUser, Content: "x"}}}, nil)
	if !errors.Is(err, errLineTooLong) || !errors.Is(err, providers.ErrTruncated) || !strings.Contains(err.Error(), "size limit") {
		t.Fatalf("Stream() = %v, want a clear line-too-long error", err)
	}
}

func TestConfigValidation(t *testing.T) {
	_, err := New(Config{Name: "a/b", BaseURL: "localhost:11434", NumCtxCap: 100, Timeout: -time.Second, MaxLineBytes: 1 << 30})
	if err == nil {
		t.Fatal("New() = nil error")
	}
	for _, want := range []string{"Config.Name", "Config.BaseURL", "Config.NumCtxCap", "Config.Timeout", "Config.MaxLineBytes"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %s", err, want)
		}
	}
}

func TestParseHost(t *testing.T) {
	for in, want := range map[string]string{
		"":                        DefaultBaseURL,
		"ollama.com":              CloudBaseURL,
		"0.0.0.0":                 "http://0.0.0.0:11434",
		"example.org:8080":        "http://example.org:8080",
		"https://ollama.com":      "https://ollama.com",
		"http://10.0.0.2:11434/":  "http://10.0.0.2:11434",
		"https://proxy.example/o": "https://proxy.example/o",
	} {
		got, err := ParseHost(in)
		if err != nil || got != want {
			t.Errorf("ParseHost(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	if _, err := ParseHost("ftp://x"); err == nil {
		t.Error("ParseHost(ftp://x) = nil error")
	}
}

// FuzzChatStream feeds arbitrary bytes as the /api/chat NDJSON body
// through the chat path: the line reader (4096-byte cap), the decoding
// into api.ChatResponse and the assembly of the answer.
func FuzzChatStream(f *testing.F) {
	f.Add([]byte(`{"message":{"role":"assistant","content":"hi"},"done":false}` + "\n" + `{"message":{"role":"assistant","content":""},"done":true,"done_reason":"stop","eval_count":3}` + "\n"))
	f.Add([]byte(`{"message":{"tool_calls":[{"id":"call_1","function":{"index":0,"name":"f","arguments":{"a":[1,{"b":null}]}}}]},"done":false}` + "\n"))
	f.Add([]byte(`{"error":"an error was encountered while running the model"}` + "\n"))
	f.Add([]byte("not json\n\n{}\n"))
	f.Add([]byte("\r\n" + `{"message":{"content":"a"}}` + "\r\n" + `{"done":true}` + "\r\nignored after done"))
	f.Add([]byte(`{"message":{"content":"` + strings.Repeat("x", 5000) + `"}}` + "\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := New(Config{MaxLineBytes: 4096, Retry: retry.Policy{MaxAttempts: 1},
			HTTPClient: &http.Client{Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
				return &http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {"application/x-ndjson"}},
					Body: io.NopCloser(bytes.NewReader(data)), Request: r}, nil
			})}})
		if err != nil {
			t.Fatal(err)
		}
		m := &Model{p: p, info: providers.ModelInfo{Name: "m", Window: 4096}}
		resp, err := m.Stream(context.Background(), &providers.Request{Messages: []providers.Message{{Role: providers.RoleUser, Content: "x"}}}, nil)
		if err == nil {
			// Success needs a done member (json matches keys case-insensitively
			// and unescapes them).
			if l := bytes.ToLower(data); !bytes.Contains(l, []byte("done")) && !bytes.Contains(l, []byte(`\u`)) {
				t.Fatalf("Stream() succeeded on a body without a done line")
			}
			for _, tc := range resp.ToolCalls {
				if !json.Valid(tc.Arguments) {
					t.Fatalf("tool call arguments %q are not JSON", tc.Arguments)
				}
			}
			return
		}
		var pe *providers.Error
		if !errors.As(err, &pe) {
			t.Fatalf("error %v is not a *providers.Error", err)
		}
	})
}

// BenchmarkStream100Deltas measures decoding and dispatch of 100 streamed
// deltas from the fake on loopback (the fake's own work included).
func BenchmarkStream100Deltas(b *testing.B) {
	text := make([]string, 100)
	for i := range text {
		text[i] = "token" + strconv.Itoa(i) + " "
	}
	s := fake.StartServer(b, fake.Options{Flavor: fake.FlavorOllama, Script: []fake.Scenario{{Text: text}}})
	p := newProvider(b, Config{BaseURL: s.URL()})
	m, err := p.Model(context.Background(), "qwen3:8b")
	if err != nil {
		b.Fatal(err)
	}
	req := &providers.Request{Messages: []providers.Message{{Role: providers.RoleUser, Content: "go"}}}
	b.ReportAllocs()
	for b.Loop() {
		n := 0
		if _, err := m.Stream(context.Background(), req, func(providers.Delta) { n++ }); err != nil {
			b.Fatal(err)
		}
		if n != 100 {
			b.Fatalf("deltas = %d, want 100", n)
		}
	}
}

func TestBuildChatFillsToolName(t *testing.T) {
	chat, err := buildChat(providers.ModelInfo{Name: "m", Window: 4096}, &providers.Request{Messages: []providers.Message{
		{Role: providers.RoleAssistant, ToolCalls: []providers.ToolCall{{ID: "lemo-7", Name: "get_time", Arguments: json.RawMessage(`{"b":1,"a":2}`)}}},
		{Role: providers.RoleTool, ToolCallID: "lemo-7", Content: "10:00"},
	}})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(chat)
	for _, want := range []string{`"tool_name":"get_time"`, `"tool_call_id":"lemo-7"`, `"arguments":{"b":1,"a":2}`, `"options":{"num_ctx":4096}`} {
		if !strings.Contains(string(b), want) {
			t.Errorf("request %s lacks %s", b, want)
		}
	}
	if _, err := buildChat(providers.ModelInfo{}, &providers.Request{Messages: []providers.Message{
		{Role: providers.RoleAssistant, ToolCalls: []providers.ToolCall{{ID: "x", Name: "f", Arguments: json.RawMessage(`[1]`)}}}}}); err == nil {
		t.Error("buildChat(non-object arguments) = nil error")
	}
}

// BenchmarkDecode100Deltas runs 100 NDJSON deltas from memory through the
// chat path (no network), to separate decoding from loopback I/O.
// api.Client.Chat, used before, allocated an 8 MB line buffer per call.
func BenchmarkDecode100Deltas(b *testing.B) {
	var body []byte
	for i := range 100 {
		body = append(body, `{"model":"m","created_at":"2026-01-01T00:00:00Z","message":{"role":"assistant","content":"token`+strconv.Itoa(i)+` "},"done":false}`+"\n"...)
	}
	body = append(body, `{"model":"m","created_at":"2026-01-01T00:00:00Z","message":{"role":"assistant","content":""},"done":true,"done_reason":"stop","prompt_eval_count":1,"eval_count":100}`+"\n"...)
	p, err := New(Config{HTTPClient: &http.Client{Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
		return &http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {"application/x-ndjson"}},
			Body: io.NopCloser(bytes.NewReader(body)), Request: r}, nil
	})}})
	if err != nil {
		b.Fatal(err)
	}
	m := &Model{p: p, info: providers.ModelInfo{Name: "m", Window: 4096}}
	req := &providers.Request{Messages: []providers.Message{{Role: providers.RoleUser, Content: "go"}}}
	b.ReportAllocs()
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		n := 0
		if _, err := m.Stream(context.Background(), req, func(providers.Delta) { n++ }); err != nil || n != 100 {
			b.Fatalf("Stream() = %v, %d deltas", err, n)
		}
	}
}

func TestAnswerSizeIsBounded(t *testing.T) {
	pr, pw := io.Pipe()
	go func() {
		line := []byte(`{"model":"m","message":{"role":"assistant","content":"` + strings.Repeat("x", 64<<10) + `"},"done":false}` + "\n")
		for {
			if _, err := pw.Write(line); err != nil {
				return
			}
		}
	}()
	defer pr.Close()
	p, err := New(Config{Retry: retry.Policy{MaxAttempts: 1}, HTTPClient: &http.Client{Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
		return &http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {"application/x-ndjson"}}, Body: pr, Request: r}, nil
	})}})
	if err != nil {
		t.Fatal(err)
	}
	p.maxResponse = 1 << 20
	m := &Model{p: p, info: providers.ModelInfo{Name: "m", Window: 4096}}
	_, err = m.Stream(context.Background(), &providers.Request{Messages: []providers.Message{{Role: providers.RoleUser, Content: "x"}}}, nil)
	if !errors.Is(err, errResponseTooLarge) || !errors.Is(err, providers.ErrTruncated) {
		t.Fatalf("Stream(endless) = %v, want errResponseTooLarge", err)
	}
}

// A Task's budget caps the answer with num_predict; none without it.
func TestBuildChatNumPredict(t *testing.T) {
	for _, tc := range []struct {
		max  int
		want string
	}{{300, `"options":{"num_ctx":4096,"num_predict":300}`}, {0, `"options":{"num_ctx":4096}`}} {
		chat, err := buildChat(providers.ModelInfo{Name: "m", Window: 4096}, &providers.Request{MaxOutputTokens: tc.max})
		if err != nil {
			t.Fatal(err)
		}
		if b, _ := json.Marshal(chat); !strings.Contains(string(b), tc.want) {
			t.Errorf("MaxOutputTokens %d: request %s lacks %s", tc.max, b, tc.want)
		}
	}
}
