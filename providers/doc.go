// Package providers defines what Lemo needs from a model vendor and keeps the
// registry of configured vendors.
//
// A Provider owns discovery (which models exist) and transport (how to talk
// to them). A Model owns its capabilities: its context window (or unknown),
// whether it reasons and whether it can call tools, and it streams one chat
// completion at a time.
//
// Lifecycle:
//  1. cmd/lemo constructs each configured Provider (ollama, openrouter, ...)
//     and registers it in a Registry.
//  2. A Cycle resolves its Task's model id ("provider/model") with
//     Registry.Model, then calls Model.Stream with the assembled Request.
//  3. Stream emits text and reasoning deltas as they arrive and returns the
//     whole Response (text, reasoning, tool calls, usage) once the provider's
//     terminal marker was seen. Any failure is an *Error with a Class.
//
// Example:
//
//	reg := providers.NewRegistry()
//	_ = reg.Register(fake.New("fake", script))
//	m, err := reg.Model(ctx, "fake/scripted")
//	resp, err := m.Stream(ctx, &providers.Request{Messages: msgs}, func(d providers.Delta) {})
package providers
