package delegate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"lemo/tools"
)

// Errors of commands sent to the agent and of steering.
var (
	// ErrOutcomeUnknown: the agent did not answer a command before its
	// deadline. It may or may not have acted on it; Lemo never retries it.
	ErrOutcomeUnknown = errors.New("delegate: the agent did not answer in time; the outcome is unknown and the command is not retried")
	// ErrClosed: the agent's session is closed (it exited, crashed or was
	// stopped); commands fail closed.
	ErrClosed = errors.New("delegate: the agent session is closed")
	// ErrBusy: the agent is not reading its input; the command was not sent.
	ErrBusy = errors.New("delegate: the agent is not reading its input; the command was not sent")
)

// AgentError is the agent's refusal of a command (a response with
// "success": false).
type AgentError struct {
	Command string
	Message string
}

func (e *AgentError) Error() string {
	return fmt.Sprintf("delegate: the agent refused %s: %s", e.Command, e.Message)
}

// request is a command the run sends through its session; the answer comes
// back as an evResponse event with the same tag.
type request struct {
	tag     string
	command map[string]any // the command without its "id"
	timeout time.Duration
}

// steerRequest is a client's steering input; the session answers it
// itself, in the order of the agent's output.
type steerRequest struct {
	kind    string // steer, follow_up or abort
	message string
	timeout time.Duration
	reply   func(error)
}

// evKind is the kind of a sessionEvent.
type evKind int

const (
	evStarted  evKind = iota // the process started (pid)
	evFrame                  // an event of the agent
	evResponse               // the answer to a request (frame, or err)
	evLate                   // a response that matched no waiting command
	evApproval               // an approval dialog was asked, decided or abandoned (outcome)
	evDialog                 // a dialog was declined or a host request rejected (text)
	evNotice                 // a notify request (text, outcome = level)
	evSteer                  // a steering input's outcome (tag = kind, err)
	evProtocol               // a record that is not a frame, or too long (text)
	evClosed                 // the agent ended the session on its own (err)
)

// sessionEvent is what a session reports to its run, in the order of the
// agent's output.
type sessionEvent struct {
	kind    evKind
	pid     int
	frame   *Frame
	tag     string
	err     error
	text    string
	outcome string
	tool    string
}

// sessionLimits are the session's timings and bounds.
type sessionLimits struct {
	exitGrace time.Duration
	killGrace time.Duration
	maxLine   int
}

// agentSession is one agent process: a tools.Session run by the call's
// session actor. It is the only owner of the agent's stdin; when Run's
// context ends it closes stdin (the agent exits on EOF), escalates to
// SIGTERM and SIGKILL, stops left-over descendants and reaps the agent.
type agentSession struct {
	spec      procSpec
	kind      string
	limits    sessionLimits
	approvals tools.Approvals
	log       zerolog.Logger
	events    chan sessionEvent

	// release, if set, is called when Run returns: the agent is gone.
	release func()

	// Set before Run returns (read after the handle's Done).
	exit       exitReport
	exited     bool
	stderrTail string
}

var _ tools.Session = (*agentSession)(nil)

func newAgentSession(spec procSpec, kind string, limits sessionLimits, approvals tools.Approvals, log zerolog.Logger) *agentSession {
	return &agentSession{spec: spec, kind: kind, limits: limits, approvals: approvals, log: log, events: make(chan sessionEvent, 256)}
}

// Run starts the agent and serves it until ctx ends or the agent ends the
// session; either way it stops the agent and everything it started before
// returning. It returns nil when the agent exited cleanly on EOF.
func (s *agentSession) Run(ctx context.Context, inbox <-chan any) error {
	if s.release != nil {
		defer s.release()
	}
	p, err := startProcess(s.spec)
	if err != nil {
		return err
	}
	r := &runner{
		s: s, p: p, ctx: ctx, inbox: inbox,
		frames:     make(chan lineMsg, 64),
		readerDone: make(chan struct{}),
		draining:   make(chan struct{}),
		writeQ:     make(chan []byte, 256),
		writeFail:  make(chan struct{}),
		writerDone: make(chan struct{}),
		stderr:     newTail(8 << 10),
		stderrDone: make(chan struct{}),
		answers:    make(chan dialogAnswer, 16),
		dialogs:    make(map[string]*dialog),
		pending:    make(map[string]*pendingCmd),
		timer:      time.NewTimer(time.Hour),
	}
	r.timer.Stop()
	go r.read()
	go r.readStderr()
	go r.write()
	r.deliver(sessionEvent{kind: evStarted, pid: p.pid})
	return r.serve()
}

type lineMsg struct {
	frame *Frame
	err   error
}

type pendingCmd struct {
	id       string
	command  string
	tag      string        // a request's tag
	steer    *steerRequest // or a steering input
	deadline time.Time
}

