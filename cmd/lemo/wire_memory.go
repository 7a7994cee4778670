package main

import (
	"lemo/actors/live"
	"lemo/memory"
	"lemo/persistence"
	"lemo/tools"
	"lemo/tools/memorytool"
	"lemo/tools/tasks"
)

// memoryTools are the tools over the memory and the store: memory.record,
// memory.search, tasks.list, tasks.read and tasks.read_block, and the
// agent tree's tasks.spawn, tasks.wait, tasks.send and tasks.wait_message.
// tasks.read_block reads the live results of lv.
func memoryTools(mem *memory.Memory, store *persistence.Store, lv *live.Accountant) []tools.Tool {
	out := memorytool.New(mem, memorytool.Config{})
	out = append(out, tasks.New(store, tasks.Config{Live: liveText(lv)})...)
	return append(out, tasks.NewTree(store)...)
}

// liveText finds a held live result in lv.
func liveText(lv *live.Accountant) func(task, callID string) (tasks.LiveText, bool) {
	return func(task, callID string) (tasks.LiveText, bool) {
		r, ok := lv.Lookup(task, callID)
		if !ok {
			return nil, false
		}
		return r, true
	}
}
