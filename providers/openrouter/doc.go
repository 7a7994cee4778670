// Package openrouter is the Lemo provider for OpenRouter
// (https://openrouter.ai/api/v1), on the shared openaicompat core.
//
// What is OpenRouter-specific: discovery reads the rich /models schema
// (window = top_provider.context_length, else context_length; tools and
// reasoning from supported_parameters); a request that asks to think sends
// reasoning{effort} or reasoning{enabled}; reasoning_details streamed back
// are kept in Response.ProviderMetadata and echoed unchanged on the
// assistant message in tool loops; ": OPENROUTER PROCESSING" keep-alives
// are skipped; a 403 with moderation reasons is a bad request, not auth; a
// model id with a variant suffix (":nitro") resolves through its base.
//
// Lifecycle:
//  1. cmd/lemo reads EnvAPIKey and calls New(Config{APIKey: key}).
//  2. Models / Model discover and cache as in openaicompat.
//  3. Model.Stream streams one chat completion.
//
// Example:
//
//	p, err := openrouter.New(openrouter.Config{APIKey: os.Getenv(openrouter.EnvAPIKey), Title: "Lemo"})
//	m, err := p.Model(ctx, "meta-llama/llama-3.3-70b-instruct:free")
package openrouter
