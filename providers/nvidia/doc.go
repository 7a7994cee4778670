// Package nvidia is the Lemo provider for NVIDIA NIM
// (https://integrate.api.nvidia.com/v1), on the shared openaicompat core.
//
// What is NVIDIA-specific: /models lists only ids (with duplicates, and
// embedding and reward models), so windows and capabilities come from
// KnownModels (plus Config.Known); other models report Window 0 (unknown)
// and no tools. Requests ask for the usage chunk
// (stream_options.include_usage) and, for reasoning models asked to think,
// chat_template_kwargs{thinking:true}. Reasoning arrives as
// reasoning_content, or for some models (R1 distills) as a
// <think>...</think> block at the start of the content, which is moved to
// reasoning. Errors come as problem+json, text/plain or vLLM
// objects; a 403 is auth, a 429 usually has no Retry-After (backoff), a 500
// "failed to decode json body" is a bad request.
//
// Lifecycle:
//  1. cmd/lemo reads EnvAPIKey and calls New(Config{APIKey: key}).
//  2. Models / Model discover and cache as in openaicompat.
//  3. Model.Stream streams one chat completion.
//
// Example:
//
//	p, err := nvidia.New(nvidia.Config{APIKey: os.Getenv(nvidia.EnvAPIKey)})
//	m, err := p.Model(ctx, "meta/llama-3.3-70b-instruct")
package nvidia