type dialog struct {
	req    uiRequest
	cancel context.CancelFunc
}

type dialogAnswer struct {
	id       string
	decision tools.Decision
	err      error
}

// runner is the state of one Run; only its serve goroutine touches it.
type runner struct {
	s     *agentSession
	p     *process
	ctx   context.Context
	inbox <-chan any

	frames     chan lineMsg
	readerDone chan struct{}
	draining   chan struct{} // closed at shutdown: the reader discards from then on
	writeQ     chan []byte
	writeFail  chan struct{}
	failOnce   sync.Once
	writerDone chan struct{}
	stderr     *tail
	stderrDone chan struct{}

	answers chan dialogAnswer
	dialogs map[string]*dialog
	asking  sync.WaitGroup

	pending map[string]*pendingCmd
	nextID  int
	timer   *time.Timer
}

// read decodes the agent's stdout until EOF; after shutdown began it keeps
// reading (so the agent can flush and exit) but discards.
func (r *runner) read() {
	defer close(r.readerDone)
	defer close(r.frames)
	lr := NewLineReader(r.p.stdout, r.s.limits.maxLine)
	for {
		line, err := lr.Next()
		var m lineMsg
		switch {
		case err == nil:
			if len(line) == 0 {
				continue
			}
			m.frame, m.err = DecodeFrame(line)
			if m.err != nil {
				m.err = fmt.Errorf("%w: %s", m.err, Short(string(line), 120))
			}
		case errors.As(err, new(*LineTooLongError)):
			m.err = err
		default: // EOF, or the read end was closed
			return
		}
		select {
		case r.frames <- m:
		case <-r.draining:
		}
	}
}

func (r *runner) readStderr() {
	defer close(r.stderrDone)
	_, _ = io.Copy(r.stderr, r.p.stderr)
}

// write is the only writer of the agent's stdin.
func (r *runner) write() {
	defer close(r.writerDone)
	failed := false
	for b := range r.writeQ {
		if failed {
			continue
		}
		if _, err := r.p.stdin.Write(b); err != nil {
			failed = true
			r.failOnce.Do(func() { close(r.writeFail) })
		}
	}
}

// send queues one line for the agent; false when the queue is full.
func (r *runner) send(v any) bool {
	b, err := json.Marshal(v)
	if err != nil {
		return false
	}
	return r.sendRaw(b)
}

func (r *runner) sendRaw(b []byte) bool {
	select {
	case r.writeQ <- append(b, '\n'):
		return true
	default:
		return false
	}
}

// deliver hands an event to the run; it gives up when the session ends.
func (r *runner) deliver(e sessionEvent) {
	select {
	case r.s.events <- e:
	case <-r.ctx.Done():
	}
}

func (r *runner) serve() error {
	exited := r.p.exited
	var drain <-chan time.Time
	var closedErr error
	done, inbox := r.ctx.Done(), r.inbox
	stopping := false
loop:
	for {
		if stopping && len(r.pending) == 0 {
			break
		}
		select {
		case <-done:
			if len(r.pending) == 0 {
				break loop
			}
			// The call ends with commands in flight, which the agent may
			// have answered already (pi answers an abort after the
			// agent_end that ends the run): read its output a little
			// longer, take no new command, and fail only what is still
			// unanswered then.
			stopping, done, inbox = true, nil, nil
			if drain == nil {
				t := time.NewTimer(r.s.limits.exitGrace)
				defer t.Stop()
				drain = t.C
			}
		case m := <-inbox:
			r.onInbox(m)
		case m, ok := <-r.frames:
			if !ok {
				closedErr = fmt.Errorf("%w: the agent closed its output", ErrClosed)
				break loop
			}
			r.onLine(m)
		case a := <-r.answers:
			r.onAnswer(a)
		case <-r.timer.C:
			r.expire(time.Now())
		case <-r.writeFail:
			closedErr = fmt.Errorf("%w: the agent stopped reading its input", ErrClosed)
			break loop
		case <-exited:
			// Read what it wrote before it exited, for a little while.
			exited = nil
			t := time.NewTimer(r.s.limits.exitGrace)
			defer t.Stop()
			drain = t.C
		case <-drain:
			if !stopping {
				closedErr = fmt.Errorf("%w: the agent exited", ErrClosed)
			}
			break loop
		}
	}
	if closedErr == nil {
		closedErr = fmt.Errorf("%w: the call ended", ErrClosed)
	} else {
		r.deliver(sessionEvent{kind: evClosed, err: closedErr})
	}
	return r.shutdown(closedErr)
}

