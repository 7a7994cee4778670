// Package live holds the live results of tool calls: the whole output of a
// call kept beside its result while its Task holds it, bounded in memory
// per call, per Task and for the whole daemon, spilled beyond that to a
// private file, and evicted under pressure.
//
// A live result is never durable: it is released when its Task finishes,
// is cancelled, passivates or restarts, and the spill folder is emptied at
// every start; after that only what the tool retained remains, and the
// rest reads as unavailable.
//
// Lifecycle:
//  1. cmd/lemo creates one Accountant with the configured Limits and the
//     spill folder <data>/live (mode 0700, outside every workspace); New
//     removes what an earlier run left there.
//  2. When a Task starts a call it opens the call's Result (Open) and hands
//     it to the tool as tools.Call.Live. The tool writes each stream of its
//     output (Stream): the first bytes stay in memory while the call's, the
//     Task's and the daemon's bounds allow (Grant), the rest goes to the
//     stream's spill file up to the spill bounds, and what is beyond them is
//     counted as dropped (Stats). When the daemon-wide bound is what stops
//     a call, the oldest results held by Tasks that are not working are
//     evicted first (Evict) and their Tasks told (OnEvict).
//  3. Once the call is recorded, the Task holds the Result (Hold):
//     tasks.read_block then reads it (Lookup, Size, ReadAt). The Task
//     reports whether it is working (SetIdle).
//  4. The Task releases it (Release) when it drops its live results; an
//     evicted Result is released by the Accountant.
//
// Why a mutex: the accounting is one set of counters that every running
// call and every Task draws on, and a reservation must be checked against
// three bounds and may evict results of other Tasks, all at once. An actor
// would put a message round trip on every write of a command's output; an
// atomic counter per level cannot decide the three levels and the eviction
// together. So the Accountant is a small object with one mutex that guards
// only its counters and maps, is never held during I/O or while calling
// out, and is never taken while a Result's own lock is wanted by it. No
// actor state is behind it: a Task's actor keeps its own map of held
// Results and learns of evictions by a message.
//
// Example:
//
//	a, err := live.New(filepath.Join(data, "live"), live.Limits{})
//	r := a.Open(taskID, callID)
//	io.Copy(r.Stream("stdout"), pipe)
//	r.Hold(int64(len(shown)))
//	defer r.Release()
package live
