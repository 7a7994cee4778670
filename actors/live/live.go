package live

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"lemo/tools"
)

// ErrReleased: the live result was released (its Task finished, was
// cancelled, passivated or restarted, or it was evicted); only the
// retained part of the output remains.
var ErrReleased = errors.New("live: the live result was released")

// Limits bound the live results. A zero field takes its default.
type Limits struct {
	// CallBytes bounds the part of one call's live result kept in memory
	// (default 8 MiB); the rest is spilled to a file.
	CallBytes int64
	// TaskBytes bounds the memory of one Task's live results together
	// (default 32 MiB).
	TaskBytes int64
	// TotalBytes bounds the memory of every live result of the daemon
	// (default 256 MiB).
	TotalBytes int64
	// SpillBytes bounds one call's spill file (default 256 MiB); bytes
	// beyond it are counted and dropped.
	SpillBytes int64
	// SpillTotalBytes bounds the spill files of the daemon together
	// (default 2 GiB).
	SpillTotalBytes int64
}

// Defaults of Limits.
const (
	DefaultCallBytes       = 8 << 20
	DefaultTaskBytes       = 32 << 20
	DefaultTotalBytes      = 256 << 20
	DefaultSpillBytes      = 256 << 20
	DefaultSpillTotalBytes = 2 << 30
)

// WithDefaults returns l with every zero field set to its default.
func (l Limits) WithDefaults() Limits {
	set := func(v *int64, d int64) {
		if *v == 0 {
			*v = d
		}
	}
	set(&l.CallBytes, DefaultCallBytes)
	set(&l.TaskBytes, DefaultTaskBytes)
	set(&l.TotalBytes, DefaultTotalBytes)
	set(&l.SpillBytes, DefaultSpillBytes)
	set(&l.SpillTotalBytes, DefaultSpillTotalBytes)
	return l
}

// Validate reports every negative field, and a call bound above the Task
// bound or a Task bound above the total.
func (l Limits) Validate() error {
	var errs []error
	for _, f := range []struct {
		name string
		v    int64
	}{{"CallBytes", l.CallBytes}, {"TaskBytes", l.TaskBytes}, {"TotalBytes", l.TotalBytes}, {"SpillBytes", l.SpillBytes}, {"SpillTotalBytes", l.SpillTotalBytes}} {
		if f.v < 0 {
			errs = append(errs, fmt.Errorf("live: Limits.%s = %d: must not be negative (0 means the default)", f.name, f.v))
		}
	}
	d := l.WithDefaults()
	if d.CallBytes > d.TaskBytes {
		errs = append(errs, fmt.Errorf("live: Limits.CallBytes = %d: must not exceed TaskBytes (%d)", d.CallBytes, d.TaskBytes))
	}
	if d.TaskBytes > d.TotalBytes {
		errs = append(errs, fmt.Errorf("live: Limits.TaskBytes = %d: must not exceed TotalBytes (%d)", d.TaskBytes, d.TotalBytes))
	}
	if d.SpillBytes > d.SpillTotalBytes {
		errs = append(errs, fmt.Errorf("live: Limits.SpillBytes = %d: must not exceed SpillTotalBytes (%d)", d.SpillBytes, d.SpillTotalBytes))
	}
	return errors.Join(errs...)
}

// Usage is what the live results hold at one moment.
type Usage struct {
	// HeapBytes and SpillBytes are the bytes held in memory and in spill
	// files; Results counts the live results open or held.
	HeapBytes, SpillBytes int64
	Results               int
	// Evicted counts the live results evicted since the start.
	Evicted uint64
}

// Accountant is the one owner of the live results' accounting: every
// reservation of memory or spill space is checked against the call's, its
// Task's and the daemon's bounds here, and evictions are chosen here.
type Accountant struct {
	lim Limits
	dir string

	// mu guards the fields below; no I/O and no blocking call is made
	// while it is held.
	mu      sync.Mutex
	heap    int64
	spill   int64
	born    uint64
	evicted uint64
	tasks   map[string]*taskUse
	evict   func(task, call string)
	space   func() error
}

type taskUse struct {
	heap    int64
	idle    bool // the Task is not working: its held results may be evicted
	results map[string]*Result
}

// New returns an Accountant with limits lim that spills into dir (one
// folder per Task, mode 0700), after removing what an earlier run left
// there: live results never survive the daemon. dir "" spills nothing:
// what does not fit in memory is dropped and counted.
func New(dir string, lim Limits) (*Accountant, error) {
	if err := lim.Validate(); err != nil {
		return nil, err
	}
	a := &Accountant{lim: lim.WithDefaults(), dir: dir, tasks: make(map[string]*taskUse)}
	if dir != "" {
		if err := os.RemoveAll(dir); err != nil {
			return nil, fmt.Errorf("live: remove the spill files left in %s: %w", dir, err)
		}
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, fmt.Errorf("live: create the spill folder %s: %w", dir, err)
		}
		if err := os.Chmod(dir, 0o700); err != nil {
			return nil, fmt.Errorf("live: make %s private: %w", dir, err)
		}
	}
	return a, nil
}

