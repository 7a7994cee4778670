package proc

import (
	"os"
	"os/exec"
	"runtime"
	"syscall"
	"time"
)

// Process is a child started by Start. Its methods may be called from any
// goroutine.
type Process struct {
	cmd  *exec.Cmd
	pid  int
	done chan struct{}
	err  error // cmd.Wait's, set before done is closed
	// since is Ticks just before the child started (0 when unknown).
	since uint64
}

// Start starts cmd in a process group of its own (the group id is the
// child's pid) with Pdeathsig SIGKILL, from a goroutine that stays locked to
// its OS thread until it has reaped the child, so that the child dies with
// the daemon even when the daemon is killed outright. It sets Setpgid and
// Pdeathsig in cmd.SysProcAttr (creating it if nil) and keeps its other
// fields. The caller must not call cmd.Wait: the Process reaps the child
// and closes Done once it did; the goroutine that does so then ends. Give
// the child *os.File pipes, not StdoutPipe and the like, which that Wait
// closes as soon as the child exits. The error is cmd.Start's.
func Start(cmd *exec.Cmd) (*Process, error) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Setpgid = true
	cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
	p := &Process{cmd: cmd, done: make(chan struct{})}
	p.since, _ = Ticks() // 0 (every process) if /proc cannot tell
	started := make(chan error, 1)
	go func() {
		// Pdeathsig fires when the creating thread ends: keep it until
		// the child has been reaped.
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		p.err = cmd.Wait()
		close(p.done)
	}()
	if err := <-started; err != nil {
		return nil, err
	}
	p.pid = cmd.Process.Pid
	return p, nil
}

// Pid is the child's process id, which is also its process group id.
func (p *Process) Pid() int { return p.pid }

// Since is the time (Ticks) just before the child started: none of its
// descendants started earlier (see Sweep).
func (p *Process) Since() uint64 { return p.since }

// Done is closed once the child has been reaped.
func (p *Process) Done() <-chan struct{} { return p.done }

// WaitFor waits up to d for the child to be reaped and reports whether it
// was.
func (p *Process) WaitFor(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-p.done:
		return true
	case <-t.C:
		return false
	}
}

// Wait waits until the child has been reaped and returns cmd.Wait's error.
func (p *Process) Wait() error {
	<-p.done
	return p.err
}

// State is how the child ended; nil until Done is closed.
func (p *Process) State() *os.ProcessState {
	select {
	case <-p.done:
		return p.cmd.ProcessState
	default:
		return nil
	}
}

// Terminate stops the child: SIGTERM to its process group, up to grace for
// the child to be reaped, then SIGKILL to the group and to the child
// itself (in case it left the group), and it waits until the child was
// reaped (SIGKILL cannot be ignored). It reports whether SIGKILL was sent.
// Members of the group other than the child may outlive it: see StopGroup.
func (p *Process) Terminate(grace time.Duration) (killed bool) {
	_ = SignalGroup(p.pid, syscall.SIGTERM)
	if p.WaitFor(grace) {
		return false
	}
	_ = SignalGroup(p.pid, syscall.SIGKILL)
	_ = p.cmd.Process.Signal(syscall.SIGKILL) // safe once reaped: os.ErrProcessDone
	<-p.done
	return true
}
