package openai

import (
	"context"
	"strings"
	"testing"
	"time"

	"lemo/providers"
	"lemo/providers/fake"
	"lemo/providers/retry"
)

func TestConformance(t *testing.T) {
	fake.RunConformance(t, fake.Conformance{Flavor: fake.FlavorOpenAI, Model: "local-model",
		New: func(t testing.TB, p fake.ProviderParams) providers.Provider {
			prov, err := New(Config{BaseURL: p.BaseURL, APIKey: p.APIKey, Models: p.Models, CacheTTL: -1, IdleTimeout: p.IdleTimeout,
				Retry: retry.Policy{BaseDelay: time.Millisecond, MaxDelay: 2 * time.Millisecond, MaxRetryAfter: time.Second}})
			if err != nil {
				t.Fatal(err)
			}
			return prov
		}})
}

func TestNew(t *testing.T) {
	if _, err := New(Config{}); err == nil || !strings.Contains(err.Error(), "Config.BaseURL") {
		t.Fatalf("New() = %v, want an error naming Config.BaseURL", err)
	}
	p, err := New(Config{Name: "vllm", BaseURL: "http://127.0.0.1:8000/v1"})
	if err != nil || p.Name() != "vllm" {
		t.Fatalf("New() = %v, %v", p, err)
	}
}

func TestStreamUsageOption(t *testing.T) {
	s := fake.StartServer(t, fake.Options{Flavor: fake.FlavorOpenAI})
	for _, off := range []bool{false, true} {
		p, err := New(Config{BaseURL: s.URL(), NoStreamUsage: off})
		if err != nil {
			t.Fatal(err)
		}
		m, err := p.Model(context.Background(), "local-model")
		if err != nil {
			t.Fatal(err)
		}
		resp, err := m.Stream(context.Background(), &providers.Request{Messages: []providers.Message{{Role: providers.RoleUser, Content: "x"}}}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if got := resp.Usage.PromptTokens > 0; got == off {
			t.Fatalf("NoStreamUsage=%v: usage = %+v", off, resp.Usage)
		}
	}
}
