package delegate

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

func frame(t *testing.T, s string) *Frame {
	t.Helper()
	f, err := DecodeFrame([]byte(s))
	if err != nil {
		t.Fatalf("DecodeFrame(%s): %v", s, err)
	}
	return f
}

func TestClassifyUI(t *testing.T) {
	cases := []struct {
		in     string
		action uiAction
		check  func(uiRequest) bool
	}{
		{`{"type":"extension_ui_request","id":"u1","method":"confirm","title":"Allow tool: bash","message":"Command: ls\n\n[lemo-approval tool=bash call=call_7]"}`, uiApproval,
			func(r uiRequest) bool {
				return r.id == "u1" && r.tool == "bash" && r.callID == "call_7" && r.detail == "Allow tool: bash\nCommand: ls" && r.approve == ""
			}},
		{`{"type":"extension_ui_request","id":"u2","method":"select","title":"Allow tool: bash\nCommand: ls","options":["Approve","Deny"]}`, uiApproval,
			func(r uiRequest) bool {
				return r.tool == "bash" && r.approve == "Approve" && r.deny == "Deny" && r.callID == ""
			}},
		{`{"type":"extension_ui_request","id":"u3","method":"confirm","title":"Allow tool: bash","message":"x [lemo-approval tool=bash call=c]","timeout":1500}`, uiApproval,
			func(r uiRequest) bool { return r.timeout == 1500*time.Millisecond }},
		{`{"type":"extension_ui_request","id":"u4","method":"confirm","title":"Delete?","message":"no marker"}`, uiDecline, nil},
		{`{"type":"extension_ui_request","id":"u5","method":"select","title":"Pick","options":["Approve","Other"]}`, uiDecline, nil},
		{`{"type":"extension_ui_request","id":"u6","method":"input","title":"Name?"}`, uiDecline, nil},
		{`{"type":"extension_ui_request","id":"u7","method":"editor","title":"Edit"}`, uiDecline, nil},
		{`{"type":"extension_ui_request","id":"u8","method":"brand_new_dialog"}`, uiDecline, nil},
		{`{"type":"extension_ui_request","method":"brand_new_dialog"}`, uiIgnore, nil},
		{`{"type":"extension_ui_request","id":"u9","method":"notify","message":"hi","notifyType":"warning"}`, uiIgnore,
			func(r uiRequest) bool { return r.notice == "hi" && r.level == "warning" }},
		{`{"type":"extension_ui_request","id":"u10","method":"setWidget","widgetKey":"autoresearch"}`, uiIgnore, nil},
		{`{"type":"extension_ui_request","id":"u11","method":"open_url","url":"https://x"}`, uiIgnore, nil},
		{`{"type":"extension_ui_request","id":"u12","method":"cancel","targetId":"u2"}`, uiCancel, func(r uiRequest) bool { return r.target == "u2" }},
		{`{"type":"host_tool_call","id":"h1","toolName":"x"}`, uiReject, func(r uiRequest) bool { return r.frameType == "host_tool_call" }},
		{`{"type":"host_uri_request","id":"h2","url":"db://x"}`, uiReject, nil},
		{`{"type":"host_tool_cancel","id":"h3","targetId":"h1"}`, uiIgnore, nil},
	}
	for _, c := range cases {
		r, action := classifyUI(frame(t, c.in))
		if action != c.action || (c.check != nil && !c.check(r)) {
			t.Errorf("classifyUI(%s) = %+v, %v; want action %v", c.in, r, action, c.action)
		}
	}
}

func TestAnswers(t *testing.T) {
	confirm := uiRequest{id: "u1"}
	sel := uiRequest{id: "u2", approve: "Approve", deny: "Deny"}
	cases := map[string][]byte{
		`{"confirmed":true,"id":"u1","type":"extension_ui_response"}`:  answerApproval(confirm, true),
		`{"confirmed":false,"id":"u1","type":"extension_ui_response"}`: answerApproval(confirm, false),
		`{"id":"u2","type":"extension_ui_response","value":"Approve"}`: answerApproval(sel, true),
		`{"id":"u2","type":"extension_ui_response","value":"Deny"}`:    answerApproval(sel, false),
		`{"cancelled":true,"id":"u3","type":"extension_ui_response"}`:  answerDecline("u3"),
		`{"id":"h1","isError":true,"result":{"content":[{"text":"Lemo offers no host tools or host URI schemes to delegate agents","type":"text"}]},"type":"host_tool_result"}`: answerReject(uiRequest{id: "h1", frameType: "host_tool_call"}),
		`{"error":"Lemo offers no host tools or host URI schemes to delegate agents","id":"h2","isError":true,"type":"host_uri_result"}`:                                        answerReject(uiRequest{id: "h2", frameType: "host_uri_request"}),
	}
	for want, got := range cases {
		if string(got) != want {
			t.Errorf("answer = %s, want %s", got, want)
		}
	}
}

