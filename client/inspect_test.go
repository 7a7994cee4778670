package client_test

import (
	"context"
	"errors"
	"testing"

	"lemo/client"
)

// Inspect and StopCall are an operator's: a token of an owner gets
// ErrPermissionDenied, an operator the live tree.
func TestInspect(t *testing.T) {
	ctx := context.Background()
	alice := startDaemon(t, t.TempDir(), "127.0.0.1:0").connect(t, aliceToken)
	if _, err := alice.Inspect(ctx); !errors.Is(err, client.ErrPermissionDenied) {
		t.Errorf("alice's Inspect: %v, want ErrPermissionDenied", err)
	}
	if _, err := alice.StopCall(ctx, "T", "call-1-1"); !errors.Is(err, client.ErrPermissionDenied) {
		t.Errorf("alice's StopCall: %v, want ErrPermissionDenied", err)
	}

	// A node holds one identity per daemon: the operator uses another.
	op := startDaemon(t, t.TempDir(), "127.0.0.1:0").connect(t, operatorToken)
	meta, err := op.CreateTask(ctx, client.CreateTask{Request: "hello", Model: "fake/echo"})
	if err != nil {
		t.Fatal(err)
	}
	tree, err := op.Inspect(ctx)
	if err != nil {
		t.Fatalf("operator's Inspect: %v", err)
	}
	kinds := map[string]string{}
	for _, a := range tree.GetActors() {
		kinds[a.GetId()] = a.GetKind()
	}
	if kinds["daemon"] != "daemon" || kinds["daemon/tasks"] != "tasks" || kinds["daemon/hub"] != "hub" {
		t.Errorf("tree = %v", kinds)
	}
	if _, err := op.StopCall(ctx, meta.GetTaskId(), "call-9-9"); !errors.Is(err, client.ErrNotFound) {
		t.Errorf("StopCall of a call that is not running: %v, want ErrNotFound", err)
	}
}
