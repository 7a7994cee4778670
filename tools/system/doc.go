// Package system is the system tool: the one gateway through which a
// Task's model reaches Services that programs attached over the remote API
// offer. It lists the Services visible to the Task's owner and executes an
// operation through a single Execute contract; the daemon's registry
// (actors/services) forwards the call to the program and waits with a
// deadline. Everything a Service returns is untrusted: the registry bounds
// it, and the tool reports Untrusted so the result is marked as such in
// what the model sees.
//
// Lifecycle of one call:
//  1. cmd/lemo registers New(registry) with the tool registry.
//  2. The model calls {"action": "list"}: the tool returns the Services of
//     the Task's owner (and those an operator registered) with their
//     operations and schemas.
//  3. The model calls {"action": "execute", "service", "operation",
//     "input"}: the registry validates the input against the operation's
//     schema, sends it to the program, and returns its bounded result or an
//     error (no such Service, the program went away, the deadline passed).
//
// Example:
//
//	reg := services.New(services.Options{})
//	if err := toolReg.Register(system.New(reg)); err != nil { ... }
package system
