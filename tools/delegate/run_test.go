package delegate

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"lemo/tools"
)

func TestRunFinishes(t *testing.T) {
	r := newRig(t, nil)
	res := r.must(map[string]any{"prompt": "hello there"}, runOpts{})
	if res.Status != StatusFinished || res.FinalAnswer != "fake answer to: hello there" {
		t.Fatalf("result = %+v", res)
	}
	if !validSessionID.MatchString(res.SessionID) || res.Resumed || res.Kind != KindPi || !strings.HasPrefix(res.Invocation, "dlg-") {
		t.Fatalf("ids: %+v", res)
	}
	if res.Exit == nil || res.Exit.Code != 0 || res.Exit.Term || res.Exit.Kill {
		t.Fatalf("the agent did not exit cleanly on EOF: %+v", res.Exit)
	}
	if res.Summary.AssistantMessages != 1 || res.Summary.Usage.Total != 52 || res.Summary.Usage.Input != 40 {
		t.Fatalf("summary = %+v", res.Summary)
	}
	// New history is in Lemo's private folder, flat, with a record of the Task.
	fi, err := os.Stat(r.dt.catalog.lemoDir)
	if err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("session folder: %v %v", fi, err)
	}
	files, _ := filepath.Glob(filepath.Join(r.dt.catalog.lemoDir, "*.jsonl"))
	if len(files) != 1 || !strings.Contains(files[0], res.SessionID) {
		t.Fatalf("session files = %v", files)
	}
	rec, ok := r.dt.catalog.readRecord(res.SessionID)
	if !ok || rec.TaskID != "task-1" || rec.Owner != "alice" || rec.Invocation != res.Invocation {
		t.Fatalf("record = %+v %v", rec, ok)
	}
	evs := r.events()
	if !hasEvent(evs, func(e LiveEvent) bool { return e.Type == "text" && strings.Contains(e.Text, "Hello") }) ||
		!hasEvent(evs, func(e LiveEvent) bool { return e.Type == "agent_end" && e.StopReason == "stop" }) {
		t.Fatalf("live events = %+v", evs)
	}
	if st := r.lastState(); st.Phase != PhaseEnded || st.SessionID != res.SessionID || st.PID == 0 {
		t.Fatalf("last state = %+v", st)
	}
}

func TestToolCallApprovedThroughLemo(t *testing.T) {
	r := newRig(t, nil)
	ap := approveAll()
	res := r.must(map[string]any{"prompt": "run a TOOL"}, runOpts{approvals: ap})
	if res.Status != StatusFinished || res.FinalAnswer != "Done. The tool said: hello-from-tool" {
		t.Fatalf("result = %+v", res)
	}
	s := res.Summary
	if s.ToolExecutions != 1 || len(s.Tools) != 1 || s.Tools[0].Tool != "bash" || !s.Tools[0].Done || s.Tools[0].IsError ||
		s.Tools[0].Output != "hello-from-tool\n" || !strings.Contains(s.Tools[0].Args, "echo hello-from-tool") {
		t.Fatalf("tools = %+v", s.Tools)
	}
	if s.Approvals.Asked != 1 || s.Approvals.Approved != 1 {
		t.Fatalf("approvals = %+v", s.Approvals)
	}
	reasons := ap.reasons()
	if len(reasons) != 1 || !strings.Contains(reasons[0], "bash") || !strings.Contains(reasons[0], "Command: echo hello-from-tool") ||
		strings.Contains(reasons[0], "lemo-approval") || !strings.Contains(reasons[0], "untrusted") {
		t.Fatalf("approval reasons = %q", reasons)
	}
	evs := r.events()
	for _, want := range []string{"tool_start", "tool_output", "tool_end", "approval"} {
		if !hasEvent(evs, func(e LiveEvent) bool { return e.Type == want }) {
			t.Errorf("no %s live event in %+v", want, evs)
		}
	}
}

func TestToolCallDenied(t *testing.T) {
	for name, ap := range map[string]tools.Approvals{
		"denied": &fakeApprovals{decide: func(context.Context, string, time.Duration) (tools.Decision, error) {
			return tools.Decision{Outcome: "denied", Reason: "no"}, nil
		}},
		"nobody to ask": nil,
		"ask fails": &fakeApprovals{decide: func(context.Context, string, time.Duration) (tools.Decision, error) {
			return tools.Decision{}, errors.New("the task is not running")
		}},
	} {
		t.Run(name, func(t *testing.T) {
			r := newRig(t, nil)
			res := r.must(map[string]any{"prompt": "run a TOOL"}, runOpts{approvals: ap})
			if res.FinalAnswer != "Done. The tool said: denied" || !res.Summary.Tools[0].IsError || res.Summary.ToolErrors != 1 {
				t.Fatalf("result = %+v", res)
			}
			if res.Summary.Approvals.Denied != 1 {
				t.Fatalf("approvals = %+v", res.Summary.Approvals)
			}
		})
	}
}

