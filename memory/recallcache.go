package memory

import (
	"sync"

	"lemo/prompt"
)

// Reusing a recall. A Cycle whose recall query is the same as its Task's
// previous Cycle's (the same request and latest focus: a model calling
// the same tool with the same arguments again) gets the previous result
// when the owner's index gained no record since, other than the Task's
// own. That is safe because recall never reinforces itself: its result
// depends only on the query and on the owner's other records (the Task's
// own records are excluded from it, recalling changes no score and
// recalled text is never indexed again), so with both unchanged, searching
// again would return the same items. Only the filter against the
// conversation is applied again (a new tool result may now hold a
// recalled text). Records are never removed from the index while the
// daemon runs (builds and merges move them, which changes no score).
//
// When other Tasks of the owner did add records, an unchanged query may
// still reuse its result for Options.RecallReuse Cycles in a row
// (memory.recall_reuse_cycles, default 4) before it searches again: the
// result may then lag the owner's other Tasks by that many Cycles. A
// Task in a loop of the same call asks the same question each Cycle;
// what recall brings is background evidence, and searching an owner's
// whole index at every step of fifty busy Tasks was a third of the
// daemon's CPU (docs/performance.md). Nothing else is given up: the
// result was exact when computed, its own records never enter it, and a
// changed query always searches. 0 keeps reuse exact.
type recallCache struct {
	mu sync.Mutex
	// gen counts the records indexed for each owner; own counts those of
	// a Task with a cached result since it was cached.
	gen     map[string]uint64
	entries map[string]*recallEntry
}

type recallEntry struct {
	owner, query string
	// other is the owner's generation less the Task's own records when
	// the result was computed.
	other uint64
	own   uint64
	// lagged counts the reuses since it was computed while other Tasks'
	// records had been added.
	lagged int
	out    []prompt.Evidence
}

// reuse says whether e answers query when the owner's generation is gen
// and at most maxLag reuses may lag other Tasks' records; lag says
// whether this reuse is one of those.
func (e *recallEntry) reuse(owner, query string, gen uint64, maxLag int) (ok, lag bool) {
	if e == nil || e.owner != owner || e.query != query {
		return false, false
	}
	if gen-e.own == e.other {
		return true, false
	}
	return e.lagged < maxLag, true
}

// maxRecallEntries bounds the cached results (one per Task; at most the
// recall budget of evidence each, 8,000 estimated tokens or about 32 KB
// of text, so up to ~130 MB in the worst case of every Task recalling a
// full budget; typical results are small).
const maxRecallEntries = 4096

func newRecallCache() *recallCache {
	return &recallCache{gen: make(map[string]uint64), entries: make(map[string]*recallEntry)}
}

// added counts n records indexed for owner by task.
func (c *recallCache) added(owner, task string, n int) {
	if n <= 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.gen[owner] += uint64(n)
	if e := c.entries[task]; e != nil && e.owner == owner {
		e.own += uint64(n)
	}
}

// forget drops task's cached result: the Task ended, and a follow-up
// message that reopens it changes its query anyway. Kept, an ended Task's
// evidence (up to the recall budget, ~32 KB) stayed in memory until the
// full cache dropped it, an entry at random.
func (c *recallCache) forget(task string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.entries, task)
}

// reset forgets every cached result (records appeared that were not
// counted).
func (c *recallCache) reset() {
	c.mu.Lock()
	defer c.mu.Unlock()
	clear(c.entries)
}

// get returns task's cached result for query when it may be reused, at
// most maxLag times in a row after other Tasks added records.
func (c *recallCache) get(owner, task, query string, maxLag int) ([]prompt.Evidence, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e := c.entries[task]
	ok, lag := e.reuse(owner, query, c.gen[owner], maxLag)
	if !ok {
		return nil, false
	}
	if lag {
		e.lagged++
	}
	return e.out, true
}

// generation returns owner's generation, read before a recall computes.
func (c *recallCache) generation(owner string) uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.gen[owner]
}

// put caches task's result for query, computed when owner's generation
// was gen (so a record added meanwhile invalidates it).
func (c *recallCache) put(owner, task, query string, gen uint64, out []prompt.Evidence) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.entries[task]; !ok && len(c.entries) >= maxRecallEntries {
		for k := range c.entries { // drop any one
			delete(c.entries, k)
			break
		}
	}
	c.entries[task] = &recallEntry{owner: owner, query: query, other: gen, out: out}
}
