package delegate

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"time"

	"lemo/tools"
	"lemo/tools/isolation"
)

// Result is delegate.run's output (and what is retained of it).
type Result struct {
	Invocation string `json:"invocation"`
	SessionID  string `json:"session_id,omitempty"`
	Resumed    bool   `json:"resumed,omitempty"`
	Kind       string `json:"kind"`
	// Status is finished, aborted, failed or timed_out.
	Status               string    `json:"status"`
	StopReason           string    `json:"stop_reason,omitempty"`
	Error                string    `json:"error,omitempty"`
	FinalAnswer          string    `json:"final_answer"`
	FinalAnswerTruncated bool      `json:"final_answer_truncated,omitempty"`
	Summary              Summary   `json:"summary"`
	Exit                 *ExitInfo `json:"exit,omitempty"`
	DurationMS           int64     `json:"duration_ms"`
}

// ExitInfo says how the agent's process ended.
type ExitInfo struct {
	Code       int    `json:"code"`
	Signal     string `json:"signal,omitempty"`
	Term       bool   `json:"term,omitempty"`
	Kill       bool   `json:"kill,omitempty"`
	Stragglers int    `json:"stragglers,omitempty"`
	// Stderr is the end of the agent's error output when it did not end
	// cleanly.
	Stderr string `json:"stderr,omitempty"`
}

// State is one live state update of a run.
type State struct {
	Phase         string      `json:"phase"`
	Invocation    string      `json:"invocation"`
	SessionID     string      `json:"session_id,omitempty"`
	Resumed       bool        `json:"resumed,omitempty"`
	PID           int         `json:"pid,omitempty"`
	ElapsedMS     int64       `json:"elapsed_ms"`
	Events        []LiveEvent `json:"events"`
	DroppedEvents int         `json:"dropped_events,omitempty"`
	Usage         Usage       `json:"usage"`
}

// Statuses of a run.
const (
	StatusFinished = "finished"
	StatusAborted  = "aborted"
	StatusFailed   = "failed"
	StatusTimedOut = "timed_out"
)

// Phases in state updates.
const (
	PhaseStarting  = "starting"
	PhaseRunning   = "running"
	PhaseFinishing = "finishing"
	PhaseEnded     = "ended"
)

// Request tags of the run's own commands.
const (
	tagState  = "state"
	tagPrompt = "prompt"
	tagFinal  = "final"
	tagAbort  = "abort"
)

// heartbeat is the longest gap between state updates of a quiet run.
const heartbeat = 5 * time.Second

// TagVariable is set in every agent's environment to its invocation id;
// descendants that keep their environment carry it, which lets Lemo find
// and stop processes that left the agent's process group.
const TagVariable = "DELEGATE_INVOCATION"

// run is one invocation: it owns the call's view of the agent session and
// turns its events into state updates and the result.
type run struct {
	t     *Tools
	ctx   context.Context
	call  tools.Call
	emit  tools.Emit
	in    runInput
	ws    string
	inv   string
	begin time.Time

	entry   *Entry // the session being continued, if any
	release func() // frees the continued session for other invocations
	sess    *agentSession
	h       tools.SessionHandle
	proj    projector
	phase   string
	pid     int
	lastOut time.Time

	sessionID string
	promptID  string // the wire id of the prompt command
	accepted  bool   // the agent accepted the prompt
	asked     bool   // a final get_last_assistant_text is on its way
	timedOut  bool
	closed    error // the session ended by itself

	steerMu sync.Mutex
	replies []*onceReply    // steering answers that may still be owed
	held    []*steerRequest // steering that waits for the prompt's acceptance
}

func newRun(t *Tools, call tools.Call, emit tools.Emit, in runInput, ws string) *run {
	if emit == nil {
		emit = func(json.RawMessage) error { return nil }
	}
	return &run{t: t, call: call, emit: emit, in: in, ws: ws, inv: newInvocationID(), begin: time.Now(), phase: PhaseStarting}
}

func newInvocationID() string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return "dlg-" + time.Now().UTC().Format("20060102T150405") + "-" + hex.EncodeToString(b)
}

