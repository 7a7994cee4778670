// Command fakeagent speaks the RPC mode of the pi and omp coding agents
// (JSON lines on stdin and stdout) for the delegate's tests, with the
// misbehaviours a client must survive. Keywords in a prompt choose what a
// run does (see run); flags choose how the process behaves:
//
//	--fake-kind pi|omp     protocol flavour (omp: a "ready" frame, select approvals)
//	--fake-ignore-eof      keep running after stdin closes
//	--fake-ignore-term     ignore SIGTERM (only SIGKILL ends it)
//	--fake-silent          read commands but never answer
//	--fake-exit N          exit with status N at once, before any output
//	--fake-stderr TEXT     write TEXT to stderr at start
//
// The real agents' own flags (--mode, --session-dir, --session/--resume,
// -e, --approval-mode, ...) are understood as far as the tests need.
package main

import (
	"bufio"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"
)

type agent struct {
	kind        string
	approvals   bool
	silent      bool
	sessionDir  string
	sessionFile string
	sessionID   string
	cwd         string
	messages    int
	written     bool

	out sync.Mutex
	w   *bufio.Writer

	mu        sync.Mutex
	streaming bool
	steers    chan string
	aborts    chan string // the abort command's id
	uiAnswers map[string]chan map[string]any
	lastText  string
	held      []map[string]any // responses held back (OUTOFORDER)
}

func main() {
	a := &agent{kind: "pi", steers: make(chan string, 16), aborts: make(chan string, 4), uiAnswers: make(map[string]chan map[string]any), w: bufio.NewWriterSize(os.Stdout, 1<<16)}
	ignoreEOF, ignoreTerm := false, false
	resume := ""
	args := os.Args[1:]
	for i := 0; i < len(args); i++ {
		next := func() string {
			if i+1 < len(args) {
				i++
				return args[i]
			}
			return ""
		}
		switch args[i] {
		case "--fake-kind":
			a.kind = next()
		case "--fake-ignore-eof":
			ignoreEOF = true
		case "--fake-ignore-term":
			ignoreTerm = true
		case "--fake-silent":
			a.silent = true
		case "--fake-exit":
			var n int
			fmt.Sscan(next(), &n)
			os.Exit(n)
		case "--fake-stderr":
			fmt.Fprintln(os.Stderr, next())
		case "--session-dir":
			a.sessionDir = next()
		case "--session", "--resume":
			resume = next()
		case "-e":
			next()
			a.approvals = true
		case "--approval-mode":
			a.approvals = next() == "always-ask"
		}
	}
	if ignoreTerm {
		signal.Ignore(syscall.SIGTERM)
	}
	wd, _ := syscall.Getwd()
	a.cwd = wd
	if resume != "" {
		a.open(resume)
	} else {
		a.sessionID = newID()
		a.sessionFile = filepath.Join(a.sessionDir, time.Now().UTC().Format("2006-01-02T15-04-05-000Z")+"_"+a.sessionID+".jsonl")
	}
	if a.kind == "omp" {
		a.emit(map[string]any{"type": "ready", "protocolVersion": 1, "supportedProtocolVersions": []int{1, 2}})
		a.emit(map[string]any{"type": "available_commands_update", "commands": []any{map[string]any{"name": "model"}}})
	}
	in := bufio.NewReaderSize(os.Stdin, 1<<16)
	for {
		line, err := in.ReadBytes('\n')
		if len(strings.TrimSpace(string(line))) > 0 {
			a.handle(line)
		}
		if err != nil {
			break
		}
	}
	if ignoreEOF {
		for { // until a signal ends it (a bare select{} could be a deadlock)
			time.Sleep(time.Hour)
		}
	}
	a.flush()
	os.Exit(0)
}

func newID() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	h := hex.EncodeToString(b)
	return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

