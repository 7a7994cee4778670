// Package ollama is the Lemo provider for Ollama, local or Ollama Cloud,
// through github.com/ollama/ollama/api behind a wrapper that fixes the
// client behaviours listed in notes/providers.md §1.4.
//
// What the wrapper fixes:
//   - A stream without its done:true line makes Chat return nil: reported
//     as an error wrapping providers.ErrTruncated.
//   - A mid-stream cancel makes Chat return nil: ctx is checked first and a
//     cancelled error returned.
//   - Errors lose the response headers: a RoundTripper records each
//     response's status and headers in the call's context, so Retry-After
//     (seconds or HTTP-date) is recovered. It also records body read errors
//     and enforces MaxLineBytes, which the client's scanner swallows.
//   - Cloud auth: the client signs requests with ~/.ollama/id_ed25519 when
//     its host is ollama.com (or OLLAMA_AUTH is set) and fails without the
//     file. The client is given an alias host instead; the RoundTripper
//     rewrites every request to BaseURL and adds "Authorization: Bearer
//     <APIKey>". cmd/lemo must leave OLLAMA_AUTH unset.
//   - Tool calls come whole with object arguments; they are returned as
//     JSON text. Ollama's done_reason stays "stop" after tool calls; the
//     Response says "tool_calls" then.
//
// Decisions: the window reported by ModelInfo is the num_ctx actually sent
// with every chat, min(<arch>.context_length, NumCtxCap), or NumCtxCap when
// the model does not say (Ollama otherwise silently truncates old
// messages). Models without the completion capability (embedding models)
// are not listed. For a thinking model, Request.Think is sent as think
// true/false (the server would default to true).
//
// Lifecycle:
//  1. cmd/lemo builds a Config (BaseURL from ParseHost(OLLAMA_HOST), or
//     CloudBaseURL with APIKey from OLLAMA_API_KEY) and calls New.
//  2. Models lists /api/tags and describes each model with /api/show;
//     results are cached for CacheTTL.
//  3. Model resolves a name ("llama3.2" finds "llama3.2:latest").
//  4. Model.Stream posts /api/chat (NDJSON) under the retry policy.
//
// Example:
//
//	p, err := ollama.New(ollama.Config{Name: "ollama-cloud", BaseURL: ollama.CloudBaseURL, APIKey: key})
//	m, err := p.Model(ctx, "gpt-oss:120b")
//	resp, err := m.Stream(ctx, &providers.Request{Messages: msgs}, func(d providers.Delta) {})
package ollama
