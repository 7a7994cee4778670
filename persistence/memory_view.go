package persistence

import (
	"bytes"
	"errors"
	"fmt"

	"github.com/dgraph-io/badger/v4"

	"lemo/api"
	"lemo/internal/failpoint"
)

// ErrStopScan may be returned by a Scan callback to end the scan early;
// Scan then returns nil.
var ErrStopScan = errors.New("persistence: scan stopped")

// Snapshot is a consistent read-only view of the store: every read through
// it sees the store as of one instant, whatever commits meanwhile. It is
// valid only during the View call that provides it and must not be shared
// between goroutines.
type Snapshot struct {
	txn *badger.Txn
}

// View calls fn with a snapshot of the store.
func (s *Store) View(fn func(*Snapshot) error) error {
	return s.db.View(func(txn *badger.Txn) error { return fn(&Snapshot{txn: txn}) })
}

// Get calls fn with the value of key, valid only during the call, or
// returns ErrNotFound.
func (v *Snapshot) Get(key []byte, fn func(val []byte) error) error {
	it, err := v.txn.Get(key)
	if errors.Is(err, badger.ErrKeyNotFound) {
		return ErrNotFound
	}
	if err != nil {
		return err
	}
	return it.Value(fn)
}

// GetCopy returns a copy of the value of key, or ErrNotFound.
func (v *Snapshot) GetCopy(key []byte) ([]byte, error) {
	var out []byte
	err := v.Get(key, func(val []byte) error {
		out = append([]byte(nil), val...)
		return nil
	})
	return out, err
}

// Has reports whether key exists.
func (v *Snapshot) Has(key []byte) (bool, error) {
	_, err := v.txn.Get(key)
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, badger.ErrKeyNotFound):
		return false, nil
	default:
		return false, err
	}
}

// ScanOptions shape a Scan.
type ScanOptions struct {
	// From starts the scan at the first key >= From (it must begin with
	// the prefix); nil starts at the prefix.
	From []byte
	// KeysOnly skips reading values: fn gets a nil value.
	KeysOnly bool
}