// execute runs the invocation to its end.
func (r *run) execute(ctx context.Context) (json.RawMessage, error) {
	cfg := &r.t.cfg
	sessionDir, resumeFile := r.t.catalog.lemoDir, ""
	if r.in.Resume != "" {
		e, err := r.t.catalog.Find(Scope{TaskID: r.call.TaskID}, r.in.Resume)
		if err != nil {
			return nil, err
		}
		if filepath.Clean(e.Cwd) != r.ws {
			return nil, fmt.Errorf("delegate: session %s was started in another folder than this Task's workspace; it can only be continued there", e.ID)
		}
		release, err := r.t.catalog.acquire(e.ID, r.inv)
		if err != nil {
			return nil, err
		}
		// The session releases it once the agent is gone (a cancelled
		// call returns before that); until the session starts, we do.
		r.release = release
		defer func() {
			if r.release != nil {
				r.release()
			}
		}()
		r.entry = &e
		// The folder comes from the discovered file, never from the caller
		// or from a path inside the session.
		sessionDir, resumeFile = filepath.Dir(e.Path), e.Path
		r.sessionID = e.ID
	}
	if err := r.t.catalog.prepare(); err != nil {
		return nil, err
	}
	if cfg.Kind == KindPi && cfg.Approval == ApprovalAsk {
		if err := r.t.writeExtension(); err != nil {
			return nil, err
		}
	}
	bin, err := r.t.binary()
	if err != nil {
		return nil, err
	}
	tag := TagVariable + "=" + r.inv
	env := append(append(append([]string(nil), r.t.env...), tag), isolation.Tags(cfg.RunTag, r.call.TaskID, r.call.CallID)...)
	spec := procSpec{path: bin, args: r.t.args(sessionDir, resumeFile), env: env, dir: r.ws, tag: tag, ns: cfg.Namespaces}
	limits := sessionLimits{exitGrace: cfg.ExitGrace, killGrace: cfg.KillGrace, maxLine: cfg.MaxLineBytes}
	log := cfg.Log.With().Str("task", r.call.TaskID).Str("call", r.call.CallID).Str("invocation", r.inv).Logger()
	r.sess = newAgentSession(spec, cfg.Kind, limits, r.call.Approvals, log)
	r.sess.release = r.release
	r.h, err = r.call.Sessions.Start("agent", r.sess)
	if err != nil {
		return nil, fmt.Errorf("delegate: %w", err)
	}
	r.release = nil // the session's now
	defer r.replyAll(fmt.Errorf("%w: the run has ended", ErrClosed))
	return r.loop(ctx)
}

func (r *run) loop(ctx context.Context) (json.RawMessage, error) {
	r.ctx = ctx
	cfg := &r.t.cfg
	timeout := cfg.RunTimeout
	if r.in.TimeoutSeconds > 0 {
		timeout = min(time.Duration(r.in.TimeoutSeconds)*time.Second, cfg.MaxRunTimeout)
	}
	runTimer := time.NewTimer(timeout)
	defer runTimer.Stop()
	tick := time.NewTicker(cfg.StateInterval)
	defer tick.Stop()
	if err := r.flush(true); err != nil {
		return nil, err
	}
	r.request(tagState, map[string]any{"type": "get_state"}, cfg.StartTimeout)
	for {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case ev := <-r.sess.events:
			if res, done, err := r.onEvent(ev); done || err != nil {
				return res, err
			}
		case st := <-r.call.Steer:
			r.onSteer(st)
		case <-tick.C:
			if err := r.flush(false); err != nil {
				return nil, err
			}
		case <-runTimer.C:
			if res, done, err := r.onTimeout(); done || err != nil {
				return res, err
			}
		case <-r.h.Done():
			// The session ended without an evClosed (it could not start, or
			// its actor was stopped): read what it did report first.
			if res, done, err := r.drainEvents(); done || err != nil {
				return res, err
			}
			if err := r.h.Err(); err != nil && r.pid == 0 {
				return nil, err
			}
			return r.finish(StatusFailed, "", fmt.Errorf("%w: the agent session ended", ErrClosed))
		}
	}
}

// drainEvents handles the events still queued.
func (r *run) drainEvents() (json.RawMessage, bool, error) {
	for {
		select {
		case ev := <-r.sess.events:
			if res, done, err := r.onEvent(ev); done || err != nil {
				return res, done, err
			}
		default:
			return nil, false, nil
		}
	}
}

// request sends one of the run's own commands through the session.
func (r *run) request(tag string, cmd map[string]any, timeout time.Duration) bool {
	return r.h.Send(&request{tag: tag, command: cmd, timeout: timeout})
}

