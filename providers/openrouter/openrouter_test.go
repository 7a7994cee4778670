package openrouter

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
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
	if cfg.CacheTTL == 0 {
		cfg.CacheTTL = -1
	}
	p, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestConformance(t *testing.T) {
	fake.RunConformance(t, fake.Conformance{Flavor: fake.FlavorOpenRouter, Model: "anthropic/claude-sonnet-4.5",
		New: func(t testing.TB, p fake.ProviderParams) providers.Provider {
			return newProvider(t, Config{BaseURL: p.BaseURL, APIKey: p.APIKey, Models: p.Models, IdleTimeout: p.IdleTimeout})
		}})
}

func TestNew(t *testing.T) {
	_, err := New(Config{ReasoningEffort: "huge", BaseURL: "nope"})
	for _, want := range []string{"Config.APIKey", "OPENROUTER_API_KEY", "Config.ReasoningEffort", "Config.BaseURL"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("New() error %v does not name %s", err, want)
		}
	}
	p, err := New(Config{APIKey: "k"})
	if err != nil || p.Name() != "openrouter" {
		t.Fatalf("New() = %v, %v; want name openrouter", p, err)
	}
}

func TestDiscovery(t *testing.T) {
	s := fake.StartServer(t, fake.Options{Flavor: fake.FlavorOpenRouter})
	p := newProvider(t, Config{BaseURL: s.URL(), APIKey: "k"})
	ms, err := p.Models(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]providers.ModelInfo{}
	for _, m := range ms {
		got[m.Name] = m
	}
	for name, want := range map[string]providers.ModelInfo{
		"openai/gpt-4o":                          {Window: 128000, Tools: true},
		"anthropic/claude-sonnet-4.5":            {Window: 200000, Tools: true, Reasoning: true}, // top_provider wins
		"deepseek/deepseek-r1:free":              {Window: 163840, Reasoning: true},              // no top_provider window
		"meta-llama/llama-3.3-70b-instruct:free": {Window: 65536, Tools: true},
		"mystery/null-context":                   {Window: 0},
	} {
		g, ok := got[name]
		if !ok || g.Window != want.Window || g.Tools != want.Tools || g.Reasoning != want.Reasoning || g.ID != "openrouter/"+name {
			t.Errorf("model %s = %+v (found %v), want %+v", name, g, ok, want)
		}
	}
	// A variant suffix resolves through its base model.
	m, err := p.Model(context.Background(), "openai/gpt-4o:nitro")
	if err != nil || m.Info().Window != 128000 || m.Info().Name != "openai/gpt-4o:nitro" {
		t.Fatalf("Model(variant) = %+v, %v", m, err)
	}
}