// shutdown fails what waits, stops the agent and waits for every goroutine
// of the session.
func (r *runner) shutdown(why error) error {
	r.timer.Stop()
	unknown := fmt.Errorf("%w before the agent answered; the outcome is unknown", why)
	for id, pc := range r.pending {
		delete(r.pending, id)
		r.fail(pc, unknown)
	}
	r.drainInbox(why)
	for id, d := range r.dialogs {
		d.cancel()
		delete(r.dialogs, id)
	}
	close(r.draining)
	close(r.writeQ)
	rep := r.p.stop(r.s.spec, r.s.limits.exitGrace, r.s.limits.killGrace)
	<-r.writerDone
	if !waitClosed(r.readerDone, r.s.limits.killGrace) {
		_ = r.p.stdout.Close() // a process that escaped the sweep holds it open
		<-r.readerDone
	}
	if !waitClosed(r.stderrDone, r.s.limits.killGrace) {
		_ = r.p.stderr.Close()
		<-r.stderrDone
	}
	closeAll(r.p.stdout, r.p.stderr)
	r.asking.Wait()
	r.drainInbox(why)
	r.s.exit, r.s.exited, r.s.stderrTail = rep, true, r.stderr.String()
	r.s.log.Debug().Int("pid", r.p.pid).Str("exit", rep.String()).Msg("delegate agent stopped")
	if rep.clean() {
		return nil
	}
	return fmt.Errorf("delegate: the agent %s", rep)
}

// drainInbox answers what is still queued for a closed session.
func (r *runner) drainInbox(why error) {
	for {
		select {
		case m := <-r.inbox:
			if st, ok := m.(*steerRequest); ok {
				st.reply(why)
			}
		default:
			return
		}
	}
}

func (r *runner) onInbox(m any) {
	switch m := m.(type) {
	case *request:
		r.command(&pendingCmd{tag: m.tag}, m.command, m.timeout)
	case *steerRequest:
		cmd := map[string]any{"type": m.kind}
		if m.kind != "abort" {
			cmd["message"] = m.message
		}
		r.command(&pendingCmd{steer: m}, cmd, m.timeout)
	}
}

// command sends cmd with a new id and waits for its answer until timeout.
func (r *runner) command(pc *pendingCmd, cmd map[string]any, timeout time.Duration) {
	r.nextID++
	pc.id = "lemo-" + strconv.Itoa(r.nextID)
	pc.command, _ = cmd["type"].(string)
	cmd["id"] = pc.id
	if !r.send(cmd) {
		r.fail(pc, ErrBusy)
		return
	}
	pc.deadline = time.Now().Add(timeout)
	r.pending[pc.id] = pc
	r.arm()
}

// arm sets the timer to the earliest deadline.
func (r *runner) arm() {
	var first time.Time
	for _, pc := range r.pending {
		if first.IsZero() || pc.deadline.Before(first) {
			first = pc.deadline
		}
	}
	if first.IsZero() {
		r.timer.Stop()
		return
	}
	r.timer.Reset(max(time.Until(first), 0))
}

func (r *runner) expire(now time.Time) {
	for id, pc := range r.pending {
		if !pc.deadline.After(now) {
			delete(r.pending, id)
			r.fail(pc, ErrOutcomeUnknown)
		}
	}
	r.arm()
}

// fail answers a waiting command with err.
func (r *runner) fail(pc *pendingCmd, err error) {
	if pc.steer != nil {
		pc.steer.reply(err)
		r.deliver(sessionEvent{kind: evSteer, tag: pc.steer.kind, err: err})
		return
	}
	r.deliver(sessionEvent{kind: evResponse, tag: pc.tag, err: err})
}

// resolve answers a waiting command with the agent's response.
func (r *runner) resolve(pc *pendingCmd, f *Frame) {
	delete(r.pending, pc.id)
	r.arm()
	if pc.steer != nil {
		var err error
		if !f.Success {
			err = &AgentError{Command: pc.command, Message: Short(f.Error, 1024)}
		}
		pc.steer.reply(err)
		r.deliver(sessionEvent{kind: evSteer, tag: pc.steer.kind, err: err})
		return
	}
	r.deliver(sessionEvent{kind: evResponse, tag: pc.tag, frame: f})
}

func (r *runner) onLine(m lineMsg) {
	if m.err != nil {
		r.deliver(sessionEvent{kind: evProtocol, text: m.err.Error()})
		return
	}
	f := m.frame
	switch f.Type {
	case "response":
		r.onResponse(f)
	case "extension_ui_request", "host_tool_call", "host_uri_request", "host_tool_cancel", "host_uri_cancel":
		r.onRequest(f)
	default:
		switch f.Type {
		case "tool_execution_end":
			if len(r.dialogs) == 0 {
				break
			}
			var e struct {
				ToolCallID string `json:"toolCallId"`
			}
			if json.Unmarshal(f.Raw, &e) == nil && e.ToolCallID != "" {
				r.abandon(func(d *dialog) bool { return d.req.callID == e.ToolCallID })
			}
		case "agent_end":
			r.abandon(func(*dialog) bool { return true })
		}
		r.deliver(sessionEvent{kind: evFrame, frame: f})
	}
}

