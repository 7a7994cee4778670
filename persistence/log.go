package persistence

import (
	"bytes"
	"errors"
	"fmt"

	"github.com/dgraph-io/badger/v4"
	"google.golang.org/protobuf/proto"

	"lemo/api"
)

// A Task's metadata record (metaKey) is a checkpoint: the metadata as of
// its LastSeq. The writer rewrites it when an append creates the Task or
// changes its status, and otherwise once metaEvery events have passed
// since it last did (saveMeta), not at every append: it was a fifth of
// what a step wrote. A read folds the events after the record into it
// (api.FoldMetaInto, as the writer does), so what is read is always the
// metadata after the Task's last committed event.

// metaEvery bounds the events a metadata read folds beyond the record.
const metaEvery = 64

// saveMeta says whether an append that takes a Task's metadata from prev
// to meta rewrites its record, last written at seq saved.
func saveMeta(prev, meta *api.TaskMeta, saved uint64) bool {
	return prev == nil || prev.GetStatus() != meta.GetStatus() || meta.GetLastSeq() >= saved+metaEvery
}

// getMeta returns task's metadata after its last committed event.
func getMeta(txn *badger.Txn, task string) (*api.TaskMeta, error) {
	m, _, err := getMetaAt(txn, task)
	return m, err
}

// getMetaAt is getMeta, and the seq at which the record was written.
func getMetaAt(txn *badger.Txn, task string) (*api.TaskMeta, uint64, error) {
	it, err := txn.Get(metaKey(task))
	if errors.Is(err, badger.ErrKeyNotFound) {
		return nil, 0, ErrNotFound
	}
	if err != nil {
		return nil, 0, err
	}
	var m *api.TaskMeta
	var saved uint64
	err = it.Value(func(v []byte) error {
		var err error
		m, saved, err = decodeMeta(txn, task, v)
		return err
	})
	return m, saved, err
}

// decodeMeta decodes task's metadata record rec and folds the events after
// it (foldTail): every read of a record goes through here. saved is the
// seq at which the record was written. Its reads may run inside a Value
// callback: every record is below valueThreshold, so it lies in the LSM
// tree and Value holds no lock of the value log.
func decodeMeta(txn *badger.Txn, task string, rec []byte) (m *api.TaskMeta, saved uint64, err error) {
	m = new(api.TaskMeta)
	if err := proto.Unmarshal(rec, m); err != nil {
		return nil, 0, fmt.Errorf("decode meta of task %s: %w", task, err)
	}
	saved = m.GetLastSeq()
	if err := foldTail(txn, task, m); err != nil {
		return nil, 0, err
	}
	return m, saved, nil
}

// foldTail folds into m, task's metadata record, the events after it.
// Each is a point read: for a Task whose record is current (every Task
// that ended or paused) that is one lookup of a key that is not there.
func foldTail(txn *badger.Txn, task string, m *api.TaskMeta) error {
	for seq := m.GetLastSeq() + 1; ; seq++ {
		it, err := txn.Get(eventKey(task, seq))
		if errors.Is(err, badger.ErrKeyNotFound) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("meta of task %s: read seq %d: %w", task, seq, err)
		}
		var ev *api.Event
		if err := it.Value(func(v []byte) error {
			ev, err = decodeEvent(task, seq, v)
			return err
		}); err != nil {
			return fmt.Errorf("meta of task %s: %w", task, err)
		}
		api.FoldMetaInto(m, ev)
	}
}

// Meta returns a Task's metadata, or ErrNotFound.
func (s *Store) Meta(task string) (*api.TaskMeta, error) {
	if err := ValidTaskID(task); err != nil {
		return nil, err
	}
	var m *api.TaskMeta
	err := s.db.View(func(txn *badger.Txn) error {
		var err error
		m, err = getMeta(txn, task)
		return err
	})
	return m, err
}

// rawEvents calls fn with the stored bytes of each event of task with
// from <= seq <= to, in order; to == 0 means to the end. The bytes are only
// valid during the call. fn may stop the scan by returning an error, which
// rawEvents returns.
func (s *Store) rawEvents(task string, from, to uint64, fn func(seq uint64, raw []byte) error) error {
	if err := ValidTaskID(task); err != nil {
		return err
	}
	if from == 0 {
		from = 1
	}
	return s.db.View(func(txn *badger.Txn) error {
		prefix := eventPrefix(task)
		opt := badger.DefaultIteratorOptions
		opt.Prefix = prefix
		opt.PrefetchSize = 256
		it := txn.NewIterator(opt)
		defer it.Close()
		for it.Seek(eventKey(task, from)); it.ValidForPrefix(prefix); it.Next() {
			item := it.Item()
			seq := seqFromEventKey(item.Key())
			if to != 0 && seq > to {
				return nil
			}
			if err := item.Value(func(v []byte) error { return fn(seq, v) }); err != nil {
				return err
			}
		}
		return nil
	})
}

// Events decodes the events of task with from <= seq <= to (to == 0: to the
// end) and calls fn with each, in order.
func (s *Store) Events(task string, from, to uint64, fn func(*api.Event) error) error {
	return s.rawEvents(task, from, to, func(seq uint64, raw []byte) error {
		ev, err := decodeEvent(task, seq, raw)
		if err != nil {
			return err
		}
		return fn(ev)
	})
}