// onEvent handles one session event; done reports that the run is over.
func (r *run) onEvent(ev sessionEvent) (json.RawMessage, bool, error) {
	cfg := &r.t.cfg
	switch ev.kind {
	case evStarted:
		r.pid = ev.pid
		return nil, false, r.flush(true)
	case evResponse:
		return r.onResponse(ev)
	case evLate:
		if f := ev.frame; f != nil && r.promptID != "" && f.ID == r.promptID && !f.Success && !r.proj.running && !r.proj.ended {
			// omp acknowledges a prompt, then may reject it under the same id.
			res, err := r.finish(StatusFailed, "", &AgentError{Command: "prompt", Message: Short(f.Error, maxErrorText)})
			return res, true, err
		}
		r.proj.sum.IgnoredFrames++
	case evFrame:
		r.proj.apply(ev.frame)
		if ev.frame.Type == "agent_end" && r.accepted && r.proj.terminal && !r.asked {
			r.asked = true
			if !r.request(tagFinal, map[string]any{"type": "get_last_assistant_text"}, cfg.CommandTimeout) {
				res, err := r.finishRun("")
				return res, true, err
			}
		}
	case evApproval:
		r.onApproval(ev)
	case evDialog:
		if len(ev.text) > 8 && ev.text[:8] == "rejected" {
			r.proj.sum.Approvals.Rejected++
		} else {
			r.proj.sum.Approvals.Declined++
		}
		r.proj.add(LiveEvent{Type: "dialog", Outcome: Short(ev.text, 128)})
	case evNotice:
		r.proj.add(LiveEvent{Type: "notice", Reason: Short(ev.outcome, 16), Text: Short(ev.text, 1024)})
	case evSteer:
		le := LiveEvent{Type: ev.tag, Outcome: "accepted"}
		switch {
		case ev.err == nil:
			switch ev.tag {
			case "steer":
				r.proj.sum.Steers++
			case "follow_up":
				r.proj.sum.FollowUps++
			case "abort":
				r.proj.sum.Aborts++
			}
		case errors.Is(ev.err, ErrOutcomeUnknown):
			le.Outcome = "unknown"
		default:
			le.Outcome, le.Error = "rejected", Short(ev.err.Error(), maxErrorText)
		}
		r.proj.add(le)
	case evProtocol:
		r.proj.sum.ProtocolErrors++
		r.proj.add(LiveEvent{Type: "protocol_error", Text: Short(ev.text, 512)})
	case evClosed:
		r.closed = ev.err
		if r.accepted && r.proj.ended && !r.proj.running && !r.proj.retrying {
			// It had finished the prompt: only the final query was lost.
			res, err := r.finishRun(r.proj.lastAnswer)
			return res, true, err
		}
		res, err := r.finish(StatusFailed, "", fmt.Errorf("the agent ended the session before finishing: %w", ev.err))
		return res, true, err
	}
	return nil, false, nil
}

func (r *run) onResponse(ev sessionEvent) (json.RawMessage, bool, error) {
	cfg := &r.t.cfg
	var refusal error
	if ev.err != nil {
		refusal = ev.err
	} else if !ev.frame.Success {
		refusal = &AgentError{Command: ev.frame.Command, Message: Short(ev.frame.Error, maxErrorText)}
	}
	fail := func(err error) (json.RawMessage, bool, error) {
		res, e := r.finish(StatusFailed, "", err)
		return res, true, e
	}
	switch ev.tag {
	case tagState:
		if refusal != nil {
			return fail(fmt.Errorf("the agent did not start: %w", refusal))
		}
		var st struct {
			SessionID   string `json:"sessionId"`
			SessionFile string `json:"sessionFile"`
		}
		_ = json.Unmarshal(ev.frame.Data, &st)
		if r.entry != nil && st.SessionID != r.entry.ID {
			return fail(fmt.Errorf("the agent opened session %q instead of %s", Short(st.SessionID, 64), r.entry.ID))
		}
		if r.entry == nil {
			if err := r.recordSession(st.SessionID, st.SessionFile); err != nil {
				return fail(err)
			}
		}
		r.sessionID = st.SessionID
		r.phase = PhaseRunning
		if err := r.flush(true); err != nil {
			return nil, true, err
		}
		if !r.request(tagPrompt, map[string]any{"type": "prompt", "message": r.in.Prompt}, cfg.StartTimeout) {
			return fail(fmt.Errorf("%w: the prompt could not be sent", ErrClosed))
		}
	case tagPrompt:
		if ev.frame != nil {
			r.promptID = ev.frame.ID
		}
		if refusal != nil {
			return fail(fmt.Errorf("the prompt was not accepted: %w", refusal))
		}
		r.accepted = true
		for _, sr := range r.held {
			r.sendSteer(sr)
		}
		r.held = nil
		if r.proj.ended && r.proj.terminal && !r.asked {
			// The run ended before its acknowledgement arrived.
			r.asked = true
			r.request(tagFinal, map[string]any{"type": "get_last_assistant_text"}, cfg.CommandTimeout)
		}
	case tagFinal:
		r.asked = false
		if r.proj.running || r.proj.retrying {
			return nil, false, nil // it went on (auto-retry, or a follow-up)
		}
		answer := r.proj.lastAnswer
		if refusal == nil {
			var d struct {
				Text *string `json:"text"`
			}
			if json.Unmarshal(ev.frame.Data, &d) == nil && d.Text != nil {
				answer = *d.Text
			}
		}
		res, err := r.finishRun(answer)
		return res, true, err
	case tagAbort:
		if refusal != nil && !r.proj.ended {
			res, err := r.finish(StatusTimedOut, "", fmt.Errorf("the run timed out and could not be aborted: %w", refusal))
			return res, true, err
		}
	}
	return nil, false, nil
}

