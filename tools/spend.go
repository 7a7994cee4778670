package tools

import "encoding/json"

// Spender is a Tool that spends model tokens of its own (the delegate
// agent's runs): the Task charges what a call reports to its budget, and
// an estimate, marked as such, for a call that reports nothing (it failed,
// was stopped, or its agent gave no usage).
type Spender interface {
	// Spent reads what a successful call spent from its output; ok is
	// false when the output reports no usage.
	Spent(output json.RawMessage) (s Spend, ok bool)
}

// Spend is what one call spent.
type Spend struct {
	// Tokens are the input and output tokens of the call's model use.
	Tokens int64
	// CostUSD is the cost the tool's agent computed; 0 when unknown.
	CostUSD float64
	// Source names what spent it ("delegate pi").
	Source string
}