// TestReasoningDetailsEchoed checks the tool loop carries reasoning_details
// back unchanged, and the request asks for reasoning and attribution.
func TestReasoningDetailsEchoed(t *testing.T) {
	s := fake.StartServer(t, fake.Options{Flavor: fake.FlavorOpenRouter, APIKey: "k", Script: []fake.Scenario{
		{Match: "go", Reasoning: []string{"Plan: ", "call it."}, ToolCalls: []fake.Call{{Name: "f", Arguments: `{"a":1}`}}},
		{AfterTool: true, Text: []string{"done"}},
	}})
	p := newProvider(t, Config{BaseURL: s.URL(), APIKey: "k", ReasoningEffort: "high", Referer: "https://lemo.example", Title: "Lemo"})
	m, err := p.Model(context.Background(), "anthropic/claude-sonnet-4.5")
	if err != nil {
		t.Fatal(err)
	}
	req := &providers.Request{Think: true, Messages: []providers.Message{{Role: providers.RoleUser, Content: "go"}},
		Tools: []providers.ToolSpec{{Name: "f", Parameters: json.RawMessage(`{"type":"object"}`)}}}
	resp, err := m.Stream(context.Background(), req, nil)
	if err != nil {
		t.Fatal(err)
	}
	if resp.Reasoning != "Plan: call it." || len(resp.ProviderMetadata) == 0 {
		t.Fatalf("Response = %+v, want reasoning and metadata", resp)
	}
	var md struct {
		ReasoningDetails json.RawMessage `json:"reasoning_details"`
	}
	if err := json.Unmarshal(resp.ProviderMetadata, &md); err != nil {
		t.Fatal(err)
	}
	req.Messages = append(req.Messages,
		providers.Message{Role: providers.RoleAssistant, ProviderMetadata: resp.ProviderMetadata,
			ToolCalls: []providers.ToolCall{{ID: "lemo-1", Name: "f", Arguments: resp.ToolCalls[0].Arguments}}},
		providers.Message{Role: providers.RoleTool, ToolCallID: "lemo-1", Content: "ok"})
	if _, err := m.Stream(context.Background(), req, nil); err != nil {
		t.Fatal(err)
	}
	reqs := s.ChatRequests()
	first, second := reqs[0], reqs[1]
	var body struct {
		Reasoning map[string]any `json:"reasoning"`
		Messages  []struct {
			ReasoningDetails json.RawMessage `json:"reasoning_details"`
			Content          *string         `json:"content"`
		} `json:"messages"`
		ToolChoice string `json:"tool_choice"`
	}
	if err := json.Unmarshal(second.Body, &body); err != nil {
		t.Fatal(err)
	}
	if body.Reasoning["effort"] != "high" || body.ToolChoice != "auto" {
		t.Fatalf("reasoning, tool_choice = %v, %q; want effort high, auto", body.Reasoning, body.ToolChoice)
	}
	asst := body.Messages[1]
	if string(asst.ReasoningDetails) != string(md.ReasoningDetails) || asst.Content != nil {
		t.Fatalf("assistant reasoning_details = %s content %v, want %s unchanged and null content", asst.ReasoningDetails, asst.Content, md.ReasoningDetails)
	}
	if !strings.Contains(string(md.ReasoningDetails), `"reasoning.encrypted"`) {
		t.Fatalf("reasoning_details %s lost the encrypted item", md.ReasoningDetails)
	}
	if first.Header.Get("HTTP-Referer") != "https://lemo.example" || first.Header.Get("X-Title") != "Lemo" || first.Header.Get("Authorization") != "Bearer k" {
		t.Fatalf("headers = %v", first.Header)
	}
}

func TestKeepAlivesAndMidStreamStringCode(t *testing.T) {
	s := fake.StartServer(t, fake.Options{Flavor: fake.FlavorOpenRouter, Script: []fake.Scenario{
		{Match: "ka", KeepAlives: 20, Text: []string{"a", "b"}},
		{Match: "mid", Text: []string{"x"}, MidStreamError: `{"id":"gen-1","provider":"P","error":{"code":"server_error","message":"Provider disconnected unexpectedly"},"choices":[{"index":0,"delta":{"content":""},"finish_reason":"error"}]}`},
	}})
	p := newProvider(t, Config{BaseURL: s.URL(), APIKey: "k"})
	m, _ := p.Model(context.Background(), "openai/gpt-4o")
	resp, err := m.Stream(context.Background(), &providers.Request{Messages: []providers.Message{{Role: providers.RoleUser, Content: "ka"}}}, nil)
	if err != nil || resp.Text != "ab" {
		t.Fatalf("keep-alives: %+v, %v", resp, err)
	}
	_, err = m.Stream(context.Background(), &providers.Request{Messages: []providers.Message{{Role: providers.RoleUser, Content: "mid"}}}, nil)
	if !errors.Is(err, providers.ErrTruncated) || !strings.Contains(err.Error(), "Provider disconnected") {
		t.Fatalf("mid-stream: %v", err)
	}
}

