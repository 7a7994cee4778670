package persistence

import "sync"

// submittedSeqs records, for the Tasks appended to since the store opened,
// the highest seq the writer has handed to a commit (before the commit
// starts, so before a snapshot can see it). A reader that opened a
// snapshot and then finds a Task's event seq above it knows the snapshot
// cannot hold that event: the memory uses it to skip looking up the index
// records of appends still in flight. It is bounded: when full it is
// cleared, and a Task it does not know is reported unknown.
type submittedSeqs struct {
	mu  sync.Mutex
	max int
	m   map[string]uint64
}

// maxSubmittedTasks bounds submittedSeqs (about 100 bytes a Task).
const maxSubmittedTasks = 16384

func newSubmittedSeqs(max int) *submittedSeqs {
	return &submittedSeqs{max: max, m: make(map[string]uint64)}
}

// mark records that task's events up to seq are handed to a commit.
func (s *submittedSeqs) mark(task string, seq uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if have, ok := s.m[task]; ok {
		s.m[task] = max(have, seq)
		return
	}
	if len(s.m) >= s.max {
		clear(s.m)
	}
	s.m[task] = seq
}

// through returns the highest seq of task handed to a commit, and whether
// it is known.
func (s *submittedSeqs) through(task string) (uint64, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	seq, ok := s.m[task]
	return seq, ok
}

// SubmittedThrough returns the highest seq of task's events that the store
// has started to commit, and whether the store knows it (it knows the
// Tasks appended to since it opened, within a bound). Read after opening
// a snapshot, an event of task with a higher seq is not in that snapshot:
// its commit had not started when the snapshot was opened. A known seq
// may belong to a commit that failed; it only ever says what is not
// committed.
func (s *Store) SubmittedThrough(task string) (uint64, bool) {
	if s.w == nil {
		return 0, false
	}
	return s.w.submitted.through(task)
}
