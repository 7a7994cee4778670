package shell

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"lemo/tools"
)

// state is one live state update of a running command.
type state struct {
	Phase       string `json:"phase"`
	PID         int    `json:"pid"`
	ElapsedMS   int64  `json:"elapsed_ms"`
	StdoutBytes int64  `json:"stdout_bytes"`
	StderrBytes int64  `json:"stderr_bytes"`
	LastLine    string `json:"last_line"`
}

// Phases of a run reported in state updates.
const (
	PhaseStarted     = "started"
	PhaseRunning     = "running"
	PhaseTerminating = "terminating"
)

// runResult is what happened to one command.
type runResult struct {
	exitCode   int
	signal     string
	timedOut   bool
	killed     bool // SIGKILL was needed
	background bool // processes were left in the group after the shell exited
	outputHeld bool // a process outside the group kept the output open
	duration   time.Duration
	stdout     *capture
	stderr     *capture
}

// run executes command with the shell in its own process group and returns
// once the shell has exited, every process left in its group is gone, and
// the output is drained. It returns ctx.Err() when ctx is cancelled (after
// the same clean-up) and an emit error when a state update is refused.
func (t *Tool) run(ctx context.Context, command, dir string, timeout time.Duration, emit tools.Emit) (*runResult, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	budget := &liveBudget{left: t.cfg.MaxLiveBytes}
	res := &runResult{
		stdout: newCapture(t.cfg.ModelHeadBytes, t.cfg.ModelTailBytes, budget),
		stderr: newCapture(t.cfg.ModelHeadBytes, t.cfg.ModelTailBytes, budget),
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("shell: pipe: %w", err)
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		outR.Close()
		outW.Close()
		return nil, fmt.Errorf("shell: pipe: %w", err)
	}

	// stop cancels the run: os/exec then calls cmd.Cancel (SIGTERM to the
	// group) and, WaitDelay later, kills the shell itself.
	runCtx, stop := context.WithCancel(context.WithoutCancel(ctx))
	defer stop()
	cmd := exec.CommandContext(runCtx, t.cfg.Shell, "-c", command)
	cmd.Dir = dir
	cmd.Env = t.env
	cmd.Stdin = nil // /dev/null
	cmd.Stdout = outW
	cmd.Stderr = errW
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Setpgid: true,
		// The shell dies with the thread that started it (locked below),
		// so a killed daemon does not leave it running.
		Pdeathsig: syscall.SIGKILL,
	}
	cmd.Cancel = func() error { return signalGroup(cmd.Process.Pid, unix.SIGTERM) }
	cmd.WaitDelay = t.cfg.KillGrace

	started := make(chan error, 1)
	exited := make(chan error, 1)
	go func() {
		// Pdeathsig fires when the creating OS thread exits: keep this
		// goroutine on its thread until the shell has been reaped.
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		exited <- cmd.Wait()
	}()
	err = <-started
	outW.Close()
	errW.Close()
	if err != nil {
		outR.Close()
		errR.Close()
		return nil, fmt.Errorf("shell: start %s: %w", t.cfg.Shell, err)
	}
	begin := time.Now()
	pgid := cmd.Process.Pid

	var readers sync.WaitGroup
	var readPanic error
	var panicOnce sync.Once
	for _, p := range []struct {
		r *os.File
		c *capture
	}{{outR, res.stdout}, {errR, res.stderr}} {
		readers.Add(1)
		go func() {
			defer readers.Done()
			defer func() {
				if v := recover(); v != nil {
					panicOnce.Do(func() { readPanic = fmt.Errorf("shell: output reader panicked: %v", v) })
				}
			}()
			_, _ = io.Copy(p.c, p.r)
		}()
	}

	if emit == nil {
		emit = func(json.RawMessage) error { return nil }
	}
	st := state{Phase: PhaseStarted, PID: pgid}
	var emitErr error
	var sentAt time.Time
	// send emits the state; a running state only when the output grew or
	// heartbeat passed since the last one.
	send := func(phase string) {
		if emitErr != nil {
			return
		}
		out, errb := res.stdout.bytes(), res.stderr.bytes()
		if phase == PhaseRunning && st.Phase != PhaseTerminating && out == st.StdoutBytes && errb == st.StderrBytes && time.Since(sentAt) < heartbeat {
			return
		}
		st.Phase = phase
		st.ElapsedMS = time.Since(begin).Milliseconds()
		st.StdoutBytes, st.StderrBytes = out, errb
		st.LastLine = res.stderr.lastLine()
		if l := res.stdout.lastLine(); l != "" {
			st.LastLine = l
		}
		b, _ := json.Marshal(st)
		sentAt = time.Now()
		if err := emit(b); err != nil {
			emitErr = fmt.Errorf("shell: state update refused: %w", err)
		}
	}
	send(PhaseStarted)

	ticker := time.NewTicker(t.cfg.StateInterval)
	defer ticker.Stop()
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	done := ctx.Done()
	var termAt time.Time
	terminate := func() {
		if termAt.IsZero() {
			termAt = time.Now()
			stop()
			send(PhaseTerminating)
		}
	}
	if emitErr != nil {
		terminate()
	}
	var waitErr error
