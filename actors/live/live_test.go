package live

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
)

func TestGrant(t *testing.T) {
	for _, c := range []struct {
		name              string
		n                 int64
		use               Use
		call, task, total int64
		want              int64
	}{
		{"all fits", 10, Use{}, 100, 100, 100, 10},
		{"the call bound", 10, Use{Call: 95}, 100, 1000, 1000, 5},
		{"the Task bound", 10, Use{Call: 0, Task: 97}, 100, 100, 1000, 3},
		{"the total bound", 10, Use{Total: 99}, 100, 100, 100, 1},
		{"nothing left", 10, Use{Call: 100}, 100, 100, 100, 0},
		{"over a bound (lowered by a reload)", 10, Use{Total: 150}, 100, 100, 100, 0},
		{"zero bytes", 0, Use{}, 100, 100, 100, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := Grant(c.n, c.use, c.call, c.task, c.total); got != c.want {
				t.Fatalf("Grant(%d, %+v, %d, %d, %d) = %d, want %d", c.n, c.use, c.call, c.task, c.total, got, c.want)
			}
		})
	}
}

func TestEvict(t *testing.T) {
	cands := []Candidate{
		{Task: "b", Call: "b1", Born: 5, Bytes: 30},
		{Task: "a", Call: "a1", Born: 1, Bytes: 10},
		{Task: "a", Call: "a2", Born: 3, Bytes: 0},
		{Task: "c", Call: "c1", Born: 2, Bytes: 20},
	}
	calls := func(cs []Candidate) []string {
		var out []string
		for _, c := range cs {
			out = append(out, c.Call)
		}
		return out
	}
	for _, c := range []struct {
		name string
		need int64
		want []string
	}{
		{"no need", 0, nil},
		{"the oldest suffices", 10, []string{"a1"}},
		{"oldest first until enough", 25, []string{"a1", "c1"}},
		{"a result holding no memory is skipped", 35, []string{"a1", "c1", "b1"}},
		{"not enough: all that frees memory", 1000, []string{"a1", "c1", "b1"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := calls(Evict(cands, c.need)); !reflect.DeepEqual(got, c.want) {
				t.Fatalf("Evict(need %d) = %v, want %v", c.need, got, c.want)
			}
		})
	}
}

func TestLimitsValidate(t *testing.T) {
	err := Limits{CallBytes: -1, SpillBytes: -2}.Validate()
	for _, want := range []string{"Limits.CallBytes = -1", "Limits.SpillBytes = -2"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Validate() = %v, want it to name %q", err, want)
		}
	}
	err = Limits{CallBytes: 10 << 20, TaskBytes: 5 << 20}.Validate()
	if err == nil || !strings.Contains(err.Error(), "must not exceed TaskBytes") {
		t.Errorf("Validate(call > task) = %v", err)
	}
	if err := (Limits{}).Validate(); err != nil {
		t.Errorf("the defaults: %v", err)
	}
}

func readAll(t *testing.T, r *Result) string {
	t.Helper()
	n, err := r.Size()
	if err != nil {
		t.Fatalf("Size: %v", err)
	}
	b := make([]byte, n)
	if _, err := r.ReadAt(b, 0); err != nil {
		t.Fatalf("ReadAt: %v", err)
	}
	return string(b)
}

