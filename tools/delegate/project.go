package delegate

import (
	"encoding/json"
	"strings"

	"lemo/excerpt"
)

// Usage is the agent's token usage, summed over its assistant messages.
type Usage struct {
	Input      int64   `json:"input"`
	Output     int64   `json:"output"`
	CacheRead  int64   `json:"cache_read"`
	CacheWrite int64   `json:"cache_write"`
	Total      int64   `json:"total_tokens"`
	Cost       float64 `json:"cost"`
}

// ToolRun is one tool execution of the agent, bounded.
type ToolRun struct {
	CallID  string `json:"call_id"`
	Tool    string `json:"tool"`
	Args    string `json:"args,omitempty"`
	Output  string `json:"output,omitempty"`
	IsError bool   `json:"is_error"`
	Done    bool   `json:"done"`
}

// ApprovalCounts counts the agent's approval dialogs by outcome.
type ApprovalCounts struct {
	Asked     int `json:"asked"`
	Approved  int `json:"approved"`
	Denied    int `json:"denied"`
	TimedOut  int `json:"timed_out"`
	Cancelled int `json:"cancelled"`
	Abandoned int `json:"abandoned"`
	// Declined counts other blocking dialogs, answered "cancelled".
	Declined int `json:"declined_dialogs"`
	// Rejected counts host tool calls and host URI requests.
	Rejected int `json:"rejected_host_requests"`
}

// Summary is the bounded account of one invocation.
type Summary struct {
	Turns             int            `json:"turns"`
	AssistantMessages int            `json:"assistant_messages"`
	ToolExecutions    int            `json:"tool_executions"`
	ToolErrors        int            `json:"tool_errors"`
	Tools             []ToolRun      `json:"tools"`
	ToolsOmitted      int            `json:"tools_omitted"`
	Compactions       int            `json:"compactions"`
	Retries           int            `json:"retries"`
	Steers            int            `json:"steers"`
	FollowUps         int            `json:"follow_ups"`
	Aborts            int            `json:"aborts"`
	Approvals         ApprovalCounts `json:"approvals"`
	Usage             Usage          `json:"usage"`
	ProtocolErrors    int            `json:"protocol_errors"`
	IgnoredFrames     int            `json:"ignored_frames"`
}

// LiveEvent is one projected agent event in a state update. Every text in
// it is cleaned and bounded.
type LiveEvent struct {
	Type       string `json:"type"`
	Role       string `json:"role,omitempty"`
	Text       string `json:"text,omitempty"`
	CallID     string `json:"call_id,omitempty"`
	Tool       string `json:"tool,omitempty"`
	IsError    bool   `json:"is_error,omitempty"`
	StopReason string `json:"stop_reason,omitempty"`
	Error      string `json:"error,omitempty"`
	Phase      string `json:"phase,omitempty"`
	Reason     string `json:"reason,omitempty"`
	Outcome    string `json:"outcome,omitempty"`
	Attempt    int    `json:"attempt,omitempty"`
	Steering   int    `json:"steering,omitempty"`
	FollowUp   int    `json:"follow_up,omitempty"`
}

// Limits of the projection.
const (
	maxLiveEvents  = 64       // events in one state update
	maxLiveText    = 4 << 10  // text of one live event
	maxToolRuns    = 20       // tool executions kept in the summary
	maxToolArgs    = 256      // args of one kept tool execution
	maxToolText    = 512      // output of one kept tool execution
	maxErrorText   = 2 << 10  // an error message
	maxPendingText = 64 << 10 // streamed text buffered between two updates
)

// projector folds the agent's events into live events, the summary and
// what the run needs to know to finish. It is a pure state machine: the
// run feeds it frames and reads it; tests feed it transcripts.
type projector struct {
	sum     Summary
	live    []LiveEvent
	dropped int

	text, thinking strings.Builder // streamed since the last update

	// Run tracking.
	running      bool   // between agent_start and agent_end
	ended        bool   // an agent_end was seen since the last agent_start
	terminal     bool   // that agent_end was final (omp: isTerminal is not false)
	retrying     bool   // pi: auto_retry_start followed the last agent_end
	stopReason   string // of the last assistant message
	errorMessage string // of the last assistant message
	lastAnswer   string // text of the last assistant message (uncleaned)
	protocol     int    // omp's protocol version from "ready"
}

func (p *projector) add(e LiveEvent) {
	p.flushText()
	p.push(e)
}

func (p *projector) push(e LiveEvent) {
	if len(p.live) >= maxLiveEvents {
		p.dropped++
		return
	}
	p.live = append(p.live, e)
}

// flushText turns streamed text into live events.
func (p *projector) flushText() {
	if p.thinking.Len() > 0 {
		t, _ := Bound(p.thinking.String(), maxLiveText)
		p.push(LiveEvent{Type: "thinking", Text: t})
		p.thinking.Reset()
	}
	if p.text.Len() > 0 {
		t, _ := Bound(p.text.String(), maxLiveText)
		p.push(LiveEvent{Type: "text", Text: t})
		p.text.Reset()
	}
}

