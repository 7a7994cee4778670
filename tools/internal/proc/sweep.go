package proc

import (
	"os"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Sweep stops the live processes of group pgid and those whose environment
// holds tag ("NAME=value"; "" for none): SIGTERM to each (and to the groups
// they lead), then SIGKILL after grace for those still alive (Escalate).
// A tag finds the descendants that left the group (setsid) and were
// re-parented, as long as they kept their environment. Only processes that
// started at or after since (Ticks, read before the child was started; 0
// for any) can be descendants, so only their environments are read. It
// returns how many processes it found. Those that were re-parented to this
// process (a child subreaper) are reaped.
func Sweep(pgid int, tag string, since uint64, grace time.Duration) int {
	found := stragglers(pgid, tag, since)
	if len(found) == 0 {
		return 0
	}
	signal := func(sig syscall.Signal) { signalAll(stragglers(pgid, tag, since), sig) }
	gone := func() bool { return len(stragglers(pgid, tag, since)) == 0 }
	Escalate(signal, gone, time.Time{}, grace)
	self := os.Getpid()
	for _, p := range found {
		if st, err := ReadStat(p.Pid); err == nil && st.PPid == self && st.Dead() {
			var ws syscall.WaitStatus
			_, _ = syscall.Wait4(p.Pid, &ws, syscall.WNOHANG, nil)
		}
	}
	return len(found)
}

func signalAll(ps []Stat, sig syscall.Signal) {
	for _, p := range ps {
		if p.Pgrp == p.Pid {
			_ = SignalGroup(p.Pid, sig)
		}
		_ = unix.Kill(p.Pid, sig)
	}
}

// stragglers lists live (not zombie) processes other than this one that
// are in group pgid or, started at or after since, carry tag in their
// environment, from /proc.
func stragglers(pgid int, tag string, since uint64) []Stat {
	self := os.Getpid()
	var out []Stat
	_ = Walk(func(s Stat) bool {
		if s.Pid != self && !s.Dead() && (s.Pgrp == pgid || (tag != "" && s.Start >= since && HasEnv(s.Pid, tag))) {
			out = append(out, s)
		}
		return true
	})
	return out
}