// recordSession notes that this Task created the session.
func (r *run) recordSession(id, file string) error {
	if !validSessionID.MatchString(id) {
		return fmt.Errorf("the agent reported session id %q, which Lemo does not accept", Short(id, 64))
	}
	if !samePath(filepath.Dir(file), r.t.catalog.lemoDir) {
		return fmt.Errorf("the agent keeps its session outside Lemo's delegate folder (%s)", Short(file, 256))
	}
	return r.t.catalog.writeRecord(record{
		SessionID: id, Kind: r.t.cfg.Kind, File: filepath.Base(file), TaskID: r.call.TaskID, Owner: r.call.Owner,
		CallID: r.call.CallID, Invocation: r.inv, Created: time.Now().UTC(),
	})
}

func (r *run) onApproval(ev sessionEvent) {
	a := &r.proj.sum.Approvals
	switch ev.outcome {
	case "asked":
		a.Asked++
	case "approved":
		a.Approved++
	case "denied":
		a.Denied++
	case "timed_out":
		a.TimedOut++
	case "cancelled":
		a.Cancelled++
	case "abandoned":
		a.Abandoned++
	}
	r.proj.add(LiveEvent{Type: "approval", Tool: Short(ev.tool, 128), Outcome: Short(ev.outcome, 32), Text: Short(ev.text, 512)})
}

// onTimeout aborts a run that took too long; it ends at the agent's
// agent_end, or at once if the abort cannot be sent.
func (r *run) onTimeout() (json.RawMessage, bool, error) {
	r.timedOut = true
	r.proj.add(LiveEvent{Type: "timeout"})
	if !r.accepted || !r.request(tagAbort, map[string]any{"type": "abort"}, r.t.cfg.CommandTimeout) {
		res, err := r.finish(StatusTimedOut, "", errors.New("the run timed out"))
		return res, true, err
	}
	return nil, false, nil
}

// onceReply answers a steering input exactly once, whoever comes first:
// the session (the agent's answer) or the run (the session ended).
type onceReply struct {
	once  sync.Once
	reply func(error)
}

func (o *onceReply) answer(err error) { o.once.Do(func() { o.reply(err) }) }

func (r *run) onSteer(st tools.Steering) {
	o := &onceReply{reply: st.Reply}
	var in struct {
		Kind    string `json:"kind"`
		Message string `json:"message"`
	}
	if err := json.Unmarshal(st.Input, &in); err != nil {
		o.answer(fmt.Errorf("delegate: steering input: %w", err))
		return
	}
	if r.closed != nil {
		o.answer(fmt.Errorf("%w: %v", ErrClosed, r.closed))
		return
	}
	r.steerMu.Lock()
	r.replies = append(r.replies, o)
	r.steerMu.Unlock()
	sr := &steerRequest{kind: in.Kind, message: in.Message, timeout: r.t.cfg.CommandTimeout, reply: o.answer}
	if !r.accepted {
		// Steering addresses the run: it waits for the prompt to be
		// accepted (an abort sent before would abort nothing).
		r.held = append(r.held, sr)
		return
	}
	r.sendSteer(sr)
}

func (r *run) sendSteer(sr *steerRequest) {
	if !r.h.Send(sr) {
		sr.reply(fmt.Errorf("%w or busy: the steering was not sent", ErrClosed))
	}
}

// replyAll answers every steering input still owed.
func (r *run) replyAll(err error) {
	r.steerMu.Lock()
	rs := r.replies
	r.replies = nil
	r.steerMu.Unlock()
	for _, o := range rs {
		o.answer(err)
	}
}

