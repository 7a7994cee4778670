package persistence

import (
	"bufio"
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"lemo/api"
	"lemo/internal/powercut"
)

const (
	powercutHelperEnv = "LEMO_PERSISTENCE_POWERCUT_HELPER" // the data folder
	powercutTasksEnv  = "LEMO_PERSISTENCE_POWERCUT_TASKS"  // Tasks to check and continue
	powercutModeEnv   = "LEMO_PERSISTENCE_POWERCUT_MODE"   // "append", "check", "append-nosync"
	// powercutCutsEnv sets the number of cuts (make soak runs hundreds).
	powercutCutsEnv = "LEMO_POWERCUT_CUTS"
)

// powercutText is the text of a Task's event seq: its identity, padded to
// a length that varies with seq so that events straddle pages.
func powercutText(task string, seq uint64) string {
	s := fmt.Sprintf("%s/%d/", task, seq)
	return s + strings.Repeat("p", 100+int(seq*37%900))
}

// powercutHelper runs in a child process on the powercut filesystem. It
// opens the store (recovering it), checks every Task it is given and prints
// "have <task> <last seq>" or "bad <task> <what>", then prints "ready". In
// the append modes it then appends to the last four Tasks and two new ones
// from six goroutines, printing "ack <task> <seq>" after each
// acknowledged append, until it is killed.
func powercutHelper() {
	out := bufio.NewWriter(os.Stdout)
	var mu sync.Mutex
	say := func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		fmt.Fprintf(out, format+"\n", args...)
		_ = out.Flush()
	}
	fail := func(err error) {
		say("error %v", err)
		os.Exit(2)
	}
	mode := os.Getenv(powercutModeEnv)
	dd, err := OpenDataDir(os.Getenv(powercutHelperEnv))
	if err != nil {
		fail(err)
	}
	st, err := Open(dd, Options{Log: zerolog.Nop(), MemTableSize: 8 << 20, BlockCacheSize: 8 << 20, unsyncedWrites: mode == "append-nosync"})
	if err != nil {
		fail(err)
	}
	var tasks []string
	if s := os.Getenv(powercutTasksEnv); s != "" {
		tasks = strings.Split(s, ",")
	}
	last := make(map[string]uint64)
	for _, task := range tasks {
		var next uint64 = 1
		err := st.Events(task, 1, 0, func(ev *api.Event) error {
			want := powercutText(task, ev.GetSeq())
			switch {
			case ev.GetSeq() != next:
				return fmt.Errorf("seq %d where %d was expected", ev.GetSeq(), next)
			case next == 1 && ev.GetTaskCreated() == nil:
				return fmt.Errorf("seq 1 is not task_created")
			case next > 1 && ev.GetUserMessage().GetText() != want:
				return fmt.Errorf("seq %d holds %.40q, want %.40q", next, ev.GetUserMessage().GetText(), want)
			}
			next++
			return nil
		})
		m, merr := st.Meta(task)
		switch {
		case err != nil:
			say("bad %s %v", task, err)
		case merr != nil && next > 1:
			say("bad %s meta: %v", task, merr)
		case merr == nil && m.GetLastSeq() != next-1:
			say("bad %s meta last seq %d, %d events", task, m.GetLastSeq(), next-1)
		default:
			say("have %s %d", task, next-1)
		}
		last[task] = next - 1
	}
	say("ready")
	if mode == "check" {
		if err := st.Close(); err != nil {
			fail(err)
		}
		_ = dd.Close()
		return
	}
	work := tasks[max(0, len(tasks)-4):]
	now := time.Now()
	work = append(work[:len(work):len(work)], NewTaskID(now), NewTaskID(now.Add(time.Millisecond)))
	for i, task := range work {
		go func() {
			seq := last[task] + 1
			for k := 0; ; k++ {
				n := 1 + (k+i)%3 // one to three events an append
				var evs []*api.Event
				for j := range n {
					if seq+uint64(j) == 1 {
						evs = append(evs, created(task, "o"))
					} else {
						evs = append(evs, msg(task, seq+uint64(j), powercutText(task, seq+uint64(j))))
					}
				}
				if _, err := st.Append(context.Background(), Append{TaskID: task, Events: evs}); err != nil {
					fail(err)
				}
				seq += uint64(n)
				say("ack %s %d", task, seq-1)
			}
		}()
	}
	select {}
}

// powercutRun is one run of the helper on a fresh mount, cut after a number
// of acknowledgements (0: while it opens the store).
type powercutRun struct {
	have  map[string]uint64
	bad   []string
	acks  int
	ready bool
}

