package nvidia

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"lemo/providers"
	"lemo/providers/fake"
	"lemo/providers/openaicompat"
	"lemo/providers/retry"
)

var fastRetry = retry.Policy{MaxAttempts: 3, BaseDelay: time.Millisecond, MaxDelay: 2 * time.Millisecond, MaxRetryAfter: time.Second}

func newProvider(t testing.TB, cfg Config) *Provider {
	t.Helper()
	if cfg.Retry == (retry.Policy{}) {
		cfg.Retry = fastRetry
	}
	cfg.CacheTTL = -1
	p, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestConformance(t *testing.T) {
	fake.RunConformance(t, fake.Conformance{Flavor: fake.FlavorNVIDIA, Model: "meta/llama-3.3-70b-instruct",
		New: func(t testing.TB, p fake.ProviderParams) providers.Provider {
			return newProvider(t, Config{BaseURL: p.BaseURL, APIKey: p.APIKey, Models: p.Models, IdleTimeout: p.IdleTimeout})
		}})
}

func TestNewRequiresKey(t *testing.T) {
	_, err := New(Config{})
	if err == nil || !strings.Contains(err.Error(), "Config.APIKey") || !strings.Contains(err.Error(), EnvAPIKey) {
		t.Fatalf("New() = %v, want an error naming Config.APIKey and %s", err, EnvAPIKey)
	}
}

func TestDiscoveryUsesTable(t *testing.T) {
	s := fake.StartServer(t, fake.Options{Flavor: fake.FlavorNVIDIA})
	p := newProvider(t, Config{BaseURL: s.URL(), APIKey: "k", Known: map[string]openaicompat.KnownModel{"acme/unknown-chat": {Window: 8192, Tools: true}}})
	ms, err := p.Models(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]providers.ModelInfo{}
	for _, m := range ms {
		if _, dup := got[m.Name]; dup {
			t.Fatalf("duplicate model %s", m.Name)
		}
		got[m.Name] = m
	}
	for name, want := range map[string]providers.ModelInfo{
		"meta/llama-3.3-70b-instruct":          {Window: 131072, Tools: true},
		"deepseek-ai/deepseek-v3.1":            {Window: 131072, Tools: true, Reasoning: true},
		"nvidia/nv-embedqa-mistral-7b-v2":      {Window: 0}, // unknown
		"nvidia/llama-3.1-nemotron-70b-reward": {Window: 0},
		"acme/unknown-chat":                    {Window: 8192, Tools: true}, // Config.Known
	} {
		g := got[name]
		if g.Window != want.Window || g.Tools != want.Tools || g.Reasoning != want.Reasoning {
			t.Errorf("%s = %+v, want %+v", name, g, want)
		}
	}
}

func TestRequestAsksForUsageAndThinking(t *testing.T) {
	s := fake.StartServer(t, fake.Options{Flavor: fake.FlavorNVIDIA, Script: []fake.Scenario{{Reasoning: []string{"hm"}, Text: []string{"ok"}, Usage: &fake.Usage{Prompt: 36, Completion: 3}}}})
	p := newProvider(t, Config{BaseURL: s.URL(), APIKey: "k"})
	m, _ := p.Model(context.Background(), "deepseek-ai/deepseek-v3.1")
	resp, err := m.Stream(context.Background(), &providers.Request{Think: true, Messages: []providers.Message{{Role: providers.RoleUser, Content: "x"}}}, nil)
	if err != nil || resp.Reasoning != "hm" || resp.Usage.PromptTokens != 36 {
		t.Fatalf("Stream() = %+v, %v; want reasoning_content and usage", resp, err)
	}
	body := s.ChatRequests()[0].JSON()
	so, _ := body["stream_options"].(map[string]any)
	kw, _ := body["chat_template_kwargs"].(map[string]any)
	if so["include_usage"] != true || kw["thinking"] != true {
		t.Fatalf("body = %v, want stream_options.include_usage and chat_template_kwargs.thinking", body)
	}
}

func TestErrors(t *testing.T) {
	cases := []struct {
		name string
		sc   fake.Scenario
		want providers.Class
	}{
		{"403 problem", fake.Scenario{Status: 403, Message: "Authorization failed"}, providers.ClassAuth},
		{"401", fake.Scenario{Status: 401}, providers.ClassAuth},
		{"404 text", fake.Scenario{Status: 404}, providers.ClassModelNotFound},
		{"404 function", fake.Scenario{Status: 404, Body: `{"detail":"Function not found for account"}`}, providers.ClassModelNotFound},
		{"429 no header", fake.Scenario{Status: 429}, providers.ClassRateLimit},
		{"400 overflow", fake.Scenario{Status: 400, Body: `{"object":"error","message":"This model's maximum context length is 16384 tokens. However, you requested 16448 tokens.","type":"BadRequestError","param":null,"code":400}`}, providers.ClassContextOverflow},
		{"500 decode", fake.Scenario{Status: 500, Body: "failed to decode json body: EOF", ContentType: "text/plain"}, providers.ClassBadRequest},
		{"502", fake.Scenario{Status: 502}, providers.ClassTransient},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := fake.StartServer(t, fake.Options{Flavor: fake.FlavorNVIDIA, Script: []fake.Scenario{c.sc}})
			p := newProvider(t, Config{BaseURL: s.URL(), APIKey: "k", Retry: retry.Policy{MaxAttempts: 1}})
			m, _ := p.Model(context.Background(), "meta/llama-3.3-70b-instruct")
			_, err := m.Stream(context.Background(), &providers.Request{Messages: []providers.Message{{Role: providers.RoleUser, Content: "x"}}}, nil)
			var pe *providers.Error
			if !errors.As(err, &pe) || pe.Class != c.want || pe.Status != c.sc.Status || pe.RetryAfter != 0 {
				t.Fatalf("Stream() = %v, want class %v status %d", err, c.want, c.sc.Status)
			}
		})
	}
}

func TestInlineThinkBlock(t *testing.T) {
	s := fake.StartServer(t, fake.Options{Flavor: fake.FlavorNVIDIA, Script: []fake.Scenario{{InlineThink: true, Reasoning: []string{"Okay, ", "so."}, Text: []string{"Answer."}}}})
	p := newProvider(t, Config{BaseURL: s.URL(), APIKey: "k"})
	m, _ := p.Model(context.Background(), "deepseek-ai/deepseek-r1")
	if m == nil {
		t.Fatal("deepseek-ai/deepseek-r1 not offered by the fake")
	}
	var kinds []providers.DeltaKind
	resp, err := m.Stream(context.Background(), &providers.Request{Messages: []providers.Message{{Role: providers.RoleUser, Content: "x"}}},
		func(d providers.Delta) { kinds = append(kinds, d.Kind) })
	if err != nil || resp.Reasoning != "Okay, so." || resp.Text != "Answer." {
		t.Fatalf("Stream() = %+v, %v; want the <think> block as reasoning", resp, err)
	}
	if kinds[0] != providers.DeltaReasoning || kinds[len(kinds)-1] != providers.DeltaText {
		t.Fatalf("delta kinds = %v", kinds)
	}
}
