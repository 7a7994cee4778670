// Package supervision decides what happens when part of the actor tree
// fails. Its decider (Decide) is a pure function of a Failure (the level of
// the actor that failed, the typed reason, its recent failures) and a
// restart Budget, table-tested without actors; Strategy adapts it to
// protoactor for Task actors.
//
// Levels (Level) and their decisions:
//   - A Tool call that fails with an error (invalid output, cancellation,
//     ...) is recorded as a tool failure the model sees; the Task goes on
//     (ToolFailureKind classifies the error). A Tool actor that crashes (a
//     panic of the tool) is stopped and recorded the same way, with the
//     decision (RecordToolFailure).
//   - A Cycle that fails is recorded with its class (CycleFailureKind); the
//     Task fails and a continue retries it. Provider-level retries happen
//     inside the provider, before any output. A Cycle actor that crashes is
//     stopped and recorded with the decision (RecordCycleFailure).
//   - A session of a tool call that crashes is stopped; the call goes on.
//   - A Task actor that crashes (a panic; a *StoreError when its store
//     failed) is restarted from its durable history within the Budget, as
//     after a daemon restart, and records the crash (RecordTaskRestart);
//     past the budget it is stopped and recorded as failed
//     (RecordTaskFailed). A child Task is decided the same way, and its
//     parent is told when it is stopped (Decision.TellParent). A Task whose
//     store closed is stopped without a record: the next start recovers it.
//
// Lifecycle:
//  1. Goroutines started by Cycles and Tools recover their own panics with
//     Recovered and report a *PanicError to their actor, which panics with
//     it again inside Receive: protoactor only sees panics there, and only
//     then does the supervisor decide.
//  2. The Task (the supervisor of its Cycles and Tools) and the task
//     manager (with Strategy, the supervisor of Tasks) call Decide, carry
//     the directive out and record what the Decision says.
//
// Example:
//
//	defer func() {
//		if v := recover(); v != nil {
//			report(supervision.Recovered(v))
//		}
//	}()
package supervision
