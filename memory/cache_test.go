package memory

import (
	"fmt"
	"testing"
)

// TestLRUBoundedByCost: the cache keeps values up to its cost, evicting the
// least recently used, and refuses a value that would take an eighth.
func TestLRUBoundedByCost(t *testing.T) {
	c := newLRU(1000, func(v []parsedRow) int { return len(v) * 10 })
	for i := range 20 {
		c.put(fmt.Sprint("k", i), make([]parsedRow, 9)) // 90 + the key's bytes
	}
	if c.size > c.max {
		t.Fatalf("size %d over the bound %d", c.size, c.max)
	}
	if _, ok := c.get([]byte("k0")); ok {
		t.Error("the oldest value was kept")
	}
	if _, ok := c.get([]byte("k19")); !ok {
		t.Error("the newest value was evicted")
	}
	c.put("big", make([]parsedRow, 13)) // 130 > 1000/8
	if _, ok := c.get([]byte("big")); ok {
		t.Error("a value over an eighth of the bound was kept")
	}
	var nilCache *lru[[]byte]
	nilCache.put("k", []byte("v"))
	if _, ok := nilCache.get([]byte("k")); ok {
		t.Error("a nil cache returned a value")
	}
}