// Limits returns the limits in force (defaults resolved).
func (a *Accountant) Limits() Limits { return a.lim }

// OnEvict sets the function told about each evicted result (the Task
// drops it, as after a restart). It is called without locks held, on the
// goroutine whose reservation caused the eviction.
func (a *Accountant) OnEvict(f func(task, call string)) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.evict = f
}

// SetSpaceCheck sets the check made before spilling and after every
// spaceEvery bytes spilled (the store's free-space floor): when it fails,
// spilling stops and further output is dropped, so spill files never take
// the space the store needs.
func (a *Accountant) SetSpaceCheck(f func() error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.space = f
}

// spaceEvery is how many spilled bytes pass between free-space checks.
const spaceEvery = 4 << 20

func (a *Accountant) spaceCheck() func() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.space
}

// Usage returns what is held now.
func (a *Accountant) Usage() Usage {
	a.mu.Lock()
	defer a.mu.Unlock()
	u := Usage{HeapBytes: a.heap, SpillBytes: a.spill, Evicted: a.evicted}
	for _, t := range a.tasks {
		u.Results += len(t.results)
	}
	return u
}

// TaskUsage returns the memory held by one Task's live results.
func (a *Accountant) TaskUsage(task string) int64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	if t := a.tasks[task]; t != nil {
		return t.heap
	}
	return 0
}

// SetIdle records whether a Task is working; the held results of a Task
// that is not are evicted first (oldest first) under pressure.
func (a *Accountant) SetIdle(task string, idle bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if t := a.tasks[task]; t != nil {
		t.idle = idle
	}
}

// Open starts the live result of one call. Its Task releases it (Release)
// when it no longer holds it.
func (a *Accountant) Open(task, call string) *Result {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.born++
	r := &Result{a: a, task: task, call: call, born: a.born}
	t := a.tasks[task]
	if t == nil {
		t = &taskUse{results: make(map[string]*Result)}
		a.tasks[task] = t
	}
	if old := t.results[call]; old != nil {
		// A call id is unique within its Task; a second Open (a restarted
		// Task actor retrying) replaces the first.
		a.forgetLocked(old)
	}
	t.results[call] = r
	return r
}

// Lookup returns the held live result of a call.
func (a *Accountant) Lookup(task, call string) (*Result, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	t := a.tasks[task]
	if t == nil {
		return nil, false
	}
	r := t.results[call]
	if r == nil || !r.held || r.gone {
		return nil, false
	}
	return r, true
}

// Empty reports whether the result holds no output (none was written, it
// was discarded, or released).
func (r *Result) Empty() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.freed || len(r.streams) == 0
}

// reserve charges up to n bytes of memory for r and returns how many were
// granted; with force, all n are charged. Under daemon-wide pressure it
// first evicts the oldest held results of Tasks that are not working; the
// evicted results are returned for the caller to free without the lock.
func (a *Accountant) reserve(r *Result, n int64, force bool) (int64, []*Result) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if r.gone {
		return 0, nil
	}
	t := a.tasks[r.task]
	use := Use{Call: r.heap, Task: t.heap, Total: a.heap}
	var victims []*Result
	if Grant(n, use, a.lim.CallBytes, a.lim.TaskBytes, a.lim.TotalBytes) < n || force {
		// What the call and Task bounds would allow, were the total not
		// in the way, is worth evicting for.
		want := min(n, max(a.lim.CallBytes-use.Call, 0), max(a.lim.TaskBytes-use.Task, 0))
		if force {
			want = n
		}
		if need := want - max(a.lim.TotalBytes-a.heap, 0); need > 0 {
			victims = a.evictLocked(need, r.task)
		}
	}
	g := Grant(n, Use{Call: r.heap, Task: t.heap, Total: a.heap}, a.lim.CallBytes, a.lim.TaskBytes, a.lim.TotalBytes)
	if force {
		g = n
	}
	r.heap += g
	t.heap += g
	a.heap += g
	return g, victims
}

// evictLocked detaches the oldest held results of idle Tasks other than
// except until need bytes are freed.
func (a *Accountant) evictLocked(need int64, except string) []*Result {
	var cands []Candidate
	for id, t := range a.tasks {
		if !t.idle || id == except {
			continue
		}
		for _, r := range t.results {
			if r.held && !r.gone {
				cands = append(cands, Candidate{Task: id, Call: r.call, Born: r.born, Bytes: r.heap})
			}
		}
	}
	var out []*Result
	for _, c := range Evict(cands, need) {
		r := a.tasks[c.Task].results[c.Call]
		a.forgetLocked(r)
		a.evicted++
		out = append(out, r)
	}
	return out
}

