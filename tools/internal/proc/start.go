package proc

import (
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Process is a child started by Start or StartIn. Its methods may be
// called from any goroutine.
type Process struct {
	cmd  *exec.Cmd
	pid  int
	done chan struct{}
	// reaped is closed once the child was reaped (done itself without
	// namespaces).
	reaped chan struct{}
	err    error // cmd.Wait's, set before reaped is closed
	// since is Ticks just before the child started (0 when unknown).
	since uint64
	// ns: the child is the init of namespaces (StartIn); code and signal
	// are how its command ended, set before done is closed.
	ns     bool
	code   int
	signal string
}

// Namespaces wraps a command so that it starts in namespaces of its own,
// through an init that writes how the command ended to status (see
// isolation.Namespaces).
type Namespaces interface {
	Wrap(cmd *exec.Cmd, status *os.File)
}

// ReadStatus reads the init's status line (isolation.ReadStatus); ok is
// false when the init ended without one.
type ReadStatus func(r *os.File) (code int, sig syscall.Signal, ok bool)

// StartIn is Start, in namespaces of its own when ns is not nil: the child
// is then an init that runs cmd's command (isolation.Namespaces) and
// reports its end on a pipe, which read reads. Done is closed once the
// command ended (or the init was killed); Exit says how. The init stays
// while other processes of its namespace live: Close stops them all.
func StartIn(cmd *exec.Cmd, ns Namespaces, read ReadStatus) (*Process, error) {
	if ns == nil {
		return Start(cmd)
	}
	r, w, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	ns.Wrap(cmd, w)
	p, err := startChild(cmd, make(chan struct{}))
	w.Close() // the init has its copy
	if err != nil {
		r.Close()
		return nil, err
	}
	p.ns = true
	go func() {
		defer r.Close()
		code, sig, ok := read(r)
		switch {
		case !ok:
			// The init ended without a word: it was killed, and with it
			// every process of its namespace.
			<-p.reaped
			code, p.signal = -1, "SIGKILL"
			if ps := p.cmd.ProcessState; ps != nil {
				code, p.signal = Exit(ps)
			}
		case sig != 0:
			code, p.signal = -1, unix.SignalName(sig)
		}
		p.code = code
		close(p.done)
	}()
	return p, nil
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
	return startChild(cmd, nil)
}

// startChild is Start; done is the Process's done channel (nil: closed when
// the child was reaped).
func startChild(cmd *exec.Cmd, done chan struct{}) (*Process, error) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Setpgid = true
	cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
	p := &Process{cmd: cmd, reaped: make(chan struct{}), done: done}
	if p.done == nil {
		p.done = p.reaped
	}
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
		close(p.reaped)
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
// In namespaces (StartIn) the child is the init, which is reaped once no
// process is left in its namespace: call Close first.
func (p *Process) Wait() error {
	<-p.reaped
	return p.err
}

// State is how the child ended; nil until it was reaped. In namespaces it
// is the init's: use Exit for the command's.
func (p *Process) State() *os.ProcessState {
	select {
	case <-p.reaped:
		return p.cmd.ProcessState
	default:
		return nil
	}
}

// Exit says how the command ended once Done is closed (see the function
// Exit): its exit status, or -1 and the signal's name. ok is false before.
func (p *Process) Exit() (code int, signal string, ok bool) {
	select {
	case <-p.done:
	default:
		return 0, "", false
	}
	if p.ns {
		return p.code, p.signal, true
	}
	if p.cmd.ProcessState == nil {
		return -1, "", true // cmd.Wait failed
	}
	code, signal = Exit(p.cmd.ProcessState)
	return code, signal, true
}

// Close ends what is left of a child started in namespaces (StartIn) once
// Done is closed: SIGKILL to its init ends every process of the namespace,
// wherever it went (another group, another session), and it waits until
// the init was reaped. It returns how many processes other than the init
// were still in the namespace. Without namespaces it does nothing and
// returns 0. Call it once the tool's own stopping (StopGroup, Sweep) is
// done.
func (p *Process) Close() int {
	if !p.ns {
		return 0
	}
	select {
	case <-p.reaped:
		return 0
	default:
	}
	left := nsMembers(p.pid)
	_ = unix.Kill(p.pid, unix.SIGKILL)
	<-p.reaped
	return left
}

// nsMembers counts the live processes other than init that are in the
// PID namespace of init.
func nsMembers(init int) int {
	ns, err := os.Readlink("/proc/" + strconv.Itoa(init) + "/ns/pid")
	if err != nil {
		return 0
	}
	n := 0
	_ = Walk(func(s Stat) bool {
		if s.Pid != init && !s.Dead() {
			if l, err := os.Readlink("/proc/" + strconv.Itoa(s.Pid) + "/ns/pid"); err == nil && l == ns {
				n++
			}
		}
		return true
	})
	return n
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
