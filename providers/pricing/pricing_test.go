package pricing_test

import (
	"context"
	"testing"

	"go.uber.org/goleak"

	"lemo/api"
	"lemo/providers"
	"lemo/providers/fake"
	"lemo/providers/openrouter"
	"lemo/providers/pricing"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// Prices come from the provider's published list (OpenRouter, here its
// HTTP fake), else the table, else a free provider; else none is known.
func TestPrice(t *testing.T) {
	s := fake.StartServer(t, fake.Options{Flavor: fake.FlavorOpenRouter})
	or, err := openrouter.New(openrouter.Config{BaseURL: s.URL(), APIKey: "k", CacheTTL: -1})
	if err != nil {
		t.Fatal(err)
	}
	reg := providers.NewRegistry()
	if err := reg.Register(or); err != nil {
		t.Fatal(err)
	}
	if err := reg.Register(fake.NewScripted("local", fake.NewScriptedModel("m", 8192, fake.Echo()))); err != nil {
		t.Fatal(err)
	}
	if err := reg.Register(fake.NewScripted("zen", fake.NewScriptedModel("glm-5", 8192, fake.Echo()), fake.NewScriptedModel("other", 8192, fake.Echo()))); err != nil {
		t.Fatal(err)
	}
	p := pricing.New(reg, map[string]providers.Price{
		"zen/glm-5": {Input: 0.6, Output: 2.2, CachedInput: 0.11},
		// The provider's published price wins over the table.
		"openrouter/openai/gpt-4o": {Input: 99, Output: 99},
	}, []string{"local"})
	for _, tc := range []struct {
		model string
		want  *api.Price
	}{
		{"openrouter/openai/gpt-4o", &api.Price{Known: true, Source: "provider", InputNanoUsd: 2_500_000_000, OutputNanoUsd: 10_000_000_000, CachedInputNanoUsd: 1_250_000_000}},
		{"openrouter/deepseek/deepseek-r1:free", &api.Price{Known: true, Source: "provider"}},
		{"openrouter/mystery/null-context", &api.Price{}},
		{"zen/glm-5", &api.Price{Known: true, Source: "config", InputNanoUsd: 600_000_000, OutputNanoUsd: 2_200_000_000, CachedInputNanoUsd: 110_000_000}},
		{"zen/other", &api.Price{}},
		{"local/m", &api.Price{Known: true, Source: "free"}},
	} {
		got, err := p.Price(context.Background(), tc.model)
		if err != nil {
			t.Errorf("%s: %v", tc.model, err)
			continue
		}
		if got.GetKnown() != tc.want.GetKnown() || got.GetSource() != tc.want.GetSource() || got.GetInputNanoUsd() != tc.want.GetInputNanoUsd() ||
			got.GetOutputNanoUsd() != tc.want.GetOutputNanoUsd() || got.GetCachedInputNanoUsd() != tc.want.GetCachedInputNanoUsd() {
			t.Errorf("%s: price %v, want %v", tc.model, got, tc.want)
		}
	}
	// A model the registry does not know: the error says so, unless the
	// table prices it.
	if got, err := p.Price(context.Background(), "nope/x"); err == nil || got.GetKnown() {
		t.Errorf("Price(nope/x) = %v, %v; want an error and no price", got, err)
	}
}
