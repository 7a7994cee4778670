package taskstate

import (
	"google.golang.org/protobuf/proto"

	"lemo/api"
)

// Delivery is what a message sent to a Task comes to, by the recipient's
// status (MessageDelivery).
type Delivery struct {
	// Reopens: the recipient had finished; taking the message runs it
	// again (a Cycle that reads it), and it ends again.
	Reopens bool
	// Read: the recipient's model reads the message (now, once reopened,
	// or once the paused Task is continued).
	Read bool
	// Note says it to the sender (tasks.send's result).
	Note string
}

// MessageDelivery is the rule for a message to a Task whose status is st.
// Every message is recorded in the recipient's history (delivered exactly
// once); whether its model reads it depends on the status. A finished Task
// is reopened by it: a parent (or sibling) that sends a follow-up to a
// child that answered expects the answer to it. A cancelled or failed Task
// is not: a person stopped it, or it could not go on, and a message of
// another Task does not overrule that; the sender is told it will not be
// read.
func MessageDelivery(st api.TaskStatus) Delivery {
	switch st {
	case api.TaskStatus_TASK_STATUS_RUNNING, api.TaskStatus_TASK_STATUS_AWAITING_APPROVAL:
		return Delivery{Read: true, Note: "it is running: it reads the message in its next model call (or its tasks.wait_message)"}
	case api.TaskStatus_TASK_STATUS_CREATED:
		return Delivery{Read: true, Note: "it has not started yet: it reads the message in its first model call"}
	case api.TaskStatus_TASK_STATUS_PAUSED:
		return Delivery{Read: true, Note: "it is paused: it reads the message once continued"}
	case api.TaskStatus_TASK_STATUS_FINISHED:
		return Delivery{Reopens: true, Read: true, Note: "it had finished: the message reopens it, it reads it and answers again"}
	case api.TaskStatus_TASK_STATUS_FAILED:
		return Delivery{Note: "it failed: it will not read the message (it is not reopened; a person may continue it)"}
	case api.TaskStatus_TASK_STATUS_CANCELLED:
		return Delivery{Note: "it was cancelled: it will not read the message (it is not reopened)"}
	}
	return Delivery{Note: "its status is unknown: the message waits in its inbox"}
}

// reopenDetail is the status detail of a Task reopened by a message.
func reopenDetail(from string) string { return "reopened by message from " + from }

// reopen returns what taking messages (bodies Take made) records beyond
// them: the reopening of a finished Task by the first message's sender
// (MessageDelivery), nil otherwise.
func (s *State) reopen(bodies []proto.Message) []proto.Message {
	if !MessageDelivery(s.Status).Reopens {
		return nil
	}
	for _, b := range bodies {
		if m, ok := b.(*api.MessageReceived); ok {
			return []proto.Message{&api.StatusChanged{Status: api.TaskStatus_TASK_STATUS_RUNNING, Detail: reopenDetail(m.GetFrom()), ReopenedBy: m.GetFrom()}}
		}
	}
	return nil
}

// ReopenEntry is the inbox entry that tells a child's parent that the
// child runs again, when evs (stamped after s, not yet applied) take it
// from an end (finished, failed, cancelled) back to work: nil for a root,
// or when evs reopen nothing. The shell commits it with evs, as EndEntry.
func (s *State) ReopenEntry(evs []*api.Event) *api.InboxEntry {
	if s.ParentID == "" || !s.Terminal() {
		return nil
	}
	var out *api.ChildReopened
	for _, ev := range evs {
		sc := ev.GetStatusChanged()
		if sc == nil {
			continue
		}
		if api.StatusEnded(sc.GetStatus()) {
			out = nil // (ended again in the same commit)
		} else {
			out = &api.ChildReopened{ChildId: s.TaskID, By: sc.GetReopenedBy(), Detail: sc.GetDetail(), ChildSeq: ev.GetSeq()}
		}
	}
	if out == nil {
		return nil
	}
	return &api.InboxEntry{From: s.TaskID, FromSeq: out.ChildSeq, ChildReopened: out}
}
