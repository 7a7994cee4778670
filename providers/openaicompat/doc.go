// Package openaicompat is the OpenAI-compatible chat-completions core
// shared by the OpenRouter, NVIDIA, Zen and plain OpenAI providers: model
// discovery with a cache and allow-list, the streamed chat (SSE), tool
// calls, reasoning, usage, error classification and retries.
//
// Vendors differ only through Hooks: the auth header, extra body fields
// (OpenRouter reasoning, NVIDIA stream_options), discovery decoding, a
// class override, a usable-model filter and whether reasoning_details are
// echoed. Static capability tables (Options.Known) fill what discovery does
// not expose.
//
// Stream rules (notes/providers.md §5):
//   - SSE lines are capped (MaxLineBytes, default 8 MiB); a longer line is
//     an error wrapping ErrLineTooLong. Comment lines (keep-alives) are
//     skipped; multi-line data is joined.
//   - Success needs a finish_reason and then [DONE] or a clean EOF; reading
//     stops at [DONE] (Zen appends a cost frame after it). Anything else is
//     an error wrapping providers.ErrTruncated, and so is an error object or
//     finish_reason "error" inside the stream (classified by its code).
//   - Tool calls are assembled by index; a new id on a known index starts a
//     new call. Arguments that are not JSON are returned as a JSON string.
//   - reasoning / reasoning_content become reasoning deltas;
//     reasoning_details items are returned in Response.ProviderMetadata as
//     {"reasoning_details":[...]} and, with Hooks.EchoReasoningDetails, sent
//     back unchanged on the assistant message that carries that metadata.
//   - A Response with tool calls keeps the provider's finish_reason.
//
// Lifecycle:
//  1. A vendor package builds Options from its Config (Validate names the
//     bad field) and calls New.
//  2. Models lists GET {BaseURL}/models, filtered by the allow-list and
//     Hooks.Usable, completed from Known, cached for CacheTTL.
//  3. Model resolves a name (or "name:variant" through its base).
//  4. Model.Stream posts {BaseURL}/chat/completions with stream:true and
//     runs it under the retry policy, emitting deltas as they arrive.
//     Cancelling ctx aborts the HTTP request and returns a cancelled error.
//
// Example:
//
//	p, err := openaicompat.New(openaicompat.Options{Name: "vllm", BaseURL: "http://127.0.0.1:8000/v1"})
//	m, err := p.Model(ctx, "qwen3-8b")
//	resp, err := m.Stream(ctx, &providers.Request{Messages: msgs}, func(d providers.Delta) { fmt.Print(d.Text) })
package openaicompat