// A transcript as pi writes it: usage, tools, the end, and a retry.
func TestProjectorTranscript(t *testing.T) {
	var p projector
	for _, l := range []string{
		`{"type":"agent_start"}`,
		`{"type":"turn_start"}`,
		`{"type":"message_end","message":{"role":"user","content":[{"type":"text","text":"do it"}]}}`,
		`{"type":"message_update","assistantMessageEvent":{"type":"thinking_delta","delta":"hmm"}}`,
		`{"type":"message_end","message":{"role":"assistant","content":[{"type":"toolCall","id":"c1"}],"stopReason":"toolUse","usage":{"input":40,"output":12,"cacheRead":3,"cacheWrite":1,"totalTokens":56,"cost":{"total":0.5}}}}`,
		`{"type":"tool_execution_start","toolCallId":"c1","toolName":"bash","args":{"command":"ls"}}`,
		`{"type":"tool_execution_update","toolCallId":"c1","toolName":"bash","partialResult":{"content":[{"type":"text","text":"a"}]}}`,
		`{"type":"tool_execution_update","toolCallId":"c1","toolName":"bash","partialResult":{"content":[{"type":"text","text":"ab"}]}}`,
		`{"type":"tool_execution_end","toolCallId":"c1","toolName":"bash","result":{"content":[{"type":"text","text":"ab\n"}]},"isError":false}`,
		`{"type":"turn_start"}`,
		`{"type":"message_update","assistantMessageEvent":{"type":"text_delta","delta":"Done"}}`,
		`{"type":"message_update","assistantMessageEvent":{"type":"text_delta","delta":"."}}`,
		`{"type":"message_end","message":{"role":"assistant","content":[{"type":"text","text":"Done."}],"stopReason":"stop","usage":{"input":60,"output":2,"totalTokens":62}}}`,
		`{"type":"compaction_start","reason":"threshold"}`,
		`{"type":"compaction_end","reason":"threshold","aborted":false}`,
		`{"type":"queue_update","steering":["x"],"followUp":[]}`,
		`{"type":"something_new","x":1}`,
		`{"type":"agent_end","messages":[{"role":"assistant","content":[{"type":"text","text":"Done."}],"stopReason":"stop"}]}`,
	} {
		p.apply(frame(t, l))
	}
	s := p.sum
	if s.Turns != 2 || s.AssistantMessages != 2 || s.ToolExecutions != 1 || s.Compactions != 1 || s.IgnoredFrames != 1 ||
		s.Usage != (Usage{Input: 100, Output: 14, CacheRead: 3, CacheWrite: 1, Total: 118, Cost: 0.5}) {
		t.Fatalf("summary = %+v", s)
	}
	if tr := s.Tools[0]; tr != (ToolRun{CallID: "c1", Tool: "bash", Args: `{"command":"ls"}`, Output: "ab\n", Done: true}) {
		t.Fatalf("tool = %+v", tr)
	}
	if !p.ended || !p.terminal || p.running || p.stopReason != "stop" || p.lastAnswer != "Done." {
		t.Fatalf("end: %+v", p)
	}
	evs, dropped := p.take()
	var types []string
	for _, e := range evs {
		types = append(types, e.Type)
	}
	want := "agent_start message thinking message tool_start tool_output tool_end text message compaction compaction queue agent_end"
	if strings.Join(types, " ") != want || dropped != 0 {
		t.Fatalf("live events = %s, want %s", strings.Join(types, " "), want)
	}
	if evs[5].Text != "ab" || evs[7].Text != "Done." || evs[8].Text != "" {
		t.Fatalf("live texts: %+v", evs)
	}

	// pi's retry: agent_end, then auto_retry_start; omp's non-terminal end.
	var q projector
	q.apply(frame(t, `{"type":"agent_start"}`))
	q.apply(frame(t, `{"type":"agent_end","messages":[{"role":"assistant","stopReason":"error","errorMessage":"500"}]}`))
	q.apply(frame(t, `{"type":"auto_retry_start","attempt":1}`))
	if !q.retrying || q.sum.Retries != 1 {
		t.Fatalf("retry: %+v", q)
	}
	q.apply(frame(t, `{"type":"agent_end","messages":[],"isTerminal":false}`))
	if q.terminal {
		t.Fatal("isTerminal false read as terminal")
	}
}

func TestProjectorBounds(t *testing.T) {
	var p projector
	for i := 0; i < 200; i++ {
		p.apply(frame(t, `{"type":"tool_execution_start","toolCallId":"c`+strings.Repeat("x", i)+`","toolName":"bash","args":{"command":"`+strings.Repeat("y", 5000)+`"}}`))
	}
	big, _ := json.Marshal(strings.Repeat("z", 1<<20))
	p.apply(frame(t, `{"type":"message_update","assistantMessageEvent":{"type":"text_delta","delta":`+string(big)+`}}`))
	if len(p.sum.Tools) != maxToolRuns || p.sum.ToolsOmitted != 180 || len(p.sum.Tools[0].Args) > maxToolArgs {
		t.Fatalf("tools kept %d, omitted %d, args %d bytes", len(p.sum.Tools), p.sum.ToolsOmitted, len(p.sum.Tools[0].Args))
	}
	evs, dropped := p.take()
	if len(evs) != maxLiveEvents || dropped != 200-maxLiveEvents+1 {
		t.Fatalf("live events %d, dropped %d", len(evs), dropped)
	}
	b, _ := json.Marshal(p.sum)
	if len(b) > 48<<10 {
		t.Fatalf("summary of %d bytes", len(b))
	}
}

