package delegate

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"lemo/tools"
)

// The fake agent's misbehaviours: each must end in a clear result or error,
// with no process left (checked by the rig).

func TestAgentCrashMidRun(t *testing.T) {
	r := newRig(t, nil)
	res := r.must(map[string]any{"prompt": "please CRASH"}, runOpts{})
	if res.Status != StatusFailed || !strings.Contains(res.Error, "ended the session before finishing") {
		t.Fatalf("result = %+v", res)
	}
	if res.Exit == nil || res.Exit.Code != 3 || !strings.Contains(res.Exit.Stderr, "crashing on purpose") {
		t.Fatalf("exit = %+v", res.Exit)
	}
	if !hasEvent(r.events(), func(e LiveEvent) bool { return e.Type == "text" && e.Text == "about to crash" }) {
		t.Fatalf("what the agent said before crashing is lost: %+v", r.events())
	}
}

func TestAgentThatCannotStart(t *testing.T) {
	cases := []struct {
		name   string
		mutate func(*Config)
		want   string
	}{
		{"exits at once", func(c *Config) { c.Args = []string{"--fake-stderr", "Error: no models", "--fake-exit", "7"} }, "exit code 7; stderr: Error: no models"},
		{"silent", func(c *Config) {
			c.Args, c.StartTimeout = []string{"--fake-silent"}, 300*time.Millisecond
		}, "did not answer in time"},
		{"not installed", func(c *Config) { c.Binary = "/nonexistent/pi" }, "/nonexistent/pi"},
		{"not on PATH", func(c *Config) { c.Binary = "no-such-agent-binary" }, "not installed"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := newRig(t, c.mutate)
			_, err := r.run(map[string]any{"prompt": "hello"}, runOpts{})
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err = %v, want one containing %q", err, c.want)
			}
		})
	}
}

// An agent that ignores stdin EOF gets SIGTERM after ExitGrace; one that
// also ignores SIGTERM gets SIGKILL after KillGrace.
func TestAgentIgnoringEOFIsTerminated(t *testing.T) {
	cases := []struct {
		args       []string
		term, kill bool
	}{
		{[]string{"--fake-ignore-eof"}, true, false},
		{[]string{"--fake-ignore-eof", "--fake-ignore-term"}, true, true},
	}
	for _, c := range cases {
		t.Run(strings.Join(c.args, " "), func(t *testing.T) {
			r := newRig(t, func(cfg *Config) { cfg.ExitGrace, cfg.KillGrace = 200*time.Millisecond, 200*time.Millisecond }, c.args...)
			begin := time.Now()
			res := r.must(map[string]any{"prompt": "hello"}, runOpts{})
			if res.Status != StatusFinished || res.Exit == nil || res.Exit.Term != c.term || res.Exit.Kill != c.kill || res.Exit.Signal == "" {
				t.Fatalf("result = %+v, exit %+v", res, res.Exit)
			}
			if d := time.Since(begin); d > 5*time.Second {
				t.Fatalf("took %v", d)
			}
		})
	}
}

// Descendants that leave the agent's process group (pi runs bash detached)
// are found by the run's variable and stopped.
func TestDetachedDescendantsAreStopped(t *testing.T) {
	r := newRig(t, nil)
	res := r.must(map[string]any{"prompt": "start a CHILD"}, runOpts{})
	if !strings.HasPrefix(res.FinalAnswer, "child ") || res.Exit == nil || res.Exit.Stragglers != 1 {
		t.Fatalf("result = %+v, exit %+v", res, res.Exit)
	}
}

func TestGarbageAndUnknownFramesAreSurvived(t *testing.T) {
	r := newRig(t, nil)
	res := r.must(map[string]any{"prompt": "GARBAGE please"}, runOpts{})
	if res.Status != StatusFinished || res.FinalAnswer != "survived the garbage" {
		t.Fatalf("result = %+v", res)
	}
	if res.Summary.ProtocolErrors < 5 || res.Summary.IgnoredFrames < 2 {
		t.Fatalf("summary = %+v", res.Summary)
	}
}

