package persistence

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dgraph-io/badger/v4"
	"github.com/rs/zerolog"
	"go.uber.org/goleak"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"lemo/api"
)

func TestMain(m *testing.M) {
	if os.Getenv(crashHelperEnv) != "" {
		crashHelper()
		return
	}
	if os.Getenv(powercutHelperEnv) != "" {
		powercutHelper()
		return
	}
	goleak.VerifyTestMain(m)
}

// testStore is a store with its locked data folder.
type testStore struct {
	*Store
	dd *DataDir
}

// openTest opens a store in dir with small buffers.
func openTest(t testing.TB, dir string) *testStore {
	t.Helper()
	dd, err := OpenDataDir(dir)
	if err != nil {
		t.Fatalf("OpenDataDir: %v", err)
	}
	st, err := Open(dd, Options{Log: zerolog.Nop(), MemTableSize: 8 << 20, BlockCacheSize: 8 << 20})
	if err != nil {
		_ = dd.Close()
		t.Fatalf("Open: %v", err)
	}
	ts := &testStore{Store: st, dd: dd}
	t.Cleanup(func() {
		_ = st.Close()
		_ = dd.Close()
	})
	return ts
}

// openReadOnly opens the store in dir read-only, as inspection does.
func openReadOnly(t testing.TB, dir string) *testStore {
	t.Helper()
	dd, err := OpenDataDir(dir)
	if err != nil {
		t.Fatalf("OpenDataDir: %v", err)
	}
	st, err := Open(dd, Options{Log: zerolog.Nop(), ReadOnly: true})
	if err != nil {
		_ = dd.Close()
		t.Fatalf("read-only Open: %v", err)
	}
	return &testStore{Store: st, dd: dd}
}

func closeTest(t testing.TB, ts *testStore) {
	t.Helper()
	if err := ts.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := ts.dd.Close(); err != nil {
		t.Fatalf("DataDir.Close: %v", err)
	}
}

var t0 = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

func ev(task string, seq uint64, body proto.Message) *api.Event {
	return api.NewEvent(task, seq, timestamppb.New(t0.Add(time.Duration(seq)*time.Second)), body)
}

func created(task, owner string) *api.Event {
	return ev(task, 1, &api.TaskCreated{Owner: owner, Model: "fake/m", Title: "t " + task})
}

func msg(task string, seq uint64, text string) *api.Event {
	return ev(task, seq, &api.UserMessage{Text: text})
}

func status(task string, seq uint64, st api.TaskStatus) *api.Event {
	return ev(task, seq, &api.StatusChanged{Status: st})
}

func mustAppend(t testing.TB, st *testStore, task string, evs ...*api.Event) *api.TaskMeta {
	t.Helper()
	m, err := st.Append(context.Background(), Append{TaskID: task, Events: evs})
	if err != nil {
		t.Fatalf("Append(%s, seq %d..): %v", task, evs[0].GetSeq(), err)
	}
	return m
}

func TestAppendReadBack(t *testing.T) {
	dir := t.TempDir()
	st := openTest(t, dir)
	task := NewTaskID(t0)
	m := mustAppend(t, st, task, created(task, "alice"), msg(task, 2, "hello"), status(task, 3, api.TaskStatus_TASK_STATUS_RUNNING))
	if m.GetLastSeq() != 3 || m.GetStatus() != api.TaskStatus_TASK_STATUS_RUNNING || m.GetOwner() != "alice" {
		t.Fatalf("meta after append = %v", m)
	}
	mustAppend(t, st, task, msg(task, 4, "again"))
	closeTest(t, st)

	st = openTest(t, dir)
	evs, err := st.ReadEvents(task, 1, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != 4 {
		t.Fatalf("ReadEvents = %d events, want 4", len(evs))
	}
	for i, e := range evs {
		if e.GetSeq() != uint64(i+1) {
			t.Fatalf("event %d has seq %d", i, e.GetSeq())
		}
	}
	if got := evs[3].GetUserMessage().GetText(); got != "again" {
		t.Fatalf("event 4 text = %q", got)
	}
	tail, err := st.Tail(task, 2)
	if err != nil || len(tail) != 2 || tail[0].GetSeq() != 3 {
		t.Fatalf("Tail(2) = %v, %v", tail, err)
	}
	m, err = st.Meta(task)
	if err != nil || m.GetLastSeq() != 4 {
		t.Fatalf("Meta = %v, %v", m, err)
	}
	if _, err := st.Meta(NewTaskID(t0)); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Meta(unknown) err = %v, want ErrNotFound", err)
	}
}

