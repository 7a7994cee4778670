package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"lemo/client"
)

// A command that cannot be encoded (a string that is not UTF-8) fails at
// once with ErrInvalid naming the field; before, protoactor dropped it and
// the command waited for its timeout ("no answer from the daemon"). A NUL or
// another control character in a request is refused the same way, and the
// daemon refuses it too when a client does not check. The Conn goes on.
func TestUnsendableCommandsFailAtOnce(t *testing.T) {
	d := startDaemon(t, t.TempDir(), "127.0.0.1:0")
	c := d.connect(t, aliceToken)
	ctx := context.Background()
	cases := []struct {
		name string
		do   func() error
		want string
	}{
		{"invalid UTF-8 in a request", func() error {
			_, err := c.CreateTask(ctx, client.CreateTask{Request: "caf\xe9", Model: "fake/echo"})
			return err
		}, "the request is not valid UTF-8"},
		{"NUL in a request", func() error {
			_, err := c.CreateTask(ctx, client.CreateTask{Request: "title\x00hidden", Model: "fake/echo"})
			return err
		}, "the request holds the control character U+0000"},
		{"escape in a message", func() error {
			_, err := c.SendMessage(ctx, "01ARZ3NDEKTSV4RRFFQ69G5FAV", "\x1b[2Jcleared")
			return err
		}, "the message holds the control character U+001B"},
		{"invalid UTF-8 in a workspace", func() error {
			_, err := c.CreateTask(ctx, client.CreateTask{Request: "hi", Model: "fake/echo", Workspace: "/tmp/\xff"})
			return err
		}, "the workspace is not valid UTF-8"},
		// Commands the client does not check field by field still fail at
		// once, naming the field.
		{"invalid UTF-8 in a call id", func() error {
			return c.Steer(ctx, "01ARZ3NDEKTSV4RRFFQ69G5FAV", "call-\xff", json.RawMessage(`{}`))
		}, "steer.call_id is not valid UTF-8"},
		{"invalid UTF-8 in a task id", func() error {
			_, err := c.Task(ctx, "\xfe\xff")
			return err
		}, "get_task.task_id is not valid UTF-8"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.do()
			if !errors.Is(err, client.ErrInvalid) || errors.Is(err, client.ErrTimeout) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want ErrInvalid with %q (not a timeout)", err, tc.want)
			}
		})
	}
	meta, err := c.CreateTask(ctx, client.CreateTask{Request: "tabs\tand\nlines are text", Model: "fake/echo"})
	if err != nil {
		t.Fatalf("a valid request after the refusals: %v", err)
	}
	if strings.ContainsAny(meta.GetTitle(), "\x00\x1b") {
		t.Fatalf("title = %q", meta.GetTitle())
	}
}