func TestHugeAndTooLongLines(t *testing.T) {
	r := newRig(t, nil)
	res := r.must(map[string]any{"prompt": "HUGE output"}, runOpts{})
	if res.Status != StatusFinished || !res.FinalAnswerTruncated || len(res.FinalAnswer) > r.cfg.AnswerBytes || !strings.HasPrefix(res.FinalAnswer, "huge done") {
		t.Fatalf("huge: status %s, answer %d bytes, truncated %v", res.Status, len(res.FinalAnswer), res.FinalAnswerTruncated)
	}
	if out := res.Summary.Tools[0].Output; len(out) > maxToolText {
		t.Fatalf("tool output kept: %d bytes", len(out))
	}
	for _, e := range r.events() {
		if len(e.Text) > maxLiveText {
			t.Fatalf("live event of %d bytes", len(e.Text))
		}
	}

	r = newRig(t, func(c *Config) { c.MaxLineBytes = 64 << 10 })
	res = r.must(map[string]any{"prompt": "TOOLONG line"}, runOpts{})
	if res.Status != StatusFinished || res.FinalAnswer != "after the long line" || res.Summary.ProtocolErrors != 1 {
		t.Fatalf("too long: %+v", res)
	}
	if !hasEvent(r.events(), func(e LiveEvent) bool {
		return e.Type == "protocol_error" && strings.Contains(e.Text, "exceeds the 65536-byte limit")
	}) {
		t.Fatalf("no protocol error shown: %+v", r.events())
	}
}

func TestTextFromTheAgentIsCleaned(t *testing.T) {
	r := newRig(t, nil)
	res := r.must(map[string]any{"prompt": "ANSI colours"}, runOpts{})
	if res.FinalAnswer != "red ALERT evil bell nul ok" {
		t.Fatalf("answer = %q", res.FinalAnswer)
	}
}

func TestUIRequestsAreDeclinedAndHostRequestsRejected(t *testing.T) {
	r := newRig(t, nil)
	ap := approveAll()
	res := r.must(map[string]any{"prompt": "show some UI"}, runOpts{approvals: ap})
	want := "ui: select=cancelled input=cancelled editor=cancelled confirm=cancelled mystery_dialog=cancelled host_tool_call=error host_uri_request=error"
	if res.FinalAnswer != want {
		t.Fatalf("answer = %q, want %q", res.FinalAnswer, want)
	}
	if a := res.Summary.Approvals; a.Declined != 5 || a.Rejected != 2 || a.Asked != 0 || len(ap.reasons()) != 0 {
		t.Fatalf("approvals = %+v, asked %q", a, ap.reasons())
	}
	if !hasEvent(r.events(), func(e LiveEvent) bool { return e.Type == "notice" && e.Text == "hello from the agent" }) {
		t.Fatalf("notify not shown cleaned: %+v", r.events())
	}
}

// pi's auto-retry emits agent_end for the failed attempt, then
// auto_retry_start: the run is not over.
func TestAutoRetryIsNotTheEnd(t *testing.T) {
	r := newRig(t, nil)
	res := r.must(map[string]any{"prompt": "RETRY once"}, runOpts{})
	if res.Status != StatusFinished || res.FinalAnswer != "second attempt worked" || res.Summary.Retries != 1 {
		t.Fatalf("result = %+v", res)
	}
}

func TestAgentErrorFailsTheRun(t *testing.T) {
	r := newRig(t, nil)
	res := r.must(map[string]any{"prompt": "FAIL now"}, runOpts{})
	if res.Status != StatusFailed || res.StopReason != "error" || res.SessionID == "" {
		t.Fatalf("result = %+v", res)
	}
}

func TestRunTimeout(t *testing.T) {
	r := newRig(t, func(c *Config) { c.CommandTimeout = 500 * time.Millisecond })
	res := r.must(map[string]any{"prompt": "go SLOW", "timeout_seconds": 1}, runOpts{})
	if res.Status != StatusTimedOut || !strings.Contains(res.Error, "timed out and was aborted") {
		t.Fatalf("slow: %+v", res)
	}
	// An agent that ignores the abort: the run ends when the abort's
	// deadline passes.
	res = r.must(map[string]any{"prompt": "HANG", "timeout_seconds": 1}, runOpts{})
	if res.Status != StatusTimedOut || !strings.Contains(res.Error, "could not be aborted") {
		t.Fatalf("hang: %+v", res)
	}
}

// Cancelling the call returns at once; the end of the call stops the agent.
func TestCancelledCall(t *testing.T) {
	r := newRig(t, nil)
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		_, err := r.run(map[string]any{"prompt": "go SLOW"}, runOpts{ctx: ctx})
		errc <- err
	}()
	eventually(t, 10*time.Second, "the agent streaming", func() error {
		if !hasEvent(r.events(), func(e LiveEvent) bool { return e.Type == "text" }) {
			return errNotYet
		}
		return nil
	})
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
}

