// Package fake provides model providers for tests and demos: Scripted, a
// deterministic in-process provider whose models answer from a script, and
// HTTP fakes that reproduce each real provider's wire protocol (see the
// *_server.go files).
//
// Lifecycle of a Scripted provider:
//  1. Build models with NewScriptedModel and a Plan (Sequence of Turns,
//     Echo, or a function of the request).
//  2. Register NewScripted("fake", models...) in a providers.Registry.
//  3. Each Stream call asks the plan for a Turn, streams its reasoning and
//     text word by word, and returns its tool calls and usage; Requests shows
//     what the model was sent.
//
// Example:
//
//	m := fake.NewScriptedModel("m", 8192, fake.Sequence(
//		fake.Turn{ToolCalls: []providers.ToolCall{fake.ToolCall("c1", "echo", map[string]any{"text": "hi"})}},
//		fake.Turn{Text: "done"},
//	))
//	reg.Register(fake.NewScripted("fake", m))
package fake