wait:
	for {
		select {
		case waitErr = <-exited:
			break wait
		case <-ticker.C:
			if termAt.IsZero() {
				send(PhaseRunning)
				if emitErr != nil {
					terminate()
				}
			}
		case <-timer.C:
			res.timedOut = true
			terminate()
		case <-done:
			done = nil
			terminate()
		}
	}
	res.duration = time.Since(begin)

	// The shell is gone; processes it left in its group are not.
	killed, leftover := stopGroup(pgid, termAt, t.cfg.KillGrace)
	res.killed = killed
	res.background = leftover && termAt.IsZero()

	// Every writer in the group is gone; a process that left the group
	// (setsid) may still hold the pipes: give it KillGrace, then stop
	// reading.
	drained := make(chan struct{})
	go func() { readers.Wait(); close(drained) }()
	grace := time.NewTimer(t.cfg.KillGrace)
	select {
	case <-drained:
	case <-grace.C:
		res.outputHeld = true
		outR.Close()
		errR.Close()
		<-drained
	}
	grace.Stop()
	outR.Close()
	errR.Close()

	ps := cmd.ProcessState
	if ps == nil {
		return nil, fmt.Errorf("shell: wait: %w", waitErr)
	}
	ws, _ := ps.Sys().(syscall.WaitStatus)
	if ws.Signaled() {
		res.exitCode = -1
		res.signal = unix.SignalName(ws.Signal())
		if ws.Signal() == syscall.SIGKILL {
			res.killed = true
		}
	} else {
		res.exitCode = ws.ExitStatus()
	}
	switch {
	case readPanic != nil:
		return nil, readPanic
	case emitErr != nil:
		return nil, emitErr
	case ctx.Err() != nil:
		return nil, ctx.Err()
	}
	return res, nil
}

// heartbeat is the longest gap between state updates of a running command
// whose output does not change.
const heartbeat = 5 * time.Second

// signalGroup sends sig to process group pgid; a group that is already gone
// is os.ErrProcessDone.
func signalGroup(pgid int, sig unix.Signal) error {
	err := unix.Kill(-pgid, sig)
	if errors.Is(err, unix.ESRCH) {
		return os.ErrProcessDone
	}
	return err
}

// groupGone bounds the wait for killed processes to disappear.
const groupGone = 5 * time.Second

// stopGroup leaves no live process in group pgid: if any is left it sends
// SIGTERM (unless that was sent at termAt), waits up to grace from then,
// and sends SIGKILL. It reaps members that are children of this process
// (orphans re-parented to a daemon that is a child subreaper); members that
// are already dead but not yet reaped by their parent (zombies of init) do
// not count. leftover reports that live processes were found.
func stopGroup(pgid int, termAt time.Time, grace time.Duration) (killed, leftover bool) {
	reap := func() {
		for {
			var ws syscall.WaitStatus
			pid, err := syscall.Wait4(-pgid, &ws, syscall.WNOHANG, nil)
			if err != nil || pid <= 0 {
				return
			}
		}
	}
	alive := func() bool {
		reap()
		if unix.Kill(-pgid, 0) == nil && liveMembers(pgid) {
			return true
		}
		// Every member left is dead: reap those that are our children.
		reap()
		return false
	}
	if !alive() {
		return false, false
	}
	if termAt.IsZero() {
		_ = signalGroup(pgid, unix.SIGTERM)
		termAt = time.Now()
	}
	if pollUntil(termAt.Add(grace), func() bool { return !alive() }) {
		return false, true
	}
	_ = signalGroup(pgid, unix.SIGKILL)
	pollUntil(time.Now().Add(groupGone), func() bool { return !alive() })
	return true, true
}

// liveMembers reports whether group pgid has a member that is not a zombie,
// from /proc; without /proc every member counts as live.
func liveMembers(pgid int) bool {
	d, err := os.Open("/proc")
	if err != nil {
		return true
	}
	defer d.Close()
	names, err := d.Readdirnames(-1)
	if err != nil {
		return true
	}
	want := strconv.Itoa(pgid)
	for _, n := range names {
		if n[0] < '0' || n[0] > '9' {
			continue
		}
		b, err := os.ReadFile("/proc/" + n + "/stat")
		if err != nil {
			continue // exited meanwhile
		}
		// "pid (comm) state ppid pgrp ...": comm may hold spaces and parens.
		i := bytes.LastIndexByte(b, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(string(b[i+1:]))
		if len(f) > 2 && f[2] == want && f[0] != "Z" && f[0] != "X" {
			return true
		}
	}
	return false
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
