// Package services is the daemon's registry of Program Services: the
// capabilities that programs attached over the remote API offer to Tasks.
// A Service has a name, a description and operations with JSON Schemas;
// Tasks reach it only through the system tool (tools/system), which this
// registry serves.
//
// The registry is a mutex-guarded structure shared by the gateway's
// sessions (edge actor system) and the system tool's goroutines (internal
// system), not an actor under the daemon's root as the design first drew
// it: it has no lifecycle of its own (a Service lives exactly as long as
// the session that registered it, whose actor unregisters it when it
// stops), its operations are short map updates, and an actor would add a
// message hop across the two systems to every call and answer. cmd/lemo
// constructs one Registry and hands it to both.
//
// Visibility: a Service registered with an owner's token serves that
// owner's Tasks; one registered with an operator token serves every
// owner's. Names are unique; the same owner may replace its registration
// (a restarted program).
//
// Lifecycle of a call:
//  1. A session registers a Service for its program (Register), naming
//     itself as the provider.
//  2. The system tool calls Execute: the input is validated against the
//     operation's schema, a ServiceCall with a deadline is delivered to the
//     provider, and Execute waits.
//  3. The program answers; its session calls Complete. The answer is
//     checked (JSON, the result schema), bounded (a labelled excerpt beyond
//     MaxResultBytes) and returned to the tool, which marks it untrusted.
//  4. If the deadline passes, Execute fails with ErrTimeout; if the program
//     goes away (UnregisterProvider), with ErrGone; a late answer is refused.
//
// Example:
//
//	reg := services.New(services.Options{})
//	err := reg.Register("alice", false, sessionID, spec, provider)
//	out, err := reg.Execute(ctx, system.Request{Owner: "alice", Service: "calendar", Operation: "list", Input: in})
package services