// take returns the live events since the last call and how many were
// dropped, and starts over.
func (p *projector) take() ([]LiveEvent, int) {
	p.flushText()
	ev, d := p.live, p.dropped
	p.live, p.dropped = nil, 0
	return ev, d
}

// fields decodes a JSON object leniently: a field of an unexpected type
// reads as absent, so one odd field does not hide the whole event.
type fields map[string]json.RawMessage

func decodeFields(raw []byte) (fields, bool) {
	var m map[string]json.RawMessage
	if json.Unmarshal(raw, &m) != nil || m == nil {
		return nil, false
	}
	return fields(m), true
}

func (f fields) str(k string) string {
	var s string
	_ = json.Unmarshal(f[k], &s)
	return s
}

func (f fields) num(k string) float64 {
	var n float64
	_ = json.Unmarshal(f[k], &n)
	return n
}

func (f fields) int(k string) int {
	n := f.num(k)
	if n < 0 || n > 1<<31 {
		return 0
	}
	return int(n)
}

// tokens reads a token count, ignoring negative or absurd values (the sums
// must stay representable).
func (f fields) tokens(k string) int64 {
	n := f.num(k)
	if n < 0 || n > 1e12 {
		return 0
	}
	return int64(n)
}

func (f fields) boolean(k string) (v, ok bool) {
	ok = json.Unmarshal(f[k], &v) == nil && len(f[k]) > 0
	return v, ok
}

func (f fields) obj(k string) fields {
	m, _ := decodeFields(f[k])
	return m
}

func (f fields) count(k string) int {
	var a []json.RawMessage
	_ = json.Unmarshal(f[k], &a)
	return len(a)
}

// apply folds one event of the agent (not a response, not a request).
func (p *projector) apply(fr *Frame) {
	e, ok := decodeFields(fr.Raw)
	if !ok {
		p.sum.IgnoredFrames++
		return
	}
	switch fr.Type {
	case "agent_start":
		p.running, p.ended, p.retrying = true, false, false
		p.add(LiveEvent{Type: "agent_start"})
	case "turn_start":
		p.sum.Turns++
	case "turn_end", "message_start":
	case "message_update":
		u := e.obj("assistantMessageEvent")
		switch u.str("type") {
		case "text_delta":
			appendBounded(&p.text, u.str("delta"))
		case "thinking_delta":
			appendBounded(&p.thinking, u.str("delta"))
		}
	case "message_end":
		p.messageEnd(e.obj("message"))
	case "tool_execution_start":
		p.sum.ToolExecutions++
		run := ToolRun{CallID: Short(e.str("toolCallId"), 128), Tool: Short(e.str("toolName"), 128), Args: jsonExcerpt(e["args"], maxToolArgs)}
		p.sum.Tools = append(p.sum.Tools, run)
		if len(p.sum.Tools) > maxToolRuns {
			p.sum.Tools = p.sum.Tools[1:]
			p.sum.ToolsOmitted++
		}
		p.add(LiveEvent{Type: "tool_start", CallID: run.CallID, Tool: run.Tool, Text: Short(run.Args, 512)})
	case "tool_execution_update":
		ev := LiveEvent{Type: "tool_output", CallID: Short(e.str("toolCallId"), 128), Tool: Short(e.str("toolName"), 128), Text: tailExcerpt(resultText(e["partialResult"]), 1024)}
		// The update carries the whole output so far: keep only the latest.
		for i := len(p.live) - 1; i >= 0; i-- {
			if p.live[i].Type == "tool_output" && p.live[i].CallID == ev.CallID {
				p.live[i] = ev
				return
			}
		}
		p.add(ev)
	case "tool_execution_end":
		text := resultText(e["result"])
		out, _ := Bound(text, maxToolText)
		isErr, _ := e.boolean("isError")
		id := Short(e.str("toolCallId"), 128)
		for i := len(p.sum.Tools) - 1; i >= 0; i-- {
			if p.sum.Tools[i].CallID == id && !p.sum.Tools[i].Done {
				p.sum.Tools[i].Done, p.sum.Tools[i].IsError, p.sum.Tools[i].Output = true, isErr, out
				break
			}
		}
		if isErr {
			p.sum.ToolErrors++
		}
		p.add(LiveEvent{Type: "tool_end", CallID: id, Tool: Short(e.str("toolName"), 128), IsError: isErr, Text: tailExcerpt(text, 1024)})
	case "agent_end":
		p.running, p.ended, p.retrying = false, true, false
		terminal, ok := e.boolean("isTerminal")
		p.terminal = !ok || terminal
		var msgs []json.RawMessage
		_ = json.Unmarshal(e["messages"], &msgs)
		for i := len(msgs) - 1; i >= 0; i-- {
			if m, _ := decodeFields(msgs[i]); m.str("role") == "assistant" {
				p.stopReason, p.errorMessage = m.str("stopReason"), m.str("errorMessage")
				p.lastAnswer = contentText(m["content"])
				break
			}
		}
		p.add(LiveEvent{Type: "agent_end", StopReason: Short(p.stopReason, 64), Error: Short(p.errorMessage, maxErrorText)})
	case "auto_retry_start":
		p.sum.Retries++
		p.retrying = true
		p.add(LiveEvent{Type: "retry", Phase: "start", Attempt: e.int("attempt"), Error: Short(e.str("errorMessage"), maxErrorText)})
	case "auto_retry_end":
		p.retrying = false
		ev := LiveEvent{Type: "retry", Phase: "end", Attempt: e.int("attempt"), Error: Short(e.str("finalError"), maxErrorText), Outcome: "failed"}
		if ok, _ := e.boolean("success"); ok {
			ev.Outcome = "succeeded"
		}
		p.add(ev)
	case "compaction_start", "auto_compaction_start":
		p.add(LiveEvent{Type: "compaction", Phase: "start", Reason: Short(e.str("reason"), 64)})
	case "compaction_end", "auto_compaction_end":
		p.sum.Compactions++
		ev := LiveEvent{Type: "compaction", Phase: "end", Reason: Short(e.str("reason"), 64), Error: Short(e.str("errorMessage"), maxErrorText)}
		if ab, _ := e.boolean("aborted"); ab {
			ev.Outcome = "aborted"
		}
		p.add(ev)
	case "queue_update":
		p.add(LiveEvent{Type: "queue", Steering: e.count("steering"), FollowUp: e.count("followUp")})
	case "extension_error":
		p.add(LiveEvent{Type: "notice", Reason: "extension_error", Error: Short(e.str("error"), maxErrorText)})
	case "ready":
		p.protocol = e.int("protocolVersion")
	default:
		p.sum.IgnoredFrames++
	}
}

