package api

import (
	"fmt"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// NewEvent returns an event of task with seq, time t (unset when nil) and
// body, which must be one of the event body messages (*TaskCreated,
// *UserMessage, ...). It panics on any other type: that is a programming
// error, never a runtime condition.
func NewEvent(task string, seq uint64, t *timestamppb.Timestamp, body proto.Message) *Event {
	ev := &Event{TaskId: task, Seq: seq, Time: t}
	switch b := body.(type) {
	case *TaskCreated:
		ev.Body = &Event_TaskCreated{TaskCreated: b}
	case *UserMessage:
		ev.Body = &Event_UserMessage{UserMessage: b}
	case *CycleStarted:
		ev.Body = &Event_CycleStarted{CycleStarted: b}
	case *CycleFinished:
		ev.Body = &Event_CycleFinished{CycleFinished: b}
	case *AssistantMessage:
		ev.Body = &Event_AssistantMessage{AssistantMessage: b}
	case *ToolCallRecorded:
		ev.Body = &Event_ToolCallRecorded{ToolCallRecorded: b}
	case *ToolExecutionStarted:
		ev.Body = &Event_ToolExecutionStarted{ToolExecutionStarted: b}
	case *ToolState:
		ev.Body = &Event_ToolState{ToolState: b}
	case *ToolResult:
		ev.Body = &Event_ToolResult{ToolResult: b}
	case *ToolFailed:
		ev.Body = &Event_ToolFailed{ToolFailed: b}
	case *ApprovalRequested:
		ev.Body = &Event_ApprovalRequested{ApprovalRequested: b}
	case *ApprovalResolved:
		ev.Body = &Event_ApprovalResolved{ApprovalResolved: b}
	case *StatusChanged:
		ev.Body = &Event_StatusChanged{StatusChanged: b}
	case *Failure:
		ev.Body = &Event_Failure{Failure: b}
	case *ToolsLoaded:
		ev.Body = &Event_ToolsLoaded{ToolsLoaded: b}
	case *ChildSpawned:
		ev.Body = &Event_ChildSpawned{ChildSpawned: b}
	case *ChildEnded:
		ev.Body = &Event_ChildEnded{ChildEnded: b}
	case *ChildReopened:
		ev.Body = &Event_ChildReopened{ChildReopened: b}
	case *MessageSent:
		ev.Body = &Event_MessageSent{MessageSent: b}
	case *MessageReceived:
		ev.Body = &Event_MessageReceived{MessageReceived: b}
	case *BudgetRaised:
		ev.Body = &Event_BudgetRaised{BudgetRaised: b}
	case *BudgetCharged:
		ev.Body = &Event_BudgetCharged{BudgetCharged: b}
	default:
		panic(fmt.Sprintf("api.NewEvent: %T is not an event body", body))
	}
	return ev
}

// Kind returns the name of an event's body ("user_message", ...), "" when
// it has none.
func Kind(ev *Event) string {
	if ev.GetBody() == nil {
		return ""
	}
	return string(ev.ProtoReflect().WhichOneof(ev.ProtoReflect().Descriptor().Oneofs().ByName("body")).Name())
}

// ProtocolVersion is the version of this wire contract. It rises when
// messages are added in a way clients may need to know about; changes stay
// additive.
const ProtocolVersion = 1

// StatusEnded reports whether a Task in status st has ended: finished, failed or
// cancelled (a follow-up message may still reopen it).
func StatusEnded(st TaskStatus) bool {
	switch st {
	case TaskStatus_TASK_STATUS_FINISHED, TaskStatus_TASK_STATUS_FAILED, TaskStatus_TASK_STATUS_CANCELLED:
		return true
	}
	return false
}