// TestErrors maps OpenRouter's statuses and bodies.
func TestErrors(t *testing.T) {
	cases := []struct {
		sc         fake.Scenario
		want       providers.Class
		retryAfter time.Duration
	}{
		{fake.Scenario{Status: 400}, providers.ClassModelNotFound, 0},
		{fake.Scenario{Status: 400, Body: `{"error":{"message":"x is not a valid model ID","error_type":"invalid_request","http_status":400,"availability":{"code":"model_not_found","retryable":false}}}`}, providers.ClassModelNotFound, 0},
		{fake.Scenario{Status: 401}, providers.ClassAuth, 0},
		{fake.Scenario{Status: 402, Message: "Insufficient credits"}, providers.ClassQuota, 0},
		{fake.Scenario{Status: 403, Body: `{"error":{"code":403,"message":"Input flagged","metadata":{"reasons":["harassment"],"flagged_input":"..."}}}`}, providers.ClassBadRequest, 0},
		{fake.Scenario{Status: 404, Message: "No endpoints found that support tool use"}, providers.ClassModelNotFound, 0},
		{fake.Scenario{Status: 408}, providers.ClassTransient, 0},
		{fake.Scenario{Status: 429, Headers: map[string]string{"Retry-After": "40", "X-RateLimit-Limit": "20", "X-RateLimit-Remaining": "0"}}, providers.ClassRateLimit, 40 * time.Second},
		{fake.Scenario{Status: 502}, providers.ClassTransient, 0},
		{fake.Scenario{Status: 503, Headers: map[string]string{"Retry-After": "60"}}, providers.ClassTransient, time.Minute},
	}
	for _, c := range cases {
		t.Run(http.StatusText(c.sc.Status), func(t *testing.T) {
			s := fake.StartServer(t, fake.Options{Flavor: fake.FlavorOpenRouter, Script: []fake.Scenario{c.sc}})
			p := newProvider(t, Config{BaseURL: s.URL(), APIKey: "k", Retry: retry.Policy{MaxAttempts: 1}})
			m, _ := p.Model(context.Background(), "openai/gpt-4o")
			_, err := m.Stream(context.Background(), &providers.Request{Messages: []providers.Message{{Role: providers.RoleUser, Content: "x"}}}, nil)
			var pe *providers.Error
			if !errors.As(err, &pe) || pe.Class != c.want || pe.Status != c.sc.Status || pe.RetryAfter != c.retryAfter {
				t.Fatalf("Stream() = %#v, want class %v status %d RetryAfter %v", err, c.want, c.sc.Status, c.retryAfter)
			}
		})
	}
}

func TestAllowListedVariant(t *testing.T) {
	s := fake.StartServer(t, fake.Options{Flavor: fake.FlavorOpenRouter})
	p := newProvider(t, Config{BaseURL: s.URL(), APIKey: "k", Models: []string{"openai/gpt-4o:nitro"}})
	if _, err := p.Model(context.Background(), "openai/gpt-4o:nitro"); err != nil {
		t.Fatalf("Model(allow-listed variant) = %v", err)
	}
	if _, err := p.Model(context.Background(), "openai/gpt-4o"); providers.ClassOf(err) != providers.ClassModelNotFound {
		t.Fatalf("Model(base outside the allow-list) = %v, want model_not_found", err)
	}
	ms, err := p.Models(context.Background())
	if err != nil || len(ms) != 0 {
		t.Fatalf("Models() = %v, %v; want none (the variant is not listed)", ms, err)
	}
}

// Discovery reads OpenRouter's published per-token prices as dollars per
// million tokens; a free model costs 0; a variable price ("-1") is no
// price.
func TestDiscoveryPrices(t *testing.T) {
	s := fake.StartServer(t, fake.Options{Flavor: fake.FlavorOpenRouter})
	p := newProvider(t, Config{BaseURL: s.URL(), APIKey: "k"})
	ms, err := p.Models(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]providers.ModelInfo{}
	for _, m := range ms {
		byName[m.Name] = m
	}
	near := func(a, b float64) bool { return a-b < 1e-9 && b-a < 1e-9 }
	for _, tc := range []struct {
		name            string
		in, out, cached float64
		none            bool
	}{
		{name: "openai/gpt-4o", in: 2.5, out: 10, cached: 1.25},
		{name: "anthropic/claude-sonnet-4.5", in: 3, out: 15, cached: 0.3},
		{name: "deepseek/deepseek-r1:free"},
		{name: "mystery/null-context", none: true},
	} {
		pr := byName[tc.name].Price
		switch {
		case tc.none && pr != nil:
			t.Errorf("%s: price %+v, want none (variable)", tc.name, *pr)
		case tc.none:
		case pr == nil:
			t.Errorf("%s: no price, want %v/%v/%v", tc.name, tc.in, tc.out, tc.cached)
		case !near(pr.Input, tc.in) || !near(pr.Output, tc.out) || !near(pr.CachedInput, tc.cached):
			t.Errorf("%s: price %+v, want %v/%v/%v", tc.name, *pr, tc.in, tc.out, tc.cached)
		}
	}
	m, err := p.Model(context.Background(), "openai/gpt-4o")
	if err != nil || m.Info().Price == nil {
		t.Fatalf("Model(openai/gpt-4o) = %v, %v; want its price", m, err)
	}
}
