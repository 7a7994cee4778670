// Package pricing finds the price of a model for budgets: what its
// provider publishes (OpenRouter's model list carries per-token prices),
// else the daemon's pricing table (config "pricing"), else zero for the
// providers configured as free (a local Ollama).
//
// Lifecycle:
//  1. cmd/lemo builds a Pricer from the provider registry, the table and
//     the free providers.
//  2. The daemon calls Price when a Task is created or switches model and
//     records the answer in the Task's history, so a restart needs no
//     provider to know what the Task's Cycles cost.
//
// Example:
//
//	p := pricing.New(reg, map[string]providers.Price{"zen/glm-5": {Input: 0.6, Output: 2.2}}, []string{"ollama"})
//	price, err := p.Price(ctx, "openrouter/openai/gpt-4o")
package pricing

import (
	"context"
	"strings"

	"lemo/api"
	"lemo/providers"
)

// Models finds a model by id (a *providers.Registry).
type Models interface {
	Model(ctx context.Context, id string) (providers.Model, error)
}

// Pricer resolves prices. It is safe for concurrent use.
type Pricer struct {
	models Models
	table  map[string]providers.Price
	free   map[string]bool
}

// New returns a Pricer over models (nil: no published prices), the table
// (model id → price in USD per million tokens) and the providers whose
// models cost nothing.
func New(models Models, table map[string]providers.Price, free []string) *Pricer {
	p := &Pricer{models: models, table: make(map[string]providers.Price, len(table)), free: make(map[string]bool, len(free))}
	for k, v := range table {
		p.table[k] = v
	}
	for _, f := range free {
		p.free[f] = true
	}
	return p
}

// Price returns the price of model ("provider/model"): the provider's
// published price, else the table's, else zero from a free provider, else
// a price with known false. An error only when the provider could not be
// asked and no other price applies.
func (p *Pricer) Price(ctx context.Context, model string) (*api.Price, error) {
	var askErr error
	if p.models != nil {
		m, err := p.models.Model(ctx, model)
		switch {
		case err != nil:
			askErr = err
		case m.Info().Price != nil:
			return convert(*m.Info().Price, "provider"), nil
		}
	}
	if pr, ok := p.table[model]; ok {
		return convert(pr, "config"), nil
	}
	provider, _, _ := strings.Cut(model, "/")
	if p.free[provider] {
		return &api.Price{Known: true, Source: "free"}, nil
	}
	if askErr != nil {
		return &api.Price{}, askErr
	}
	return &api.Price{}, nil
}

func convert(pr providers.Price, source string) *api.Price {
	return &api.Price{Known: true, Source: source, InputNanoUsd: api.PerMillion(pr.Input), OutputNanoUsd: api.PerMillion(pr.Output), CachedInputNanoUsd: api.PerMillion(pr.CachedInput)}
}
