package shell

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"lemo/actors/live"
	"lemo/tools"
	"lemo/tools/internal/proc"
)

func TestRunBasics(t *testing.T) {
	h := newHarness(t, testConfig(randomHex()))
	r := h.must(obj{"command": "echo out; echo err >&2; pwd; exit 3"})
	if r.ExitCode != 3 || r.Stdout != "out\n"+h.ws+"\n" || r.Stderr != "err\n" || r.StdoutBytes != int64(5+len(h.ws)) || r.StderrBytes != 4 {
		t.Errorf("result = %+v", r)
	}
	if r.TimedOut || r.Killed || r.BackgroundKilled || r.Truncated || r.TimeoutMS != 120000 {
		t.Errorf("flags = %+v", r)
	}
	r = h.must(obj{"command": "kill -KILL $$"})
	if r.ExitCode != -1 || r.Signal != "SIGKILL" || !r.Killed {
		t.Errorf("self-killed shell = %+v; want exit -1, SIGKILL", r)
	}
	// stdin is /dev/null: a command reading it ends at once.
	r = h.must(obj{"command": "cat; echo done"})
	if r.Stdout != "done\n" {
		t.Errorf("cat with stdin = %+v; want immediate EOF", r)
	}
}

func TestTimeout(t *testing.T) {
	marker := randomHex()
	h := newHarness(t, testConfig(marker))
	var pid int
	start := time.Now()
	r, err := h.run(context.Background(), obj{"command": "echo before; sleep 1000; echo after", "timeout_seconds": 0.3}, func(s state) { pid = s.PID })
	if err != nil {
		t.Fatal(err)
	}
	took := time.Since(start)
	if !r.TimedOut || r.Stdout != "before\n" || r.TimeoutMS != 300 || r.ExitCode != -1 || r.Signal != "SIGTERM" || !strings.Contains(r.Note, "timeout") {
		t.Errorf("result = %+v; want timed out by SIGTERM after printing before", r)
	}
	// The timeout cannot fire early; how late it may come on a loaded
	// machine is not this test's business.
	if took < 300*time.Millisecond {
		t.Errorf("timed-out run took %v; want at least the 300ms timeout", took)
	}
	noLeftovers(t, map[int]bool{pid: true}, marker)

	// A group that ignores SIGTERM is killed after the grace period.
	r, err = h.run(context.Background(), obj{"command": "trap '' TERM; sleep 1000 & sleep 1000; wait", "timeout_seconds": 0.2}, func(s state) { pid = s.PID })
	if err != nil {
		t.Fatal(err)
	}
	if !r.TimedOut || !r.Killed || r.Signal != "SIGKILL" {
		t.Errorf("TERM-ignoring run = %+v; want timed out and killed", r)
	}
	noLeftovers(t, map[int]bool{pid: true}, marker)
}

func TestTimeoutInputBounds(t *testing.T) {
	cfg := testConfig(randomHex())
	cfg.MaxTimeout = 5 * time.Second
	h := newHarness(t, cfg)
	in := []byte(`{"command":"true","timeout_seconds":6}`)
	if err := h.rt.ValidateInput(in); err == nil {
		t.Error("a timeout above MaxTimeout passed the input schema")
	}
	if err := h.rt.ValidateInput([]byte(`{"command":"true","timeout_seconds":0}`)); err == nil {
		t.Error("a zero timeout passed the input schema")
	}
	r := h.must(obj{"command": "true"})
	if r.TimeoutMS != 5000 {
		t.Errorf("default timeout with MaxTimeout 5s = %dms, want 5000", r.TimeoutMS)
	}
}

