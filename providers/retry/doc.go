// Package retry is the one retry loop every Lemo provider uses, and the
// HTTP facts it decides on: Retry-After parsing, the class of an error
// status, and bounded, key-free error messages.
//
// Rules (DESIGN.md, Providers): only transient and rate-limit failures are
// retried, and only before any output streamed: once a delta or a tool call
// was seen, a retry could duplicate what the user or a tool already got.
// A Retry-After up to MaxRetryAfter is waited for; a longer one fails at
// once with the rate-limit error carrying RetryAfter, so supervision can
// decide. Without Retry-After the wait is a jittered exponential backoff.
//
// Lifecycle:
//  1. A provider's Config carries a Policy; New calls Validate and
//     WithDefaults (3 attempts, 30s Retry-After cap, 500ms..8s backoff).
//  2. Model.Stream calls Policy.Do with one Attempt that performs a single
//     HTTP call, emitting deltas through the emit it is given and marking
//     OutputStarted on errors after a tool call.
//  3. Do returns the first success, or an *providers.Error: the last
//     failure, or a cancelled error when ctx ends during a wait.
//
// Example:
//
//	p := retry.Policy{MaxAttempts: 5}
//	resp, err := p.Do(ctx, log, "openrouter", emit, func(ctx context.Context, emit func(providers.Delta)) (*providers.Response, error) {
//		return streamOnce(ctx, payload, emit)
//	})
package retry