// An event's record leaves out the Task and seq its key names; the
// records of stores written before, which hold them, read the same, and a
// record naming another Task or seq than its key is refused.
func TestEventRecordsLeaveOutTheirKey(t *testing.T) {
	st := openTest(t, t.TempDir())
	task := NewTaskID(t0)
	mustAppend(t, st, task, created(task, "alice"), msg(task, 2, "hello"))
	err := st.db.View(func(txn *badger.Txn) error {
		item, err := txn.Get(eventKey(task, 2))
		if err != nil {
			return err
		}
		return item.Value(func(v []byte) error {
			var rec api.Event
			if err := proto.Unmarshal(v, &rec); err != nil {
				return err
			}
			if rec.GetTaskId() != "" || rec.GetSeq() != 0 || rec.GetUserMessage().GetText() != "hello" || !rec.GetTime().AsTime().Equal(t0.Add(2*time.Second)) {
				t.Errorf("stored record = %v, want the time and body alone", &rec)
			}
			return nil
		})
	})
	if err != nil {
		t.Fatal(err)
	}

	// A whole event, as stores before wrote it, and one naming another
	// Task, then another seq.
	put := func(seq uint64, e *api.Event) {
		t.Helper()
		b, err := proto.Marshal(e)
		if err != nil {
			t.Fatal(err)
		}
		if err := st.db.Update(func(txn *badger.Txn) error { return txn.Set(eventKey(task, seq), b) }); err != nil {
			t.Fatal(err)
		}
	}
	put(3, msg(task, 3, "whole"))
	evs, err := st.ReadEvents(task, 1, 0)
	if err != nil || len(evs) != 3 {
		t.Fatalf("ReadEvents = %v, %v", evs, err)
	}
	for i, e := range evs {
		if e.GetTaskId() != task || e.GetSeq() != uint64(i+1) {
			t.Fatalf("event %d = task %q seq %d", i, e.GetTaskId(), e.GetSeq())
		}
	}
	err = st.View(func(v *Snapshot) error {
		e, err := v.Event(task, 2)
		if err != nil || e.GetTaskId() != task || e.GetSeq() != 2 || e.GetUserMessage().GetText() != "hello" {
			t.Errorf("Snapshot.Event = %v, %v", e, err)
		}
		n := 0
		err = v.Events(task, 1, 0, func(e *api.Event) error {
			n++
			if e.GetTaskId() != task || e.GetSeq() != uint64(n) {
				t.Errorf("Snapshot.Events %d = task %q seq %d", n, e.GetTaskId(), e.GetSeq())
			}
			return nil
		})
		if err != nil || n != 3 {
			t.Errorf("Snapshot.Events read %d, %v", n, err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	other := NewTaskID(t0.Add(time.Second))
	for _, bad := range []struct {
		name string
		rec  *api.Event
	}{
		{"another task", msg(other, 3, "stray")},
		{"another seq", msg(task, 9, "stray")},
	} {
		put(3, bad.rec)
		if _, err := st.ReadEvents(task, 1, 0); err == nil || !strings.Contains(err.Error(), "the record names") {
			t.Errorf("%s: ReadEvents err = %v, want the record refused", bad.name, err)
		}
		if err := st.View(func(v *Snapshot) error { _, err := v.Event(task, 3); return err }); err == nil {
			t.Errorf("%s: Snapshot.Event read it", bad.name)
		}
	}
}

func TestAppendConflicts(t *testing.T) {
	st := openTest(t, t.TempDir())
	task := NewTaskID(t0)
	ctx := context.Background()
	if _, err := st.Append(ctx, Append{TaskID: task, Events: []*api.Event{msg(task, 1, "x")}}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("first event not task_created: err = %v, want ErrInvalid", err)
	}
	mustAppend(t, st, task, created(task, "o"))
	cases := []struct {
		name string
		evs  []*api.Event
		want error
	}{
		{"gap", []*api.Event{msg(task, 3, "x")}, ErrSeqConflict},
		{"stale", []*api.Event{msg(task, 1, "x")}, ErrSeqConflict},
		{"duplicate create", []*api.Event{created(task, "o")}, ErrSeqConflict},
		{"not contiguous", []*api.Event{msg(task, 2, "a"), msg(task, 4, "b")}, ErrInvalid},
		{"foreign task", []*api.Event{msg("OTHER", 2, "a")}, ErrInvalid},
		{"late create", []*api.Event{ev(task, 2, &api.TaskCreated{})}, ErrInvalid},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := st.Append(ctx, Append{TaskID: task, Events: c.evs})
			if !errors.Is(err, c.want) {
				t.Fatalf("err = %v, want %v", err, c.want)
			}
		})
	}
	evs, _ := st.ReadEvents(task, 1, 0)
	if len(evs) != 1 {
		t.Fatalf("after rejected appends the log has %d events, want 1", len(evs))
	}
	if _, err := st.Append(ctx, Append{TaskID: "bad/id", Events: []*api.Event{created("bad/id", "o")}}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("bad id: err = %v", err)
	}
}

func TestStatusIndexAndList(t *testing.T) {
	dir := t.TempDir()
	st := openTest(t, dir)
	var ids []string
	for i := 0; i < 5; i++ {
		id := NewTaskID(t0.Add(time.Duration(i) * time.Millisecond))
		ids = append(ids, id)
		owner := "alice"
		if i%2 == 1 {
			owner = "bob"
		}
		mustAppend(t, st, id, created(id, owner), status(id, 2, api.TaskStatus_TASK_STATUS_RUNNING))
	}
	mustAppend(t, st, ids[0], status(ids[0], 3, api.TaskStatus_TASK_STATUS_PAUSED))
	running, err := st.TasksWithStatus(api.TaskStatus_TASK_STATUS_RUNNING)
	if err != nil || len(running) != 4 {
		t.Fatalf("running = %d, %v; want 4", len(running), err)
	}
	paused, _ := st.TasksWithStatus(api.TaskStatus_TASK_STATUS_PAUSED)
	if len(paused) != 1 || paused[0].GetTaskId() != ids[0] {
		t.Fatalf("paused = %v", paused)
	}
	closeTest(t, st)
	st = openTest(t, dir)

	// Newest first, paginated.
	page, next, err := st.ListTasks(ListOptions{Limit: 2})
	if err != nil || len(page) != 2 || page[0].GetTaskId() != ids[4] || page[1].GetTaskId() != ids[3] || next != ids[3] {
		t.Fatalf("page 1 = %v next %q err %v", page, next, err)
	}
	page, next, _ = st.ListTasks(ListOptions{Limit: 2, Before: next})
	if len(page) != 2 || page[0].GetTaskId() != ids[2] || next != ids[1] {
		t.Fatalf("page 2 = %v next %q", page, next)
	}
	page, next, _ = st.ListTasks(ListOptions{Limit: 2, Before: next})
	if len(page) != 1 || page[0].GetTaskId() != ids[0] || next != "" {
		t.Fatalf("page 3 = %v next %q", page, next)
	}
	bobs, _, _ := st.ListTasks(ListOptions{Owner: "bob"})
	if len(bobs) != 2 || bobs[0].GetTaskId() != ids[3] || bobs[1].GetTaskId() != ids[1] {
		t.Fatalf("bob's tasks = %v", bobs)
	}
}

func TestExtraKeysCommitWithEvents(t *testing.T) {
	st := openTest(t, t.TempDir())
	task := NewTaskID(t0)
	_, err := st.Append(context.Background(), Append{TaskID: task, Events: []*api.Event{created(task, "o")},
		Extra: []KV{{Key: []byte("x/posting"), Value: []byte("1")}}})
	if err != nil {
		t.Fatal(err)
	}
	v, err := st.Get([]byte("x/posting"))
	if err != nil || string(v) != "1" {
		t.Fatalf("Get = %q, %v", v, err)
	}
	_, err = st.Append(context.Background(), Append{TaskID: task, Events: []*api.Event{msg(task, 2, "x")},
		Extra: []KV{{Key: []byte("x/posting"), Delete: true}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Get([]byte("x/posting")); !errors.Is(err, ErrNotFound) {
		t.Fatalf("deleted key: err = %v", err)
	}
}

// The writer begins the transaction of its next batch as soon as a commit
// is handed to Badger (newTxn), so the next append is staged in a
// transaction begun before other writers' later commits (the memory's
// UpdateIndex). Its writes still land after theirs, without a conflict,
// and a commit of theirs is never lost to it.
func TestAppendAfterAnotherWritersCommit(t *testing.T) {
	st := openTest(t, t.TempDir())
	task := NewTaskID(t0)
	key := append(IndexPrefix(), "shared"...)
	other := append(IndexPrefix(), "other"...)
	if _, err := st.Append(context.Background(), Append{TaskID: task, Events: []*api.Event{created(task, "o")},
		Extra: []KV{{Key: key, Value: []byte("append 1")}}}); err != nil {
		t.Fatal(err)
	}
	for i, want := range []string{"append 2", "append 3"} {
		if err := st.UpdateIndex([]KV{{Key: key, Value: []byte("index")}, {Key: other, Value: []byte(want)}}); err != nil {
			t.Fatal(err)
		}
		if _, err := st.Append(context.Background(), Append{TaskID: task, Events: []*api.Event{msg(task, uint64(i+2), want)},
			Extra: []KV{{Key: key, Value: []byte(want)}}}); err != nil {
			t.Fatalf("append after another writer's commit: %v", err)
		}
		if v, err := st.Get(key); err != nil || string(v) != want {
			t.Fatalf("the key both wrote: %q, %v; want the later commit's %q", v, err, want)
		}
		if v, err := st.Get(other); err != nil || string(v) != want {
			t.Fatalf("the other writer's own key: %q, %v; want %q", v, err, want)
		}
	}
}

func TestTooLargeEventRefused(t *testing.T) {
	st := openTest(t, t.TempDir())
	task := NewTaskID(t0)
	mustAppend(t, st, task, created(task, "o"))
	big := make([]byte, MaxEventBytes+1)
	for i := range big {
		big[i] = 'a'
	}
	_, err := st.Append(context.Background(), Append{TaskID: task, Events: []*api.Event{msg(task, 2, string(big))}})
	if !errors.Is(err, ErrTooLarge) {
		t.Fatalf("err = %v, want ErrTooLarge", err)
	}
	mustAppend(t, st, task, msg(task, 2, "small"))
}

// TestBatchSplitAcrossTransactions appends, concurrently, more data than one
// Badger transaction holds (with an 8 MiB memtable a transaction takes about
// 1.2 MB): every append must be acknowledged and present.
func TestBatchSplitAcrossTransactions(t *testing.T) {
	dir := t.TempDir()
	st := openTest(t, dir)
	const tasks, perTask = 16, 4
	payload := string(make([]byte, 300<<10))
	ids := make([]string, tasks)
	for i := range ids {
		ids[i] = NewTaskID(t0)
		mustAppend(t, st, ids[i], created(ids[i], "o"))
	}
	var wg sync.WaitGroup
	errs := make(chan error, tasks)
	for _, id := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for s := uint64(2); s < 2+perTask; s++ {
				if _, err := st.Append(context.Background(), Append{TaskID: id, Events: []*api.Event{msg(id, s, payload)}}); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("append: %v", err)
	}
	if st.w.splits.Load() == 0 {
		t.Fatal("no batch was split: the test did not exercise splitting")
	}
	closeTest(t, st)
	st = openTest(t, dir)
	for _, id := range ids {
		m, err := st.Meta(id)
		if err != nil || m.GetLastSeq() != 1+perTask {
			t.Fatalf("task %s meta = %v, %v", id, m, err)
		}
	}
}

// An append bigger than a whole transaction fails alone; others in the same
// batch are unaffected.
func TestAppendLargerThanTransaction(t *testing.T) {
	st := openTest(t, t.TempDir())
	task := NewTaskID(t0)
	mustAppend(t, st, task, created(task, "o"))
	payload := string(make([]byte, 600<<10))
	var evs []*api.Event
	for s := uint64(2); s < 6; s++ {
		evs = append(evs, msg(task, s, payload))
	}
	_, err := st.Append(context.Background(), Append{TaskID: task, Events: evs})
	if !errors.Is(err, ErrTooLarge) {
		t.Fatalf("err = %v, want ErrTooLarge", err)
	}
	m := mustAppend(t, st, task, msg(task, 2, "fits"))
	if m.GetLastSeq() != 2 {
		t.Fatalf("last seq = %d, want 2", m.GetLastSeq())
	}
}

func TestDataDirRules(t *testing.T) {
	t.Run("second daemon is refused and changes nothing", func(t *testing.T) {
		dir := t.TempDir()
		st := openTest(t, dir)
		_ = st
		before := snapshotDir(t, dir)
		_, err := OpenDataDir(dir)
		if !errors.Is(err, ErrLocked) {
			t.Fatalf("second OpenDataDir err = %v, want ErrLocked", err)
		}
		if after := snapshotDir(t, dir); after != before {
			t.Fatalf("folder changed:\nbefore %s\nafter  %s", before, after)
		}
	})
	t.Run("a file is not a data folder", func(t *testing.T) {
		f := filepath.Join(t.TempDir(), "file")
		if err := os.WriteFile(f, []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := OpenDataDir(f); err == nil {
			t.Fatal("OpenDataDir(file) succeeded")
		}
	})
	t.Run("a foreign non-empty folder is refused", func(t *testing.T) {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("mine"), 0o600); err != nil {
			t.Fatal(err)
		}
		before := snapshotDir(t, dir)
		if _, err := OpenDataDir(dir); err == nil {
			t.Fatal("OpenDataDir(foreign) succeeded")
		}
		if after := snapshotDir(t, dir); after != before {
			t.Fatalf("folder changed: %s -> %s", before, after)
		}
	})
	t.Run("a lost store is not replaced by a fresh one", func(t *testing.T) {
		dir := t.TempDir()
		st := openTest(t, dir)
		closeTest(t, st)
		if err := os.RemoveAll(filepath.Join(dir, storeDir)); err != nil {
			t.Fatal(err)
		}
		dd, err := OpenDataDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		defer dd.Close()
		if _, err := Open(dd, Options{Log: zerolog.Nop()}); err == nil {
			t.Fatal("Open over a lost store succeeded")
		}
		if _, err := os.Stat(filepath.Join(dir, storeDir)); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("a store folder was created: %v", err)
		}
	})
	t.Run("a damaged store is refused", func(t *testing.T) {
		dir := t.TempDir()
		st := openTest(t, dir)
		closeTest(t, st)
		if err := os.WriteFile(filepath.Join(dir, storeDir, "MANIFEST"), []byte("garbage, not a manifest"), 0o600); err != nil {
			t.Fatal(err)
		}
		dd, err := OpenDataDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		defer dd.Close()
		if st, err := Open(dd, Options{Log: zerolog.Nop()}); err == nil {
			_ = st.Close()
			t.Fatal("Open on a damaged store succeeded")
		}
	})
}

// snapshotDir describes every file under dir (name, size, mtime).
func snapshotDir(t testing.TB, dir string) string {
	t.Helper()
	var s string
	err := filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		s += fmt.Sprintf("%s:%d:%d;", p, fi.Size(), fi.ModTime().UnixNano())
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestNewTaskIDSortsByTime(t *testing.T) {
	a := NewTaskID(t0)
	b := NewTaskID(t0.Add(time.Millisecond))
	if len(a) != 26 || !(a < b) {
		t.Fatalf("ids %q, %q: want 26 chars, sorted by time", a, b)
	}
	if err := ValidTaskID(a); err != nil {
		t.Fatal(err)
	}
}

func TestPendingApprovalsIndex(t *testing.T) {
	dir := t.TempDir()
	st := openTest(t, dir)
	a, b := NewTaskID(t0), NewTaskID(t0.Add(time.Millisecond))
	mustAppend(t, st, a, created(a, "alice"), ev(a, 2, &api.ApprovalRequested{ApprovalId: a + ".call-1-1", CallId: "call-1-1"}))
	mustAppend(t, st, b, created(b, "bob"), ev(b, 2, &api.ApprovalRequested{ApprovalId: b + ".call-1-1", CallId: "call-1-1"}),
		ev(b, 3, &api.ApprovalRequested{ApprovalId: b + ".call-1-2", CallId: "call-1-2"}))
	mustAppend(t, st, b, ev(b, 4, &api.ApprovalResolved{ApprovalId: b + ".call-1-1", CallId: "call-1-1"}))
	closeTest(t, st)
	st = openTest(t, dir)
	all, err := st.PendingApprovals("")
	if err != nil || len(all) != 2 {
		t.Fatalf("all pending = %d, %v; want 2", len(all), err)
	}
	bobs, _ := st.PendingApprovals("bob")
	if len(bobs) != 1 || bobs[0].GetApprovalRequested().GetApprovalId() != b+".call-1-2" || bobs[0].GetSeq() != 3 {
		t.Fatalf("bob's pending = %v", bobs)
	}
}

func TestStatusCountsAndCommitObserver(t *testing.T) {
	dir := t.TempDir()
	var commits, events, acks atomic.Int64
	dd, err := OpenDataDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	st, err := Open(dd, Options{Log: zerolog.Nop(), MemTableSize: 8 << 20, OnCommit: func(a, e int, wait time.Duration) {
		commits.Add(int64(a))
		events.Add(int64(e))
	}, OnAck: func(wait time.Duration) {
		if wait > 0 {
			acks.Add(1)
		}
	}})
	if err != nil {
		t.Fatal(err)
	}
	ts := &testStore{Store: st, dd: dd}
	a, b := NewTaskID(t0), NewTaskID(t0.Add(time.Millisecond))
	mustAppend(t, ts, a, created(a, "o"), status(a, 2, api.TaskStatus_TASK_STATUS_RUNNING))
	mustAppend(t, ts, b, created(b, "o"), status(b, 2, api.TaskStatus_TASK_STATUS_RUNNING))
	mustAppend(t, ts, a, status(a, 3, api.TaskStatus_TASK_STATUS_FINISHED))
	want := map[api.TaskStatus]int64{api.TaskStatus_TASK_STATUS_RUNNING: 1, api.TaskStatus_TASK_STATUS_FINISHED: 1}
	if got := st.StatusCounts(); !maps.Equal(got, want) {
		t.Fatalf("StatusCounts() = %v, want %v", got, want)
	}
	if commits.Load() != 3 || events.Load() != 5 || acks.Load() != 3 {
		t.Fatalf("observed %d appends, %d events, %d acknowledgements with their wait; want 3, 5, 3", commits.Load(), events.Load(), acks.Load())
	}
	closeTest(t, ts)
	ts = openTest(t, dir)
	if got := ts.StatusCounts(); !maps.Equal(got, want) {
		t.Fatalf("after reopening StatusCounts() = %v, want %v", got, want)
	}
}