// TestBackgroundAndHeldOutput: the shell exits while a grandchild keeps
// running and keeps stdout open. The run must return promptly, stop it and
// leave nothing.
func TestBackgroundAndHeldOutput(t *testing.T) {
	marker := randomHex()
	h := newHarness(t, testConfig(marker))
	for _, cmd := range []string{
		"sleep 1000 & echo started",
		"(sleep 1000; echo late) & echo started",
		"sh -c 'sleep 1000 & sleep 1000' & echo started",
	} {
		t.Run(cmd, func(t *testing.T) {
			var pid int
			// The run returns (the sleeps would take 1000s) with the
			// background stopped.
			r, err := h.run(context.Background(), obj{"command": cmd}, func(s state) { pid = s.PID })
			if err != nil {
				t.Fatal(err)
			}
			if r.Stdout != "started\n" || r.ExitCode != 0 || !r.BackgroundKilled {
				t.Errorf("result = %+v; want started, exit 0, background_killed", r)
			}
			noLeftovers(t, map[int]bool{pid: true}, marker)
		})
	}
}

// TestEscapedProcessHoldsOutput: a process that leaves the group (setsid)
// and keeps stdout open cannot be found by group; the run still returns
// within KillGrace and says why the output may be incomplete.
func TestEscapedProcessIsStopped(t *testing.T) {
	if _, err := exec.LookPath("setsid"); err != nil {
		t.Skip("setsid not installed")
	}
	h := newHarness(t, testConfig(randomHex()))
	// The shell waits until the child has left its group (field 5 of
	// /proc/PID/stat is the group), so the escape is certain.
	r := h.must(obj{"command": `setsid sleep 1000 & p=$!; while [ "$(cut -d' ' -f5 /proc/$p/stat)" = "$$" ]; do sleep 0.01; done; echo $p`})
	pid, err := strconv.Atoi(strings.TrimSpace(r.Stdout))
	if err != nil {
		t.Fatalf("stdout %q: %v", r.Stdout, err)
	}
	t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGKILL) })
	// It carried the run's tag: stopped before the run returned.
	if st, err := proc.ReadStat(pid); err == nil && !st.Dead() {
		t.Fatalf("the escaped process %d is still running: %+v", pid, st)
	}
	if !r.BackgroundKilled || strings.Contains(r.Note, "kept the output open") {
		t.Errorf("result %+v; want background_killed and no held output", r)
	}
}

// A process that left the group and dropped the run's tag from its
// environment is not found: it holds the output, which is read for
// KillGrace and then given up, and the result says so.
func TestUntaggedEscapedProcessHoldsOutput(t *testing.T) {
	if _, err := exec.LookPath("setsid"); err != nil {
		t.Skip("setsid not installed")
	}
	h := newHarness(t, testConfig(randomHex()))
	r := h.must(obj{"command": `env -u ` + RunTagVariable + ` setsid sleep 1000 & p=$!; while [ "$(cut -d' ' -f5 /proc/$p/stat)" = "$$" ]; do sleep 0.01; done; echo $p`})
	pid, err := strconv.Atoi(strings.TrimSpace(r.Stdout))
	if err != nil {
		t.Fatalf("stdout %q: %v", r.Stdout, err)
	}
	t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGKILL) })
	if !strings.Contains(r.Note, "kept the output open") {
		t.Errorf("note = %q; want it to say the output was held open (result %+v)", r.Note, r)
	}
}

