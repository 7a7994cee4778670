package config

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"lemo/api"
)

// Budgets are the daemon-wide defaults of Task budgets: a Task that sets
// no limit in a dimension gets this one (0 or empty: no limit). Each
// Cycle reserves its estimated input plus OutputTokens before it starts.
type Budgets struct {
	MaxTokens    int64         `yaml:"max_tokens" env:"LEMO_BUDGETS_MAX_TOKENS" help:"default token budget of a Task (input and output tokens of its model calls); 0: no limit"`
	MaxCost      string        `yaml:"max_cost" env:"LEMO_BUDGETS_MAX_COST" help:"default cost budget of a Task in US dollars (0.50); empty: no limit; needs the model's price (provider or pricing.models)"`
	MaxTime      time.Duration `yaml:"max_time" env:"LEMO_BUDGETS_MAX_TIME" help:"default working-time budget of a Task (time it runs, not paused or waiting for approval); 0: no limit"`
	OutputTokens int           `yaml:"output_tokens" env:"LEMO_BUDGETS_OUTPUT_TOKENS" help:"output tokens each model call reserves, and its output cap when the Task has a token or cost budget"`
	// UnreportedToolTokens is charged for a delegate run without usage.
	UnreportedToolTokens int `yaml:"unreported_tool_tokens" env:"LEMO_BUDGETS_UNREPORTED_TOOL_TOKENS" help:"tokens charged, marked as an estimate, for a delegate agent's run that reported no usage (it failed or was stopped)"`
	// PerOwnerDay caps what each owner's Tasks spend together per UTC day.
	PerOwnerDay OwnerDay `yaml:"per_owner_day"`
}

// OwnerDay is each owner's daily budget: what the Cycles of its Tasks that
// start on one UTC day may spend together (0 or empty: no limit).
type OwnerDay struct {
	Tokens int64  `yaml:"tokens" env:"LEMO_BUDGETS_PER_OWNER_DAY_TOKENS" help:"daily token budget of each owner: tokens of all its Tasks' model calls on one UTC day (resets at UTC midnight; lemo budget --owner raises it for the day); 0: no limit"`
	Cost   string `yaml:"cost" env:"LEMO_BUDGETS_PER_OWNER_DAY_COST" help:"daily cost budget of each owner in US dollars (5.00), for all its Tasks on one UTC day; empty: no limit; needs the models' prices"`
}

// Pricing prices models for cost budgets where the provider publishes no
// price (OpenRouter publishes its prices).
type Pricing struct {
	Models []string `yaml:"models" env:"LEMO_PRICING_MODELS" help:"model prices: provider/model=INPUT:OUTPUT[:CACHED_INPUT] in US dollars per million tokens (zen/glm-5=0.6:2.2:0.11; comma-separated in the environment)"`
	Free   []string `yaml:"free" env:"LEMO_PRICING_FREE" help:"providers whose models cost nothing (a local Ollama, the demo models)"`
}

// ModelPrice is one parsed entry of pricing.models, in US dollars per
// million tokens.
type ModelPrice struct {
	Model                      string
	Input, Output, CachedInput float64
}

// ParseModelPrice parses "provider/model=INPUT:OUTPUT[:CACHED_INPUT]";
// the cached-input price defaults to the input price.
func ParseModelPrice(s string) (ModelPrice, error) {
	i := strings.LastIndex(s, "=")
	if i < 0 {
		return ModelPrice{}, fmt.Errorf("%q: want provider/model=INPUT:OUTPUT[:CACHED_INPUT] in US dollars per million tokens", s)
	}
	model, nums := strings.TrimSpace(s[:i]), strings.Split(s[i+1:], ":")
	if p, _, ok := strings.Cut(model, "/"); !ok || p == "" || strings.HasSuffix(model, "/") {
		return ModelPrice{}, fmt.Errorf("%q: model %q: want provider/model", s, model)
	}
	if len(nums) < 2 || len(nums) > 3 {
		return ModelPrice{}, fmt.Errorf("%q: want two or three prices INPUT:OUTPUT[:CACHED_INPUT] in US dollars per million tokens", s)
	}
	var v [3]float64
	for j, n := range nums {
		f, err := strconv.ParseFloat(strings.TrimSpace(n), 64)
		if err != nil || f < 0 || math.IsInf(f, 0) || math.IsNaN(f) {
			return ModelPrice{}, fmt.Errorf("%q: price %q: want a non-negative number of US dollars per million tokens", s, n)
		}
		v[j] = f
	}
	if len(nums) == 2 {
		v[2] = v[0]
	}
	return ModelPrice{Model: model, Input: v[0], Output: v[1], CachedInput: v[2]}, nil
}

// Parsed returns the prices by model; entries that do not parse are left
// out (Problems reports them).
func (p *Pricing) Parsed() map[string]ModelPrice {
	out := make(map[string]ModelPrice, len(p.Models))
	for _, s := range p.Models {
		if mp, err := ParseModelPrice(s); err == nil {
			out[mp.Model] = mp
		}
	}
	return out
}

// budgetProblems checks the budgets and pricing keys.
func (c *Config) budgetProblems() []error {
	var ps []error
	add := func(where, format string, args ...any) {
		ps = append(ps, Problem{Where: where, What: fmt.Sprintf(format, args...)})
	}
	b := c.Budgets
	if b.MaxTokens < 0 {
		add("budgets.max_tokens", "must not be negative (got %d; 0: no limit)", b.MaxTokens)
	}
	if b.MaxCost != "" {
		if _, err := api.ParseUSD(b.MaxCost); err != nil {
			add("budgets.max_cost", "%v", err)
		}
	}
	if b.MaxTime < 0 {
		add("budgets.max_time", "must not be negative (got %s; 0: no limit)", b.MaxTime)
	}
	if b.OutputTokens < 1 {
		add("budgets.output_tokens", "must be at least 1 (got %d)", b.OutputTokens)
	}
	if b.UnreportedToolTokens < 0 {
		add("budgets.unreported_tool_tokens", "must not be negative (got %d)", b.UnreportedToolTokens)
	}
	if b.PerOwnerDay.Tokens < 0 {
		add("budgets.per_owner_day.tokens", "must not be negative (got %d; 0: no limit)", b.PerOwnerDay.Tokens)
	}
	if b.PerOwnerDay.Cost != "" {
		if _, err := api.ParseUSD(b.PerOwnerDay.Cost); err != nil {
			add("budgets.per_owner_day.cost", "%v", err)
		}
	}
	seen := map[string]int{}
	for i, s := range c.Pricing.Models {
		where := fmt.Sprintf("pricing.models[%d]", i)
		mp, err := ParseModelPrice(s)
		if err != nil {
			add(where, "%v", err)
			continue
		}
		if j, dup := seen[mp.Model]; dup {
			add(where, "%s is priced twice (also pricing.models[%d])", mp.Model, j)
		}
		seen[mp.Model] = i
	}
	for i, f := range c.Pricing.Free {
		if strings.TrimSpace(f) == "" || strings.Contains(f, "/") {
			add(fmt.Sprintf("pricing.free[%d]", i), "%q: want a provider name (ollama)", f)
		}
	}
	return ps
}
