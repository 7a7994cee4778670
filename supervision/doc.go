// Package supervision decides what happens when part of the actor tree
// fails. Its deciders are pure functions over typed errors and restart
// histories, table-tested without actors; Strategy adapts them to
// protoactor.
//
// Levels:
//   - A Tool call that fails (error, panic, invalid output, cancellation) is
//     recorded as a tool failure the model sees; the Task goes on
//     (ToolFailureKind classifies the error).
//   - A Cycle that fails is recorded with its class (CycleFailureKind); the
//     Task fails and a continue retries it. Provider-level retries happen
//     inside the provider, before any output.
//   - A Task actor that panics is restarted from its durable history, as
//     after a daemon restart; one that keeps crashing (Budget) is stopped and
//     recorded as failed.
//
// Lifecycle:
//  1. Goroutines started by Cycles and Tools recover their own panics with
//     Recovered and report a *PanicError to their actor.
//  2. The Task classifies child failures with ToolFailureKind and
//     CycleFailureKind.
//  3. The task manager supervises Task actors with NewStrategy(budget,
//     onStop): restart within the budget, else stop and call onStop.
//
// Example:
//
//	defer func() {
//		if v := recover(); v != nil {
//			report(supervision.Recovered(v))
//		}
//	}()
package supervision
