package persistence

import (
	"bytes"
	"strings"

	"github.com/dgraph-io/badger/v4"
)

// FindTasks returns the ids of owner's Tasks (every owner's when owner is
// "") that begin or end with part, ignoring case, in id order: at most
// limit (at least 1) of them, and whether there are more. A suffix cannot
// be sought in an index ordered by id, so this scans the keys (no values)
// of the owner's index; BenchmarkFindTasks measures it at 100,000 Tasks.
func (s *Store) FindTasks(owner, part string, limit int) ([]string, bool, error) {
	if owner != "" {
		if err := ValidOwner(owner); err != nil {
			return nil, false, err
		}
	}
	if err := ValidTaskID(part); err != nil {
		return nil, false, err
	}
	limit = max(limit, 1)
	var base []byte
	if owner != "" {
		base = ownerPrefix(owner)
	} else {
		base = metaKey("")
	}
	var out []string
	more := false
	err := s.db.View(func(txn *badger.Txn) error {
		opt := badger.DefaultIteratorOptions
		opt.PrefetchValues = false
		opt.Prefix = base
		it := txn.NewIterator(opt)
		defer it.Close()
		for it.Rewind(); it.ValidForPrefix(base); it.Next() {
			id := string(bytes.TrimPrefix(it.Item().Key(), base))
			if !IDMatches(id, part) {
				continue
			}
			if len(out) == limit {
				more = true
				return nil
			}
			out = append(out, id)
		}
		return nil
	})
	return out, more, err
}

// IDMatches reports whether part names the Task id: the whole id, or its
// beginning or end, ignoring case (ids are case-insensitive ULIDs).
func IDMatches(id, part string) bool {
	if len(part) == 0 || len(part) > len(id) {
		return false
	}
	return strings.EqualFold(id[:len(part)], part) || strings.EqualFold(id[len(id)-len(part):], part)
}
