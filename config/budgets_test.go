package config

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

func TestBudgetsAndPricingLoad(t *testing.T) {
	c := Default()
	errs := c.LoadYAML("lemo.yaml", []byte(`
budgets:
  max_tokens: 200000
  max_cost: "0.50"
  max_time: 10m
pricing:
  models: ["zen/glm-5=0.6:2.2:0.11", "ollama-cloud/gpt-oss:120b=0.1:0.5"]
`))
	if len(errs) > 0 {
		t.Fatalf("LoadYAML: %v", errs)
	}
	if errs := c.Validate(); len(errs) > 0 {
		t.Fatalf("Validate: %v", errs)
	}
	if c.Budgets.MaxTokens != 200000 || c.Budgets.MaxCost != "0.50" || c.Budgets.MaxTime != 10*time.Minute || c.Budgets.OutputTokens != 4096 {
		t.Fatalf("budgets = %+v", c.Budgets)
	}
	p := c.Pricing.Parsed()
	if got := p["zen/glm-5"]; got.Input != 0.6 || got.Output != 2.2 || got.CachedInput != 0.11 {
		t.Fatalf("zen/glm-5 = %+v", got)
	}
	// The cached-input price defaults to the input price; a colon in the
	// model name is kept.
	if got := p["ollama-cloud/gpt-oss:120b"]; got.Input != 0.1 || got.Output != 0.5 || got.CachedInput != 0.1 {
		t.Fatalf("ollama-cloud/gpt-oss:120b = %+v", got)
	}
	if len(c.Pricing.Free) != 2 || c.Pricing.Free[0] != "ollama" || c.Pricing.Free[1] != "fake" {
		t.Fatalf("pricing.free default = %v, want [ollama fake]", c.Pricing.Free)
	}
}

func TestBudgetsProblems(t *testing.T) {
	c := Default()
	c.Budgets = Budgets{MaxTokens: -1, MaxCost: "-2", MaxTime: -time.Second, OutputTokens: 0}
	c.Pricing = Pricing{Models: []string{"glm-5=1:2", "zen/glm-5=1", "zen/glm-5=1:x", "zen/a=1:2", "zen/a=3:4"}, Free: []string{"ollama/x"}}
	joined := Join(c.Validate()).Error()
	for _, want := range []string{
		"budgets.max_tokens: must not be negative",
		`budgets.max_cost: "-2": want a dollar amount`,
		"budgets.max_time: must not be negative",
		"budgets.output_tokens: must be at least 1",
		`pricing.models[0]: "glm-5=1:2": model "glm-5": want provider/model`,
		"pricing.models[1]: \"zen/glm-5=1\": want two or three prices",
		`pricing.models[2]: "zen/glm-5=1:x": price "x"`,
		"pricing.models[4]: zen/a is priced twice (also pricing.models[3])",
		`pricing.free[0]: "ollama/x": want a provider name`,
	} {
		if !strings.Contains(joined, want) {
			t.Errorf("problems lack %q:\n%s", want, joined)
		}
	}
}

func TestPricingFromEnvironment(t *testing.T) {
	c := Default()
	if errs := c.ApplyEnv([]string{"LEMO_PRICING_MODELS=zen/a=1:2,zen/b=3:4:1", "LEMO_BUDGETS_MAX_COST=1.25"}); len(errs) > 0 {
		t.Fatalf("ApplyEnv: %v", errs)
	}
	if p := c.Pricing.Parsed(); len(p) != 2 || p["zen/b"].CachedInput != 1 || c.Budgets.MaxCost != "1.25" {
		t.Fatalf("pricing = %v, budgets = %+v", p, c.Budgets)
	}
}

// Token budgets and the owners' daily budget come from the environment
// too (whole numbers of 64 bits), and bad values are named.
func TestBudgetsFromEnvironment(t *testing.T) {
	c := Default()
	if errs := c.ApplyEnv([]string{"LEMO_BUDGETS_MAX_TOKENS=5000000000", "LEMO_BUDGETS_PER_OWNER_DAY_TOKENS=200000", "LEMO_BUDGETS_PER_OWNER_DAY_COST=5"}); len(errs) > 0 {
		t.Fatalf("ApplyEnv: %v", errs)
	}
	if b := c.Budgets; b.MaxTokens != 5_000_000_000 || b.PerOwnerDay.Tokens != 200_000 || b.PerOwnerDay.Cost != "5" {
		t.Fatalf("budgets = %+v", b)
	}
	c = Default()
	if errs := c.ApplyEnv([]string{"LEMO_BUDGETS_PER_OWNER_DAY_TOKENS=lots"}); len(errs) != 1 || !strings.Contains(errs[0].Error(), "not a whole number") {
		t.Fatalf("ApplyEnv of a bad number = %v", errs)
	}
	c = Default()
	c.Budgets.PerOwnerDay = OwnerDay{Tokens: -1, Cost: "five"}
	joined := fmt.Sprint(c.Validate())
	for _, want := range []string{"budgets.per_owner_day.tokens: must not be negative", "budgets.per_owner_day.cost"} {
		if !strings.Contains(joined, want) {
			t.Errorf("problems lack %q:\n%s", want, joined)
		}
	}
}
