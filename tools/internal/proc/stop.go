package proc

import (
	"errors"
	"fmt"
	"os"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// KillWait bounds the wait for processes to disappear after SIGKILL.
const KillWait = 5 * time.Second

// SignalGroup sends sig to every process of group pgid; a group with no
// process left is os.ErrProcessDone. pgid must be above 1: kill(2) reads 0
// as the caller's own group and -1 as every process.
func SignalGroup(pgid int, sig syscall.Signal) error {
	if pgid <= 1 {
		return fmt.Errorf("proc: signal process group %d: not a child's group", pgid)
	}
	err := unix.Kill(-pgid, sig)
	if errors.Is(err, unix.ESRCH) {
		return os.ErrProcessDone
	}
	return err
}

// Exit says how a reaped child ended: its exit status, or -1 and the name
// of the signal that ended it ("SIGKILL"). ps must not be nil.
func Exit(ps *os.ProcessState) (code int, signal string) {
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return -1, unix.SignalName(ws.Signal())
	}
	return ps.ExitCode(), ""
}

// Escalate stops a set of processes. It returns at once, having sent
// nothing, when gone reports true at first. Otherwise signal sends SIGTERM
// (unless it was sent already at termAt, when that is not zero), Escalate
// waits until grace after that for gone to report true, then signal sends
// SIGKILL and it waits up to KillWait more. signal reaches every live
// process of the set; gone reports that none is left (it may reap).
// leftover reports that something was left at first, killed that SIGKILL
// was sent.
func Escalate(signal func(syscall.Signal), gone func() bool, termAt time.Time, grace time.Duration) (killed, leftover bool) {
	if gone() {
		return false, false
	}
	if termAt.IsZero() {
		signal(syscall.SIGTERM)
		termAt = time.Now()
	}
	if pollUntil(termAt.Add(grace), gone) {
		return false, true
	}
	signal(syscall.SIGKILL)
	pollUntil(time.Now().Add(KillWait), gone)
	return true, true
}

// StopGroup leaves no live process in group pgid, whose leader has been
// reaped: if any is left it sends SIGTERM to the group (unless that was
// sent at termAt), waits up to grace from then, and sends SIGKILL
// (Escalate). It reaps members that are children of this process (orphans
// re-parented to a daemon that is a child subreaper); members that are
// already dead but not yet reaped by their parent (zombies of init) do not
// count. leftover reports that live processes were found, killed that
// SIGKILL was sent.
func StopGroup(pgid int, termAt time.Time, grace time.Duration) (killed, leftover bool) {
	if pgid <= 1 {
		return false, false // not a child's group (see SignalGroup)
	}
	reap := func() {
		for {
			var ws syscall.WaitStatus
			pid, err := syscall.Wait4(-pgid, &ws, syscall.WNOHANG, nil)
			if err != nil || pid <= 0 {
				return
			}
		}
	}
	gone := func() bool {
		reap()
		if unix.Kill(-pgid, 0) == nil && LiveMembers(pgid) {
			return false
		}
		// Every member left is dead: reap those that are our children.
		reap()
		return true
	}
	signal := func(sig syscall.Signal) { _ = SignalGroup(pgid, sig) }
	return Escalate(signal, gone, termAt, grace)
}

// pollUntil calls done with a growing pause until it reports true or the
// deadline passes, and reports whether it did.
func pollUntil(deadline time.Time, done func() bool) bool {
	pause := time.Millisecond
	for {
		if done() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(min(pause, time.Until(deadline)+time.Millisecond))
		pause = min(2*pause, 20*time.Millisecond)
	}
}
