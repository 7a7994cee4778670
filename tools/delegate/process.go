package delegate

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"time"

	"lemo/tools/internal/proc"
	"lemo/tools/isolation"
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
	// ns, when set, starts the agent in namespaces of its own.
	ns *isolation.Namespaces
}

// process is one running agent with its three pipes; exited is closed once
// it was reaped.
type process struct {
	pid    int
	stdin  *os.File
	stdout *os.File
	stderr *os.File
	exited <-chan struct{}
	child  *proc.Process
}

// startProcess starts the agent with the three pipes, in its own process
// group and with Pdeathsig from a locked thread (proc.Start), so that a
// daemon killed outright takes the agent with it. The caller owns the
// process: it must call stop.
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
	child, err := isolation.Start(cmd, spec.ns)
	closeAll(inR, outW, errW) // the child has its copies
	if err != nil {
		closeAll(inW, outR, errR)
		return nil, fmt.Errorf("delegate: start %s: %w", spec.path, err)
	}
	return &process{pid: child.Pid(), stdin: inW, stdout: outR, stderr: errR, exited: child.Done(), child: child}, nil
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
	if !p.child.WaitFor(exitGrace) {
		r.Term = true
		r.Kill = p.child.Terminate(killGrace)
	}
	r.Code, r.Signal, _ = p.child.Exit()
	r.Stragglers = proc.Sweep(p.pid, spec.tag, p.child.Since(), killGrace)
	// In namespaces, whatever is left ends with the namespace's init.
	r.Stragglers += p.child.Close()
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
