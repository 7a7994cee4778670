// Package discovery provides the tools that let a Task find and load the
// daemon's other tools, so that it starts with a small set
// (config tools.initial) and a small context window is not filled by
// schemas it does not need:
//
//   - tools.search {query} finds the tools offered to the Task by name and
//     description (built-in ones, and those registered later, such as MCP
//     servers' tools) and returns their names with one-line summaries,
//     at most MaxResults of them, with a note naming the sources that
//     have not listed their tools yet (an MCP server that is not up;
//     tools.PendingSource);
//   - tools.load {names} adds tools to the Task from its next model call
//     on. Each load is an event in the Task's history (api.ToolsLoaded), so
//     later Cycles, a continue after a restart and a child created with the
//     Task's tools see the same set (actors/taskstate.ToolSet).
//
// Both work through the Task's tools.Toolset (tools.Call.Toolset), which
// the daemon gives only to Tasks whose tools are discovered; a Task created
// with a fixed set (lemo run --tools) is not offered them.
//
// Lifecycle:
//  1. cmd/lemo registers New() in the tool registry.
//  2. A new Task without --tools starts with tools.initial (these two are
//     always in it).
//  3. tools.search ranks the offered tools (Rank, a pure function);
//     tools.load asks the Task to record the load and returns what it did.
//
// Example:
//
//	for _, t := range discovery.New() {
//		if err := reg.Register(t); err != nil { ... }
//	}
package discovery
