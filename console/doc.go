// Package console is Lemo's terminal inspection console (lemo console): a
// live view of a daemon's actor tree and of any Task, with the operator's
// actions. It is a client like any other, built only on package client
// (bubbletea and lipgloss draw it).
//
// What it shows:
//   - the actor tree: daemon → hub, tasks → each Task → its Cycles, Tools
//     and their delegate sessions, with each actor's state, time in state,
//     mailbox depth, messages processed, restarts and last failure, and
//     what its supervision decided (RST "restarts/N": N children stopped
//     after they failed; its last decision in the failure column and the
//     detail line) (read
//     with client.Conn.Inspect, operator tokens only; other tokens see
//     their Tasks without the tree). Tasks with no actor now (dormant)
//     are listed under the task manager;
//   - a selected Task: its transcript with the tool Views, the model's
//     text as it streams, running calls' live state, pending approvals,
//     token usage per Cycle and what the model saw (section sizes of the
//     assembled input, the excerpted records, what was recalled and from
//     which Task);
//   - the delegate agent's sessions (S): kind, where stored, the Task that
//     created each, when it last changed and its first prompt; an operator
//     sees every session with its file, another token those its Tasks
//     created (client.Conn.DelegateSessions), read again every Refresh
//     while the pane is open and on r; Enter opens the Task;
//   - a Task's row expanded (e, →; ← or e collapses it): its most recent
//     events one a line under it (maxRecentEvents, read from the tail of
//     its history, then kept current), so a child's progress shows under
//     its parent without leaving the tree;
//   - a selected Task's event log (l): its recent events one a line
//     (seq, time, kind and what each records), scrollable, instead of its
//     transcript;
//   - actions, each confirmed with y: pause, continue and cancel a Task,
//     approve or deny its first pending approval or approve it and always
//     allow that kind of call for the rest of the Task (A;
//     client.Conn.AllowForTask), stop one running tool call (recorded as a
//     cancelled failure; the Task goes on).
//
// Frame rate: updates from the daemon wait in an inbox and the model
// applies them on frame ticks (Options.Frame, 50ms by default), and it
// renders only when something changed. However fast deltas arrive (1,000
// a second and more), the screen is redrawn at most 20 times a second for
// them and the loop never queues work behind them; keys are answered at
// once.
//
// Lifecycle:
//  1. The caller connects (client.Connect) and calls Run with the Conn,
//     the terminal and Options.
//  2. Run reads the tools (for their Views) and the newest Tasks, then
//     follows every Task the token may see from the listed state (resuming
//     after any interruption) on a goroutine it owns.
//  3. The bubbletea program runs: frame ticks apply updates and poll the
//     actor tree and approvals (Options.Refresh); opening a Task reads its
//     history (subscribe first, then read, drop duplicates); confirmed
//     actions run as commands and report on the status line.
//  4. q, Ctrl-C or the end of ctx quit: Run stops following, waits for its
//     goroutine and returns. The daemon and its Tasks go on.
//
// Example:
//
//	c, err := client.Connect(ctx, client.Options{Addr: addr, Token: token, Name: "lemo-console"})
//	if err != nil {
//		return err
//	}
//	defer c.Close()
//	return console.Run(ctx, c, console.Terminal{}, console.Options{})
package console
