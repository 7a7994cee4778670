// Package actors is the daemon's internal actor tree and the Go API over it.
//
// The tree (protoactor ids in brackets):
//
//	daemon [daemon]
//	├── hub [daemon/hub]            fan-out of committed events and live deltas
//	└── tasks [daemon/tasks]        task manager: lazy activation, routing by id, root supervision
//	    └── task [daemon/tasks/<id>]          single writer of its history
//	        ├── cycle [.../cycle-<n>]         one model call
//	        ├── tool  [.../tool-<call id>]    one tool call
//	        └── task  [.../<child id>]        a running child Task, supervised by its parent
//
// A child Task's actor runs under its parent's actor (placement.go): the
// manager activates a dormant parent first, a parent with child actors
// is not passivated, and a parent's restart or stop stops its children's
// actors, which recover from their histories under its next incarnation.
//
// Rules:
//   - A Task persists events, waits for the durable acknowledgement, then
//     applies and publishes them (persist → apply → publish). It never blocks
//     in Receive: appends, loads, model calls and tool runs happen in
//     goroutines that report back as messages.
//   - Before a tool call executes, its call and its execution start are
//     durable. A call that started and never reported is closed as "outcome
//     unknown" when the Task is next loaded, and never re-executed.
//   - Live tool results (full outputs) are held by the Task actor and given
//     to each later Cycle; the whole output beside the model's view is kept
//     by actors/live within per-call, per-Task and daemon-wide memory bounds
//     and spilled beyond them to <data>/live. They are released when the
//     Task finishes, is cancelled, restarts or passivates (a paused Task
//     holding them passivates after Options.PausedLiveTimeout), or evicted
//     under daemon-wide pressure (oldest of Tasks not working first). After
//     that only what each tool retained exists.
//   - A Tool or Cycle that panics (on its goroutine too: the panic is routed
//     into its Receive) is stopped by its Task's supervision and becomes a
//     recorded failure with the decision; a Task that panics restarts from
//     its history (as after a daemon restart) and records the crash; one
//     that keeps panicking is stopped and recorded as failed (supervise.go).
//     A root Task's actor is decided by the manager, a child's by its
//     parent's actor (level child_task), whose end then reaches the parent.
//   - At most Options.MaxRunningChildren child Tasks hold a place at once
//     daemon-wide, from their start to their end; the others are queued
//     and record so (taskstate.Admission, derived from the recorded
//     statuses at the start, so a restart keeps the queue and the limit).
//   - Tasks are activated on demand and passivated when idle: a dormant Task
//     costs storage, not memory.
//   - A Task works in a folder of its own under Options.WorkspaceRoot unless
//     its creation names another; WorkspacePolicy.Allow (a pure function)
//     decides that one after it is opened and its symlinks resolved: never
//     the data folder (Options.DataDir), inside it or containing it, never
//     the workspace root or a Task's folder in it, otherwise only under a
//     root granted to the caller's owner or to operators
//     (Options.WorkspaceGrants). A refusal is ErrPermission. Before each
//     tool call the workspace is resolved again (WorkspacePolicy.InUse): a
//     folder replaced by a symlink into the data folder fails the call.
//   - When the data folder's disk turns full (the store's guard), every
//     running Task stops its model call and tools at once and pauses with
//     reason disk_full, recorded from the store's reserve; an append the
//     store refuses for it loses nothing. When space is back the Tasks the
//     disk paused continue by themselves (taskstate.ResumeDiskFull says
//     why), also after a restart.
//
// Lifecycle:
//  1. Start recovers the store (every Task found running is durably paused
//     as interrupted, open Cycles and calls are closed) before it accepts
//     any command, then starts the actor system.
//  2. CreateTask, SendMessage, Pause, Continue, Cancel, Resolve, StopCall
//     (stop one running tool call) and Subscribe serve callers (the
//     gateway, tests, cmd/lemo); a subscription to a Task is told what
//     runs below it when it starts (ProgressBelow, folded by the hub from
//     the events of its children that have not ended, seeded at the start
//     from the histories of those that had not) and what waits below it
//     (PendingBelow), then its descendants' TreeEvents live; Inspect
//     reports the live tree.
//     SetLimits changes the limits a reload may change (cycles, parallel
//     tools, request size) while Tasks run.
//  3. Stop durably pauses running Tasks as interrupted, stops the tree and
//     waits for every goroutine it started.
//
// Example:
//
//	d, err := actors.Start(ctx, actors.Deps{Store: st, Providers: provs, Tools: tls, Log: log}, actors.Options{})
//	meta, err := d.CreateTask(ctx, actors.Operator, actors.CreateTask{Request: "hi", Model: "fake/echo"})
//	sub, err := d.Subscribe(ctx, actors.Operator, actors.SubscribeOptions{TaskID: meta.GetTaskId(), FromSeq: 1})
//	for u := range sub.C { ... }
//	err = d.Stop(ctx)
package actors