func TestAgentEnv(t *testing.T) {
	environ := []string{"PATH=/bin", "HOME=/h", "LANG=C", "LC_ALL=C", "TERM=xterm", "PI_CODING_AGENT_DIR=/a", "PI_API_KEY=k",
		"LEMO_DATA=/d", "LEMO_TOKEN=t", "OPENAI_API_KEY=sk", "AWS_SECRET_ACCESS_KEY=s", "GITHUB_TOKEN=g", "RANDOM_VAR=r", "HTTPS_PROXY=p", "XDG_CONFIG_HOME=/x", "malformed", "=x"}
	got := agentEnv(environ, []string{"OPENAI_API_KEY", "LEMO_DATA"}, []string{"HOME=/h2", "LEMO_X=1", "EXTRA=1"}, []string{"TAG=t"})
	want := "PATH=/bin HOME=/h2 LANG=C LC_ALL=C TERM=xterm PI_CODING_AGENT_DIR=/a OPENAI_API_KEY=sk HTTPS_PROXY=p XDG_CONFIG_HOME=/x EXTRA=1 TAG=t"
	if strings.Join(got, " ") != want {
		t.Fatalf("agentEnv =\n %s\nwant\n %s", strings.Join(got, " "), want)
	}
}

func TestConfigValidation(t *testing.T) {
	cfg := Config{Kind: "codex", Approval: "maybe", Binary: "rel/pi", Dir: "relative", Args: []string{"--session-dir=/x", "--model", "a/b"},
		SetEnv: []string{"BAD"}, PassEnv: []string{"LEMO_TOKEN"}, KillGrace: -1, MaxLineBytes: 10}
	cfg.fill()
	err := cfg.validate()
	for _, want := range []string{"Config.Kind", "Config.Approval", "Config.Binary", "Config.Dir", "--session-dir=/x", "Config.SetEnv", "Config.PassEnv", "Config.KillGrace", "Config.MaxLineBytes"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("validate: %v; want a problem with %s", err, want)
		}
	}
	if _, err := New(Config{Dir: t.TempDir()}); err != nil {
		t.Fatalf("defaults: %v", err)
	}
}

// The retained result stays bounded even when every text is as long as
// allowed and made of characters JSON escapes.
func TestResultIsBounded(t *testing.T) {
	var p projector
	worst := strings.Repeat("<\"\\\n", 1<<14)
	w, _ := json.Marshal(worst[:4<<10])
	for i := 0; i < 25; i++ {
		id := strings.Repeat("i", 200) + string(rune('a'+i%26))
		p.apply(frame(t, `{"type":"tool_execution_start","toolCallId":"`+id+`","toolName":"`+strings.Repeat("n", 300)+`","args":{"command":`+string(w)+`}}`))
		p.apply(frame(t, `{"type":"tool_execution_end","toolCallId":"`+id+`","result":{"content":[{"type":"text","text":`+string(w)+`}]},"isError":true}`))
	}
	res := Result{Invocation: "dlg-x", SessionID: "s", Kind: KindPi, Status: StatusFailed, Summary: p.sum}
	res.FinalAnswer, _ = Bound(worst, 16<<10)
	res.Error, _ = Bound(worst, maxErrorText)
	b, err := marshal(res)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) > 72<<10 {
		t.Fatalf("worst-case result: %d bytes", len(b))
	}
	t.Logf("worst-case result: %d bytes", len(b))
}

// A run's result reports the agent's usage to the Task's budget.
func TestRunSpent(t *testing.T) {
	var rt RunTool
	for _, tc := range []struct {
		name   string
		out    string
		tokens int64
		cost   float64
		ok     bool
	}{
		{"total", `{"kind":"pi","summary":{"usage":{"input":100,"output":20,"cache_read":5,"cache_write":0,"total_tokens":125,"cost":0.002}}}`, 125, 0.002, true},
		{"no total", `{"kind":"pi","summary":{"usage":{"input":100,"output":20,"cache_read":0,"cache_write":0,"total_tokens":0,"cost":0}}}`, 120, 0, true},
		{"no usage", `{"kind":"pi","summary":{"usage":{"input":0,"output":0,"cache_read":0,"cache_write":0,"total_tokens":0,"cost":0}}}`, 0, 0, false},
		{"not a result", `[1]`, 0, 0, false},
	} {
		s, ok := rt.Spent(json.RawMessage(tc.out))
		if ok != tc.ok || s.Tokens != tc.tokens || s.CostUSD != tc.cost || (ok && s.Source != "delegate pi") {
			t.Errorf("%s: Spent = %+v, %v; want %d tokens, $%v, %v", tc.name, s, ok, tc.tokens, tc.cost, tc.ok)
		}
	}
}
