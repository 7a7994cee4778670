// Package openai is a plain OpenAI-compatible Lemo provider configured by
// base URL, for self-hosted servers (vLLM, llama.cpp, LM Studio) and for
// tests against the fake server.
//
// Discovery reads GET /models and takes a window from max_model_len,
// context_length or context_window when the server sends one; Config.Known
// describes the rest. Unknown models are assumed to call tools and not to
// reason. Requests ask for the usage chunk unless NoStreamUsage.
//
// Lifecycle:
//  1. cmd/lemo calls New(Config{Name, BaseURL, APIKey}).
//  2. Models / Model discover and cache as in openaicompat.
//  3. Model.Stream streams one chat completion.
//
// Example:
//
//	p, err := openai.New(openai.Config{Name: "vllm", BaseURL: "http://127.0.0.1:8000/v1"})
//	m, err := p.Model(ctx, "Qwen/Qwen3-8B")
package openai