// powercutCycle mounts backing, runs the helper in mode on it, cuts the
// power after cutAfter acknowledgements (never, for mode "check"), kills
// the helper and unmounts. Acknowledgements go into acked.
func powercutCycle(t *testing.T, backing, mnt, mode string, tasks []string, cutAfter int, acked map[string]uint64) (powercutRun, powercut.Stats) {
	t.Helper()
	pfs, err := powercut.Mount(backing, mnt)
	if err != nil {
		t.Fatal(err)
	}
	unmounted := false
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	defer func() {
		// A failure before the end leaves no process and no mount behind.
		if !unmounted {
			pfs.Cut()
			if cmd.Process != nil {
				_ = cmd.Process.Kill()
				_ = cmd.Wait()
			}
			_ = pfs.Unmount()
		}
	}()
	cmd.Env = append(os.Environ(), powercutHelperEnv+"="+mnt, powercutModeEnv+"="+mode, powercutTasksEnv+"="+strings.Join(tasks, ","))
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	run := powercutRun{have: make(map[string]uint64)}
	cut := false
	doCut := func() {
		if !cut {
			cut = true
			pfs.Cut()
			_ = cmd.Process.Signal(syscall.SIGKILL)
		}
	}
	line := func(l string, afterCut bool) {
		f := strings.Fields(l)
		switch {
		case len(f) == 3 && f[0] == "ack":
			// An ack printed after the cut is acknowledged all the same:
			// its sync finished before the cut.
			seq, _ := strconv.ParseUint(f[2], 10, 64)
			acked[f[1]] = max(acked[f[1]], seq)
			run.acks++
		case len(f) == 3 && f[0] == "have":
			seq, _ := strconv.ParseUint(f[2], 10, 64)
			run.have[f[1]] = seq
		case len(f) >= 2 && f[0] == "bad":
			run.bad = append(run.bad, l)
		case l == "ready":
			run.ready = true
		case afterCut && len(f) > 0 && f[0] == "error":
			// Appends in flight at the cut fail: expected.
		case len(f) > 0 && f[0] == "error":
			// Before the cut, the helper fails only if the last cut
			// damaged the store: a finding, not a harness failure.
			run.bad = append(run.bad, l)
			doCut()
		default:
			doCut()
			t.Fatalf("helper printed %q", l)
		}
	}
	// One scanner for the whole output: what it buffered before the cut
	// is the start of the lines read after it.
	sc := bufio.NewScanner(stdout)
	if mode == "check" || cutAfter > 0 {
		for sc.Scan() {
			line(sc.Text(), false)
			if mode != "check" && run.ready && run.acks >= cutAfter {
				break
			}
		}
	}
	doCut()
	for sc.Scan() {
		if l := strings.TrimSpace(sc.Text()); l != "" {
			line(l, true)
		}
	}
	werr := cmd.Wait()
	if mode == "check" && !run.ready && len(run.bad) == 0 {
		t.Fatalf("check run: %v", werr)
	}
	stats := pfs.Stats()
	unmounted = true
	if err := pfs.Unmount(); err != nil {
		t.Fatalf("unmount: %v", err)
	}
	return run, stats
}

// powercutHere skips unless FUSE can be mounted (root and /dev/fuse), and
// reports whether the test runs here: it runs in a child process with a
// private mount namespace (see powercut.InPrivateMounts), where this
// returns true.
func powercutHere(t *testing.T) bool {
	t.Helper()
	if testing.Short() {
		t.Skip("power-cut loop skipped in -short mode")
	}
	if os.Geteuid() != 0 {
		t.Skip("power-cut test: mounting FUSE needs root")
	}
	if _, err := os.Stat("/dev/fuse"); err != nil {
		t.Skipf("power-cut test: no /dev/fuse: %v", err)
	}
	return powercut.InPrivateMounts(t)
}

// powercutSetup makes the backing and mount folders and checks that FUSE
// mounts; under CI=true a machine with root and /dev/fuse must run the
// test.
func powercutSetup(t *testing.T) (backing, mnt string) {
	t.Helper()
	backing, mnt = filepath.Join(t.TempDir(), "backing"), filepath.Join(t.TempDir(), "mnt")
	for _, d := range []string{backing, mnt} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	p, err := powercut.Mount(backing, mnt)
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("CI=true, root and /dev/fuse, but FUSE does not mount: %v", err)
		}
		t.Skipf("power-cut test: %v", err)
	}
	if err := p.Unmount(); err != nil {
		t.Fatal(err)
	}
	return backing, mnt
}

