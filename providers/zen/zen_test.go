package zen

import (
	"context"
	"errors"
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
	cfg.CacheTTL = -1
	p, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestConformance(t *testing.T) {
	fake.RunConformance(t, fake.Conformance{Flavor: fake.FlavorZen, Model: "glm-5",
		New: func(t testing.TB, p fake.ProviderParams) providers.Provider {
			return newProvider(t, Config{BaseURL: p.BaseURL, APIKey: p.APIKey, Models: p.Models, IdleTimeout: p.IdleTimeout})
		}})
}

func TestDiscoveryTableAndProtocolFilter(t *testing.T) {
	s := fake.StartServer(t, fake.Options{Flavor: fake.FlavorZen})
	p := newProvider(t, Config{BaseURL: s.URL()})
	ms, err := p.Models(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]providers.ModelInfo{}
	for _, m := range ms {
		got[m.Name] = m
	}
	for _, other := range []string{"claude-sonnet-4-5", "gpt-5.1", "gemini-3-pro"} {
		if _, ok := got[other]; ok {
			t.Errorf("%s listed; it needs another protocol", other)
		}
		if _, err := p.Model(context.Background(), other); providers.ClassOf(err) != providers.ClassModelNotFound {
			t.Errorf("Model(%s) = %v, want model_not_found", other, err)
		}
	}
	if g := got["kimi-k2.5"]; g.Window != 262144 || !g.Tools || !g.Reasoning {
		t.Errorf("kimi-k2.5 = %+v, want the table entry", g)
	}
	if g := got["acme-unknown"]; g.Window != 0 || !g.Tools {
		t.Errorf("acme-unknown = %+v, want unknown window, tools", g)
	}
}

func TestFreeModelWithoutKeyAndCostFrame(t *testing.T) {
	s := fake.StartServer(t, fake.Options{Flavor: fake.FlavorZen, APIKey: "secret", Script: []fake.Scenario{{Reasoning: []string{"r"}, Text: []string{"free"}}}})
	p := newProvider(t, Config{BaseURL: s.URL()})
	m, err := p.Model(context.Background(), "big-pickle")
	if err != nil {
		t.Fatal(err)
	}
	resp, err := m.Stream(context.Background(), &providers.Request{Messages: []providers.Message{{Role: providers.RoleUser, Content: "x"}}}, nil)
	if err != nil || resp.Text != "free" || resp.Reasoning != "r" || resp.Usage.PromptTokens == 0 {
		t.Fatalf("Stream() = %+v, %v", resp, err)
	}
	if h := s.ChatRequests()[0].Header.Get("Authorization"); h != "" {
		t.Fatalf("Authorization = %q, want none without a key", h)
	}
	m, _ = p.Model(context.Background(), "glm-5")
	_, err = m.Stream(context.Background(), &providers.Request{Messages: []providers.Message{{Role: providers.RoleUser, Content: "x"}}}, nil)
	if providers.ClassOf(err) != providers.ClassAuth {
		t.Fatalf("paid model without key = %v, want auth", err)
	}
}

func TestErrors(t *testing.T) {
	cases := []struct {
		name       string
		sc         fake.Scenario
		want       providers.Class
		retryAfter time.Duration
	}{
		{"auth", fake.Scenario{Status: 401}, providers.ClassAuth, 0},
		{"model", fake.Scenario{Status: 401, Body: `{"type":"error","error":{"type":"ModelError","message":"Model format not supported"}}`}, providers.ClassModelNotFound, 0},
		{"credits", fake.Scenario{Status: 401, Body: `{"type":"error","error":{"type":"CreditsError","message":"No credits"}}`}, providers.ClassQuota, 0},
		{"monthly", fake.Scenario{Status: 401, Body: `{"type":"error","error":{"type":"MonthlyLimitError","message":"Monthly limit"}}`}, providers.ClassQuota, 0},
		{"rate with header", fake.Scenario{Status: 429, Headers: map[string]string{"Retry-After": "12"}}, providers.ClassRateLimit, 12 * time.Second},
		{"rate without header", fake.Scenario{Status: 429}, providers.ClassRateLimit, 0},
		{"free usage", fake.Scenario{Status: 429, Body: `{"type":"error","error":{"type":"FreeUsageLimitError","message":"Free usage exceeded"},"metadata":{}}`}, providers.ClassQuota, 0},
		{"region", fake.Scenario{Status: 403}, providers.ClassAuth, 0},
		{"internal", fake.Scenario{Status: 500}, providers.ClassTransient, 0},
		{"upstream 404 as 400", fake.Scenario{Status: 400, Body: `{"error":{"message":"Error from provider (Moonshot): model does not exist"}}`}, providers.ClassModelNotFound, 0},
		{"upstream 400", fake.Scenario{Status: 400, Body: `{"error":{"message":"Error from provider (X): invalid tool schema"}}`}, providers.ClassBadRequest, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := fake.StartServer(t, fake.Options{Flavor: fake.FlavorZen, Script: []fake.Scenario{c.sc}})
			p := newProvider(t, Config{BaseURL: s.URL(), APIKey: "k", Retry: retry.Policy{MaxAttempts: 1}})
			m, _ := p.Model(context.Background(), "glm-5")
			_, err := m.Stream(context.Background(), &providers.Request{Messages: []providers.Message{{Role: providers.RoleUser, Content: "x"}}}, nil)
			var pe *providers.Error
			if !errors.As(err, &pe) || pe.Class != c.want || pe.Status != c.sc.Status || pe.RetryAfter != c.retryAfter {
				t.Fatalf("Stream() = %v, want class %v status %d RetryAfter %v", err, c.want, c.sc.Status, c.retryAfter)
			}
		})
	}
}
