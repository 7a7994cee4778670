// Package zen is the Lemo provider for OpenCode Zen
// (https://opencode.ai/zen/v1), on the shared openaicompat core, for the
// models Zen serves over /chat/completions.
//
// What is Zen-specific: /models exposes no window, so KnownModels (plus
// Config.Known) fills it, else Window 0; Claude, GPT and Gemini models use
// other protocols and are neither listed nor resolvable (Usable). The key
// is optional: free models (*-free, big-pickle) answer anonymously. The
// cost frame Zen appends after [DONE] is ignored, and its
// {"type":"error","error":{"type":...}} envelope is mapped by type
// (AuthError, ModelError, CreditsError, RateLimitError, ...).
//
// Lifecycle:
//  1. cmd/lemo reads EnvAPIKey (may be empty) and calls New.
//  2. Models / Model discover and cache as in openaicompat.
//  3. Model.Stream streams one chat completion.
//
// Example:
//
//	p, err := zen.New(zen.Config{APIKey: os.Getenv(zen.EnvAPIKey)})
//	m, err := p.Model(ctx, "big-pickle")
package zen