// powercutLoss runs cuts power cuts at random moments while the helper
// appends in mode, and after each restart compares what the store holds
// with what was acknowledged. It returns the first loss it finds ("" when
// none) and the figures.
func powercutLoss(t *testing.T, mode string, cuts int, seed uint64) (loss string, acks, verified int) {
	backing, mnt := powercutSetup(t)
	rng := rand.New(rand.NewPCG(seed, 10))
	acked := make(map[string]uint64)
	var tasks []string
	// check compares what a run found when it opened the store with what
	// was acknowledged before it started.
	check := func(run powercutRun, before map[string]uint64) string {
		if len(run.bad) > 0 {
			return strings.Join(run.bad, "; ")
		}
		if !run.ready {
			return "" // cut while the store opened: checked next time
		}
		for _, task := range tasks {
			if have := run.have[task]; have < before[task] {
				return fmt.Sprintf("task %s: %d events acknowledged, %d after the cut", task, before[task], have)
			}
			verified += int(before[task])
		}
		return ""
	}
	var total powercut.Stats
	if mode == "append-nosync" {
		// Create the store with synced writes and close it cleanly, so
		// that what the negative control loses is acknowledged events.
		if run, _ := powercutCycle(t, backing, mnt, "check", nil, 0, acked); len(run.bad) > 0 {
			t.Fatalf("creating the store: %s", run.bad)
		}
	}
	for i := 0; i < cuts; i++ {
		// One cut in eight while the store opens (recovers) after the
		// last one; the others after 1 to 300 acknowledgements.
		cutAfter := 0
		if rng.IntN(8) != 0 {
			cutAfter = 1 + rng.IntN(300)
		}
		before := maps.Clone(acked)
		run, st := powercutCycle(t, backing, mnt, mode, tasks, cutAfter, acked)
		if loss := check(run, before); loss != "" {
			return fmt.Sprintf("after cut %d: %s", i-1, loss), acks, verified
		}
		acks += run.acks
		total.Syncs += st.Syncs
		total.PagesDropped += st.PagesDropped
		total.OpsDropped += st.OpsDropped
		tasks = tasks[:0]
		for task := range acked {
			tasks = append(tasks, task)
		}
		slices.Sort(tasks) // IDs sort by creation: the newest last
	}
	before := maps.Clone(acked)
	run, _ := powercutCycle(t, backing, mnt, "check", tasks, 0, acked)
	t.Logf("syncs %d, unsynced pages dropped %d, journal entries dropped %d", total.Syncs, total.PagesDropped, total.OpsDropped)
	if loss := check(run, before); loss != "" {
		return fmt.Sprintf("after cut %d: %s", cuts-1, loss), acks, verified
	}
	return "", acks, verified
}

// TestPowerCutKeepsAcknowledgedAppends runs the store on a filesystem that
// keeps unsynced writes only in memory, cuts the power at random moments
// while six Tasks append (and while the store recovers), and checks after
// each cut that every acknowledged event is there, in a contiguous log with
// the content written. LEMO_POWERCUT_CUTS sets the number of cuts (make
// soak).
func TestPowerCutKeepsAcknowledgedAppends(t *testing.T) {
	if !powercutHere(t) {
		return
	}
	cuts := 12
	if s := os.Getenv(powercutCutsEnv); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			t.Fatalf("%s=%q: want a positive number of cuts", powercutCutsEnv, s)
		}
		cuts = n
	}
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d, %d cuts", seed, cuts)
	start := time.Now()
	loss, acks, verified := powercutLoss(t, "append", cuts, seed)
	if loss != "" {
		t.Fatalf("seed %d: %s", seed, loss)
	}
	el := time.Since(start)
	t.Logf("%d cuts survived: %d appends acknowledged; %d acknowledged events found intact after the cuts (each counted once per cut it survived); %v per cut", cuts, acks, verified, (el / time.Duration(cuts+1)).Round(time.Millisecond))
}

// TestPowerCutNoticesUnsyncedWrites is the negative control: with
// SyncWrites off, acknowledged events are lost at a power cut, and the test
// above would notice.
func TestPowerCutNoticesUnsyncedWrites(t *testing.T) {
	if !powercutHere(t) {
		return
	}
	seed := uint64(time.Now().UnixNano())
	for attempt := 1; attempt <= 3; attempt++ {
		loss, _, _ := powercutLoss(t, "append-nosync", 4, seed+uint64(attempt))
		if loss != "" {
			t.Logf("SyncWrites off, seed %d: %s", seed+uint64(attempt), loss)
			return
		}
	}
	t.Fatalf("seed %d: with SyncWrites off, 12 power cuts lost no acknowledged event: the power-cut test cannot see a missing sync", seed)
}
