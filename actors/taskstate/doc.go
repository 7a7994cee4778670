// Package taskstate is the deterministic core of a Task: the state folded
// from its history, the decisions that turn commands and results into new
// events, and the next step a running Task takes. It does no I/O and keeps
// no clock: callers pass the time in. The Task actor persists what these
// functions return, applies it after the durable acknowledgement, and
// performs the effects.
//
// Lifecycle:
//  1. Fold a Task's stored events into a State (Apply, event by event).
//  2. Recover returns the events that close what a dead incarnation left
//     open: a Cycle that never finished, a tool call whose execution started
//     but never reported (outcome unknown), a running status (paused as
//     interrupted).
//  3. For each command (Message, Pause, Continue, Cancel) or child result
//     (CycleDone, CycleFailed, ToolDone), a decision function returns the
//     event bodies to record, or an error for the caller.
//  4. When the data folder's disk is full, DiskFull pauses a running Task
//     (reason disk_full): its model call and running tools are stopped and
//     closed, calls not started wait. Once space is back ResumeDiskFull
//     continues it by itself: a person who sees a Task stop for lack of
//     space expects it to go on, as it would have without the
//     interruption. One a person paused, continued or cancelled since is
//     left as it is.
//  5. Next returns the step a running Task takes once nothing is in flight:
//     start a tool call, start a Cycle, finish, or wait.
//  6. Stamp turns bodies into events with the Task id, contiguous seqs and
//     the time.
//  7. ToolSet is the tools the Task offers its model, derived from its
//     history alone (the creation's set plus every tools.load,
//     ToolsLoaded); ToolSetOf gives it from a history without a State and
//     Inherit passes it to a child Task. LoadTools validates a load.
//
// Example:
//
//	st := taskstate.New()
//	for _, ev := range history { st.Apply(ev) }
//	bodies := taskstate.Recover(st)
//	evs := st.Stamp(bodies, now)
package taskstate
