package persistence

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/dgraph-io/badger/v4"
	"github.com/rs/zerolog"
	"google.golang.org/protobuf/proto"

	"lemo/api"
)

// spawnChild commits parent's record of a spawn with child's creation.
func spawnChild(t testing.TB, st *testStore, parent string, pseq uint64, child, owner string) {
	t.Helper()
	_, err := st.Append(context.Background(), Append{
		TaskID: parent,
		Events: []*api.Event{ev(parent, pseq, &api.ChildSpawned{ChildId: child, CallId: fmt.Sprintf("call-%d", pseq)})},
		Also:   []Append{{TaskID: child, Events: []*api.Event{ev(child, 1, &api.TaskCreated{Owner: owner, ParentId: parent})}}},
	})
	if err != nil {
		t.Fatalf("spawn %s under %s: %v", child, parent, err)
	}
}

func ids(nodes []api.TreeNode) []string {
	out := make([]string, len(nodes))
	for i, n := range nodes {
		out[i] = n.ID
	}
	return out
}

// buildTree creates root -> a, b; a -> a1 among other Tasks of the same
// owner and of another, and returns root, a, b, a1.
func buildTree(t testing.TB, st *testStore) (root, a, b, a1 string) {
	t.Helper()
	made := map[int]string{}
	id := func(i int) string {
		if made[i] == "" {
			made[i] = NewTaskID(t0.Add(time.Duration(i) * time.Second))
		}
		return made[i]
	}
	root, a, b, a1 = id(1), id(2), id(3), id(4)
	for i := 10; i < 15; i++ { // other Tasks of the owner, one with its own child
		mustAppend(t, st, id(i), created(id(i), "alice"))
	}
	spawnChild(t, st, id(10), 2, id(20), "alice")
	mustAppend(t, st, id(30), created(id(30), "bob"))
	mustAppend(t, st, root, created(root, "alice"))
	spawnChild(t, st, root, 2, a, "alice")
	spawnChild(t, st, root, 3, b, "alice")
	_, err := st.Append(context.Background(), Append{
		TaskID: a,
		Events: []*api.Event{ev(a, 2, &api.ChildSpawned{ChildId: a1})},
		Also:   []Append{{TaskID: a1, Events: []*api.Event{ev(a1, 1, &api.TaskCreated{Owner: "alice", ParentId: a, Budget: &api.BudgetAmounts{Tokens: 5000}})}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	return root, a, b, a1
}

// spendA1 starts a1 running with a Cycle that reserves 1100 tokens.
func spendA1(t testing.TB, st *testStore, a1 string) {
	t.Helper()
	mustAppend(t, st, a1, status(a1, 2, api.TaskStatus_TASK_STATUS_RUNNING),
		ev(a1, 3, &api.CycleStarted{Cycle: 1, Reservation: &api.BudgetReservation{InputTokens: 1000, OutputTokens: 100}}))
}

// The children index is written with each spawn: a Task's children and
// its tree are read without the owner's other Tasks, and survive a reopen.
func TestChildrenIndex(t *testing.T) {
	dir := t.TempDir()
	st := openTest(t, dir)
	root, a, b, a1 := buildTree(t, st)
	spendA1(t, st, a1)
	check := func(st *testStore) {
		t.Helper()
		if got, err := st.Children(root); err != nil || !slices.Equal(got, []string{a, b}) {
			t.Fatalf("Children(root) = %v, %v; want [a b]", got, err)
		}
		if got, err := st.Children(b); err != nil || len(got) != 0 {
			t.Fatalf("Children(b) = %v, %v; want none", got, err)
		}
		tree, err := st.Descendants(root)
		if err != nil || !slices.Equal(ids(tree), []string{a, b, a1}) {
			t.Fatalf("Descendants(root) = %v, %v; want a, b, a1", ids(tree), err)
		}
		if tree[2].Parent != a || tree[0].Children != 1 || tree[1].Children != 0 {
			t.Fatalf("Descendants(root) = %+v; want a with 1 child, b with none, a1 under a", tree)
		}
		// a1's spend: its open reservation (1000 + 100 tokens), running.
		if n := tree[2]; n.Spent.GetTokens() != 1100 || n.Limits.GetTokens() != 5000 || n.RunningSince.IsZero() || n.Cycles != 1 {
			t.Fatalf("a1 = %+v; want 1100 tokens spent of 5000 in Cycle 1, running", n)
		}
		if sub, err := st.Descendants(a); err != nil || !slices.Equal(ids(sub), []string{a1}) {
			t.Fatalf("Descendants(a) = %v, %v; want a1", ids(sub), err)
		}
		if got, err := st.Descendants(NewTaskID(t0.Add(time.Hour))); err != nil || len(got) != 0 {
			t.Fatalf("Descendants(unknown) = %v, %v; want none", got, err)
		}
	}
	check(st)
	closeTest(t, st)
	check(openTest(t, dir))
}

// A spawn refused (the child id taken) writes no index entry.
func TestChildrenIndexRefusedSpawn(t *testing.T) {
	st := openTest(t, t.TempDir())
	p1, p2, child := NewTaskID(t0), NewTaskID(t0.Add(time.Second)), NewTaskID(t0.Add(2*time.Second))
	mustAppend(t, st, p1, created(p1, "alice"))
	mustAppend(t, st, p2, created(p2, "alice"))
	spawnChild(t, st, p1, 2, child, "alice")
	_, err := st.Append(context.Background(), Append{TaskID: p2, Events: []*api.Event{ev(p2, 2, &api.ChildSpawned{ChildId: child})},
		Also: []Append{{TaskID: child, Events: []*api.Event{ev(child, 1, &api.TaskCreated{Owner: "alice", ParentId: p2})}}}})
	if !errors.Is(err, ErrSeqConflict) {
		t.Fatalf("second spawn of one child id: %v, want ErrSeqConflict", err)
	}
	if got, err := st.Children(p2); err != nil || len(got) != 0 {
		t.Fatalf("Children(p2) = %v, %v; want none", got, err)
	}
}

// A store of format 1 (no children index) is upgraded when opened for
// writing: the index is built from the Tasks' metadata. Opened read-only
// before that, it is readable but refuses tree reads.
func TestChildrenIndexUpgradeFromFormat1(t *testing.T) {
	dir := t.TempDir()
	st := openTest(t, dir)
	root, a, b, a1 := buildTree(t, st)
	spendA1(t, st, a1)
	// Make it a store of format 1: every Task's metadata record current
	// (format 3 writes checkpoints), no index, the old format key.
	wholeMeta(t, st)
	err := st.db.Update(func(txn *badger.Txn) error {
		opt := badger.DefaultIteratorOptions
		opt.PrefetchValues = false
		opt.Prefix = []byte{prefixChild, '/'}
		it := txn.NewIterator(opt)
		var keys [][]byte
		for it.Rewind(); it.ValidForPrefix(opt.Prefix); it.Next() {
			keys = append(keys, it.Item().KeyCopy(nil))
		}
		it.Close()
		for _, k := range keys {
			if err := txn.Delete(k); err != nil {
				return err
			}
		}
		return txn.Set(formatKey, []byte(storeFormat1))
	})
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := st.Children(root); len(got) != 0 {
		t.Fatalf("the index was not removed: %v", got)
	}
	closeTest(t, st)

	ro := openReadOnly(t, dir)
	if _, err := ro.Meta(root); err != nil {
		t.Fatalf("read-only Meta: %v", err)
	}
	if _, err := ro.Descendants(root); !errors.Is(err, ErrInvalid) {
		t.Fatalf("read-only Descendants of format 1: %v, want ErrInvalid", err)
	}
	closeTest(t, ro)

	st = openTest(t, dir)
	tree, err := st.Descendants(root)
	if err != nil || !slices.Equal(ids(tree), []string{a, b, a1}) || tree[0].Children != 1 || tree[2].Spent.GetTokens() != 1100 {
		t.Fatalf("Descendants(root) after the upgrade = %+v, %v", tree, err)
	}
	if m, err := st.Meta(a); err != nil || m.GetChildren() != 1 {
		t.Fatalf("a's meta after the upgrade = %v, %v; want 1 child counted", m, err)
	}
	v, err := st.Get(formatKey)
	if err != nil || string(v) != storeFormat {
		t.Fatalf("format after the upgrade = %q, %v; want %q", v, err, storeFormat)
	}
}

// BenchmarkTree50Among10000 reads the descendants of the root of a tree of 50 Tasks (a root, 7 children,
// 42 grandchildren) of an owner with 10,000 other Tasks.
func BenchmarkTree50Among10000(b *testing.B) {
	dd, err := OpenDataDir(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	store, err := Open(dd, Options{Log: zerolog.Nop()})
	if err != nil {
		b.Fatal(err)
	}
	st := &testStore{Store: store, dd: dd}
	b.Cleanup(func() { _ = st.Close(); _ = dd.Close() })
	root := benchTree(b, st, 10_000)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		tree, err := st.Descendants(root)
		if err != nil || len(tree) != 49 {
			b.Fatalf("Descendants = %d tasks, %v", len(tree), err)
		}
	}
}

// benchTree writes others Tasks of owner "o" and a tree of 50 Tasks of
// the same owner (a root, 7 children, 6 grandchildren under each), and
// returns the root.
func benchTree(b testing.TB, st *testStore, others int) string {
	at := t0
	next := func() string { at = at.Add(time.Millisecond); return NewTaskID(at) }
	for i := 0; i < others; i++ {
		id := next()
		mustAppend(b, st, id, created(id, "o"))
	}
	root := next()
	mustAppend(b, st, root, created(root, "o"))
	pseq := map[string]uint64{root: 1}
	for i := 0; i < 7; i++ {
		kid := next()
		pseq[root]++
		spawnChild(b, st, root, pseq[root], kid, "o")
		pseq[kid] = 1
		for j := 0; j < 6; j++ {
			gk := next()
			pseq[kid]++
			spawnChild(b, st, kid, pseq[kid], gk, "o")
		}
	}
	return root
}

// wholeMeta rewrites every Task's metadata record as the metadata after
// its last event, as stores before format 3 kept it.
func wholeMeta(t testing.TB, st *testStore) {
	t.Helper()
	var metas []*api.TaskMeta
	if err := st.View(func(v *Snapshot) error {
		return v.EachMeta(func(m *api.TaskMeta) error { metas = append(metas, m); return nil })
	}); err != nil {
		t.Fatal(err)
	}
	err := st.db.Update(func(txn *badger.Txn) error {
		for _, m := range metas {
			b, err := proto.Marshal(m)
			if err != nil {
				return err
			}
			if err := txn.Set(metaKey(m.GetTaskId()), b); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
