// Package client is the Go client of a Lemo daemon's remote API: it
// connects (token, optional mutual TLS), runs every command, streams
// subscriptions with credit-based flow control, keeps a live projection of
// the Tasks a token may see, serves Program Services, and renders tool
// calls through a View registry.
//
// The transport is protoactor remote, whose peers must all listen: the
// daemon dials its replies back to the client. A Node is that listening
// endpoint (one per process: protoactor's remote sets gRPC's global logger
// when it starts); it accepts only the daemon it attached to (which
// presents the node's callback secret) and only the messages a client
// expects. Each Conn is one session with the daemon. Requests carry ids and
// their answers are matched in the Conn's receiver actor (no protoactor
// futures: they are single-waiter and racy); an answer nobody awaits any
// more is dropped.
//
// Lifecycle:
//  1. FindLocal reads a local daemon's address and token from its data
//     folder (daemon.json, token), or the caller knows both.
//  2. Connect (or NewNode, then Node.Connect for several Conns in one
//     process) checks that a daemon answers and accepts the token (plain
//     gRPC, so "not running" and "wrong token" are told apart), then opens
//     a session.
//  3. Commands (CreateTask, SendMessage, Pause, Continue, Cancel, Task,
//     ListTasks, History, Tools, Models, Approvals, Resolve, Steer,
//     RegisterService; for operators Inspect and StopCall) return typed
//     errors: *Error values that match ErrNotFound, ErrInvalid,
//     ErrPermissionDenied, ... with errors.Is. A command that cannot be
//     sent (a string that is not UTF-8, text with control characters, one
//     too large) fails at once with ErrInvalid or ErrTooLarge naming the
//     field, instead of being dropped by protoactor and timing out.
//  4. Subscribe streams updates; Follow resubscribes after the reader fell
//     behind or the daemon restarted, from the last seq delivered, so each
//     event arrives once and in order; Projection.Run folds them into a
//     live picture (tasks, histories, in-flight deltas, statuses).
//  5. Close ends the session; the daemon withdraws its subscriptions and
//     Services.
//
// Example:
//
//	l, err := client.FindLocal("lemo-data")
//	c, err := client.Connect(ctx, client.Options{Addr: l.Address, Token: l.Token})
//	defer c.Close()
//	meta, err := c.CreateTask(ctx, client.CreateTask{Request: "list the files", Model: "ollama/qwen3:8b"})
//	err = c.Follow(ctx, client.FollowOptions{TaskID: meta.GetTaskId(), FromSeq: 1}, func(u *api.Update) error {
//		fmt.Println(u)
//		return nil
//	})
package client