// A result keeps its bound in memory, spills the rest, and reads whole
// from any offset; Release frees both and deletes the spill files.
func TestResultSpillsAndReads(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "live")
	a, err := New(dir, Limits{CallBytes: 1000, TaskBytes: 1000, TotalBytes: 1000, SpillBytes: 3000, SpillTotalBytes: 3000})
	if err != nil {
		t.Fatal(err)
	}
	r := a.Open("task1", "call1")
	out, errw := r.Stream("stdout"), r.Stream("stderr")
	want := bytes.Repeat([]byte("0123456789"), 300) // 3000 bytes
	for i := 0; i < len(want); i += 7 {
		out.Write(want[i:min(i+7, len(want))])
	}
	errw.Write([]byte("oops\n")) // nothing left in memory: spilled
	st := r.Stats()
	if st.HeapBytes != 1000 || st.SpilledBytes != 2005 || st.DroppedBytes != 0 || st.Bytes != 3005 {
		t.Fatalf("Stats() = %+v", st)
	}
	if u := a.Usage(); u.HeapBytes != 1000 || u.SpillBytes != 2005 || u.Results != 1 {
		t.Fatalf("Usage() = %+v", u)
	}
	if _, ok := a.Lookup("task1", "call1"); ok {
		t.Fatal("Lookup found a result not yet held")
	}
	r.Hold(0)
	got, ok := a.Lookup("task1", "call1")
	if !ok || got != r {
		t.Fatal("Lookup does not find the held result")
	}
	text := readAll(t, r)
	wantText := "[stdout: 3000 bytes]\n" + string(want) + "\n[stderr: 5 bytes]\noops\n\n"
	if text != wantText {
		t.Fatalf("text = %.80q…, want %.80q…", text, wantText)
	}
	for _, off := range []int64{0, 5, 21, 1000, 1021, 3020, int64(len(wantText) - 3)} {
		b := make([]byte, 50)
		n, err := r.ReadAt(b, off)
		if err != nil && !(errors.Is(err, io.EOF) && off+50 > int64(len(wantText))) {
			t.Fatalf("ReadAt(%d): %v", off, err)
		}
		if string(b[:n]) != wantText[off:min(off+50, int64(len(wantText)))] {
			t.Fatalf("ReadAt(%d) = %q, want %q", off, b[:n], wantText[off:min(off+50, int64(len(wantText)))])
		}
	}
	files, _ := filepath.Glob(filepath.Join(dir, "task1", "*"))
	if len(files) != 2 {
		t.Fatalf("spill files %v, want stdout and stderr", files)
	}
	if fi, err := os.Stat(filepath.Join(dir, "task1")); err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("the Task's spill folder: %v %v, want mode 0700", fi.Mode(), err)
	}
	r.Release()
	if _, err := r.ReadAt(make([]byte, 1), 0); !errors.Is(err, ErrReleased) {
		t.Fatalf("ReadAt after Release = %v, want ErrReleased", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "task1")); !os.IsNotExist(err) {
		t.Fatalf("the spill folder of the Task remains after Release: %v", err)
	}
	if u := a.Usage(); u.HeapBytes != 0 || u.SpillBytes != 0 || u.Results != 0 {
		t.Fatalf("Usage() after Release = %+v", u)
	}
}

// Beyond the spill bound bytes are dropped and counted, and the text says
// so; with no spill folder, what does not fit in memory is dropped.
func TestResultDropsBeyondSpill(t *testing.T) {
	a, err := New(filepath.Join(t.TempDir(), "live"), Limits{CallBytes: 100, TaskBytes: 100, TotalBytes: 100, SpillBytes: 200, SpillTotalBytes: 200})
	if err != nil {
		t.Fatal(err)
	}
	r := a.Open("t", "c")
	r.Stream("stdout").Write(bytes.Repeat([]byte("x"), 1000))
	if st := r.Stats(); st.HeapBytes != 100 || st.SpilledBytes != 200 || st.DroppedBytes != 700 {
		t.Fatalf("Stats() = %+v", st)
	}
	r.Hold(0)
	if text := readAll(t, r); !strings.HasPrefix(text, "[stdout: 1000 bytes; the last 700 were dropped: beyond the spill limit]\n") || len(text) != 72+300+1 {
		t.Fatalf("text = %.100q (%d bytes)", text, len(text))
	}
	r.Release()

	none, err := New("", Limits{CallBytes: 100, TaskBytes: 100, TotalBytes: 100})
	if err != nil {
		t.Fatal(err)
	}
	r = none.Open("t", "c")
	r.Stream("stdout").Write(bytes.Repeat([]byte("x"), 1000))
	if st := r.Stats(); st.HeapBytes != 100 || st.SpilledBytes != 0 || st.DroppedBytes != 900 {
		t.Fatalf("without a spill folder: Stats() = %+v", st)
	}
	r.Release()
}

// The Task bound is shared by a Task's calls; another Task is not
// affected.
func TestTaskBound(t *testing.T) {
	a, err := New(filepath.Join(t.TempDir(), "live"), Limits{CallBytes: 100, TaskBytes: 150, TotalBytes: 1000})
	if err != nil {
		t.Fatal(err)
	}
	r1, r2, other := a.Open("t", "c1"), a.Open("t", "c2"), a.Open("u", "c1")
	for _, r := range []*Result{r1, r2, other} {
		r.Stream("stdout").Write(bytes.Repeat([]byte("x"), 100))
	}
	if h1, h2, ho := r1.Stats().HeapBytes, r2.Stats().HeapBytes, other.Stats().HeapBytes; h1 != 100 || h2 != 50 || ho != 100 {
		t.Fatalf("in memory: %d, %d (same Task), %d (other); want 100, 50, 100", h1, h2, ho)
	}
	if got := a.TaskUsage("t"); got != 150 {
		t.Fatalf("TaskUsage = %d, want 150", got)
	}
	for _, r := range []*Result{r1, r2, other} {
		r.Release()
	}
}