// Scan calls fn with each key under prefix and its value, in key order.
// Both are valid only during the call. fn may return ErrStopScan to end the
// scan (Scan then returns nil) or another error, which Scan returns.
func (v *Snapshot) Scan(prefix []byte, o ScanOptions, fn func(key, val []byte) error) error {
	opt := badger.DefaultIteratorOptions
	opt.Prefix = prefix
	opt.PrefetchValues = !o.KeysOnly
	if o.KeysOnly {
		opt.PrefetchSize = 0
	} else {
		opt.PrefetchSize = 64
	}
	it := v.txn.NewIterator(opt)
	defer it.Close()
	start := prefix
	if o.From != nil {
		start = o.From
	}
	for it.Seek(start); it.ValidForPrefix(prefix); it.Next() {
		item := it.Item()
		var err error
		if o.KeysOnly {
			err = fn(item.Key(), nil)
		} else {
			err = item.Value(func(val []byte) error { return fn(item.Key(), val) })
		}
		if errors.Is(err, ErrStopScan) {
			return nil
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// Children calls fn with each distinct name that follows prefix up to the
// next '/' (for example each owner under IndexPrefix), in order, seeking
// past each name's keys instead of reading them.
func (v *Snapshot) Children(prefix []byte, fn func(name string) error) error {
	opt := badger.DefaultIteratorOptions
	opt.Prefix = prefix
	opt.PrefetchValues = false
	it := v.txn.NewIterator(opt)
	defer it.Close()
	for it.Seek(prefix); it.ValidForPrefix(prefix); {
		rest := it.Item().Key()[len(prefix):]
		name := rest
		if i := bytes.IndexByte(rest, '/'); i >= 0 {
			name = rest[:i]
		}
		n := string(name)
		if err := fn(n); err != nil {
			if errors.Is(err, ErrStopScan) {
				return nil
			}
			return err
		}
		// The next name sorts after every key of "<prefix><name>/".
		next := append(append(append([]byte(nil), prefix...), n...), '/'+1)
		it.Seek(next)
	}
	return nil
}

// Event returns event seq of task, or ErrNotFound.
func (v *Snapshot) Event(task string, seq uint64) (*api.Event, error) {
	var ev *api.Event
	err := v.Get(eventKey(task, seq), func(val []byte) error {
		var err error
		ev, err = decodeEvent(task, seq, val)
		return err
	})
	if err != nil && !errors.Is(err, ErrNotFound) {
		return nil, fmt.Errorf("task %s seq %d: %w", task, seq, err)
	}
	if err != nil {
		return nil, err
	}
	return ev, nil
}

// Meta returns a Task's metadata, or ErrNotFound.
func (v *Snapshot) Meta(task string) (*api.TaskMeta, error) {
	return getMeta(v.txn, task)
}

// EachMeta calls fn with the metadata of every Task, in Task id order.
func (v *Snapshot) EachMeta(fn func(*api.TaskMeta) error) error {
	prefix := metaKey("")
	return v.Scan(prefix, ScanOptions{}, func(k, val []byte) error {
		m, _, err := decodeMeta(v.txn, string(k[len(prefix):]), val)
		if err != nil {
			return err
		}
		return fn(m)
	})
}

// Events calls fn with each event of task with from <= seq <= to (to == 0:
// to the end), in order.
func (v *Snapshot) Events(task string, from, to uint64, fn func(*api.Event) error) error {
	if from == 0 {
		from = 1
	}
	return v.Scan(eventPrefix(task), ScanOptions{From: eventKey(task, from)}, func(k, val []byte) error {
		if to != 0 && seqFromEventKey(k) > to {
			return ErrStopScan
		}
		ev, err := decodeEvent(task, seqFromEventKey(k), val)
		if err != nil {
			return err
		}
		return fn(ev)
	})
}

// FailIndexCommit is the failpoint at the index's commit, UpdateIndex (see
// package failpoint). Its argument is the []KV to commit; an error makes
// UpdateIndex fail with it and write nothing.
const FailIndexCommit = "persistence.update-index"

// UpdateIndex commits kvs in one transaction outside any Task's log: the
// index maintenance records that belong to no Task (segments built from
// pending documents, merges, the memory format marker). Only index records
// (keys beginning "i/" or "j/") are accepted; facts, like events, go
// through Append. The commit is durable when UpdateIndex returns. A set too
// large for one transaction fails with ErrTooLarge and writes nothing.
func (s *Store) UpdateIndex(kvs []KV) error {
	if s.w == nil {
		return fmt.Errorf("%w: store is read-only", ErrClosed)
	}
	for _, kv := range kvs {
		if len(kv.Key) < 2 || kv.Key[1] != '/' || (kv.Key[0] != prefixIndex && kv.Key[0] != prefixIndexMeta) {
			return fmt.Errorf("%w: UpdateIndex writes index records only, not %q", ErrInvalid, kv.Key)
		}
		if len(kv.Value) >= valueThreshold {
			return fmt.Errorf("%w: index record %q of %d bytes, the limit is %d", ErrTooLarge, kv.Key, len(kv.Value), valueThreshold-1)
		}
	}
	// The index is written beside the appends: it too stays off a full
	// disk (the indexer retries later).
	if err := s.space.admit(false).normal; err != nil {
		return err
	}
	if failpoint.Armed() {
		if err := failpoint.Eval(FailIndexCommit, kvs); err != nil {
			return err
		}
	}
	err := s.db.Update(func(txn *badger.Txn) error {
		for _, kv := range kvs {
			var err error
			if kv.Delete {
				err = txn.Delete(kv.Key)
			} else {
				err = txn.Set(kv.Key, kv.Value)
			}
			if err != nil {
				return err
			}
		}
		return nil
	})
	if errors.Is(err, badger.ErrTxnTooBig) {
		return fmt.Errorf("%w: index update of %d records exceeds a transaction", ErrTooLarge, len(kvs))
	}
	if errors.Is(err, badger.ErrDBClosed) {
		return ErrClosed
	}
	return err
}
