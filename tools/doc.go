// Package tools defines the Tool contract, validates tool inputs, state
// updates and results against their JSON Schemas, and keeps the registry of
// tools a daemon offers.
//
// Lifecycle of one call:
//  1. cmd/lemo registers every built-in tool in a Registry; registration
//     compiles the tool's schemas and maps its name to the function name
//     models see ("memory.record" becomes "memory_record").
//  2. A Task offers the model the Specs of its allowed tools.
//  3. When the model calls one, the Tool actor resolves it (Registry.ByModelName),
//     validates the arguments (Registered.ValidateInput), runs Execute in a
//     goroutine with a cancellable context, validates every state update and
//     the result, and computes Retain(output, input): the part that is
//     persisted. The full output stays with the Task as the live result
//     until the Task finishes, is cancelled, passivates or restarts: the
//     result in the Task actor's memory, and what a tool streams into
//     Call.Live (a command's whole output) bounded in memory and spilled to
//     a private file beyond that.
//
// Example:
//
//	reg := tools.NewRegistry()
//	if err := reg.Register(myTool); err != nil { ... }
//	rt, _ := reg.Get("my.tool")
//	if err := rt.ValidateInput(args); err != nil { ... } // becomes a tool failure the model sees
package tools
