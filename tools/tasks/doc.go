// Package tasks provides the tools that give an agent bounded access to
// the retained history of its owner's Tasks: tasks.list (a page of Tasks,
// newest first, with a cursor), tasks.read (a page of one Task's records,
// with a cursor; long texts cut, each cut record naming its handle) and
// tasks.read_block (one record whole, or a byte range of it, by seq or by
// call id and part). tasks.read_block is the handle that Cycle input
// excerpts and recalled evidence name: tasks.read_block {"task":…,"seq":…}.
//
// Scoping: every tool reads only Tasks owned by the calling Task's owner
// (tools.Call.Owner); an unknown Task and another owner's Task both read as
// not found. Operators are not special here: an agent sees its owner's
// Tasks. Everything is bounded: pages by record count and bytes, blocks by
// MaxBlockBytes. Byte ranges are snapped to rune boundaries. Records are
// shown as history holds them: a result the tool retained nothing of says
// so; untrusted outputs are marked.
//
// tasks.read and tasks.read_block retain which records they read, not their
// text: the text stays in its own Task's history, and copies are never
// indexed again as new memory.
//
// Lifecycle:
//  1. cmd/lemo registers New(store, Config{}) in the tool registry.
//  2. The Tool actor runs a call with the Task's owner.
//  3. The tool reads the store (Store, satisfied by *persistence.Store) and
//     returns a bounded page.
//
// Example:
//
//	for _, t := range tasks.New(store, tasks.Config{}) {
//		if err := reg.Register(t); err != nil { ... }
//	}
package tasks
