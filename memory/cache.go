package memory

import (
	"container/list"
	"sync"
)

// blockCache keeps recently read segment blocks (immutable: a block key is
// never rewritten with other content) up to a number of bytes, evicting the
// least recently used. It never modifies a value it holds (callers may
// share the bytes get returns, read-only).
type blockCache struct {
	mu    sync.Mutex
	max   int
	size  int
	ll    *list.List
	items map[string]*list.Element
}

type cacheItem struct {
	key string
	val []byte
}

func newBlockCache(max int) *blockCache {
	return &blockCache{max: max, ll: list.New(), items: make(map[string]*list.Element)}
}

func (c *blockCache) get(key string) ([]byte, bool) {
	if c == nil {
		return nil, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.items[key]; ok {
		c.ll.MoveToFront(e)
		return e.Value.(*cacheItem).val, true
	}
	return nil, false
}

// getBytes is get with the key as bytes (looked up without a copy).
func (c *blockCache) getBytes(key []byte) ([]byte, bool) {
	if c == nil {
		return nil, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.items[string(key)]; ok {
		c.ll.MoveToFront(e)
		return e.Value.(*cacheItem).val, true
	}
	return nil, false
}

func (c *blockCache) put(key string, val []byte) {
	if c == nil || len(val) > c.max/8 {
		return // one block must not flush the cache
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.items[key]; ok {
		c.ll.MoveToFront(e)
		return
	}
	c.items[key] = c.ll.PushFront(&cacheItem{key: key, val: val})
	c.size += len(key) + len(val)
	for c.size > c.max {
		e := c.ll.Back()
		it := e.Value.(*cacheItem)
		c.ll.Remove(e)
		delete(c.items, it.key)
		c.size -= len(it.key) + len(it.val)
	}
}
