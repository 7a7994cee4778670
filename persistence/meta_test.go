package persistence

import (
	"context"
	"testing"

	"github.com/dgraph-io/badger/v4"
	"google.golang.org/protobuf/proto"

	"lemo/api"
)

// When an append rewrites its Task's metadata record.
func TestSaveMeta(t *testing.T) {
	running := func(last uint64) *api.TaskMeta {
		return &api.TaskMeta{Status: api.TaskStatus_TASK_STATUS_RUNNING, LastSeq: last}
	}
	paused := &api.TaskMeta{Status: api.TaskStatus_TASK_STATUS_PAUSED, LastSeq: 12}
	tests := []struct {
		name       string
		prev, meta *api.TaskMeta
		saved      uint64
		want       bool
	}{
		{"creation", nil, running(3), 0, true},
		{"status change", running(10), paused, 10, true},
		{"a step", running(10), running(16), 3, false},
		{"the last seq before the bound", running(10), running(3 + metaEvery - 1), 3, false},
		{"metaEvery events since the record", running(10), running(3 + metaEvery), 3, true},
		{"far past it (a long append)", running(10), running(500), 3, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := saveMeta(tt.prev, tt.meta, tt.saved); got != tt.want {
				t.Fatalf("saveMeta = %v, want %v", got, tt.want)
			}
		})
	}
}

// metaRecord is the stored metadata record of task, as written.
func metaRecord(t testing.TB, st *testStore, task string) *api.TaskMeta {
	t.Helper()
	m := new(api.TaskMeta)
	err := st.db.View(func(txn *badger.Txn) error {
		item, err := txn.Get(metaKey(task))
		if err != nil {
			return err
		}
		return item.Value(func(v []byte) error { return proto.Unmarshal(v, m) })
	})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// A Task's metadata record is rewritten at its creation, at each status
// change and every metaEvery events; every read of the metadata folds in
// the events after it, before and after a reopen, and the writer goes on
// from the record after a reopen.
func TestMetaRecordIsACheckpoint(t *testing.T) {
	dir := t.TempDir()
	st := openTest(t, dir)
	task := NewTaskID(t0)
	other := NewTaskID(t0.Add(1))
	mustAppend(t, st, other, created(other, "alice"))
	want := mustAppend(t, st, task, created(task, "alice"), status(task, 2, api.TaskStatus_TASK_STATUS_RUNNING))
	if rec := metaRecord(t, st, task); rec.GetLastSeq() != 2 {
		t.Fatalf("record after the creation at seq %d, want 2", rec.GetLastSeq())
	}
	seq := uint64(2)
	step := func() {
		t.Helper()
		want = mustAppend(t, st, task, msg(task, seq+1, "a"), msg(task, seq+2, "b"), msg(task, seq+3, "c"))
		seq += 3
	}
	// Appends of three events: the record is rewritten once 64 events
	// passed since it was, at seq 68 (2 + 66), then 134.
	for seq < 100 {
		step()
		rec := metaRecord(t, st, task)
		wantRec := uint64(2)
		if seq >= 2+metaEvery {
			wantRec = 68
		}
		if rec.GetLastSeq() != wantRec {
			t.Fatalf("after seq %d the record stands at %d, want %d", seq, rec.GetLastSeq(), wantRec)
		}
	}
	check := func(when string) {
		t.Helper()
		reads := map[string]*api.TaskMeta{}
		var err error
		if reads["Store.Meta"], err = st.Meta(task); err != nil {
			t.Fatal(err)
		}
		if err := st.View(func(v *Snapshot) error {
			if reads["Snapshot.Meta"], err = v.Meta(task); err != nil {
				return err
			}
			return v.EachMeta(func(m *api.TaskMeta) error {
				if m.GetTaskId() == task {
					reads["EachMeta"] = m
				}
				return nil
			})
		}); err != nil {
			t.Fatal(err)
		}
		for _, owner := range []string{"", "alice"} {
			list, _, err := st.ListTasks(ListOptions{Owner: owner})
			if err != nil {
				t.Fatal(err)
			}
			for _, m := range list {
				if m.GetTaskId() == task {
					reads["ListTasks owner "+owner] = m
				}
			}
		}
		running, err := st.TasksWithStatus(api.TaskStatus_TASK_STATUS_RUNNING)
		if err != nil || len(running) != 1 {
			t.Fatalf("TasksWithStatus = %v, %v", running, err)
		}
		reads["TasksWithStatus"] = running[0]
		if len(reads) != 6 {
			t.Fatalf("%s: read by %d ways, want 6", when, len(reads))
		}
		for how, m := range reads {
			if !proto.Equal(m, want) {
				t.Errorf("%s: %s = %v, want %v", when, how, m, want)
			}
		}
	}
	check("before a reopen")
	if rec := metaRecord(t, st, task); rec.GetLastSeq() == want.GetLastSeq() {
		t.Fatalf("the record is current (seq %d): nothing to fold", rec.GetLastSeq())
	}
	closeTest(t, st)

	st = openTest(t, dir)
	check("after a reopen")
	for seq < 140 {
		step()
	}
	if rec := metaRecord(t, st, task); rec.GetLastSeq() != 134 {
		t.Fatalf("after a reopen the record stands at %d, want 134", rec.GetLastSeq())
	}
	// A status change makes the record current.
	want = mustAppend(t, st, task, status(task, seq+1, api.TaskStatus_TASK_STATUS_PAUSED))
	if rec := metaRecord(t, st, task); !proto.Equal(rec, want) {
		t.Fatalf("record after a status change = %v, want %v", rec, want)
	}
	if _, err := st.Append(context.Background(), Append{TaskID: task, Events: []*api.Event{msg(task, seq, "stale")}}); err == nil {
		t.Fatal("an append at a seq already written was accepted")
	}
}

// A store of format 2 is marked format 3 when opened for writing, and
// left as it is when opened read-only.
func TestFormat2IsMarked3(t *testing.T) {
	dir := t.TempDir()
	st := openTest(t, dir)
	task := NewTaskID(t0)
	mustAppend(t, st, task, created(task, "alice"))
	if err := st.db.Update(func(txn *badger.Txn) error { return txn.Set(formatKey, []byte(storeFormat2)) }); err != nil {
		t.Fatal(err)
	}
	closeTest(t, st)
	ro := openReadOnly(t, dir)
	if v, err := ro.Get(formatKey); err != nil || string(v) != storeFormat2 {
		t.Fatalf("format after a read-only open = %q, %v", v, err)
	}
	closeTest(t, ro)
	st = openTest(t, dir)
	if v, err := st.Get(formatKey); err != nil || string(v) != storeFormat {
		t.Fatalf("format after a read-write open = %q, %v; want %q", v, err, storeFormat)
	}
	if m, err := st.Meta(task); err != nil || m.GetOwner() != "alice" {
		t.Fatalf("Meta = %v, %v", m, err)
	}
}
