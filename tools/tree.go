package tools

import (
	"context"
	"errors"
	"time"
)

// ErrLimit: a tree limit refused a spawn; the message names the limit.
var ErrLimit = errors.New("limit")

// Tree is what a running call of the tree tools asks of its Task: each
// method is carried out by the Task, the single writer of its history, and
// is idempotent per call (a call re-run after a restart finds what it did
// before).
type Tree interface {
	// Spawn creates a child Task (exactly once per call) and returns its
	// id; queued reports that it waits for a free place among the child
	// Tasks that run daemon-wide.
	Spawn(ctx context.Context, in SpawnRequest) (id string, queued bool, err error)
	// Wait blocks until the children ids ended (all of them, or any one
	// when any) and returns those that ended; after timeout it returns
	// those that ended so far and context.DeadlineExceeded.
	Wait(ctx context.Context, ids []string, any bool, timeout time.Duration) ([]ChildEnd, error)
	// Send records a message to a Task the call's Task may address (its
	// parent, children and siblings; "parent" names the parent) and puts
	// it in the recipient's inbox. It says who received it and what comes
	// of it.
	Send(ctx context.Context, to, text string) (Sent, error)
	// WaitMessages blocks until the Task has received messages its model
	// has not seen, or ctx ends, and returns them.
	WaitMessages(ctx context.Context) ([]TreeMessage, error)
}

// SpawnRequest is a tasks.spawn call's input.
type SpawnRequest struct {
	Request, Model, Instructions string
	Tools                        []string
	FreshWorkspace               bool
	// Budget the child asks for (zero amounts: everything its parent has
	// left in a dimension the parent limits); capped at the parent's
	// remainder.
	MaxTokens, MaxCostNanoUSD uint64
	MaxTime                   time.Duration
}

// ChildEnd is how a child Task ended.
type ChildEnd struct {
	ID, Status, Answer, Detail string
	PromptTokens               uint64
	CompletionTokens           uint64
}

// Sent is what a message sent came to.
type Sent struct {
	// ID is the recipient's id; Relation how it relates to the sender
	// ("parent", "child", "sibling").
	ID, Relation string
	// Status is the recipient's status when the message was sent; Read
	// whether its model reads the message (a finished Task is reopened to
	// read it; a cancelled or failed one does not); Note says so.
	Status string
	Read   bool
	Note   string
}

// TreeMessage is a message a Task received.
type TreeMessage struct {
	From, Text string
}

// Rerunnable is a Tool whose call, when its execution started in an
// earlier incarnation of its Task (the daemon was killed), runs again
// instead of being recorded as of unknown outcome: it is idempotent per
// call.
type Rerunnable interface {
	Rerunnable() bool
}
