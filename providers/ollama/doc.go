// Package ollama is the Lemo provider for Ollama, local or Ollama Cloud.
// Discovery goes through github.com/ollama/ollama/api (List, Show); the
// chat stream is posted and read by Lemo itself, with the api package's
// wire types (api.ChatRequest marshalled as is, each NDJSON line decoded
// into api.ChatResponse), so the wire format stays Ollama's own.
//
// Why chat does not use api.Client.Chat: the client's stream reader
// allocates an 8 MB line buffer on every call (bufio.Scanner with
// maxBufferSize), so each model call cost 8 MB of garbage and its zeroing,
// several milliseconds per answer. Lemo reads the stream with a bounded
// line reader whose buffer is pooled.
//
// What the package fixes or adds over the api client (notes/providers.md
// §1.4):
//   - A stream without its done:true line is an error wrapping
//     providers.ErrTruncated (the client returns nil).
//   - Cancellation, before or mid-stream, returns a cancelled error
//     promptly; ctx is checked before every line (the client returns nil).
//   - A mid-stream {"error":...} line and a line that is not JSON are
//     transient errors wrapping providers.ErrTruncated.
//   - HTTP errors keep their status, the body's message (the JSON "error",
//     or the first readable line of an HTML or text body) and Retry-After
//     (seconds or HTTP-date), which the client drops. For discovery,
//     still through the client, a RoundTripper records each response's
//     headers in the call's context to recover Retry-After.
//   - Lines are bounded by Config.MaxLineBytes and a whole answer by
//     MaxResponseBytes and MaxToolCalls, with clear errors.
//   - Cloud auth: the client signs requests with ~/.ollama/id_ed25519 when
//     its host is ollama.com (or OLLAMA_AUTH is set) and fails without the
//     file. Requests are addressed to an alias host instead; the
//     RoundTripper rewrites every request (chat and discovery) to BaseURL
//     and adds "Authorization: Bearer <APIKey>". cmd/lemo must leave
//     OLLAMA_AUTH unset.
//   - Tool calls come whole with object arguments; they are returned as
//     JSON text with the call ids the server gave. Ollama's done_reason
//     stays "stop" after tool calls; the Response says "tool_calls" then.
//
// Decisions: the window reported by ModelInfo is the num_ctx actually sent
// with every chat, min(<arch>.context_length, NumCtxCap), or NumCtxCap when
// the model does not say (Ollama otherwise silently truncates old
// messages). Models without the completion capability (embedding models)
// are not listed. For a thinking model, Request.Think is sent as think
// true/false (the server would default to true).
//
// Known server limitation (Ollama 0.17.4): a stream the client cancels
// usually stops the generation at once, but when the client goes away just
// as the server's chat handler passes on a chunk, the handler's goroutine
// blocks for ever and keeps one of the model runner's OLLAMA_NUM_PARALLEL
// slots until the model unloads (OLLAMA_KEEP_ALIVE, 5 min by default).
// With one slot, later calls to that model then wait. Lemo cannot undo it
// from the client side; tests/tiny_ollama_test.go explains the mechanism.
//
// Lifecycle:
//  1. cmd/lemo builds a Config (BaseURL from ParseHost(OLLAMA_HOST), or
//     CloudBaseURL with APIKey from OLLAMA_API_KEY) and calls New.
//  2. Models lists /api/tags and describes each model with /api/show;
//     results are cached for CacheTTL.
//  3. Model resolves a name ("llama3.2" finds "llama3.2:latest").
//  4. Model.Stream posts /api/chat and reads its NDJSON stream, under the
//     retry policy (retries only before any output).
//
// Example:
//
//	p, err := ollama.New(ollama.Config{Name: "ollama-cloud", BaseURL: ollama.CloudBaseURL, APIKey: key})
//	m, err := p.Model(ctx, "gpt-oss:120b")
//	resp, err := m.Stream(ctx, &providers.Request{Messages: msgs}, func(d providers.Delta) {})
package ollama
