package persistence

import (
	"sync/atomic"

	"github.com/dgraph-io/badger/v4"

	"lemo/api"
)

// statusCounts counts Tasks by status; indexed by the status number.
type statusCounts [8]atomic.Int64

func (c *statusCounts) move(prev, next *api.TaskMeta) {
	if prev != nil {
		if prev.GetStatus() == next.GetStatus() {
			return
		}
		c.add(prev.GetStatus(), -1)
	}
	c.add(next.GetStatus(), 1)
}

func (c *statusCounts) add(st api.TaskStatus, n int64) {
	if int(st) >= 0 && int(st) < len(c) {
		c[st].Add(n)
	}
}

// countStatuses reads the status index once, at open.
func (s *Store) countStatuses() error {
	return s.db.View(func(txn *badger.Txn) error {
		opt := badger.DefaultIteratorOptions
		opt.PrefetchValues = false
		opt.Prefix = []byte{prefixStatus, '/'}
		it := txn.NewIterator(opt)
		defer it.Close()
		for it.Rewind(); it.ValidForPrefix(opt.Prefix); it.Next() {
			k := it.Item().Key()
			if len(k) > 2 {
				s.statuses.add(api.TaskStatus(k[2]), 1)
			}
		}
		return nil
	})
}

// StatusCounts returns how many Tasks are in each status.
func (s *Store) StatusCounts() map[api.TaskStatus]int64 {
	out := make(map[api.TaskStatus]int64)
	for i := range s.statuses {
		if n := s.statuses[i].Load(); n != 0 {
			out[api.TaskStatus(i)] = n
		}
	}
	return out
}
