package persistence

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"lemo/api"
)

// TestLinkedAppend: a parent's record and a child's creation land in one
// commit, or neither does (a re-delivered spawn of the same child conflicts
// and writes nothing of the parent either).
func TestLinkedAppend(t *testing.T) {
	st := openTest(t, t.TempDir())
	parent, child := NewTaskID(t0), NewTaskID(t0.Add(time.Second))
	mustAppend(t, st, parent, created(parent, "alice"))
	spawn := func(pseq uint64) error {
		_, err := st.Append(context.Background(), Append{
			TaskID: parent,
			Events: []*api.Event{ev(parent, pseq, &api.ChildSpawned{ChildId: child, CallId: "call-1-1"})},
			Also:   []Append{{TaskID: child, Events: []*api.Event{ev(child, 1, &api.TaskCreated{Owner: "alice", ParentId: parent, Depth: 1})}}},
		})
		return err
	}
	if err := spawn(2); err != nil {
		t.Fatalf("spawn: %v", err)
	}
	if m, err := st.Meta(child); err != nil || m.GetParentId() != parent || m.GetDepth() != 1 {
		t.Fatalf("child meta = %v, %v; want parent %s depth 1", m, err, parent)
	}
	// A second spawn of the same child: the child's log conflicts, so the
	// parent's record does not land either.
	if err := spawn(3); !errors.Is(err, ErrSeqConflict) {
		t.Fatalf("second spawn: %v, want ErrSeqConflict", err)
	}
	if m, _ := st.Meta(parent); m.GetLastSeq() != 2 {
		t.Fatalf("parent last seq = %d after a refused spawn, want 2", m.GetLastSeq())
	}
	// A linked append may not name the same Task twice.
	_, err := st.Append(context.Background(), Append{TaskID: parent, Events: []*api.Event{msg(parent, 3, "x")}, Also: []Append{{TaskID: parent, Events: []*api.Event{msg(parent, 4, "y")}}}})
	if !errors.Is(err, ErrInvalid) {
		t.Fatalf("append linking its own task: %v, want ErrInvalid", err)
	}
}

// TestLinkedAppendConcurrent: linked appends batched with others each land
// whole.
func TestLinkedAppendConcurrent(t *testing.T) {
	st := openTest(t, t.TempDir())
	parent := NewTaskID(t0)
	mustAppend(t, st, parent, created(parent, "alice"))
	const n = 20
	kids := make([]string, n)
	for i := range kids {
		kids[i] = NewTaskID(t0.Add(time.Duration(i+1) * time.Second))
	}
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range kids {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			other := NewTaskID(t0.Add(time.Hour + time.Duration(i)*time.Second))
			_, errs[i] = st.Append(context.Background(), Append{TaskID: kids[i], Events: []*api.Event{ev(kids[i], 1, &api.TaskCreated{Owner: "alice", ParentId: parent})},
				Also: []Append{{TaskID: other, Events: []*api.Event{created(other, "alice")}}}})
		}(i)
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("append %d: %v", i, err)
		}
		if m, err := st.Meta(kids[i]); err != nil || m.GetParentId() != parent {
			t.Fatalf("kid %d meta = %v, %v", i, m, err)
		}
	}
}

// TestInbox: an entry put with the sender's record is read back, and the
// recipient's record that deletes it leaves the inbox empty.
func TestInbox(t *testing.T) {
	st := openTest(t, t.TempDir())
	a, b := NewTaskID(t0), NewTaskID(t0.Add(time.Second))
	mustAppend(t, st, a, created(a, "alice"))
	mustAppend(t, st, b, created(b, "alice"))
	put, err := InboxPut(b, &api.InboxEntry{From: a, FromSeq: 2, Text: "hello"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Append(context.Background(), Append{TaskID: a, Events: []*api.Event{ev(a, 2, &api.MessageSent{To: b, Text: "hello"})}, Extra: []KV{put}}); err != nil {
		t.Fatalf("send: %v", err)
	}
	items, err := st.Inbox(b, 0)
	if err != nil || len(items) != 1 || items[0].Entry.GetText() != "hello" || items[0].Entry.GetFrom() != a {
		t.Fatalf("Inbox = %v, %v; want the one message", items, err)
	}
	if _, err := st.Append(context.Background(), Append{TaskID: b, Events: []*api.Event{ev(b, 2, &api.MessageReceived{From: a, FromSeq: 2, Text: "hello"})}, Extra: []KV{{Key: items[0].Key, Delete: true}}}); err != nil {
		t.Fatalf("take: %v", err)
	}
	if items, err := st.Inbox(b, 0); err != nil || len(items) != 0 {
		t.Fatalf("Inbox after take = %v, %v; want empty", items, err)
	}
}