func (r *runner) onResponse(f *Frame) {
	if f.ID != "" {
		if pc := r.pending[f.ID]; pc != nil {
			r.resolve(pc, f)
			return
		}
		r.deliver(sessionEvent{kind: evLate, frame: f})
		return
	}
	// The agents drop the id when they reject an unknown command: the
	// rejection belongs to the one waiting command of that name, if it is
	// the only one.
	if !f.Success && f.Command != "" {
		var match *pendingCmd
		n := 0
		for _, pc := range r.pending {
			if pc.command == f.Command {
				match, n = pc, n+1
			}
		}
		if n == 1 {
			r.resolve(match, f)
			return
		}
	}
	r.deliver(sessionEvent{kind: evLate, frame: f})
}

func (r *runner) onRequest(f *Frame) {
	req, action := classifyUI(f)
	switch action {
	case uiIgnore:
		if req.notice != "" {
			r.deliver(sessionEvent{kind: evNotice, text: req.notice, outcome: req.level})
		}
	case uiCancel:
		r.abandon(func(d *dialog) bool { return d.req.id == req.target })
	case uiReject:
		if r.sendRaw(answerReject(req)) {
			r.deliver(sessionEvent{kind: evDialog, text: "rejected " + req.frameType})
		}
	case uiDecline:
		if r.sendRaw(answerDecline(req.id)) {
			r.deliver(sessionEvent{kind: evDialog, text: "declined a " + Short(req.method, 32) + " dialog"})
		}
	case uiApproval:
		r.ask(req)
	}
}

// ask bridges an approval dialog to a Lemo approval on its own goroutine,
// so the session keeps serving the agent meanwhile.
func (r *runner) ask(req uiRequest) {
	if old := r.dialogs[req.id]; old != nil {
		return // a repeated request id: the first one is being asked
	}
	if r.s.approvals == nil {
		r.sendRaw(answerApproval(req, false))
		r.deliver(sessionEvent{kind: evApproval, tool: req.tool, outcome: "denied", text: "no person can be asked"})
		return
	}
	ctx, cancel := context.WithCancel(r.ctx)
	r.dialogs[req.id] = &dialog{req: req, cancel: cancel}
	reason := approvalReason(r.s.kind, req)
	r.asking.Add(1)
	go func() {
		defer r.asking.Done()
		var a dialogAnswer
		a.id = req.id
		func() {
			defer func() {
				if v := recover(); v != nil {
					a.err = fmt.Errorf("delegate: approval panicked: %v", v)
				}
			}()
			a.decision, a.err = r.s.approvals.Ask(ctx, reason, req.timeout)
		}()
		select {
		case r.answers <- a:
		case <-ctx.Done():
		}
	}()
	r.deliver(sessionEvent{kind: evApproval, tool: req.tool, outcome: "asked"})
}

func (r *runner) onAnswer(a dialogAnswer) {
	d := r.dialogs[a.id]
	if d == nil {
		return // abandoned meanwhile
	}
	delete(r.dialogs, a.id)
	d.cancel()
	approved := a.err == nil && a.decision.Approved
	r.sendRaw(answerApproval(d.req, approved))
	outcome := a.decision.Outcome
	text := ""
	if a.err != nil {
		outcome, text = "denied", "the approval failed: "+Short(a.err.Error(), 256)
	}
	r.deliver(sessionEvent{kind: evApproval, tool: d.req.tool, outcome: outcome, text: text})
}

// abandon withdraws the pending approvals the agent gave up on: the Lemo
// approval is cancelled, the agent is not answered.
func (r *runner) abandon(match func(*dialog) bool) {
	for id, d := range r.dialogs {
		if match(d) {
			d.cancel()
			delete(r.dialogs, id)
			r.deliver(sessionEvent{kind: evApproval, tool: d.req.tool, outcome: "abandoned"})
		}
	}
}

// tail keeps the last bytes written to it.
type tail struct {
	mu  sync.Mutex
	max int
	buf []byte
	n   int64
}

func newTail(max int) *tail { return &tail{max: max} }

func (t *tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.n += int64(len(p))
	t.buf = append(t.buf, p...)
	if len(t.buf) > t.max {
		t.buf = append(t.buf[:0], t.buf[len(t.buf)-t.max:]...)
	}
	return len(p), nil
}

func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.buf)
}

var _ io.Writer = (*tail)(nil)
