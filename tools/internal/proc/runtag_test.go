package proc

import (
	"fmt"
	"os"
	"os/exec"
	"slices"
	"syscall"
	"testing"
	"time"
)

// StopTagged stops the processes carrying the tag, whichever group or
// session they are in, reports each with its command name and call, and
// leaves a process with another tag alone.
func TestStopTagged(t *testing.T) {
	tag := RunTagVariable + "=" + randomHex()
	other := RunTagVariable + "=" + randomHex()
	start := func(env ...string) *exec.Cmd {
		cmd, _ := command(t, "exec sleep 1000")
		cmd.Env = append(cmd.Env, env...)
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
		// Wait until it runs sleep with its environment.
		eventually(t, 5*time.Second, func() error {
			comm, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", cmd.Process.Pid))
			if !HasEnv(cmd.Process.Pid, env[0]) || string(comm) != "sleep\n" {
				return fmt.Errorf("process %d has not started sleep with its environment yet", cmd.Process.Pid)
			}
			return nil
		})
		return cmd
	}
	a := start(tag, CallEntry("task-1", "call-1-1"))
	b := start(tag)
	keep := start(other, CallEntry("task-1", "call-1-1"))

	got := StopTagged(tag, time.Second)
	slices.SortFunc(got, func(x, y Tagged) int { return x.Pid - y.Pid })
	want := []Tagged{{Pid: a.Process.Pid, Command: "sleep", Call: "task-1/call-1-1"}, {Pid: b.Process.Pid, Command: "sleep"}}
	slices.SortFunc(want, func(x, y Tagged) int { return x.Pid - y.Pid })
	if !slices.Equal(got, want) {
		t.Fatalf("StopTagged = %+v, want %+v", got, want)
	}
	for _, c := range []*exec.Cmd{a, b} {
		if st, err := ReadStat(c.Process.Pid); err == nil && !st.Dead() {
			t.Errorf("process %d carrying the tag is still running: %+v", c.Process.Pid, st)
		}
	}
	if st, err := ReadStat(keep.Process.Pid); err != nil || st.Dead() {
		t.Errorf("the process with another tag was stopped: %+v, %v", st, err)
	}
	if got := StopTagged("", time.Second); got != nil {
		t.Errorf("StopTagged(\"\") = %+v, want nothing", got)
	}
}