// Under daemon-wide pressure the oldest held results of idle Tasks are
// evicted (and their Tasks told); a working Task's results are not.
func TestEvictionUnderPressure(t *testing.T) {
	a, err := New(filepath.Join(t.TempDir(), "live"), Limits{CallBytes: 100, TaskBytes: 100, TotalBytes: 250})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var told []string
	a.OnEvict(func(task, call string) {
		mu.Lock()
		defer mu.Unlock()
		told = append(told, task+"/"+call)
	})
	held := func(task string, idle bool) *Result {
		r := a.Open(task, "c")
		r.Stream("stdout").Write(bytes.Repeat([]byte("x"), 100))
		r.Hold(0)
		a.SetIdle(task, idle)
		return r
	}
	old := held("old", true)
	working := held("working", false)
	if u := a.Usage(); u.HeapBytes != 200 {
		t.Fatalf("Usage = %+v", u)
	}
	// 100 more bytes: 50 fit, the oldest idle Task's result is evicted for
	// the rest; the working Task keeps its own.
	r := a.Open("new", "c")
	r.Stream("stdout").Write(bytes.Repeat([]byte("y"), 100))
	if st := r.Stats(); st.HeapBytes != 100 {
		t.Fatalf("the new result holds %d bytes in memory, want 100 after the eviction", st.HeapBytes)
	}
	if _, ok := a.Lookup("old", "c"); ok {
		t.Fatal("the idle Task's result was not evicted")
	}
	if _, err := old.Size(); !errors.Is(err, ErrReleased) {
		t.Fatalf("the evicted result reads: %v, want ErrReleased", err)
	}
	if _, ok := a.Lookup("working", "c"); !ok {
		t.Fatal("the working Task's result was evicted")
	}
	mu.Lock()
	if !reflect.DeepEqual(told, []string{"old/c"}) {
		t.Fatalf("told %v, want old/c", told)
	}
	mu.Unlock()
	if u := a.Usage(); u.HeapBytes != 200 || u.Evicted != 1 {
		t.Fatalf("Usage = %+v, want 200 bytes held and one eviction", u)
	}
	// No idle Task left: the rest spills.
	r2 := a.Open("new", "c2")
	r2.Stream("stdout").Write(bytes.Repeat([]byte("z"), 100))
	if st := r2.Stats(); st.HeapBytes != 0 || st.SpilledBytes != 100 {
		t.Fatalf("with no idle Task to evict: %+v, want all spilled", st)
	}
	for _, r := range []*Result{working, r, r2} {
		r.Release()
	}
}

// New empties the spill folder an earlier run left.
func TestNewRemovesLeftovers(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "live")
	if err := os.MkdirAll(filepath.Join(dir, "t"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "t", "c.stdout"), []byte("old"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := New(dir, Limits{}); err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(dir)
	if err != nil || len(entries) != 0 {
		t.Fatalf("after New: %v %v, want an empty folder", entries, err)
	}
	if fi, _ := os.Stat(dir); fi.Mode().Perm() != 0o700 {
		t.Fatalf("mode %v, want 0700", fi.Mode().Perm())
	}
}

// Spilling stops when the free-space check fails: the rest is dropped and
// the reason recorded.
func TestSpillStopsWhenSpaceRunsLow(t *testing.T) {
	a, err := New(filepath.Join(t.TempDir(), "live"), Limits{CallBytes: 100, TaskBytes: 100, TotalBytes: 100, SpillBytes: 64 << 20, SpillTotalBytes: 64 << 20})
	if err != nil {
		t.Fatal(err)
	}
	checks := 0
	a.SetSpaceCheck(func() error {
		checks++
		if checks > 1 {
			return errors.New("the data folder's filesystem is below its floor")
		}
		return nil
	})
	r := a.Open("t", "c")
	w := r.Stream("stdout")
	block := bytes.Repeat([]byte("x"), 1<<20)
	for range 10 {
		w.Write(block)
	}
	st := r.Stats()
	// Checked before the file is made and once spaceEvery (4 MiB) more was
	// spilled: the fifth write still spills, the sixth is refused.
	if st.HeapBytes != 100 || st.SpilledBytes != 5<<20-100 || st.DroppedBytes != 5<<20 || !strings.Contains(st.SpillError, "below its floor") {
		t.Fatalf("Stats() = %+v; want 5 MiB (less the 100 bytes in memory) spilled before the check failed, the rest dropped, and why", st)
	}
	r.Release()
}