// TestCancelledRuns runs `sleep 1000 & sleep 1000 & wait` many times,
// cancels each run right after its first state update (or, for every other
// run, once the two sleeps exist), and proves that no process of those
// groups, or carrying the test's marker, survives, and no zombie remains.
func TestCancelledRuns(t *testing.T) {
	runs := 200
	if s := os.Getenv("SHELLTEST_RUNS"); s != "" {
		runs, _ = strconv.Atoi(s)
	}
	if testing.Short() {
		runs = 20
	}
	marker := randomHex()
	h := newHarness(t, testConfig(marker))
	var (
		mu      sync.Mutex
		pgids   = map[int]bool{}
		maxStop time.Duration
		waited  int
	)
	const workers = 4
	var wg sync.WaitGroup
	errs := make(chan error, runs)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < runs; i += workers {
				ctx, cancel := context.WithCancel(context.Background())
				var once sync.Once
				var pid int
				started := make(chan struct{})
				done := make(chan error, 1)
				go func() {
					_, err := h.run(ctx, obj{"command": "sleep 1000 & sleep 1000 & wait"}, func(s state) {
						once.Do(func() { pid = s.PID; close(started) })
					})
					done <- err
				}()
				select {
				case <-started:
				case err := <-done:
					cancel()
					errs <- fmt.Errorf("run %d ended before it started: %v", i, err)
					continue
				}
				mu.Lock()
				pgids[pid] = true
				mu.Unlock()
				if i%2 == 1 {
					// Wait until both sleeps run, so that the group is
					// cancelled with its children in place.
					deadline := time.Now().Add(5 * time.Second)
					for n, _ := countGroup(pid); n < 3 && time.Now().Before(deadline); n, _ = countGroup(pid) {
						time.Sleep(time.Millisecond)
					}
					mu.Lock()
					waited++
					mu.Unlock()
				}
				at := time.Now()
				cancel()
				err := <-done
				took := time.Since(at)
				mu.Lock()
				maxStop = max(maxStop, took)
				mu.Unlock()
				if !errors.Is(err, context.Canceled) {
					errs <- fmt.Errorf("run %d: err = %v, want context.Canceled", i, err)
				}
				if live, zombies := countGroup(pid); live+zombies > 0 {
					errs <- fmt.Errorf("run %d: group %d has %d live processes and %d unreaped zombies of ours right after Execute returned", i, pid, live, zombies)
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	noLeftovers(t, pgids, marker)
	// Each run returned Canceled with its group empty; how fast is logged,
	// not bounded (a loaded machine would make a bound flaky).
	t.Logf("%d cancelled runs (%d with both sleeps running); slowest return after cancel: %v", runs, waited, maxStop)
}

// countGroup counts the live processes of group pgid, and its zombies
// whose parent is this process (ours to reap). Zombies of another parent
// (init) are dead and are waited for separately.
func countGroup(pgid int) (live, ourZombies int) {
	l, _ := proc.Survivors(proc.InGroup(pgid))
	z, _ := proc.Zombies(proc.InGroup(pgid))
	return len(l), len(z)
}

// TestCancelledRunsAsSubreaper repeats TestCancelledRuns in a child test
// binary that is a child subreaper, as a daemon that supervises other
// processes may be: orphaned sleeps are then re-parented to it, and the
// tool must reap them or they stay zombies.
func TestCancelledRunsAsSubreaper(t *testing.T) {
	if os.Getenv(envSubreaper) == "1" {
		t.Skip("already the subreaper child")
	}
	cmd := exec.Command(os.Args[0], "-test.run=^(TestCancelledRuns|TestBackgroundAndHeldOutput)$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), envSubreaper+"=1", "SHELLTEST_RUNS=60")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("subreaper run failed: %v\n%s", err, out)
	}
	if !regexp.MustCompile(`(?m)^--- PASS: TestCancelledRuns `).Match(out) {
		t.Fatalf("subreaper run did not pass TestCancelledRuns:\n%s", out)
	}
	for _, l := range strings.Split(string(out), "\n") {
		if strings.Contains(l, "cancelled runs") {
			t.Log(strings.TrimSpace(l))
		}
	}
}

// TestShellDiesWithDaemon kills a daemon (this test binary in a helper
// mode) with SIGKILL while it runs a command: Pdeathsig, set from the
// locked thread that started the shell, must take the shell with it.
// (Grandchildren of the shell are not covered; see the package doc.)
func TestShellDiesWithDaemon(t *testing.T) {
	marker := randomHex()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	// exec: the shell process becomes sleep, so it is the one process that
	// must die with the daemon, whatever the timing.
	cmd.Env = append(os.Environ(), envDaemon+"=exec sleep 1000 # "+marker)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var line [64]byte
	n, _ := stdout.Read(line[:])
	var pid int
	if _, err := fmt.Sscanf(string(line[:n]), "pid %d", &pid); err != nil {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		t.Fatalf("helper said %q: %v", line[:n], err)
	}
	if err := syscall.Kill(pid, 0); err != nil {
		t.Fatalf("the shell %d is not running: %v", pid, err)
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	noLeftovers(t, map[int]bool{pid: true}, marker)
}

func TestEnvScrubbed(t *testing.T) {
	t.Setenv("LEMO_DAEMON_ONLY", "daemon-secret") // in this process, not in Config.Environ
	cfg := testConfig(randomHex())
	cfg.Environ = append(cfg.Environ,
		"MY_API_KEY=k1", "LEMO_TOKEN=k2", "LEMO_ADDR=127.0.0.1:1", "DB_PASSWORD=k3", "github_token=k4",
		"AWS_SECRET_ACCESS_KEY=k5", "PGPASSWD=k6", "GOOGLE_APPLICATION_CREDENTIALS=k7", "lemo_lower=k8",
		"PLAIN=keep1", "PASSME_TOKEN=keep2", "DROPME=gone", "LEMO_PASS_TOKEN=k9", "HOME=/home/x")
	cfg.PassEnv = []string{"passme_*", "LEMO_*"}
	cfg.DropEnv = []string{"DROP*"}
	h := newHarness(t, cfg)
	r := h.must(obj{"command": "env"})
	got := map[string]string{}
	for _, l := range strings.Split(strings.TrimSpace(r.Stdout), "\n") {
		k, v, _ := strings.Cut(l, "=")
		got[k] = v
	}
	for _, k := range []string{"MY_API_KEY", "LEMO_TOKEN", "LEMO_ADDR", "DB_PASSWORD", "github_token", "AWS_SECRET_ACCESS_KEY",
		"PGPASSWD", "GOOGLE_APPLICATION_CREDENTIALS", "lemo_lower", "DROPME", "LEMO_PASS_TOKEN", "LEMO_DAEMON_ONLY"} {
		if v, ok := got[k]; ok {
			t.Errorf("child sees %s=%s; want it scrubbed", k, v)
		}
	}
	for k, want := range map[string]string{"PLAIN": "keep1", "PASSME_TOKEN": "keep2", "HOME": "/home/x"} {
		if got[k] != want {
			t.Errorf("child sees %s=%q, want %q", k, got[k], want)
		}
	}
	for _, secret := range []string{"k1", "k2", "k3", "k4", "k5", "k6", "k7", "k8", "k9", "daemon-secret"} {
		if regexp.MustCompile(`=` + secret + `$`).MatchString(r.Stdout) {
			t.Errorf("secret %s reached the child:\n%s", secret, r.Stdout)
		}
	}
}

// TestOutputCaps produces 12 MB of stdout: the model sees head and tail
// with the sizes; the live output keeps its bound in memory (4 MiB in the
// harness), spills the rest up to the spill bound (6 MiB) and counts what
// is beyond as dropped; the note says how to read it; the retained part
// stays within RetainBytes.
func TestOutputCaps(t *testing.T) {
	cfg := testConfig(randomHex())
	h := newHarness(t, cfg)
	const n = 12_000_000
	r := h.must(obj{"command": fmt.Sprintf("echo first; head -c %d /dev/zero | tr '\\0' a; echo; echo last; echo oops >&2", n)})
	total := int64(len("first\n") + n + len("\nlast\n"))
	if r.StdoutBytes != total || r.StderrBytes != 5 {
		t.Fatalf("byte counts = %d, %d; want %d, 5", r.StdoutBytes, r.StderrBytes, total)
	}
	if !r.Truncated || !strings.HasPrefix(r.Stdout, "first\naaa") || !strings.HasSuffix(r.Stdout, "aaa\nlast\n") || r.Stderr != "oops\n" {
		t.Errorf("model view: truncated=%v stdout %.40q…%q stderr %q", r.Truncated, r.Stdout, r.Stdout[max(0, len(r.Stdout)-20):], r.Stderr)
	}
	if want := fmt.Sprintf("bytes omitted; %d bytes in all", total); !strings.Contains(r.Stdout, want) {
		t.Errorf("model view does not state the sizes (%q)", want)
	}
	if lim := h.tool.cfg.ModelHeadBytes + h.tool.cfg.ModelTailBytes + 100; len(r.Stdout) > lim {
		t.Errorf("model view of stdout is %d bytes; want at most %d (head, tail and the marker)", len(r.Stdout), lim)
	}
	st := h.last.Stats()
	if st.Bytes != total+5 || st.HeapBytes != 4<<20 || st.SpilledBytes != 6<<20 || st.DroppedBytes != total+5-10<<20 {
		t.Fatalf("live output: %+v; want %d bytes: 4 MiB in memory, 6 MiB spilled, the rest dropped", st, total+5)
	}
	if !strings.Contains(r.Note, `tasks.read_block {"task":"t","call_id":"c1","part":"result"}`) || !strings.Contains(r.Note, fmt.Sprintf("the last %d bytes", st.DroppedBytes)) {
		t.Errorf("note %q does not name the read_block call and the dropped bytes", r.Note)
	}
	// The live output reads whole up to what was dropped: memory, then
	// the spill file.
	h.last.Hold(0)
	size, err := h.last.Size()
	if err != nil {
		t.Fatal(err)
	}
	text := make([]byte, size)
	if _, err := h.last.ReadAt(text, 0); err != nil {
		t.Fatalf("ReadAt: %v", err)
	}
	wantOut := fmt.Sprintf("[stdout: %d bytes; the last %d were dropped: beyond the spill limit]\nfirst\n", total, st.DroppedBytes-5)
	if !bytes.HasPrefix(text, []byte(wantOut)) || !bytes.HasSuffix(text, []byte("aaa\n[stderr: 5 bytes; the last 5 were dropped: beyond the spill limit]\n\n")) ||
		bytes.Count(text, []byte("a")) < 10<<20-10 {
		t.Errorf("live text: %d bytes, %.100q … %q", len(text), text, text[max(0, len(text)-120):])
	}
	h.last.Release()
	if _, err := h.last.ReadAt(text[:1], 0); !errors.Is(err, live.ErrReleased) {
		t.Errorf("ReadAt after Release: %v, want ErrReleased", err)
	}

	// A short output is all in the result: the live output is discarded.
	r = h.must(obj{"command": "echo short"})
	if r.Truncated || r.Note != "" {
		t.Errorf("short output: truncated %v, note %q", r.Truncated, r.Note)
	}
	if !h.last.Empty() || h.last.Stats() != (tools.LiveStats{}) {
		t.Errorf("the live output of a short result was kept: %+v", h.last.Stats())
	}
	if u := h.live.Usage(); u.HeapBytes != 0 || u.SpillBytes != 0 || u.Results != 1 {
		t.Errorf("after both calls: %+v, want nothing held by the open result", u)
	}
	h.last.Release()
	var rss string
	if b, err := os.ReadFile("/proc/self/status"); err == nil {
		rss = regexp.MustCompile(`VmHWM:\s+\d+ kB`).FindString(string(b))
	}
	t.Logf("peak memory of the test process: %s", rss)
}

func TestStateUpdates(t *testing.T) {
	cfg := testConfig(randomHex())
	cfg.StateInterval = 20 * time.Millisecond
	h := newHarness(t, cfg)
	var got states
	// After printing line i the command waits for file go$i, which the test
	// creates when a state update reports line i as the last line: every
	// line must be seen, whatever the timing.
	r, err := h.run(context.Background(), obj{"command": "for i in 1 2 3 4 5; do echo line$i; while [ ! -e go$i ]; do sleep 0.01; done; done"}, func(s state) {
		got.add(s)
		if n, ok := strings.CutPrefix(s.LastLine, "line"); ok {
			_ = os.WriteFile(h.ws+"/go"+n, nil, 0o644)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	if r.Stdout != "line1\nline2\nline3\nline4\nline5\n" {
		t.Fatalf("stdout = %q", r.Stdout)
	}
	all := got.list()
	if len(all) < 3 || all[0].Phase != PhaseStarted || all[0].PID <= 0 {
		t.Fatalf("states = %+v; want started first, then running updates", all)
	}
	var lines []string
	var last int64
	for i, s := range all {
		if i > 0 && (s.Phase != PhaseRunning || s.PID != all[0].PID) {
			t.Errorf("state %+v; want running with pid %d", s, all[0].PID)
		}
		if s.StdoutBytes < last {
			t.Errorf("stdout_bytes went down: %d after %d", s.StdoutBytes, last)
		}
		last = s.StdoutBytes
		// The started state already has line1 when the shell was quick.
		if s.LastLine != "" && (len(lines) == 0 || lines[len(lines)-1] != s.LastLine) {
			lines = append(lines, s.LastLine)
		}
	}
	if seen, want := strings.Join(lines, ","), "line1,line2,line3,line4,line5"; !strings.HasSuffix(seen, want) {
		t.Errorf("last lines seen = %s; want %s in order", seen, want)
	}

	// Without output there is nothing new to report until the heartbeat.
	var quiet states
	if _, err := h.run(context.Background(), obj{"command": "sleep 0.3"}, quiet.add); err != nil {
		t.Fatal(err)
	}
	if q := quiet.list(); len(q) != 1 || q[0].Phase != PhaseStarted {
		t.Errorf("states of a quiet 0.3s command = %+v; want only the started state", q)
	}
}

func TestEmitRefusedStopsRun(t *testing.T) {
	marker := randomHex()
	h := newHarness(t, testConfig(marker))
	var pid int
	out, err := h.tool.Execute(context.Background(), toolsCall(h, `{"command":"echo go; sleep 1000 & sleep 1000"}`), func(s json.RawMessage) error {
		if pid == 0 {
			pid = pidOf(s)
			return nil
		}
		return errors.New("no more")
	})
	if err == nil || !strings.Contains(err.Error(), "no more") {
		t.Fatalf("Execute = %s, %v; want the emit error", out, err)
	}
	noLeftovers(t, map[int]bool{pid: true}, marker)
}

func TestExecuteRefusesDenied(t *testing.T) {
	cfg := testConfig(randomHex())
	cfg.Policy = Policy{Deny: []string{"touch"}, Default: Allow}
	h := newHarness(t, cfg)
	_, err := h.run(context.Background(), obj{"command": "true; touch pwned"}, nil)
	if !errors.Is(err, ErrDenied) || !strings.Contains(err.Error(), `"touch"`) {
		t.Fatalf("denied command: %v; want ErrDenied naming the rule", err)
	}
	if _, err := os.Stat(h.ws + "/pwned"); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the denied command ran: %v", err)
	}
}

func toolsCall(h *harness, input string) tools.Call {
	return tools.Call{TaskID: "t", CallID: "c", Workspace: h.ws, Input: []byte(input)}
}

func pidOf(b json.RawMessage) int {
	var s state
	_ = json.Unmarshal(b, &s)
	return s.PID
}

func TestCancelledBeforeStart(t *testing.T) {
	h := newHarness(t, testConfig(randomHex()))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := h.run(ctx, obj{"command": "touch x"}, nil); !errors.Is(err, context.Canceled) {
		t.Errorf("err = %v, want context.Canceled", err)
	}
	if _, err := os.Stat(h.ws + "/x"); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a cancelled call ran its command")
	}
}
