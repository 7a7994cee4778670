package delegate

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
	"unicode/utf8"
)

// FuzzLineReader: records never hold a line feed, never exceed the limit,
// and the reader always reaches EOF.
func FuzzLineReader(f *testing.F) {
	for _, s := range []string{"a\nb\n", "a\r\n", "x\u2028y\n", strings.Repeat("z", 300) + "\nq", "\n\n", ""} {
		f.Add([]byte(s), uint16(16))
	}
	f.Fuzz(func(t *testing.T, in []byte, max uint16) {
		m := int(max%512) + 1
		lr := NewLineReader(bytes.NewReader(in), m)
		total := 0
		for i := 0; ; i++ {
			if i > len(in)+1 {
				t.Fatal("no EOF")
			}
			l, err := lr.Next()
			var tl *LineTooLongError
			switch {
			case err == nil:
				if bytes.IndexByte(l, '\n') >= 0 || len(l) > m {
					t.Fatalf("record %q (limit %d)", l, m)
				}
				total += len(l)
			case errors.As(err, &tl):
				if tl.Bytes <= int64(m)-1 {
					t.Fatalf("too long at %d bytes, limit %d", tl.Bytes, m)
				}
			case errors.Is(err, io.EOF):
				if total > len(in) {
					t.Fatalf("read %d bytes from %d", total, len(in))
				}
				return
			default:
				t.Fatal(err)
			}
		}
	})
}

// FuzzAgentRecord feeds one record through everything that reads the
// agent's output: the frame decoder, the projection, the UI bridge and the
// catalog's header parser. Nothing may panic, and what reaches the live
// view is clean and bounded.
func FuzzAgentRecord(f *testing.F) {
	for _, s := range []string{
		`{"type":"agent_start"}`,
		`{"type":"message_update","assistantMessageEvent":{"type":"text_delta","delta":"hi \u001b[31m"}}`,
		`{"type":"message_end","message":{"role":"assistant","content":[{"type":"text","text":"x"}],"usage":{"input":1e300,"cost":{"total":"x"}},"stopReason":"stop"}}`,
		`{"type":"tool_execution_start","toolCallId":"c","toolName":"bash","args":{"command":"ls"}}`,
		`{"type":"tool_execution_update","toolCallId":"c","partialResult":{"content":"str"}}`,
		`{"type":"tool_execution_end","toolCallId":"c","result":{"content":[{"type":"text","text":"o"}]},"isError":"yes"}`,
		`{"type":"agent_end","messages":[{"role":"assistant","content":"t","stopReason":"aborted"}],"isTerminal":false}`,
		`{"type":"auto_retry_start","attempt":-1}`,
		`{"type":"queue_update","steering":["a"],"followUp":{}}`,
		`{"type":"extension_ui_request","id":"u","method":"confirm","title":"Allow tool: bash","message":"x\n[lemo-approval tool=bash call=c1]","timeout":1e20}`,
		`{"type":"extension_ui_request","id":"u","method":"select","title":"Allow tool: bash\nCommand: ls","options":["Approve","Deny"]}`,
		`{"type":"extension_ui_request","id":"u","method":"cancel","targetId":"v"}`,
		`{"type":"host_tool_call","id":"h"}`,
		`{"type":"session","version":3,"id":"0193-ab","cwd":"/w","timestamp":"2026-01-01T00:00:00Z"}`,
		`{"type":"response","id":"lemo-1","command":"get_state","success":true,"data":{"sessionId":"s"}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		fr, err := DecodeFrame(line)
		var e Entry
		parseHeader(line, &e)
		_ = firstPrompt(line)
		if err != nil {
			return
		}
		var p projector
		p.apply(fr)
		p.apply(fr)
		classifyUI(fr)
		if req, action := classifyUI(fr); action == uiApproval {
			_ = approvalReason("pi", req)
			_ = answerApproval(req, true)
			if len(req.detail) > maxDetail {
				t.Fatalf("detail of %d bytes", len(req.detail))
			}
		}
		evs, _ := p.take()
		if len(evs) > maxLiveEvents {
			t.Fatalf("%d live events", len(evs))
		}
		for _, ev := range evs {
			for _, s := range []string{ev.Type, ev.Text, ev.Tool, ev.Error, ev.CallID} {
				if !utf8.ValidString(s) || strings.ContainsRune(s, 0x1b) || len(s) > 2*maxLiveText {
					t.Fatalf("live event text %q", s)
				}
			}
		}
	})
}

// FuzzClean: the output is valid UTF-8 without escapes or controls other
// than newline and tab, and Bound keeps to its limit.
func FuzzClean(f *testing.F) {
	for _, s := range []string{"a\x1b[31mb", "\x1b]0;t\x07", "\u202e", "\xff", "x\r\ny"} {
		f.Add(s, uint16(40))
	}
	f.Fuzz(func(t *testing.T, s string, max uint16) {
		c := Clean(s)
		if !utf8.ValidString(c) {
			t.Fatalf("Clean(%q) = %q: invalid UTF-8", s, c)
		}
		for _, r := range c {
			if (r < 0x20 && r != '\n' && r != '\t') || r == 0x7f || (r >= 0x80 && r <= 0x9f) || isBidiControl(r) {
				t.Fatalf("Clean(%q) = %q keeps %U", s, c, r)
			}
		}
		m := int(max%4096) + 1
		if b, _ := Bound(s, m); len(b) > m || !utf8.ValidString(b) {
			t.Fatalf("Bound(%q, %d) = %q", s, m, b)
		}
	})
}