func (p *projector) messageEnd(m fields) {
	switch role := m.str("role"); role {
	case "assistant":
		p.sum.AssistantMessages++
		if u := m.obj("usage"); u != nil {
			p.sum.Usage.Input += u.tokens("input")
			p.sum.Usage.Output += u.tokens("output")
			p.sum.Usage.CacheRead += u.tokens("cacheRead")
			p.sum.Usage.CacheWrite += u.tokens("cacheWrite")
			p.sum.Usage.Total += u.tokens("totalTokens")
			if c := u.obj("cost").num("total"); c > 0 && c < 1e9 {
				p.sum.Usage.Cost += c
			}
		}
		p.stopReason, p.errorMessage = m.str("stopReason"), m.str("errorMessage")
		p.lastAnswer = contentText(m["content"])
		ev := LiveEvent{Type: "message", Role: "assistant", StopReason: Short(p.stopReason, 64), Error: Short(p.errorMessage, maxErrorText)}
		if p.text.Len() == 0 && !p.liveHasText() {
			// Nothing was streamed: show the message itself.
			ev.Text, _ = Bound(p.lastAnswer, maxLiveText)
		}
		p.add(ev)
	case "user", "custom":
		t, _ := Bound(contentText(m["content"]), maxLiveText)
		p.add(LiveEvent{Type: "message", Role: role, Text: t})
	}
}

func (p *projector) liveHasText() bool {
	for _, e := range p.live {
		if e.Type == "text" {
			return true
		}
	}
	return false
}

func appendBounded(b *strings.Builder, s string) {
	if room := maxPendingText - b.Len(); room > 0 {
		b.WriteString(excerpt.Head(s, room))
	}
}

// contentText joins the text blocks of a message's content (a string or an
// array of blocks).
func contentText(raw json.RawMessage) string {
	if len(raw) == 0 {
		return ""
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var blocks []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if json.Unmarshal(raw, &blocks) != nil {
		return ""
	}
	var parts []string
	for _, b := range blocks {
		if b.Type == "text" && b.Text != "" {
			parts = append(parts, b.Text)
		}
	}
	return strings.Join(parts, "\n")
}

// resultText is the text of a tool result ({"content": [...]}).
func resultText(raw json.RawMessage) string {
	var r struct {
		Content json.RawMessage `json:"content"`
	}
	if json.Unmarshal(raw, &r) != nil {
		return ""
	}
	return contentText(r.Content)
}

// jsonExcerpt is compact JSON text, cleaned and bounded.
func jsonExcerpt(raw json.RawMessage, max int) string {
	if len(raw) == 0 || string(raw) == "null" {
		return ""
	}
	s, _ := Bound(string(raw), max)
	return s
}

// tailExcerpt keeps the end of a growing output.
func tailExcerpt(s string, max int) string {
	if len(s) > 4*max+64 {
		s = excerpt.Tail(s, 2*max)
	}
	s = Clean(s)
	if len(s) <= max {
		return s
	}
	return excerpt.Ellipsis + excerpt.Tail(s, max-len(excerpt.Ellipsis))
}
