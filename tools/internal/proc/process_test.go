package proc

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestStartOwnGroupAndExit(t *testing.T) {
	p, _ := start(t, "exit 3")
	if err := p.Wait(); err == nil {
		t.Errorf("Wait() = nil for exit 3, want an *exec.ExitError")
	}
	if code, sig := Exit(p.State()); code != 3 || sig != "" {
		t.Errorf("Exit = %d, %q; want 3, no signal", code, sig)
	}

	p, _ = start(t, "kill -TERM $$")
	_ = p.Wait()
	if code, sig := Exit(p.State()); code != -1 || sig != "SIGTERM" {
		t.Errorf("Exit = %d, %q; want -1, SIGTERM", code, sig)
	}

	p, kv := start(t, "exec sleep 1000")
	if p.State() != nil {
		t.Error("State() of a running child is not nil")
	}
	// /proc describes the shell until its exec of sleep is done.
	eventually(t, 5*time.Second, func() error {
		if ps, err := Processes(func(s Stat) bool { return s.Pid == p.Pid() }); err != nil || len(ps) != 1 || ps[0].Cmdline != "sleep 1000" {
			return fmt.Errorf("the child is %+v (%v), want sleep 1000", ps, err)
		}
		return nil
	})
	s, err := ReadStat(p.Pid())
	if err != nil {
		t.Fatal(err)
	}
	if s.Pid != p.Pid() || s.Pgrp != p.Pid() || s.PPid != os.Getpid() || s.Dead() {
		t.Fatalf("stat of the child = %+v; want its own live group, child of %d", s, os.Getpid())
	}
	if !HasEnv(p.Pid(), kv) || HasEnv(p.Pid(), kv+"0") || HasEnv(p.Pid(), kv[:len(kv)-1]) || !Mentions(p.Pid(), "sleep 1000") || Mentions(p.Pid(), "sleep 10000") || Mentions(p.Pid(), "") {
		t.Errorf("HasEnv/Mentions do not find exactly %s in the child", kv)
	}
	if p.WaitFor(10 * time.Millisecond) {
		t.Fatal("WaitFor reports that a sleeping child was reaped")
	}
	if killed := p.Terminate(time.Second); killed {
		t.Error("Terminate needed SIGKILL for sleep")
	}
	select {
	case <-p.Done():
	default:
		t.Fatal("Done is open after Terminate")
	}
	if code, sig := Exit(p.State()); code != -1 || sig != "SIGTERM" {
		t.Errorf("Exit = %d, %q; want -1, SIGTERM", code, sig)
	}
}

func TestStartFails(t *testing.T) {
	_, err := Start(exec.Command("/nonexistent/binary"))
	if !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("Start = %v, want ErrNotExist", err)
	}
	// Start keeps the other fields of SysProcAttr: a new session
	// (Setsid) cannot also be a new group (EPERM).
	cmd := exec.Command("/bin/sh", "-c", "exit 0")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if _, err := Start(cmd); !errors.Is(err, syscall.EPERM) || !cmd.SysProcAttr.Setsid || !cmd.SysProcAttr.Setpgid || cmd.SysProcAttr.Pdeathsig != syscall.SIGKILL {
		t.Fatalf("Start with Setsid = %v, SysProcAttr %+v; want EPERM with Setsid, Setpgid and Pdeathsig set", err, cmd.SysProcAttr)
	}
}

// A group that ignores SIGTERM gets SIGKILL after the grace period; every
// member goes, not only the child.
func TestTerminateEscalates(t *testing.T) {
	p, _ := start(t, "trap '' TERM; sleep 1000 & sleep 1000 & wait")
	waitGroupSize(t, p.Pid(), 3)
	begin := time.Now()
	if killed := p.Terminate(200 * time.Millisecond); !killed {
		t.Error("Terminate of a TERM-ignoring shell did not need SIGKILL")
	}
	// SIGKILL comes only after the grace period (a lower bound a loaded
	// machine cannot break; how fast is for benchmarks).
	if took := time.Since(begin); took < 200*time.Millisecond {
		t.Errorf("Terminate took %v; want the grace period, then SIGKILL", took)
	}
	if _, sig := Exit(p.State()); sig != "SIGKILL" {
		t.Errorf("the shell ended by %q, want SIGKILL", sig)
	}
	eventually(t, 5*time.Second, func() error {
		if ps, _ := Survivors(InGroup(p.Pid())); len(ps) > 0 {
			return fmt.Errorf("group members alive: %+v", ps)
		}
		return nil
	})
}

