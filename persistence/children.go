package persistence

import (
	"encoding/binary"
	"fmt"
	"time"

	"github.com/dgraph-io/badger/v4"
	"google.golang.org/protobuf/proto"

	"lemo/api"
)

// The children index: c/<parent>/<child> for every child Task (its value:
// the child's links, limits and spend, see encodeTreeValue), written by
// the writer in the transaction that creates the child (for a spawn, the
// one commit of the parent's record and the child's creation), so it never
// disagrees with the Tasks' metadata. It lets a Task's tree be read
// without reading its owner's other Tasks.

// storeFormat1 is the store format before the children index; opened for
// writing, such a store is upgraded (upgradeFormat1).
const storeFormat1 = "lemo-store-1"

// MaxTreeTasks bounds the Tasks one Descendants read returns.
const MaxTreeTasks = 100_000

// errNoChildIndex refuses a tree read of a store opened read-only before
// its upgrade.
var errNoChildIndex = fmt.Errorf("%w: the store has format %s, without the children index: open it with the daemon once to upgrade it", ErrInvalid, storeFormat1)

// Children returns the ids of the children of Task parent, in id order
// (the order they were created).
func (s *Store) Children(parent string) ([]string, error) {
	nodes, err := s.descendants(parent, false)
	if err != nil {
		return nil, err
	}
	out := make([]string, len(nodes))
	for i, n := range nodes {
		out[i] = n.ID
	}
	return out, nil
}

// Descendants returns every descendant of Task root (not root itself),
// breadth first, each Task's children in id order, with its links, limits
// and recorded spend, read in one consistent view from the children index
// alone: its cost grows with the tree, not with the owner's other Tasks,
// and no metadata is decoded. A tree of more than MaxTreeTasks Tasks is
// refused with ErrTooLarge. An unknown root has no descendants.
func (s *Store) Descendants(root string) ([]api.TreeNode, error) {
	return s.descendants(root, true)
}

func (s *Store) descendants(root string, all bool) ([]api.TreeNode, error) {
	if err := ValidTaskID(root); err != nil {
		return nil, err
	}
	if s.noChildIndex {
		return nil, errNoChildIndex
	}
	var out []api.TreeNode
	err := s.db.View(func(txn *badger.Txn) error {
		opt := badger.DefaultIteratorOptions
		opt.Prefix = []byte{prefixChild, '/'}
		opt.PrefetchValues = false
		it := txn.NewIterator(opt)
		defer it.Close()
		out = make([]api.TreeNode, 0, 64)
		var slab []api.BudgetAmounts // the nodes' amounts, two by two
		parents := []string{root}
		for len(parents) > 0 {
			parent := parents[0]
			parents = parents[1:]
			p := childPrefix(parent)
			for it.Seek(p); it.ValidForPrefix(p); it.Next() {
				item := it.Item()
				n := api.TreeNode{ID: string(item.Key()[len(p):]), Parent: parent}
				if len(slab) < 2 {
					slab = make([]api.BudgetAmounts, 64)
				}
				n.Limits, n.Spent, slab = &slab[0], &slab[1], slab[2:]
				if err := item.Value(func(v []byte) error { return decodeTreeValue(v, &n) }); err != nil {
					return fmt.Errorf("children index entry %q: %w", item.Key(), err)
				}
				// A child is indexed once, under its parent, when it is
				// created with a new id, so the links form a tree; the
				// bound also ends a loop in damaged links.
				if len(out) == MaxTreeTasks {
					return fmt.Errorf("%w: the tree of task %s has more than %d tasks (or its links loop)", ErrTooLarge, root, MaxTreeTasks)
				}
				out = append(out, n)
				if all && n.Children > 0 {
					parents = append(parents, n.ID)
				}
			}
		}
		return nil
	})
	return out, err
}

// The value of a children index entry: what a tree's budget needs of the
// child (api.TreeNode), rewritten by the writer whenever it changes, in
// the commit that changes the child's metadata. Fixed-width big-endian:
// version 1, children and cycles (4 bytes each), limits and spend
// (tokens, cost, time: 8 bytes each), running since (Unix nanoseconds, 0:
// not running).
const treeValueLen = 1 + 4 + 4 + 6*8 + 8

