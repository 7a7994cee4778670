package proc

import (
	"bufio"
	"io"
	"os/exec"
	"testing"
	"time"
)

// noGroup is a process group no process is in: only the tag finds anyone.
const noGroup = 1 << 30

// emptyEnvShell starts `env -i sh -c script` (a process whose environment
// reads empty, as one in the middle of an execve does) and waits for its
// first line, "ready".
func emptyEnvShell(t *testing.T, script string) (cmd *exec.Cmd, stdin io.WriteCloser, lines *bufio.Reader) {
	t.Helper()
	cmd = exec.Command("env", "-i", "/bin/sh", "-c", "echo ready; "+script)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait() // the sweep may have reaped it already
	})
	lines = bufio.NewReader(out)
	if l, err := lines.ReadString('\n'); l != "ready\n" {
		t.Fatalf("first line %q, %v", l, err)
	}
	return cmd, stdin, lines
}

func stubPause(t *testing.T, f func(time.Duration)) {
	t.Cleanup(func() { pause = time.Sleep })
	pause = f
}

// A candidate whose environment reads empty is looked at again: once its
// exec has set the tagged environment, the sweep finds and stops it.
func TestSweepWaitsForAnEnvironmentBeingSet(t *testing.T) {
	since, err := Ticks()
	if err != nil {
		t.Fatal(err)
	}
	tag := "PROCTEST_SWEEP=" + randomHex()
	cmd, stdin, lines := emptyEnvShell(t, "read _; exec env "+tag+" /bin/sh -c 'echo tagged; read _'")
	pauses := 0
	stubPause(t, func(d time.Duration) {
		if pauses++; pauses == 1 {
			// The first search saw the empty environment: now let the
			// process exec into the tagged one.
			if _, err := io.WriteString(stdin, "\n"); err != nil {
				t.Error(err)
			}
			if l, err := lines.ReadString('\n'); l != "tagged\n" {
				t.Errorf("line %q, %v", l, err)
			}
			return
		}
		time.Sleep(d)
	})
	if n := Sweep(noGroup, tag, since, time.Second); n != 1 || pauses == 0 {
		t.Fatalf("Sweep = %d after %d pauses, want 1 after at least one", n, pauses)
	}
	if st, err := ReadStat(cmd.Process.Pid); err == nil && !st.Dead() {
		t.Fatalf("the tagged process is still running: %+v", st)
	}
}

// A process that truly has no environment is looked at settleAttempts
// times, then left alone: it carries no tag, so it is not ours to stop.
func TestSweepLeavesAnEmptyEnvironmentAlone(t *testing.T) {
	since, err := Ticks()
	if err != nil {
		t.Fatal(err)
	}
	cmd, _, _ := emptyEnvShell(t, "read _")
	pauses := 0
	stubPause(t, func(time.Duration) { pauses++ })
	if n := Sweep(noGroup, "PROCTEST_SWEEP="+randomHex(), since, time.Second); n != 0 || pauses != settleAttempts {
		t.Fatalf("Sweep = %d after %d pauses, want 0 after %d", n, pauses, settleAttempts)
	}
	st, err := ReadStat(cmd.Process.Pid)
	if err != nil || st.Dead() || !Mentions(cmd.Process.Pid, "read _") {
		t.Fatalf("the untagged process did not survive the sweep: %+v, %v", st, err)
	}
}