// flush emits a state update: always when force, else when there are new
// events or the heartbeat is due.
func (r *run) flush(force bool) error {
	events, dropped := r.proj.take()
	if !force && len(events) == 0 && time.Since(r.lastOut) < heartbeat {
		return nil
	}
	if events == nil {
		events = []LiveEvent{}
	}
	st := State{Phase: r.phase, Invocation: r.inv, SessionID: r.sessionID, Resumed: r.entry != nil, PID: r.pid,
		ElapsedMS: time.Since(r.begin).Milliseconds(), Events: events, DroppedEvents: dropped, Usage: r.proj.sum.Usage}
	b, err := marshal(st)
	if err != nil {
		return fmt.Errorf("delegate: state: %w", err)
	}
	r.lastOut = time.Now()
	if err := r.emit(b); err != nil {
		return fmt.Errorf("delegate: state update refused: %w", err)
	}
	return nil
}

// finishRun ends a run whose agent finished its prompt: the status follows
// the last assistant message's stop reason.
func (r *run) finishRun(answer string) (json.RawMessage, error) {
	status, runErr := StatusFinished, error(nil)
	switch {
	case r.timedOut:
		status, runErr = StatusTimedOut, errors.New("the run timed out and was aborted")
	case r.proj.stopReason == "aborted":
		status = StatusAborted
	case r.proj.stopReason == "error":
		status, runErr = StatusFailed, errors.New(r.proj.errorMessage)
	}
	return r.finish(status, answer, runErr)
}

// finish stops the agent (stdin EOF first), waits for it, and builds the
// result.
func (r *run) finish(status, answer string, runErr error) (json.RawMessage, error) {
	r.phase = PhaseFinishing
	if err := r.flush(true); err != nil {
		return nil, err
	}
	r.h.Stop()
	cfg := &r.t.cfg
	wait := time.NewTimer(cfg.ExitGrace + 2*cfg.KillGrace + 10*time.Second)
	defer wait.Stop()
	for done := false; !done; {
		select {
		case <-r.h.Done():
			done = true
		case <-r.sess.events:
		case st := <-r.call.Steer:
			st.Reply(fmt.Errorf("%w: the run is ending", ErrClosed))
		case <-wait.C:
			done = true
		case <-r.ctx.Done():
			return nil, r.ctx.Err()
		}
	}
	r.replyAll(fmt.Errorf("%w: the run has ended", ErrClosed))
	res := Result{
		Invocation: r.inv, SessionID: r.sessionID, Resumed: r.entry != nil, Kind: cfg.Kind, Status: status,
		StopReason: Short(r.proj.stopReason, 64), Summary: r.proj.sum, DurationMS: time.Since(r.begin).Milliseconds(),
	}
	if res.Summary.Tools == nil {
		res.Summary.Tools = []ToolRun{}
	}
	if runErr != nil {
		res.Error, _ = Bound(runErr.Error(), maxErrorText)
	}
	res.FinalAnswer, res.FinalAnswerTruncated = Bound(answer, cfg.AnswerBytes)
	select {
	case <-r.h.Done():
		if r.sess.exited {
			x := r.sess.exit
			res.Exit = &ExitInfo{Code: x.Code, Signal: x.Signal, Term: x.Term, Kill: x.Kill, Stragglers: x.Stragglers}
			if !x.clean() || status == StatusFailed {
				res.Exit.Stderr = tailExcerpt(r.sess.stderrTail, 2048)
			}
		}
	default:
	}
	r.phase = PhaseEnded
	if err := r.flush(true); err != nil {
		return nil, err
	}
	if status == StatusFailed && r.sessionID == "" {
		// Nothing happened in a session: a tool failure, not a result.
		msg := res.Error
		if res.Exit != nil {
			msg += " (" + r.sess.exit.String()
			if res.Exit.Stderr != "" {
				msg += "; stderr: " + res.Exit.Stderr
			}
			msg += ")"
		}
		return nil, fmt.Errorf("delegate: %s", msg)
	}
	return marshal(res)
}

// marshal encodes without escaping <, > and &: the texts are data, and
// escaping would let them grow sixfold.
func marshal(v any) (json.RawMessage, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

// samePath reports whether a and b name the same folder (symlinks
// resolved).
func samePath(a, b string) bool {
	if filepath.Clean(a) == filepath.Clean(b) {
		return true
	}
	ra, err1 := filepath.EvalSymlinks(a)
	rb, err2 := filepath.EvalSymlinks(b)
	return err1 == nil && err2 == nil && ra == rb
}