// reserveSpill charges up to n bytes of spill space for r.
func (a *Accountant) reserveSpill(r *Result, n int64) int64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	if r.gone {
		return 0
	}
	g := max(min(n, a.lim.SpillBytes-r.spill, a.lim.SpillTotalBytes-a.spill), 0)
	r.spill += g
	a.spill += g
	return g
}

// forgetLocked removes r from the accounting; it is gone for readers.
func (a *Accountant) forgetLocked(r *Result) {
	if r.gone {
		return
	}
	r.gone = true
	a.heap -= r.heap
	a.spill -= r.spill
	if t := a.tasks[r.task]; t != nil {
		t.heap -= r.heap
		if t.results[r.call] == r {
			delete(t.results, r.call)
		}
		if len(t.results) == 0 {
			delete(a.tasks, r.task)
		}
	}
	r.heap, r.spill = 0, 0
}

// freeVictims frees evicted results and tells their Tasks.
func (a *Accountant) freeVictims(vs []*Result) {
	if len(vs) == 0 {
		return
	}
	a.mu.Lock()
	f := a.evict
	a.mu.Unlock()
	for _, v := range vs {
		v.free()
		if f != nil {
			f(v.task, v.call)
		}
	}
}

func (a *Accountant) spillPath(task, call, stream string) string {
	return filepath.Join(a.dir, task, call+"."+stream)
}

// Result is the live result of one call: its whole output, stream by
// stream, the first part in memory and the rest in a spill file.
type Result struct {
	a          *Accountant
	task, call string
	born       uint64

	// Guarded by a.mu.
	heap, spill int64
	held        bool // its Task holds it: readable, evictable when idle
	gone        bool // released or evicted: no longer counted

	// mu guards the streams' data; it may be held during file I/O.
	mu      sync.Mutex
	streams []*stream
	freed   bool
	spillE  error
	// spilled: a stream made the Task's spill folder for a file, so the
	// folder may be removed once this result's files are.
	spilled bool
}

var _ tools.LiveOutput = (*Result)(nil)

type stream struct {
	r        *Result
	name     string
	chunks   [][]byte
	heapLen  int64
	spilling bool
	file     *os.File
	path     string // the spill file once closed
	fileLen  int64
	checked  int64 // fileLen at the last free-space check
	dropped  int64
}

// chunk is the size of the blocks holding the in-memory part: no regrowing
// of one large buffer.
const chunk = 256 << 10

// Stream returns the writer of one named part of the output (made of
// [a-z0-9_]); writes never fail: what is not kept is counted as dropped.
func (r *Result) Stream(name string) io.Writer {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, s := range r.streams {
		if s.name == name {
			return s
		}
	}
	s := &stream{r: r, name: cleanName(name)}
	r.streams = append(r.streams, s)
	return s
}

func cleanName(s string) string {
	s = strings.Map(func(c rune) rune {
		if c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_' {
			return c
		}
		return '_'
	}, strings.ToLower(s))
	if s == "" {
		s = "output"
	}
	return s[:min(len(s), 32)]
}

