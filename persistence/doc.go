// Package persistence keeps everything the daemon stores, in one data folder
// holding an embedded Badger store opened with SyncWrites.
//
// The Task log: each Task's events are stored under big-endian keys so that a
// range scan reads them in order; sequence numbers are contiguous from 1. A
// Task's metadata (status, model, last seq) and the status and owner indexes
// are written in the same transaction as the events they summarise, so they
// can never disagree with the log. So are the children index (each child
// under its parent, with its links, limits and spend: Descendants reads a
// tree without its owner's other Tasks) and each owner's spend per UTC day
// (DaySpend; an append may be conditional on it: Append.DayCheck).
//
// All writes go through one group-commit writer goroutine: it batches appends
// from many Tasks into one transaction and acknowledges each append only after
// the commit (and its fsync) returned. Appends are conditional: the first
// event's seq must follow the stored last seq, which fences a stale
// incarnation of a Task actor. A batch that exceeds Badger's transaction limit
// is split, never dropped.
//
// A full disk: Badger writes through memory-mapped files, and a write into
// a page the filesystem cannot back kills the process (SIGBUS). The store
// keeps it off the cliff (space.go): it allocates every memtable log in
// advance, reads the free space before every batch and refuses the batch
// with ErrDiskFull below its headroom (before Badger is asked to write),
// keeps a reserve file it releases for the records that pause Tasks
// (Append.Reserve), polls the disk while no append comes, and tells a
// watcher (WatchDisk) when it turns full and when space is back.
//
// Lifecycle:
//  1. OpenDataDir locks the data folder (a second daemon gets ErrLocked and
//     changes nothing) and checks its format marker.
//  2. Open opens the store in it; a store that cannot be read is an error, and
//     an existing folder is never replaced by a fresh store. A store of an
//     older format this code upgrades (format 1: no children index) is
//     upgraded when opened for writing.
//  3. Append, Meta, Events, ListTasks, TasksWithStatus serve the daemon.
//  4. Close stops the writer after the queued appends and closes the store;
//     DataDir.Close releases the lock.
//
// Example:
//
//	dd, err := persistence.OpenDataDir("lemo-data")
//	st, err := persistence.Open(dd, persistence.Options{Log: log})
//	meta, err := st.Append(ctx, persistence.Append{TaskID: id, Events: evs})
//	err = st.Events(id, 1, 0, func(ev *api.Event) error { ...; return nil })
package persistence
