package taskstate

import "lemo/api"

// MaxAncestry bounds how many ancestors of a Task are read to label its
// events with their path from the root (a tree is far shallower: see
// tasks.max_depth).
const MaxAncestry = 16

// ForwardedUp reports whether ev, an event of a child Task, is also sent
// to the subscriptions of the Task's ancestors (as a TreeEvent): what a
// client following an ancestor needs to ask for the child's approvals (the
// request, the call it is for, its resolution) and to show the child's
// progress (its Cycles, its tool calls and their ends, its status). Text,
// tool output and the rest stay in the child's own stream.
func ForwardedUp(ev *api.Event) bool {
	switch ev.GetBody().(type) {
	case *api.Event_ApprovalRequested, *api.Event_ApprovalResolved,
		*api.Event_ToolCallRecorded, *api.Event_ToolResult, *api.Event_ToolFailed,
		*api.Event_CycleStarted, *api.Event_CycleFinished, *api.Event_StatusChanged:
		return true
	}
	return false
}

// Forward returns the path to label ev with for a subscription to
// subscribed (root .. ev's Task), or nil when that subscription does not
// get ev as a TreeEvent: ancestors are ev's Task's ancestors from the root
// down to its parent; only a strict ancestor's subscription gets it (the
// Task's own subscription gets the event itself), and only events that
// are ForwardedUp.
func Forward(subscribed string, ancestors []string, ev *api.Event) []string {
	if subscribed == "" || !ForwardedUp(ev) {
		return nil
	}
	for _, a := range ancestors {
		if a == subscribed {
			return append(append(make([]string, 0, len(ancestors)+1), ancestors...), ev.GetTaskId())
		}
	}
	return nil
}

// IsBelow reports whether a Task whose ancestors (root .. parent) are
// given lies below ancestor.
func IsBelow(ancestor string, ancestors []string) bool {
	for _, a := range ancestors {
		if a == ancestor {
			return true
		}
	}
	return false
}
