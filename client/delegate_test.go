package client_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"lemo/client"
)

// DelegateSessions asks the daemon for the sessions list: a daemon without
// the delegate tool answers an empty list that says why; a Task the token
// may not see is ErrNotFound. (Scoping is tested in actors/gateway, the
// listing of real session folders in tests/sessions_test.go.)
func TestDelegateSessions(t *testing.T) {
	ctx := context.Background()
	alice := startDaemon(t, t.TempDir(), "127.0.0.1:0").connect(t, aliceToken)
	l, err := alice.DelegateSessions(ctx, "")
	if err != nil {
		t.Fatalf("DelegateSessions: %v", err)
	}
	if len(l.GetSessions()) != 0 || len(l.GetWarnings()) != 1 || !strings.Contains(l.GetWarnings()[0], "delegate tool is not configured") {
		t.Errorf("list = %v", l)
	}
	meta, err := alice.CreateTask(ctx, client.CreateTask{Request: "hello", Model: "fake/echo"})
	if err != nil {
		t.Fatal(err)
	}
	if l, err := alice.DelegateSessions(ctx, meta.GetTaskId()); err != nil || len(l.GetSessions()) != 0 {
		t.Errorf("alice's Task: %v, %v", l, err)
	}
	if _, err := alice.DelegateSessions(ctx, "01M8PEPSX4T06MEF12P2ZZZZZZ"); !errors.Is(err, client.ErrNotFound) {
		t.Errorf("an unknown Task: %v, want ErrNotFound", err)
	}
	if _, err := alice.DelegateSessions(ctx, "a/b"); !errors.Is(err, client.ErrInvalid) {
		t.Errorf("a malformed task id: %v, want ErrInvalid", err)
	}
}