// A pending approval the agent abandons (the turn was aborted) is
// cancelled; for omp the agent says so with a "cancel" request.
func TestAbandonedApprovalIsCancelled(t *testing.T) {
	for _, c := range []struct{ kind, prompt string }{
		{KindPi, "ABANDON the dialog"},
		{KindOmp, "ABANDON the dialog"},
		{KindOmp, "ABANDON the dialog NOCALL"}, // only agent_end tells
	} {
		t.Run(c.kind+" "+c.prompt, func(t *testing.T) {
			r := newRig(t, nil, "--fake-kind", c.kind)
			asked := make(chan struct{}, 1)
			ended := make(chan error, 1)
			ap := &fakeApprovals{decide: func(ctx context.Context, _ string, _ time.Duration) (tools.Decision, error) {
				asked <- struct{}{}
				<-ctx.Done()
				ended <- ctx.Err()
				return tools.Decision{}, ctx.Err()
			}}
			steer := make(chan tools.Steering, 1)
			done := r.async(map[string]any{"prompt": c.prompt}, runOpts{approvals: ap, steer: steer})
			<-asked
			if err := waitAnswer(t, steerAsync(steer, `{"kind":"abort"}`), 10*time.Second); err != nil {
				t.Fatalf("abort: %v", err)
			}
			if err := <-ended; !errors.Is(err, context.Canceled) {
				t.Fatalf("the approval ended with %v, want cancelled", err)
			}
			res := await(t, done)
			if res.Status != StatusAborted || res.Summary.Approvals.Abandoned != 1 || res.Summary.Approvals.Asked != 1 {
				t.Fatalf("result = %+v", res)
			}
		})
	}
}

// A dialog the agent gives up on by itself while its run goes on (pi: the
// dialog's own timeout, which is also the approval's deadline; omp: a
// "cancel" request) cancels the pending approval at once.
func TestDialogGivenUpByTheAgent(t *testing.T) {
	for _, kind := range []string{KindPi, KindOmp} {
		t.Run(kind, func(t *testing.T) {
			r := newRig(t, nil, "--fake-kind", kind)
			deadlines := make(chan time.Duration, 1)
			ended := make(chan error, 1)
			ap := &fakeApprovals{decide: func(ctx context.Context, _ string, d time.Duration) (tools.Decision, error) {
				deadlines <- d
				<-ctx.Done()
				ended <- ctx.Err()
				return tools.Decision{}, ctx.Err()
			}}
			steer := make(chan tools.Steering, 1)
			done := r.async(map[string]any{"prompt": "EXPIRE"}, runOpts{approvals: ap, steer: steer})
			want := time.Duration(0)
			if kind == KindPi {
				want = 100 * time.Millisecond
			}
			if d := <-deadlines; d != want {
				t.Fatalf("approval deadline = %v, want %v", d, want)
			}
			select {
			case err := <-ended:
				if !errors.Is(err, context.Canceled) {
					t.Fatalf("the approval ended with %v", err)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("the approval the agent gave up on is still pending")
			}
			if err := waitAnswer(t, steerAsync(steer, `{"kind":"steer","message":"go on"}`), 10*time.Second); err != nil {
				t.Fatal(err)
			}
			res := await(t, done)
			if res.FinalAnswer != "expired, then: go on" || res.Summary.Approvals.Abandoned != 1 {
				t.Fatalf("result = %+v", res)
			}
		})
	}
}

// A pending approval is cancelled when the session ends (the call was
// cancelled).
func TestPendingApprovalEndsWithTheSession(t *testing.T) {
	r := newRig(t, nil)
	asked := make(chan struct{}, 1)
	ended := make(chan error, 1)
	ap := &fakeApprovals{decide: func(ctx context.Context, _ string, _ time.Duration) (tools.Decision, error) {
		asked <- struct{}{}
		<-ctx.Done()
		ended <- ctx.Err()
		return tools.Decision{}, ctx.Err()
	}}
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		_, err := r.run(map[string]any{"prompt": "run a TOOL"}, runOpts{approvals: ap, ctx: ctx})
		errc <- err
	}()
	<-asked
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v", err)
	}
	if err := <-ended; !errors.Is(err, context.Canceled) {
		t.Fatalf("the approval ended with %v, want cancelled", err)
	}
}

func TestOmpFlavour(t *testing.T) {
	r := newRig(t, func(c *Config) { c.Kind = KindOmp }, "--fake-kind", "omp")
	ap := approveAll()
	res := r.must(map[string]any{"prompt": "run a TOOL"}, runOpts{approvals: ap})
	if res.Status != StatusFinished || res.Kind != KindOmp || res.FinalAnswer != "Done. The tool said: hello-from-tool" || res.Summary.Approvals.Approved != 1 {
		t.Fatalf("result = %+v", res)
	}
	if reasons := ap.reasons(); len(reasons) != 1 || !strings.Contains(reasons[0], "use bash") {
		t.Fatalf("reasons = %q", reasons)
	}
	// omp acknowledges a prompt, then rejects it under the same id.
	res = r.must(map[string]any{"prompt": "PROMPT2"}, runOpts{})
	if res.Status != StatusFailed || !strings.Contains(res.Error, "Agent is already processing") {
		t.Fatalf("second response: %+v", res)
	}
}
