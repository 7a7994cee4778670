package live

import "sort"

// Use is what is in use at the three levels a reservation is checked
// against: the call, its Task and the whole daemon.
type Use struct {
	Call, Task, Total int64
}

// Grant returns how many of n more bytes may be held at the three levels
// of use under the bounds call, task and total (each > 0): the least room
// left at any level, never negative.
func Grant(n int64, use Use, call, task, total int64) int64 {
	g := min(n, call-use.Call, task-use.Task, total-use.Total)
	return max(g, 0)
}

// Candidate is a live result that may be evicted: one of a Task that is
// not working (paused, failed, waiting for input), held since Born (a
// daemon-wide sequence: smaller is older).
type Candidate struct {
	Task, Call string
	Born       uint64
	Bytes      int64 // its bytes in memory
}

// Evict chooses the live results to evict so that need bytes of memory
// are freed: the oldest first, until the freed bytes reach need. When the
// candidates cannot free need, it returns them all; when need <= 0, none.
func Evict(cands []Candidate, need int64) []Candidate {
	if need <= 0 {
		return nil
	}
	c := append([]Candidate(nil), cands...)
	sort.Slice(c, func(i, j int) bool { return c[i].Born < c[j].Born })
	var out []Candidate
	for _, x := range c {
		if need <= 0 {
			break
		}
		if x.Bytes <= 0 {
			continue
		}
		out = append(out, x)
		need -= x.Bytes
	}
	return out
}
