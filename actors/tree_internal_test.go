package actors

import (
	"context"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"lemo/api"
	"lemo/persistence"
)

// A child recorded failed after repeated crashes tells its parent in the
// same commit: the parent's inbox holds the child's end.
func TestMarkFailedTellsTheParent(t *testing.T) {
	dd, err := persistence.OpenDataDir(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer dd.Close()
	st, err := persistence.Open(dd, persistence.Options{Log: zerolog.Nop(), MemTableSize: 4 << 20, BlockCacheSize: 4 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	now := time.Now()
	parent, child := persistence.NewTaskID(now), persistence.NewTaskID(now.Add(time.Millisecond))
	put := func(id string, bodies ...proto.Message) {
		evs := make([]*api.Event, len(bodies))
		for i, b := range bodies {
			evs[i] = api.NewEvent(id, uint64(i+1), timestamppb.New(now), b)
		}
		if _, err := st.Append(context.Background(), persistence.Append{TaskID: id, Events: evs}); err != nil {
			t.Fatal(err)
		}
	}
	put(parent, &api.TaskCreated{Owner: "o", Model: "f/m"}, &api.ChildSpawned{ChildId: child, CallId: "call-1-1"})
	put(child, &api.TaskCreated{Owner: "o", Model: "f/m", ParentId: parent, ParentCallId: "call-1-1", Depth: 1},
		&api.UserMessage{Text: "x"}, &api.StatusChanged{Status: api.TaskStatus_TASK_STATUS_RUNNING})
	f := &api.Failure{Scope: api.FailureScope_FAILURE_SCOPE_TASK, Kind: "panic", Message: "boom", Decision: "stop"}
	owner, got, evs, err := markFailed(st, child, f, now)
	if err != nil || got != parent || owner != "o" || len(evs) == 0 {
		t.Fatalf("markFailed = %q, %q, %d events, %v; want the owner o, the parent %s and the events", owner, got, len(evs), err, parent)
	}
	items, err := st.Inbox(parent, 0)
	if err != nil || len(items) != 1 {
		t.Fatalf("parent's inbox = %v, %v; want the child's end", items, err)
	}
	if e := items[0].Entry.GetChildEnded(); e.GetStatus() != api.TaskStatus_TASK_STATUS_FAILED || items[0].Entry.GetFrom() != child {
		t.Fatalf("inbox entry = %v, want the child failed", items[0].Entry)
	}
}