// ReadEvents returns at most limit events of task starting at from.
func (s *Store) ReadEvents(task string, from uint64, limit int) ([]*api.Event, error) {
	var out []*api.Event
	errStop := errors.New("stop")
	err := s.Events(task, from, 0, func(ev *api.Event) error {
		if limit > 0 && len(out) >= limit {
			return errStop
		}
		out = append(out, ev)
		return nil
	})
	if err != nil && !errors.Is(err, errStop) {
		return nil, err
	}
	return out, nil
}

// Tail returns the last n events of task, in order.
func (s *Store) Tail(task string, n int) ([]*api.Event, error) {
	m, err := s.Meta(task)
	if err != nil {
		return nil, err
	}
	from := uint64(1)
	if last := m.GetLastSeq(); last > uint64(n) {
		from = last - uint64(n) + 1
	}
	return s.ReadEvents(task, from, n)
}

// TasksWithStatus returns the metadata of every Task whose status is st,
// through the status index (no scan of other Tasks).
func (s *Store) TasksWithStatus(st api.TaskStatus) ([]*api.TaskMeta, error) {
	var out []*api.TaskMeta
	err := s.db.View(func(txn *badger.Txn) error {
		prefix := statusPrefix(st)
		opt := badger.DefaultIteratorOptions
		opt.PrefetchValues = false
		opt.Prefix = prefix
		it := txn.NewIterator(opt)
		defer it.Close()
		for it.Rewind(); it.ValidForPrefix(prefix); it.Next() {
			task := string(bytes.TrimPrefix(it.Item().Key(), prefix))
			m, err := getMeta(txn, task)
			if err != nil {
				return fmt.Errorf("status index names task %s: %w", task, err)
			}
			out = append(out, m)
		}
		return nil
	})
	return out, err
}

// ListOptions selects a page of Tasks, newest first.
type ListOptions struct {
	// Owner limits the list to one owner; "" lists every owner's Tasks.
	Owner string
	// Before is the cursor: only Tasks with an id below it (older) are
	// listed. "" starts at the newest.
	Before string
	// Limit bounds the page; 0 means 100.
	Limit int
}

// ListTasks returns a page of Task metadata, newest first, and the cursor of
// the next page ("" when this is the last).
func (s *Store) ListTasks(o ListOptions) ([]*api.TaskMeta, string, error) {
	if o.Limit <= 0 {
		o.Limit = 100
	}
	if o.Owner != "" {
		if err := ValidOwner(o.Owner); err != nil {
			return nil, "", err
		}
	}
	if o.Before != "" {
		if err := ValidTaskID(o.Before); err != nil {
			return nil, "", err
		}
	}
	var out []*api.TaskMeta
	next := ""
	err := s.db.View(func(txn *badger.Txn) error {
		var prefix []byte
		if o.Owner != "" {
			prefix = ownerPrefix(o.Owner)
		} else {
			prefix = metaKey("")
		}
		opt := badger.DefaultIteratorOptions
		opt.Reverse = true
		opt.Prefix = prefix
		opt.PrefetchValues = o.Owner == ""
		it := txn.NewIterator(opt)
		defer it.Close()
		// Reverse iteration seeks to the largest key <= the seek key.
		seek := append(append([]byte(nil), prefix...), 0xff)
		if o.Before != "" {
			seek = append(append([]byte(nil), prefix...), o.Before...)
		}
		for it.Seek(seek); it.ValidForPrefix(prefix); it.Next() {
			task := string(bytes.TrimPrefix(it.Item().Key(), prefix))
			if task == o.Before {
				continue
			}
			if len(out) == o.Limit {
				next = out[len(out)-1].GetTaskId()
				return nil
			}
			var m *api.TaskMeta
			var err error
			if o.Owner == "" {
				err = it.Item().Value(func(v []byte) error {
					var err error
					m, _, err = decodeMeta(txn, task, v)
					return err
				})
			} else {
				m, err = getMeta(txn, task)
			}
			if err != nil {
				return fmt.Errorf("list tasks: task %s: %w", task, err)
			}
			out = append(out, m)
		}
		return nil
	})
	return out, next, err
}

// Get returns the value of a key written as an extra KV, or ErrNotFound.
func (s *Store) Get(key []byte) ([]byte, error) {
	var out []byte
	err := s.db.View(func(txn *badger.Txn) error {
		it, err := txn.Get(key)
		if errors.Is(err, badger.ErrKeyNotFound) {
			return ErrNotFound
		}
		if err != nil {
			return err
		}
		out, err = it.ValueCopy(nil)
		return err
	})
	return out, err
}

// PendingApprovals returns the ApprovalRequested events not yet resolved, of
// one owner ("" for every owner), in key order.
func (s *Store) PendingApprovals(owner string) ([]*api.Event, error) {
	if owner != "" {
		if err := ValidOwner(owner); err != nil {
			return nil, err
		}
	}
	var out []*api.Event
	err := s.db.View(func(txn *badger.Txn) error {
		prefix := approvalPrefix(owner)
		opt := badger.DefaultIteratorOptions
		opt.Prefix = prefix
		it := txn.NewIterator(opt)
		defer it.Close()
		for it.Rewind(); it.ValidForPrefix(prefix); it.Next() {
			ev := new(api.Event)
			if err := it.Item().Value(func(v []byte) error { return proto.Unmarshal(v, ev) }); err != nil {
				return fmt.Errorf("decode pending approval %q: %w", it.Item().Key(), err)
			}
			out = append(out, ev)
		}
		return nil
	})
	return out, err
}
