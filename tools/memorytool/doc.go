// Package memorytool provides the memory tools: memory.record, which
// records an explicit fact with the calling tool call as its source, and
// memory.search, full-text search over the calling Task's owner's memory
// (requests, answers, retained tool results, facts, failures) with kind,
// task and time filters and a bounded result.
//
// memory.record needs no dependency: it records through the recorder the
// daemon gives every call (tools.Call.Memory), so the fact's source (task,
// call) and method ("memory.record") are filled in by the daemon, never by
// the model. memory.search takes a Searcher (*memory.Memory) and always
// searches within tools.Call.Owner. Its retained result keeps which records
// were found, not their text, so search results are never indexed again as
// new memory.
//
// Lifecycle:
//  1. cmd/lemo opens the memory and registers New(mem, Config{}) in the
//     tool registry.
//  2. The Tool actor runs a call with the Task's owner and recorder.
//  3. The result is validated, retained (whole for memory.record, references
//     only for memory.search) and shown to the model.
//
// Example:
//
//	for _, t := range memorytool.New(mem, memorytool.Config{}) {
//		if err := reg.Register(t); err != nil { ... }
//	}
package memorytool
