package proc

import (
	"os"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Sweep stops the live processes of group pgid other than its leader (the
// child, reaped, or in namespaces its init, which Process.Close ends) and
// those whose environment holds tag ("NAME=value"; "" for none): SIGTERM to each (and to the groups
// they lead), then SIGKILL after grace for those still alive (Escalate).
// A tag finds the descendants that left the group (setsid) and were
// re-parented, as long as they kept their environment. Only processes that
// started at or after since (Ticks, read before the child was started; 0
// for any) can be descendants, so only their environments are read. It
// returns how many processes it found. Those that were re-parented to this
// process (a child subreaper) are reaped.
//
// A candidate whose environment reads empty may be in the middle of an
// execve (see envHolds): the first search looks again, settleAttempts times
// settlePause apart, until no such candidate is left, so a descendant that
// has just left the group is not missed. Only processes whose tag was read
// are ever signalled.
func Sweep(pgid int, tag string, since uint64, grace time.Duration) int {
	found := discover(pgid, tag, since)
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

// How long the first search of a sweep waits for candidates whose
// environment reads empty; pause is time.Sleep, replaced in tests.
const (
	settleAttempts = 50
	settlePause    = 10 * time.Millisecond
)

var pause = time.Sleep

// discover is stragglers, looking again while a candidate's environment
// reads empty (at most settleAttempts times).
func discover(pgid int, tag string, since uint64) []Stat {
	found, unsure := scan(pgid, tag, since)
	for attempt := 0; unsure > 0 && attempt < settleAttempts; attempt++ {
		pause(settlePause)
		found, unsure = scan(pgid, tag, since)
	}
	return found
}

// stragglers lists live (not zombie) processes other than this one that
// are in group pgid or, started at or after since, carry tag in their
// environment, from /proc.
func stragglers(pgid int, tag string, since uint64) []Stat {
	found, _ := scan(pgid, tag, since)
	return found
}

// scan is stragglers, and counts the candidates (started at or after
// since, live, not kernel threads, outside the group) whose environment
// read empty.
func scan(pgid int, tag string, since uint64) (found []Stat, unsure int) {
	self := os.Getpid()
	_ = Walk(func(s Stat) bool {
		if s.Pid == self || s.Pid == pgid || s.Dead() {
			return true // pgid: the group's leader, the child (see Sweep)
		}
		if s.Pgrp == pgid {
			found = append(found, s)
			return true
		}
		if tag == "" || s.Start < since || s.Kernel() {
			return true
		}
		switch has, empty := envHolds(s.Pid, tag); {
		case has:
			found = append(found, s)
		case empty:
			unsure++
		}
		return true
	})
	return found, unsure
}