func TestApprovalOffRunsToolsWithoutAsking(t *testing.T) {
	r := newRig(t, func(c *Config) { c.Approval = ApprovalOff })
	ap := approveAll()
	res := r.must(map[string]any{"prompt": "run a TOOL"}, runOpts{approvals: ap})
	if res.FinalAnswer != "Done. The tool said: hello-from-tool" || len(ap.reasons()) != 0 {
		t.Fatalf("result = %+v, asked %q", res, ap.reasons())
	}
}

func TestAgentEnvironmentIsScrubbed(t *testing.T) {
	r := newRig(t, func(c *Config) { c.PassEnv = []string{"OPENAI_API_KEY"} })
	res := r.must(map[string]any{"prompt": "show ENV"}, runOpts{})
	names := strings.Split(strings.TrimPrefix(res.FinalAnswer, "env: "), ",")
	has := map[string]bool{}
	for _, n := range names {
		has[n] = true
	}
	for _, want := range []string{"PATH", "HOME", "LANG", TagVariable, markVar, "OPENAI_API_KEY", "PI_OFFLINE"} {
		if !has[want] {
			t.Errorf("the agent lacks %s: %v", want, names)
		}
	}
	for _, bad := range []string{"LEMO_TOKEN", "GITHUB_TOKEN", "PROVIDER_URL"} {
		if has[bad] {
			t.Errorf("the agent got %s: %v", bad, names)
		}
	}
}

func TestSteerFollowUpAndAbort(t *testing.T) {
	r := newRig(t, nil)
	steer := make(chan tools.Steering, 8)
	done := r.async(map[string]any{"prompt": "go SLOW"}, runOpts{steer: steer})
	eventually(t, 10*time.Second, "ticks", func() error {
		if !hasEvent(r.events(), func(e LiveEvent) bool { return e.Type == "text" && strings.Contains(e.Text, "tick") }) {
			return errNotYet
		}
		return nil
	})
	if err := waitAnswer(t, steerAsync(steer, `{"kind":"steer","message":"focus on tests"}`), 10*time.Second); err != nil {
		t.Fatalf("steer: %v", err)
	}
	res := await(t, done)
	if res.Status != StatusFinished || res.FinalAnswer != "steered: focus on tests" || res.Summary.Steers != 1 {
		t.Fatalf("result = %+v", res)
	}
	if !hasEvent(r.events(), func(e LiveEvent) bool { return e.Type == "message" && e.Role == "user" && e.Text == "focus on tests" }) {
		t.Fatalf("the steered message is not shown live: %+v", r.events())
	}

	// An abort sent while the agent starts waits for the prompt's
	// acceptance, then stops the run.
	r.reset()
	done = r.async(map[string]any{"prompt": "go SLOW"}, runOpts{steer: steer})
	if err := waitAnswer(t, steerAsync(steer, `{"kind":"abort"}`), 10*time.Second); err != nil {
		t.Fatalf("abort: %v", err)
	}
	res = await(t, done)
	if res.Status != StatusAborted || res.StopReason != "aborted" || res.Summary.Aborts != 1 {
		t.Fatalf("aborted result = %+v", res)
	}
}

func TestSteeringRejectedSilentAndOutOfOrder(t *testing.T) {
	r := newRig(t, func(c *Config) { c.CommandTimeout = 300 * time.Millisecond })
	steer := make(chan tools.Steering, 8)
	done := r.async(map[string]any{"prompt": "collect STEERS 2"}, runOpts{steer: steer})

	var ae *AgentError
	if err := waitAnswer(t, steerAsync(steer, `{"kind":"steer","message":"please REJECT"}`), 10*time.Second); !errors.As(err, &ae) || ae.Message != "steering refused" {
		t.Fatalf("refused steer: err = %v, want an AgentError", err)
	}
	// An id-less rejection is matched by command name.
	if err := waitAnswer(t, steerAsync(steer, `{"kind":"follow_up","message":"NOID"}`), 10*time.Second); !errors.As(err, &ae) || ae.Command != "follow_up" {
		t.Fatalf("id-less rejection: err = %v", err)
	}
	if err := waitAnswer(t, steerAsync(steer, `{"kind":"steer","message":"SILENT please"}`), 10*time.Second); !errors.Is(err, ErrOutcomeUnknown) {
		t.Fatalf("silence: err = %v, want ErrOutcomeUnknown", err)
	}
	// The agent answers the second before the first.
	first := steerAsync(steer, `{"kind":"steer","message":"HOLD one"}`)
	second := steerAsync(steer, `{"kind":"steer","message":"RELEASE two"}`)
	if err := waitAnswer(t, second, 10*time.Second); err != nil {
		t.Fatalf("second: %v", err)
	}
	if err := waitAnswer(t, first, 10*time.Second); err != nil {
		t.Fatalf("first: %v", err)
	}
	res := await(t, done)
	if res.FinalAnswer != "got: HOLD one | RELEASE two" || res.Summary.Steers != 2 {
		t.Fatalf("result = %+v", res)
	}
	if !hasEvent(r.events(), func(e LiveEvent) bool { return e.Type == "steer" && e.Outcome == "unknown" }) ||
		!hasEvent(r.events(), func(e LiveEvent) bool { return e.Type == "steer" && e.Outcome == "rejected" }) {
		t.Fatalf("steering outcomes are not shown live: %+v", r.events())
	}
}