func encodeTreeValue(m *api.TaskMeta) []byte {
	b := m.GetBudget()
	l, sp := b.GetLimits(), b.GetSpent()
	v := make([]byte, 0, treeValueLen)
	v = append(v, 1)
	v = binary.BigEndian.AppendUint32(v, m.GetChildren())
	v = binary.BigEndian.AppendUint32(v, m.GetCycles())
	for _, x := range []uint64{l.GetTokens(), l.GetCostNanoUsd(), l.GetTimeMs(), sp.GetTokens(), sp.GetCostNanoUsd(), sp.GetTimeMs()} {
		v = binary.BigEndian.AppendUint64(v, x)
	}
	var since int64
	if rs := b.GetRunningSince(); rs != nil {
		since = rs.AsTime().UnixNano()
	}
	return binary.BigEndian.AppendUint64(v, uint64(since))
}

// decodeTreeValue fills n's Children, Cycles, Limits, Spent (which must not be nil)
// and RunningSince from v.
func decodeTreeValue(v []byte, n *api.TreeNode) error {
	if len(v) != treeValueLen || v[0] != 1 {
		return fmt.Errorf("%w: children index value of %d bytes, version %v", ErrInvalid, len(v), v[:min(len(v), 1)])
	}
	u := func(i int) uint64 { return binary.BigEndian.Uint64(v[9+8*i:]) }
	n.Children = binary.BigEndian.Uint32(v[1:])
	n.Cycles = binary.BigEndian.Uint32(v[5:])
	n.Limits.Tokens, n.Limits.CostNanoUsd, n.Limits.TimeMs = u(0), u(1), u(2)
	n.Spent.Tokens, n.Spent.CostNanoUsd, n.Spent.TimeMs = u(3), u(4), u(5)
	if since := int64(u(6)); since != 0 {
		n.RunningSince = time.Unix(0, since).UTC()
	}
	return nil
}

// upgradeFormat1 builds the children index of a store of format 1 from
// its Tasks' metadata (and counts each parent's children in its metadata),
// then records format 2. It is idempotent: an upgrade interrupted by a
// crash is done again at the next open (the format key is written last).
func (s *Store) upgradeFormat1() error {
	metas := map[string]*api.TaskMeta{}
	children := map[string]uint32{}
	err := s.db.View(func(txn *badger.Txn) error {
		opt := badger.DefaultIteratorOptions
		opt.Prefix = metaKey("")
		it := txn.NewIterator(opt)
		defer it.Close()
		for it.Rewind(); it.ValidForPrefix(opt.Prefix); it.Next() {
			m := new(api.TaskMeta)
			if err := it.Item().Value(func(v []byte) error { return proto.Unmarshal(v, m) }); err != nil {
				return fmt.Errorf("decode meta %q: %w", it.Item().Key(), err)
			}
			metas[m.GetTaskId()] = m
			if p := m.GetParentId(); p != "" {
				children[p]++
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("upgrade from %s: %w", storeFormat1, err)
	}
	wb := s.db.NewWriteBatch()
	defer wb.Cancel()
	for id, n := range children {
		if m := metas[id]; m != nil && m.GetChildren() != n {
			m.Children = n
			b, err := proto.MarshalOptions{Deterministic: true}.Marshal(m)
			if err == nil {
				err = wb.Set(metaKey(id), b)
			}
			if err != nil {
				return fmt.Errorf("upgrade from %s: %w", storeFormat1, err)
			}
		}
	}
	for id, m := range metas {
		if p := m.GetParentId(); p != "" {
			if err := wb.Set(childKey(p, id), encodeTreeValue(m)); err != nil {
				return fmt.Errorf("upgrade from %s: %w", storeFormat1, err)
			}
		}
	}
	if err := wb.Flush(); err != nil {
		return fmt.Errorf("upgrade from %s: %w", storeFormat1, err)
	}
	if err := s.markFormat(); err != nil {
		return fmt.Errorf("upgrade from %s: record format: %w", storeFormat1, err)
	}
	s.log.Info().Int("parents", len(children)).Str("format", storeFormat).Msg("store upgraded: children index built")
	return nil
}