// TestStopGroup: the child exits and leaves processes in its group;
// StopGroup stops them, escalating for one that ignores SIGTERM, and in a
// child subreaper (TestStopGroupAsSubreaper) reaps them too.
func TestStopGroup(t *testing.T) {
	for _, c := range []struct {
		name, script string
		members      int
		killed       bool
	}{
		{"background", "sleep 1000 & sleep 1000 & echo started", 2, false},
		// "started" comes once the trap is set: a TERM sent before it
		// would end the member, not be ignored.
		{"ignores TERM", "(trap '' TERM; echo started; exec sleep 1000) &", 1, true},
		{"nothing left", "echo started", 0, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			cmd, _ := command(t, c.script)
			out, w, err := os.Pipe()
			if err != nil {
				t.Fatal(err)
			}
			defer out.Close()
			cmd.Stdout = w
			p, err := Start(cmd)
			w.Close()
			if err != nil {
				t.Fatal(err)
			}
			pgid := p.Pid()
			t.Cleanup(func() { StopGroup(pgid, time.Now(), 0) })
			// The pipe is held open by the background members: read the
			// line, not to EOF.
			if l, err := bufio.NewReader(out).ReadString('\n'); l != "started\n" {
				t.Fatalf("read %q, %v", l, err)
			}
			<-p.Done()
			waitGroupSize(t, pgid, c.members)
			begin := time.Now()
			killed, leftover := StopGroup(pgid, time.Time{}, 300*time.Millisecond)
			if killed != c.killed || leftover != (c.members > 0) {
				t.Errorf("StopGroup = killed %v, leftover %v; want %v, %v", killed, leftover, c.killed, c.members > 0)
			}
			if took := time.Since(begin); c.killed && took < 300*time.Millisecond {
				t.Errorf("StopGroup took %v; want the grace period before SIGKILL", took)
			}
			// Right away: StopGroup returns once nothing is alive, and it
			// reaps what is ours (in a subreaper the orphans are).
			if ps, _ := Survivors(InGroup(pgid)); len(ps) > 0 {
				t.Errorf("alive after StopGroup: %+v", ps)
			}
			if zs, _ := Zombies(InGroup(pgid)); len(zs) > 0 {
				t.Errorf("unreaped zombies of ours after StopGroup: %+v", zs)
			}
		})
	}
}

func TestStopGroupAsSubreaper(t *testing.T) {
	if os.Getenv(envSubreaper) == "1" {
		t.Skip("already the subreaper child")
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestStopGroup$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), envSubreaper+"=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("subreaper run failed: %v\n%s", err, out)
	}
	if !regexp.MustCompile(`(?m)^--- PASS: TestStopGroup `).Match(out) {
		t.Fatalf("the subreaper run did not pass TestStopGroup:\n%s", out)
	}
}

// TestChildDiesWithDaemon kills a daemon (this test binary in a helper
// mode) with SIGKILL while its child runs: Pdeathsig, set from the locked
// thread that started the child, must take the child with it.
func TestChildDiesWithDaemon(t *testing.T) {
	mark := randomHex()
	kv := markVar + "=" + mark
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), envDaemon+"="+mark)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		for _, p := range must(Survivors(WithEnv(kv))) {
			_ = syscall.Kill(p.Pid, syscall.SIGKILL)
		}
	})
	line, err := bufio.NewReader(out).ReadString('\n')
	pid, _ := strconv.Atoi(strings.TrimSpace(strings.TrimPrefix(line, "pid ")))
	if err != nil || pid <= 0 {
		t.Fatalf("the daemon said %q, %v", line, err)
	}
	if ps := must(Survivors(WithEnv(kv))); len(ps) != 1 || ps[0].Pid != pid || ps[0].Pgrp != pid {
		t.Fatalf("the child %d does not run in its own group: %+v", pid, ps)
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	eventually(t, 5*time.Second, func() error {
		if ps := must(Survivors(WithEnv(kv))); len(ps) > 0 {
			return fmt.Errorf("the child outlived the daemon: %+v", ps)
		}
		return nil
	})
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

func TestSignalGroup(t *testing.T) {
	for _, pgid := range []int{-5, 0, 1} {
		if err := SignalGroup(pgid, 0); err == nil {
			t.Errorf("SignalGroup(%d) = nil; want it refused", pgid)
		}
	}
	p, _ := start(t, "exit 0")
	<-p.Done()
	if err := SignalGroup(p.Pid(), syscall.SIGTERM); !errors.Is(err, os.ErrProcessDone) {
		t.Errorf("SignalGroup of a gone group = %v, want os.ErrProcessDone", err)
	}
	if killed, leftover := StopGroup(0, time.Time{}, 0); killed || leftover {
		t.Error("StopGroup(0) acted on this process's group")
	}
}

// Escalate's sequence, with fake processes.
func TestEscalate(t *testing.T) {
	var sent []syscall.Signal
	signal := func(s syscall.Signal) { sent = append(sent, s) }
	goneAfter := func(s syscall.Signal) func() bool {
		return func() bool {
			for _, x := range sent {
				if x == s {
					return true
				}
			}
			return false
		}
	}
	for _, c := range []struct {
		name             string
		gone             func() bool
		termAt           time.Time
		want             []syscall.Signal
		killed, leftover bool
	}{
		{"gone at first", func() bool { return true }, time.Time{}, nil, false, false},
		{"ends on TERM", goneAfter(syscall.SIGTERM), time.Time{}, []syscall.Signal{syscall.SIGTERM}, false, true},
		{"needs KILL", goneAfter(syscall.SIGKILL), time.Time{}, []syscall.Signal{syscall.SIGTERM, syscall.SIGKILL}, true, true},
		{"TERM sent already", goneAfter(syscall.SIGKILL), time.Now().Add(-time.Hour), []syscall.Signal{syscall.SIGKILL}, true, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			sent = nil
			killed, leftover := Escalate(signal, c.gone, c.termAt, 50*time.Millisecond)
			if killed != c.killed || leftover != c.leftover || fmt.Sprint(sent) != fmt.Sprint(c.want) {
				t.Errorf("Escalate = killed %v, leftover %v, sent %v; want %v, %v, %v", killed, leftover, sent, c.killed, c.leftover, c.want)
			}
		})
	}
}
