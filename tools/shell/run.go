package shell

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"lemo/tools"
	"lemo/tools/internal/proc"
	"lemo/tools/isolation"
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
func (t *Tool) run(ctx context.Context, command, dir string, tags []string, timeout time.Duration, emit tools.Emit, live tools.LiveOutput) (*runResult, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var liveOut, liveErr io.Writer
	if live != nil {
		liveOut, liveErr = live.Stream("stdout"), live.Stream("stderr")
	}
	res := &runResult{
		stdout: newCapture(t.cfg.ModelHeadBytes, t.cfg.ModelTailBytes, liveOut),
		stderr: newCapture(t.cfg.ModelHeadBytes, t.cfg.ModelTailBytes, liveErr),
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
	tag, err := runTag()
	if err != nil {
		outR.Close()
		outW.Close()
		errR.Close()
		errW.Close()
		return nil, err
	}
	cmd.Env = append(append(slices.DeleteFunc(slices.Clone(t.env), func(kv string) bool { return strings.HasPrefix(kv, RunTagVariable+"=") }), tag), tags...)
	cmd.Stdin = nil // /dev/null
	cmd.Stdout = outW
	cmd.Stderr = errW
	cmd.Cancel = func() error { return proc.SignalGroup(cmd.Process.Pid, unix.SIGTERM) }
	cmd.WaitDelay = t.cfg.KillGrace

	// The shell runs in its own process group and dies with the daemon
	// (Pdeathsig from a locked thread); p reaps it.
	p, err := isolation.Start(cmd, t.cfg.Namespaces)
	outW.Close()
	errW.Close()
	if err != nil {
		outR.Close()
		errR.Close()
		return nil, fmt.Errorf("shell: start %s: %w", t.cfg.Shell, err)
	}
	begin := time.Now()
	pgid := p.Pid()

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
wait:
	for {
		select {
		case <-p.Done():
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

	// The shell is gone; processes it left in its group are not. Nor,
	// perhaps, are those that left the group (setsid) but carry the run's
	// tag in their environment: they are stopped the same way.
	killed, leftover := proc.StopGroup(pgid, termAt, t.cfg.KillGrace)
	escaped := proc.Sweep(pgid, tag, p.Since(), t.cfg.KillGrace) > 0
	// In namespaces, whatever is left (one that dropped the tag too) ends
	// with the namespace's init.
	escaped = p.Close() > 0 || escaped
	res.killed = killed
	res.background = (leftover || escaped) && termAt.IsZero()

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

	code, signal, ok := p.Exit()
	if !ok || (code == -1 && signal == "") {
		return nil, fmt.Errorf("shell: wait: %v", p.Wait())
	}
	res.exitCode, res.signal = code, signal
	if res.signal == "SIGKILL" {
		res.killed = true
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

// tags are the environment entries that tag a call's processes: the data
// folder's run tag and the call (none without Config.RunTag).
func (t *Tool) tags(call tools.Call) []string {
	return isolation.Tags(t.cfg.RunTag, call.TaskID, call.CallID)
}

// RunTagVariable is set in the environment of every command to an id of
// its run, so that descendants that left the run's process group can be
// found and stopped when it ends.
const RunTagVariable = "SHELL_RUN_ID"

func runTag() (string, error) {
	b := make([]byte, 12)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("shell: run id: %w", err)
	}
	return RunTagVariable + "=" + hex.EncodeToString(b), nil
}

// heartbeat is the longest gap between state updates of a running command
// whose output does not change.
const heartbeat = 5 * time.Second
