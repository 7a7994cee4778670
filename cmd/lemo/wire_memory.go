package main

import (
	"lemo/memory"
	"lemo/persistence"
	"lemo/tools"
	"lemo/tools/memorytool"
	"lemo/tools/tasks"
)

// memoryTools are the tools over the memory and the store: memory.record,
// memory.search, tasks.list, tasks.read and tasks.read_block.
func memoryTools(mem *memory.Memory, store *persistence.Store) []tools.Tool {
	out := memorytool.New(mem, memorytool.Config{})
	return append(out, tasks.New(store, tasks.Config{})...)
}
