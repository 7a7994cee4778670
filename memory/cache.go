package memory

import (
	"container/list"
	"sync"
)

// lru keeps values by key up to a total cost, evicting the least recently
// used. Its values are immutable: it never modifies one it holds, and
// callers must not either (they may share what get returns, read-only).
type lru[V any] struct {
	mu    sync.Mutex
	max   int
	size  int
	cost  func(V) int
	ll    *list.List
	items map[string]*list.Element
}

type lruItem[V any] struct {
	key string
	val V
}

func newLRU[V any](max int, cost func(V) int) *lru[V] {
	return &lru[V]{max: max, cost: cost, ll: list.New(), items: make(map[string]*list.Element)}
}

// blockCache keeps recently read segment blocks (immutable: a block key is
// never rewritten with other content) up to a number of bytes.
type blockCache = lru[[]byte]

func newBlockCache(max int) *blockCache {
	return newLRU(max, func(b []byte) int { return len(b) })
}

// get returns key's value, if cached (looked up without a copy of key).
func (c *lru[V]) get(key []byte) (V, bool) {
	var zero V
	if c == nil {
		return zero, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.items[string(key)]; ok {
		c.ll.MoveToFront(e)
		return e.Value.(*lruItem[V]).val, true
	}
	return zero, false
}

func (c *lru[V]) put(key string, val V) {
	if c == nil {
		return
	}
	cost := c.cost(val)
	if cost > c.max/8 {
		return // one value must not flush the cache
	}
	cost += len(key)
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.items[key]; ok {
		c.ll.MoveToFront(e)
		return
	}
	c.items[key] = c.ll.PushFront(&lruItem[V]{key: key, val: val})
	c.size += cost
	for c.size > c.max {
		e := c.ll.Back()
		it := e.Value.(*lruItem[V])
		c.ll.Remove(e)
		delete(c.items, it.key)
		c.size -= len(it.key) + c.cost(it.val)
	}
}
