package delegate

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// procSpec is what to run.
type procSpec struct {
	path string
	args []string
	env  []string
	dir  string
	// tag is "NAME=value", also present in env: every descendant that keeps
	// its environment carries it, so it finds processes that left the
	// agent's process group and were re-parented.
	tag string
}

// process is one running agent with its three pipes. The goroutine that
// started it stays on its OS thread until the agent is reaped (Pdeathsig
// fires when that thread ends), and exited is closed once it was reaped.
type process struct {
	pid    int
	stdin  *os.File
	stdout *os.File
	stderr *os.File
	exited chan struct{}
	state  *os.ProcessState // set before exited is closed
	err    error
}

// startProcess starts the agent in its own process group with the three
// pipes. The caller owns the process: it must call stop.
func startProcess(spec procSpec) (*process, error) {
	inR, inW, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("delegate: pipe: %w", err)
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		closeAll(inR, inW)
		return nil, fmt.Errorf("delegate: pipe: %w", err)
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		closeAll(inR, inW, outR, outW)
		return nil, fmt.Errorf("delegate: pipe: %w", err)
	}
	cmd := exec.Command(spec.path, spec.args...)
	cmd.Dir = spec.dir
	cmd.Env = spec.env
	cmd.Stdin, cmd.Stdout, cmd.Stderr = inR, outW, errW
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Setpgid: true,
		// The agent dies with the thread that started it (kept locked
		// below), so a daemon killed outright takes the agent with it.
		Pdeathsig: syscall.SIGKILL,
	}
	p := &process{stdin: inW, stdout: outR, stderr: errR, exited: make(chan struct{})}
	started := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		p.err = cmd.Wait()
		p.state = cmd.ProcessState
		close(p.exited)
	}()
	err = <-started
	closeAll(inR, outW, errW) // the child has its copies
	if err != nil {
		closeAll(inW, outR, errR)
		return nil, fmt.Errorf("delegate: start %s: %w", spec.path, err)
	}
	p.pid = cmd.Process.Pid
	return p, nil
}

func closeAll(fs ...*os.File) {
	for _, f := range fs {
		_ = f.Close()
	}
}

// exitReport says how the agent ended.
type exitReport struct {
	Code   int    // exit status; -1 when a signal ended it
	Signal string // the signal that ended it, if any
	// Term and Kill say that SIGTERM or SIGKILL had to be sent to the
	// agent's process group after stdin was closed.
	Term bool
	Kill bool
	// Stragglers counts descendants that outlived the agent and were
	// stopped by the sweep.
	Stragglers int
}

func (r exitReport) clean() bool { return r.Code == 0 && r.Signal == "" && !r.Term && !r.Kill }

func (r exitReport) String() string {
	var b strings.Builder
	if r.Signal != "" {
		fmt.Fprintf(&b, "ended by %s", r.Signal)
	} else {
		fmt.Fprintf(&b, "exit code %d", r.Code)
	}
	if r.Kill {
		b.WriteString(", SIGKILL was needed")
	} else if r.Term {
		b.WriteString(", SIGTERM was needed")
	}
	if r.Stragglers > 0 {
		fmt.Fprintf(&b, ", %d left-over descendant(s) stopped", r.Stragglers)
	}
	return b.String()
}

// stop ends the agent the way it is meant to end: stdin EOF, then up to
// exitGrace for it to exit, then SIGTERM to its process group, killGrace
// later SIGKILL. It then stops every descendant that is still alive (in
// the agent's group or carrying its tag) the same way, and returns once
// the agent was reaped. stdin is closed by the caller before (the writer
// owns it); stop only closes it again, harmlessly.
func (p *process) stop(spec procSpec, exitGrace, killGrace time.Duration) exitReport {
	_ = p.stdin.Close()
	var r exitReport
	if !waitClosed(p.exited, exitGrace) {
		r.Term = true
		_ = unix.Kill(-p.pid, unix.SIGTERM)
		if !waitClosed(p.exited, killGrace) {
			r.Kill = true
			_ = unix.Kill(-p.pid, unix.SIGKILL)
			<-p.exited // SIGKILL cannot be ignored
		}
	}
	if ws, ok := p.state.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		r.Code, r.Signal = -1, unix.SignalName(ws.Signal())
	} else {
		r.Code = p.state.ExitCode()
	}
	r.Stragglers = sweep(p.pid, spec.tag, killGrace)
	return r
}

// waitClosed waits up to d for c to be closed.
func waitClosed(c <-chan struct{}, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-c:
		return true
	case <-t.C:
		return false
	}
}

// sweep stops the live processes of group pgid and those whose environment
// holds tag: SIGTERM (to each and to the groups they lead), then SIGKILL
// after grace for those still alive. It returns how many it found.
func sweep(pgid int, tag string, grace time.Duration) int {
	found := stragglers(pgid, tag)
	if len(found) == 0 {
		return 0
	}
	signalAll(found, unix.SIGTERM)
	deadline := time.Now().Add(grace)
	pause := time.Millisecond
	for time.Now().Before(deadline) {
		if len(stragglers(pgid, tag)) == 0 {
			return len(found)
		}
		time.Sleep(pause)
		pause = min(2*pause, 50*time.Millisecond)
	}
	left := stragglers(pgid, tag)
	signalAll(left, unix.SIGKILL)
	deadline = time.Now().Add(5 * time.Second)
	for len(stragglers(pgid, tag)) > 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	return len(found)
}

type procInfo struct{ pid, pgrp int }

func signalAll(ps []procInfo, sig unix.Signal) {
	for _, p := range ps {
		if p.pgrp == p.pid {
			_ = unix.Kill(-p.pid, sig)
		}
		_ = unix.Kill(p.pid, sig)
	}
}

// stragglers lists live (not zombie) processes other than this one that
// are in group pgid or carry tag in their environment, from /proc.
func stragglers(pgid int, tag string) []procInfo {
	d, err := os.Open("/proc")
	if err != nil {
		return nil
	}
	names, _ := d.Readdirnames(-1)
	d.Close()
	self := os.Getpid()
	needle := []byte(tag)
	var out []procInfo
	for _, n := range names {
		if n == "" || n[0] < '0' || n[0] > '9' {
			continue
		}
		pid, err := strconv.Atoi(n)
		if err != nil || pid == self {
			continue
		}
		st, err := os.ReadFile("/proc/" + n + "/stat")
		if err != nil {
			continue // gone
		}
		state, pgrp, ok := parseStat(st)
		if !ok || state == 'Z' || state == 'X' {
			continue
		}
		if pgrp == pgid {
			out = append(out, procInfo{pid, pgrp})
			continue
		}
		if tag == "" {
			continue
		}
		env, err := os.ReadFile("/proc/" + n + "/environ")
		if err != nil {
			continue // not ours, or gone
		}
		for _, kv := range bytes.Split(env, []byte{0}) {
			if bytes.Equal(kv, needle) {
				out = append(out, procInfo{pid, pgrp})
				break
			}
		}
	}
	return out
}

// parseStat reads state and process group from /proc/<pid>/stat
// ("pid (comm) state ppid pgrp ..."; comm may hold spaces and parens).
func parseStat(b []byte) (state byte, pgrp int, ok bool) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, 0, false
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 3 || len(f[0]) == 0 {
		return 0, 0, false
	}
	pgrp, err := strconv.Atoi(f[2])
	if err != nil {
		return 0, 0, false
	}
	return f[0][0], pgrp, true
}