// Write keeps p: in memory while the bounds allow, then in the spill file,
// then (beyond the spill bounds) counted as dropped.
func (s *stream) Write(p []byte) (int, error) {
	r := s.r
	n := int64(len(p))
	var g int64
	if !s.spillingNow() {
		var victims []*Result
		g, victims = r.a.reserve(r, n, false)
		r.a.freeVictims(victims)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.freed {
		r.a.unreserve(r, g)
		return len(p), nil
	}
	for keep := p[:g]; len(keep) > 0; {
		if len(s.chunks) == 0 || len(s.chunks[len(s.chunks)-1]) == cap(s.chunks[len(s.chunks)-1]) {
			// Chunks grow to the full size, so a short output holds
			// little more than its bytes.
			s.chunks = append(s.chunks, make([]byte, 0, min(chunk, max(4<<10, 2*s.heapLen))))
		}
		last := &s.chunks[len(s.chunks)-1]
		k := min(len(keep), cap(*last)-len(*last))
		*last = append(*last, keep[:k]...)
		keep = keep[k:]
	}
	s.heapLen += g
	if rest := p[g:]; len(rest) > 0 {
		s.spilling = true
		s.spillLocked(rest)
	}
	return len(p), nil
}

func (s *stream) spillingNow() bool {
	s.r.mu.Lock()
	defer s.r.mu.Unlock()
	return s.spilling
}

// spillLocked appends p to the stream's spill file within the spill
// bounds; the rest is dropped.
func (s *stream) spillLocked(p []byte) {
	r := s.r
	if r.a.dir == "" || r.spillE != nil {
		s.dropped += int64(len(p))
		return
	}
	if check := r.a.spaceCheck(); check != nil && (s.file == nil || s.fileLen >= s.checked+spaceEvery) {
		s.checked = s.fileLen
		if err := check(); err != nil {
			r.spillE = fmt.Errorf("live: spilling stopped: %w", err)
			s.dropped += int64(len(p))
			return
		}
	}
	g := r.a.reserveSpill(r, int64(len(p)))
	s.dropped += int64(len(p)) - g
	if g == 0 {
		return
	}
	if s.file == nil && s.path != "" {
		// Written again after Hold: nothing more is kept.
		s.dropped += g
		r.a.unreserveSpill(r, g)
		return
	}
	if s.file == nil {
		path := r.a.spillPath(r.task, r.call, s.name)
		var err error
		// Twice: another result of the Task may remove the folder, once
		// empty, between the two calls.
		for range 2 {
			if err = os.MkdirAll(filepath.Dir(path), 0o700); err == nil {
				r.spilled = true
				if s.file, err = os.OpenFile(path, os.O_CREATE|os.O_TRUNC|os.O_RDWR, 0o600); !errors.Is(err, os.ErrNotExist) {
					break
				}
			}
		}
		if err != nil {
			r.spillE = fmt.Errorf("live: spill file: %w", err)
			s.dropped += g
			r.a.unreserveSpill(r, g)
			return
		}
	}
	w, err := s.file.Write(p[:g])
	s.fileLen += int64(w)
	if err != nil {
		r.spillE = fmt.Errorf("live: write the spill file: %w", err)
		s.dropped += g - int64(w)
		r.a.unreserveSpill(r, g-int64(w))
	}
}

func (a *Accountant) unreserve(r *Result, n int64) {
	if n == 0 {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if r.gone {
		return
	}
	r.heap -= n
	a.heap -= n
	if t := a.tasks[r.task]; t != nil {
		t.heap -= n
	}
}

func (a *Accountant) unreserveSpill(r *Result, n int64) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if r.gone {
		return
	}
	r.spill -= n
	a.spill -= n
}

// Stats says where the bytes written so far are.
func (r *Result) Stats() tools.LiveStats {
	r.mu.Lock()
	defer r.mu.Unlock()
	var st tools.LiveStats
	for _, s := range r.streams {
		st.HeapBytes += s.heapLen
		st.SpilledBytes += s.fileLen
		st.DroppedBytes += s.dropped
	}
	st.Bytes = st.HeapBytes + st.SpilledBytes + st.DroppedBytes
	if r.freed {
		return tools.LiveStats{}
	}
	if r.spillE != nil {
		st.SpillError = r.spillE.Error()
	}
	return st
}

// Discard drops what was written (the tool's result holds all of it); the
// Result stays open, for Hold.
func (r *Result) Discard() {
	r.mu.Lock()
	var heap, spill int64
	for _, s := range r.streams {
		heap += s.heapLen
		spill += s.fileLen
		if s.file != nil {
			_ = s.file.Close()
			_ = os.Remove(s.file.Name())
		}
	}
	r.streams = nil
	r.mu.Unlock()
	r.a.unreserve(r, heap)
	r.a.unreserveSpill(r, spill)
}

// Hold marks r as held by its Task (readable with Lookup, evictable while
// the Task is not working) and charges extra bytes of memory the Task
// keeps beside it (the model's view of the result), beyond the bounds if
// need be: they are already in memory.
func (r *Result) Hold(extra int64) {
	r.mu.Lock()
	for _, s := range r.streams {
		if s.file != nil {
			// Writing is over: the spill file stays for reading, opened
			// by each read.
			s.path = s.file.Name()
			_ = s.file.Close()
			s.file = nil
		}
	}
	r.mu.Unlock()
	_, victims := r.a.reserve(r, extra, true)
	r.a.mu.Lock()
	if !r.gone {
		r.held = true
	}
	r.a.mu.Unlock()
	r.a.freeVictims(victims)
}

// Release frees the result: its memory and its spill files. Reads then
// fail with ErrReleased. It may be called more than once.
func (r *Result) Release() {
	r.a.mu.Lock()
	r.a.forgetLocked(r)
	r.a.mu.Unlock()
	r.free()
}

// free drops the data and deletes the spill files.
func (r *Result) free() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.freed {
		return
	}
	r.freed = true
	for _, s := range r.streams {
		s.chunks = nil
		if s.file != nil {
			s.path = s.file.Name()
			_ = s.file.Close()
			s.file = nil
		}
		if s.path != "" {
			_ = os.Remove(s.path)
		}
	}
	if r.a.dir != "" && r.spilled {
		// The Task's folder goes once empty (a result that never spilled
		// cannot have emptied it: no removal, no syscall, for most).
		_ = os.Remove(filepath.Join(r.a.dir, r.task))
	}
}