// open continues a session file in place.
func (a *agent) open(path string) {
	f, err := os.Open(path)
	if err != nil {
		fmt.Fprintln(os.Stderr, "fakeagent: no session", path)
		os.Exit(1)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for sc.Scan() {
		var e struct {
			Type string `json:"type"`
			ID   string `json:"id"`
		}
		_ = json.Unmarshal(sc.Bytes(), &e)
		switch e.Type {
		case "session":
			a.sessionID = e.ID
		case "message":
			a.messages++
		}
	}
	a.sessionFile, a.written = path, true
}

func (a *agent) record(role, text string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	f, err := os.OpenFile(a.sessionFile, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		return
	}
	defer f.Close()
	if !a.written {
		h, _ := json.Marshal(map[string]any{"type": "session", "version": 3, "id": a.sessionID, "timestamp": time.Now().UTC().Format(time.RFC3339Nano), "cwd": a.cwd})
		f.Write(append(h, '\n'))
		a.written = true
	}
	m, _ := json.Marshal(map[string]any{"type": "message", "id": newID()[:8], "message": map[string]any{"role": role, "content": []any{map[string]any{"type": "text", "text": text}}}})
	f.Write(append(m, '\n'))
	a.messages++
}

func (a *agent) emit(v any) {
	b, _ := json.Marshal(v)
	a.raw(b)
}

func (a *agent) raw(b []byte) {
	a.out.Lock()
	defer a.out.Unlock()
	a.w.Write(b)
	a.w.WriteByte('\n')
	a.w.Flush()
}

func (a *agent) flush() {
	a.out.Lock()
	defer a.out.Unlock()
	a.w.Flush()
}

func (a *agent) respond(id, command string, ok bool, errMsg string, data any) {
	m := map[string]any{"type": "response", "command": command, "success": ok}
	if id != "" {
		m["id"] = id
	}
	if !ok {
		m["error"] = errMsg
	}
	if data != nil {
		m["data"] = data
	}
	a.emit(m)
}

func (a *agent) handle(line []byte) {
	var c map[string]any
	if err := json.Unmarshal(line, &c); err != nil {
		a.respond("", "parse", false, "Failed to parse command: "+err.Error(), nil)
		return
	}
	if a.silent {
		return
	}
	typ, _ := c["type"].(string)
	id, _ := c["id"].(string)
	msg, _ := c["message"].(string)
	switch typ {
	case "extension_ui_response", "host_tool_result", "host_uri_result":
		a.mu.Lock()
		ch := a.uiAnswers[id]
		delete(a.uiAnswers, id)
		a.mu.Unlock()
		if ch != nil {
			c["frame"] = typ
			ch <- c
		}
	case "get_state":
		a.mu.Lock()
		st := map[string]any{"sessionId": a.sessionID, "sessionFile": a.sessionFile, "isStreaming": a.streaming, "messageCount": a.messages}
		a.mu.Unlock()
		a.respond(id, typ, true, "", st)
	case "prompt":
		a.mu.Lock()
		busy := a.streaming
		a.streaming = !busy
		a.mu.Unlock()
		if busy {
			a.respond(id, typ, false, "Agent is already processing.", nil)
			return
		}
		if a.kind == "omp" && strings.Contains(msg, "PROMPT2") {
			a.respond(id, typ, true, "", nil)
			a.respond(id, typ, false, "Agent is already processing. Use steer() or followUp() to queue messages, or wait for completion.", nil)
			a.mu.Lock()
			a.streaming = false
			a.mu.Unlock()
			return
		}
		a.respond(id, typ, true, "", nil)
		go a.run(msg)
	case "steer", "follow_up":
		switch {
		case strings.Contains(msg, "SILENT"):
		case strings.Contains(msg, "REJECT"):
			a.respond(id, typ, false, "steering refused", nil)
		case strings.Contains(msg, "NOID"):
			a.respond("", typ, false, "Unknown command: "+typ, nil)
		case strings.Contains(msg, "HOLD"):
			a.mu.Lock()
			a.held = append(a.held, map[string]any{"type": "response", "command": typ, "success": true, "id": id})
			a.mu.Unlock()
			a.steers <- msg
		case strings.Contains(msg, "RELEASE"):
			// Answer this one first, then the held ones: out of order.
			a.respond(id, typ, true, "", nil)
			a.mu.Lock()
			held := a.held
			a.held = nil
			a.mu.Unlock()
			for _, h := range held {
				a.emit(h)
			}
			a.steers <- msg
		default:
			a.respond(id, typ, true, "", nil)
			a.emit(map[string]any{"type": "queue_update", "steering": []string{msg}, "followUp": []string{}})
			a.steers <- msg
		}
	case "abort":
		a.mu.Lock()
		streaming := a.streaming
		a.mu.Unlock()
		if !streaming {
			a.respond(id, typ, true, "", nil)
			return
		}
		a.aborts <- id // the run answers after its agent_end
	case "get_last_assistant_text":
		a.mu.Lock()
		t := a.lastText
		a.mu.Unlock()
		a.respond(id, typ, true, "", map[string]any{"text": t})
	default:
		a.respond("", typ, false, "Unknown command: "+typ, nil)
	}
}

// run plays one prompt.
func (a *agent) run(prompt string) {
	a.record("user", prompt)
	a.emit(map[string]any{"type": "agent_start"})
	a.emit(map[string]any{"type": "turn_start"})
	a.emit(map[string]any{"type": "message_start", "message": map[string]any{"role": "user", "content": []any{map[string]any{"type": "text", "text": prompt}}}})
	a.emit(map[string]any{"type": "message_end", "message": map[string]any{"role": "user", "content": []any{map[string]any{"type": "text", "text": prompt}}}})
	answer, stop := a.play(prompt)
	a.finish(answer, stop, "")
}

// finish ends a run with an assistant message and agent_end.
func (a *agent) finish(answer, stop, errMsg string) {
	msg := map[string]any{"role": "assistant", "content": []any{map[string]any{"type": "text", "text": answer}}, "stopReason": stop,
		"usage": map[string]any{"input": 40, "output": 12, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 52, "cost": map[string]any{"total": 0.001}}}
	if errMsg != "" {
		msg["errorMessage"] = errMsg
	}
	a.emit(map[string]any{"type": "message_update", "message": msg, "assistantMessageEvent": map[string]any{"type": "text_delta", "delta": answer}})
	a.emit(map[string]any{"type": "message_end", "message": msg})
	a.emit(map[string]any{"type": "turn_end", "message": msg, "toolResults": []any{}})
	a.record("assistant", answer)
	a.mu.Lock()
	a.lastText = answer
	a.streaming = false
	a.mu.Unlock()
	end := map[string]any{"type": "agent_end", "messages": []any{msg}}
	if a.kind == "omp" {
		end["isTerminal"] = true
	}
	a.emit(end)
	select {
	case id := <-a.aborts:
		a.respond(id, "abort", true, "", nil)
	default:
	}
}

// play performs the run's keywords and returns the answer and stop reason.
func (a *agent) play(p string) (string, string) {
	switch {
	case strings.Contains(p, "CRASH"):
		a.emit(map[string]any{"type": "message_update", "assistantMessageEvent": map[string]any{"type": "text_delta", "delta": "about to crash"}})
		a.flush()
		fmt.Fprintln(os.Stderr, "fakeagent: crashing on purpose")
		os.Exit(3)
	case strings.Contains(p, "GARBAGE"):
		for _, l := range []string{"not json at all", "[1,2,3]", `{"no":"type"}`, `{"type":123}`, "\x00\x01\xff\xfe", `{"type":"mystery_event","x":1}`,
			`{"type":"response","id":"nobody-asked","command":"get_state","success":true}`, `{"type":"tool_execution_start","toolCallId":5,"toolName":["x"]}`, `{"type":`} {
			a.raw([]byte(l))
		}
		return "survived the garbage", "stop"
	case strings.Contains(p, "TOOLONG"):
		a.raw([]byte(`{"type":"message_update","assistantMessageEvent":{"type":"text_delta","delta":"` + strings.Repeat("y", 200<<10) + `"}}`))
		return "after the long line", "stop"
	case strings.Contains(p, "HUGE"):
		big := strings.Repeat("x", 5<<20)
		a.emit(map[string]any{"type": "message_update", "assistantMessageEvent": map[string]any{"type": "text_delta", "delta": big}})
		a.emit(map[string]any{"type": "tool_execution_start", "toolCallId": "h1", "toolName": "bash", "args": map[string]any{"command": "yes"}})
		a.emit(map[string]any{"type": "tool_execution_end", "toolCallId": "h1", "toolName": "bash", "result": map[string]any{"content": []any{map[string]any{"type": "text", "text": big}}}, "isError": false})
		return "huge done " + strings.Repeat("z", 100<<10), "stop"
	case strings.Contains(p, "ANSI"):
		return "red \x1b[31mALERT\x1b[0m \u202eevil\u202c bell\x07 nul\x00 ok", "stop"
	case strings.Contains(p, "ENV"):
		var names []string
		for _, kv := range os.Environ() {
			n, _, _ := strings.Cut(kv, "=")
			names = append(names, n)
		}
		sort.Strings(names)
		return "env: " + strings.Join(names, ","), "stop"
	case strings.Contains(p, "HISTORY"):
		a.mu.Lock()
		n := a.messages
		a.mu.Unlock()
		return fmt.Sprintf("history: %d messages before this answer", n), "stop"
	case strings.Contains(p, "CHILD"):
		cmd := exec.Command("sleep", "300")
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
		if err := cmd.Start(); err != nil {
			return "child failed: " + err.Error(), "error"
		}
		return fmt.Sprintf("child %d started", cmd.Process.Pid), "stop"
	case strings.Contains(p, "RETRY"):
		a.finishAttempt("500 fake upstream failure")
		return "second attempt worked", "stop"
	case strings.Contains(p, "FAIL"):
		return "", "error"
	case strings.Contains(p, "UI"):
		return a.ui(), "stop"
	case strings.Contains(p, "EXPIRE"):
		return a.expire(), "stop"
	case strings.Contains(p, "ABANDON"):
		answer := a.approval("bash", "echo abandoned", !strings.Contains(p, "NOCALL"))
		if answer == "aborted" {
			return "", "aborted"
		}
		return answer, "stop"
	case strings.Contains(p, "TOOL"):
		out := a.tool("bash", "echo hello-from-tool")
		return "Done. The tool said: " + out, "stop"
	case strings.Contains(p, "STEERS"):
		return a.collectSteers(p), "stop"
	case strings.Contains(p, "SLOW"), strings.Contains(p, "HANG"):
		return a.slow(strings.Contains(p, "HANG"))
	}
	a.emit(map[string]any{"type": "message_update", "assistantMessageEvent": map[string]any{"type": "text_delta", "delta": "Hello "}})
	return "fake answer to: " + p, "stop"
}

// finishAttempt plays a failed attempt that pi retries (agent_end, then
// auto_retry_start in the same breath).
func (a *agent) finishAttempt(errMsg string) {
	msg := map[string]any{"role": "assistant", "content": []any{}, "stopReason": "error", "errorMessage": errMsg}
	a.emit(map[string]any{"type": "message_end", "message": msg})
	a.emit(map[string]any{"type": "agent_end", "messages": []any{msg}})
	a.emit(map[string]any{"type": "auto_retry_start", "attempt": 1, "maxAttempts": 3, "delayMs": 10, "errorMessage": errMsg})
	time.Sleep(30 * time.Millisecond)
	a.emit(map[string]any{"type": "agent_start"})
	a.emit(map[string]any{"type": "auto_retry_end", "success": true, "attempt": 2})
}

// tool runs one tool call, asking for approval when approvals are on.
func (a *agent) tool(name, command string) string {
	id := "call_" + newID()[:6]
	a.emit(map[string]any{"type": "message_end", "message": map[string]any{"role": "assistant", "content": []any{map[string]any{"type": "toolCall", "id": id, "name": name}}, "stopReason": "toolUse",
		"usage": map[string]any{"input": 30, "output": 8, "totalTokens": 38}}})
	a.emit(map[string]any{"type": "tool_execution_start", "toolCallId": id, "toolName": name, "args": map[string]any{"command": command}})
	if a.approvals {
		ans := a.ask(name, id, command)
		if !ans {
			a.emit(map[string]any{"type": "tool_execution_end", "toolCallId": id, "toolName": name, "result": map[string]any{"content": []any{map[string]any{"type": "text", "text": "Denied by RPC host"}}}, "isError": true})
			return "denied"
		}
	}
	a.emit(map[string]any{"type": "tool_execution_update", "toolCallId": id, "toolName": name, "partialResult": map[string]any{"content": []any{map[string]any{"type": "text", "text": "hello-"}}}})
	a.emit(map[string]any{"type": "tool_execution_end", "toolCallId": id, "toolName": name, "result": map[string]any{"content": []any{map[string]any{"type": "text", "text": "hello-from-tool\n"}}}, "isError": false})
	a.emit(map[string]any{"type": "turn_end"})
	a.emit(map[string]any{"type": "turn_start"})
	return "hello-from-tool"
}

// ask shows an approval dialog and waits for its answer.
func (a *agent) ask(tool, callID, command string) bool {
	uid := newID()
	ch := make(chan map[string]any, 1)
	a.mu.Lock()
	a.uiAnswers[uid] = ch
	a.mu.Unlock()
	if a.kind == "omp" {
		a.emit(map[string]any{"type": "extension_ui_request", "id": uid, "method": "select", "title": "Allow tool: " + tool + "\nCommand: " + command, "options": []string{"Approve", "Deny"}})
	} else {
		a.emit(map[string]any{"type": "extension_ui_request", "id": uid, "method": "confirm", "title": "Allow tool: " + tool,
			"message": "Command: " + command + "\n\n[lemo-approval tool=" + tool + " call=" + callID + "]"})
	}
	r := <-ch
	if v, ok := r["confirmed"].(bool); ok {
		return v
	}
	return r["value"] == "Approve"
}

// approval shows an approval dialog that the agent may abandon: on abort
// it ends the tool call without waiting for the answer.
func (a *agent) approval(tool, command string, withCallID bool) string {
	uid, callID := newID(), "call_"+newID()[:6]
	marked := callID
	if !withCallID {
		marked = "" // only the run's end tells that the dialog is gone
	}
	ch := make(chan map[string]any, 1)
	a.mu.Lock()
	a.uiAnswers[uid] = ch
	a.mu.Unlock()
	a.emit(map[string]any{"type": "tool_execution_start", "toolCallId": callID, "toolName": tool, "args": map[string]any{"command": command}})
	if a.kind == "omp" {
		a.emit(map[string]any{"type": "extension_ui_request", "id": uid, "method": "select", "title": "Allow tool: " + tool, "options": []string{"Approve", "Deny"}})
	} else {
		a.emit(map[string]any{"type": "extension_ui_request", "id": uid, "method": "confirm", "title": "Allow tool: " + tool,
			"message": "Command: " + command + "\n\n[lemo-approval tool=" + tool + " call=" + marked + "]"})
	}
	select {
	case r := <-ch:
		return fmt.Sprintf("answered %v", r)
	case id := <-a.aborts:
		if a.kind == "omp" && withCallID {
			a.emit(map[string]any{"type": "extension_ui_request", "id": newID(), "method": "cancel", "targetId": uid})
		}
		a.emit(map[string]any{"type": "tool_execution_end", "toolCallId": callID, "toolName": tool, "result": map[string]any{"content": []any{map[string]any{"type": "text", "text": "aborted"}}}, "isError": true})
		a.aborts <- id
		return "aborted"
	}
}

// expire shows an approval dialog that the agent gives up on by itself
// (pi: its timeout passes; omp: it sends "cancel"), ends the tool call,
// and goes on once a steer arrives.
func (a *agent) expire() string {
	uid, callID := newID(), "call_"+newID()[:6]
	a.emit(map[string]any{"type": "tool_execution_start", "toolCallId": callID, "toolName": "bash", "args": map[string]any{"command": "sleep 1"}})
	if a.kind == "omp" {
		a.emit(map[string]any{"type": "extension_ui_request", "id": uid, "method": "select", "title": "Allow tool: bash", "options": []string{"Approve", "Deny"}})
		time.Sleep(100 * time.Millisecond)
		a.emit(map[string]any{"type": "extension_ui_request", "id": newID(), "method": "cancel", "targetId": uid})
	} else {
		a.emit(map[string]any{"type": "extension_ui_request", "id": uid, "method": "confirm", "title": "Allow tool: bash", "timeout": 100,
			"message": "Command: sleep 1\n\n[lemo-approval tool=bash call=" + callID + "]"})
		time.Sleep(100 * time.Millisecond)
	}
	a.emit(map[string]any{"type": "tool_execution_end", "toolCallId": callID, "toolName": "bash", "result": map[string]any{"content": []any{map[string]any{"type": "text", "text": "no answer"}}}, "isError": true})
	return "expired, then: " + <-a.steers
}

// ui sends every kind of UI and host request and reports the answers.
func (a *agent) ui() string {
	a.emit(map[string]any{"type": "extension_ui_request", "id": newID(), "method": "notify", "message": "hello \x1b[1mfrom\x1b[0m the agent", "notifyType": "info"})
	a.emit(map[string]any{"type": "extension_ui_request", "id": newID(), "method": "setStatus", "statusKey": "k", "statusText": "busy"})
	reqs := []map[string]any{
		{"type": "extension_ui_request", "method": "select", "title": "Pick a colour", "options": []string{"red", "blue"}},
		{"type": "extension_ui_request", "method": "input", "title": "Your name?"},
		{"type": "extension_ui_request", "method": "editor", "title": "Edit this", "prefill": "x"},
		{"type": "extension_ui_request", "method": "confirm", "title": "Really?", "message": "no marker here"},
		{"type": "extension_ui_request", "method": "mystery_dialog", "title": "?"},
		{"type": "host_tool_call", "toolCallId": "t1", "toolName": "host_secret", "arguments": map[string]any{}},
		{"type": "host_uri_request", "operation": "read", "url": "db://secrets"},
	}
	var got []string
	for _, r := range reqs {
		uid := newID()
		ch := make(chan map[string]any, 1)
		a.mu.Lock()
		a.uiAnswers[uid] = ch
		a.mu.Unlock()
		r["id"] = uid
		a.emit(r)
		ans := <-ch
		name, _ := r["method"].(string)
		if name == "" {
			name, _ = r["type"].(string)
		}
		switch {
		case ans["cancelled"] == true:
			got = append(got, name+"=cancelled")
		case ans["isError"] == true:
			got = append(got, name+"=error")
		default:
			b, _ := json.Marshal(ans)
			got = append(got, name+"="+string(b))
		}
	}
	return "ui: " + strings.Join(got, " ")
}

// slow streams ticks until a steer or an abort arrives; hang streams
// nothing and ignores aborts.
func (a *agent) slow(hang bool) (string, string) {
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	text := ""
	for i := 0; ; i++ {
		select {
		case <-tick.C:
			if hang {
				continue
			}
			d := fmt.Sprintf("tick%d ", i)
			text += d
			a.emit(map[string]any{"type": "message_update", "assistantMessageEvent": map[string]any{"type": "text_delta", "delta": d}})
		case s := <-a.steers:
			a.emit(map[string]any{"type": "turn_end"})
			a.emit(map[string]any{"type": "turn_start"})
			a.emit(map[string]any{"type": "message_end", "message": map[string]any{"role": "user", "content": []any{map[string]any{"type": "text", "text": s}}}})
			return "steered: " + s, "stop"
		case id := <-a.aborts:
			if hang {
				continue // never answers
			}
			a.aborts <- id
			return text, "aborted"
		}
	}
}

// collectSteers waits for the steers named in the prompt ("STEERS n").
func (a *agent) collectSteers(p string) string {
	var n int
	fmt.Sscanf(p[strings.Index(p, "STEERS")+len("STEERS"):], "%d", &n)
	var got []string
	for len(got) < n {
		got = append(got, <-a.steers)
	}
	return "got: " + strings.Join(got, " | ")
}
