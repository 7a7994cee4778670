package mcp

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"syscall"
	"testing"
	"time"

	gomcp "github.com/modelcontextprotocol/go-sdk/mcp"
)

func TestMapToolName(t *testing.T) {
	for in, want := range map[string]string{
		"echo": "echo", "getUser": "get_user", "get_user": "get_user", "read-file": "read-file",
		"a.b": "a_b", "HTTPGet": "httpget", "v2Call": "v2_call", "ünï": "_n_", "x y": "x_y",
	} {
		if got := MapToolName(in); got != want {
			t.Errorf("MapToolName(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestPlan(t *testing.T) {
	long := strings.Repeat("x", 60)
	offered, refused := Plan("srv", []string{"echo", "getUser", "get_user", "a.b", "a_b", long, "other"}, nil)
	if len(offered) != 2 || offered["echo"] != "mcp.srv.echo" || offered["other"] != "mcp.srv.other" {
		t.Errorf("offered = %v", offered)
	}
	var names []string
	for _, r := range refused {
		names = append(names, r.Tool)
	}
	if got := strings.Join(names, ","); got != "a.b,a_b,getUser,get_user,"+long {
		t.Errorf("refused = %v", refused)
	}
	if !strings.Contains(refused[0].Reason, `maps to mcp.srv.a_b, as "a_b" does`) {
		t.Errorf("reason = %q", refused[0].Reason)
	}
	offered, refused = Plan("srv", []string{"echo", "getUser", "get_user"}, []string{"getUser"})
	if len(offered) != 1 || offered["getUser"] != "mcp.srv.get_user" || len(refused) != 0 {
		t.Errorf("with an allow-list: %v %v", offered, refused)
	}
}

func TestRestartPolicy(t *testing.T) {
	p := RestartPolicy{Backoff: time.Second, MaxBackoff: 4 * time.Second, Window: time.Minute, FailAfter: 4}
	t0 := time.Unix(1000, 0)
	at := func(secs ...int) []time.Time { return secondsAfter(t0, secs...) }
	for _, c := range []struct {
		name   string
		deaths []time.Time
		now    int
		wait   time.Duration
		failed bool
	}{
		{"never died", nil, 0, 0, false},
		{"just died", at(0), 0, time.Second, false},
		{"backoff passed", at(0), 2, 0, false},
		{"second death doubles", at(0, 10), 10, 2 * time.Second, false},
		{"third doubles again", at(0, 10, 20), 21, 3 * time.Second, false},
		{"fails", at(0, 10, 20, 30), 31, 0, true},
		{"deaths age out", at(0, 10, 20, 30), 65, 0, false},
		{"old deaths do not count", at(0, 70), 70, time.Second, false},
	} {
		wait, failed := p.Next(c.deaths, t0.Add(time.Duration(c.now)*time.Second))
		if wait != c.wait || failed != c.failed {
			t.Errorf("%s: Next = %v, %v; want %v, %v", c.name, wait, failed, c.wait, c.failed)
		}
	}
	p.FailAfter = 10
	if wait, _ := p.Next(at(0, 1, 2, 3, 4, 5), t0.Add(5*time.Second)); wait != 4*time.Second {
		t.Errorf("backoff not capped: %v", wait)
	}
}

func TestDecideApproval(t *testing.T) {
	no, yes := false, true
	for _, c := range []struct {
		name string
		mode string
		ann  *gomcp.ToolAnnotations
		ask  bool
	}{
		{"no annotations: destructive and open by MCP's defaults", ApprovalAnnotations, nil, true},
		{"read-only", ApprovalAnnotations, &gomcp.ToolAnnotations{ReadOnlyHint: true}, false},
		{"destructive", ApprovalAnnotations, &gomcp.ToolAnnotations{DestructiveHint: &yes, OpenWorldHint: &no}, true},
		{"open world", ApprovalAnnotations, &gomcp.ToolAnnotations{DestructiveHint: &no, OpenWorldHint: &yes}, true},
		{"neither: approvals.* decide", ApprovalAnnotations, &gomcp.ToolAnnotations{DestructiveHint: &no, OpenWorldHint: &no}, false},
		{"ask asks a read-only tool too", ApprovalAsk, &gomcp.ToolAnnotations{ReadOnlyHint: true}, true},
		{"allow", ApprovalAllow, nil, false},
	} {
		a := decideApproval("s", c.mode, c.ann)
		if a.Required != c.ask || a.Deny {
			t.Errorf("%s: %+v, want required %v", c.name, a, c.ask)
		}
		if a.Required && !strings.Contains(a.Reason, "mcp.servers.s.approval") {
			t.Errorf("%s: reason %q does not name the key that changes it", c.name, a.Reason)
		}
	}
}

func TestRetain(t *testing.T) {
	o := Output{Server: "s", Tool: "t", Text: strings.Repeat("a", 5000) + strings.Repeat("b", 5000), TextBytes: 10000, Structured: json.RawMessage(`{"k":"` + strings.Repeat("v", 3000) + `"}`)}
	b, _ := json.Marshal(o)
	if retain(RetainNone, 1024, b) != nil {
		t.Error("none retained something")
	}
	if string(retain(RetainFull, 1024, b)) != string(b) {
		t.Error("full did not retain the output")
	}
	var got Output
	if err := json.Unmarshal(retain(RetainExcerpt, 2048, b), &got); err != nil {
		t.Fatal(err)
	}
	if len(got.Text) > 2048 || !got.Truncated || !strings.HasPrefix(got.Text, "aaa") || !strings.HasSuffix(got.Text, "bbb") || got.TextBytes != 10000 {
		t.Errorf("excerpt: %d bytes, truncated %v, text_bytes %d", len(got.Text), got.Truncated, got.TextBytes)
	}
	if got.Structured != nil || !got.StructuredOmitted {
		t.Errorf("large structured content retained: %s", got.Structured)
	}
}

func TestServerEnv(t *testing.T) {
	environ := []string{"PATH=/bin", "HOME=/h", "LC_ALL=C", "OPENAI_API_KEY=k", "LEMO_TOKEN=t", "SOMETHING=s", "AWS_SECRET=x", "MALFORMED"}
	got := strings.Join(serverEnv(environ, []string{"OPENAI_API_KEY", "MODE=x", "PATH=/override"}, []string{"LEMO_RUN_TAG=r"}), " ")
	if want := "PATH=/override HOME=/h LC_ALL=C OPENAI_API_KEY=k MODE=x LEMO_RUN_TAG=r"; got != want {
		t.Errorf("serverEnv = %q\nwant        %q", got, want)
	}
	if got := serverEnv(environ, []string{"LEMO_TOKEN", "LEMO_X=1"}, nil); strings.Contains(strings.Join(got, " "), "LEMO_") {
		t.Errorf("LEMO_* passed: %v", got)
	}
}

func TestLineLimit(t *testing.T) {
	l := &lineLimit{r: io.NopCloser(strings.NewReader("short\n" + strings.Repeat("x", 100) + "\nok\n")), max: 50}
	b, err := io.ReadAll(l)
	if err != errTooLarge || !l.exceeded.Load() || len(b) > 6 {
		t.Fatalf("ReadAll = %q, %v; want the bound", b, err)
	}
	l = &lineLimit{r: io.NopCloser(strings.NewReader(strings.Repeat(strings.Repeat("y", 40)+"\n", 100))), max: 50}
	if b, err := io.ReadAll(l); err != nil || len(b) != 4100 {
		t.Fatalf("many short lines: %d bytes, %v", len(b), err)
	}
}

func TestMapResult(t *testing.T) {
	size := int64(99)
	r := &gomcp.CallToolResult{Content: []gomcp.Content{
		&gomcp.TextContent{Text: "a\x1b[2Jb"}, &gomcp.TextContent{Text: "\u202ec"},
		&gomcp.ResourceLink{URI: "file:///big", Name: "big", Size: &size},
		&gomcp.AudioContent{Data: []byte("123"), MIMEType: "audio/wav"},
	}, StructuredContent: map[string]any{"k": strings.Repeat("v", 2000)}}
	o := mapResult("s", "t", r, 1024)
	if o.Text != "ab\nc" || o.Truncated {
		t.Errorf("text = %q", o.Text)
	}
	if len(o.Content) != 2 || o.Content[0].Bytes != 99 || o.Content[1].Bytes != 3 {
		t.Errorf("content = %+v", o.Content)
	}
	if o.Structured != nil || !o.StructuredOmitted || o.StructuredBytes < 2000 {
		t.Errorf("structured over the bound: %+v", o)
	}
}

func TestAfterCall(t *testing.T) {
	for _, c := range []struct {
		name     string
		end      callEnd
		stdio    bool
		gone     bool
		retired  bool
		inFlight int
		want     connAction
	}{
		{"answered", endDone, true, false, false, 0, keepConn},
		{"answered with others in flight", endDone, true, false, false, 2, keepConn},
		{"timed out: hung", endTimedOut, true, false, false, 0, killConn},
		{"timed out with others in flight: they fail too", endTimedOut, true, false, false, 3, killConn},
		{"timed out on a retired server", endTimedOut, true, false, true, 1, killConn},
		{"cancelled, alone", endCancelled, true, false, false, 0, stopConn},
		{"cancelled, others in flight", endCancelled, true, false, false, 1, retireConn},
		{"cancelled again on a retired server", endCancelled, true, false, true, 1, retireConn},
		{"last call of a retired server", endDone, true, false, true, 0, stopConn},
		{"a call of a retired server, others left", endDone, true, false, true, 1, keepConn},
		{"timed out on a server already gone", endTimedOut, true, true, false, 0, keepConn},
		{"cancelled on a server already gone", endCancelled, true, true, true, 0, keepConn},
		{"http: timed out", endTimedOut, false, false, false, 0, keepConn},
		{"http: cancelled", endCancelled, false, false, false, 0, keepConn},
	} {
		if got := afterCall(c.end, c.stdio, c.gone, c.retired, c.inFlight); got != c.want {
			t.Errorf("%s: afterCall = %d, want %d", c.name, got, c.want)
		}
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

func TestHeaderTransportBoundsBodies(t *testing.T) {
	for _, c := range []struct {
		name, contentType string
		body              int
		contentLength     int64
		wantErr           bool
	}{
		{"json within", "application/json", 100, -1, false},
		{"json at the bound", "application/json", 1000, -1, false},
		{"json over", "application/json; charset=utf-8", 1001, -1, true},
		{"said too large", "application/json", 10, 5000, true},
		{"no type over", "", 2000, -1, true},
		{"event stream: the SDK bounds each event", "text/event-stream", 5000, -1, false},
	} {
		tr := &headerTransport{max: 1000, headers: map[string]string{"X-Key": "v"}, base: roundTripFunc(func(r *http.Request) (*http.Response, error) {
			if r.Header.Get("X-Key") != "v" {
				t.Errorf("%s: header not sent", c.name)
			}
			h := http.Header{}
			h.Set("Content-Type", c.contentType)
			return &http.Response{StatusCode: 200, Header: h, ContentLength: c.contentLength, Body: io.NopCloser(strings.NewReader(strings.Repeat("x", c.body)))}, nil
		})}
		req, _ := http.NewRequest("POST", "http://example.invalid/", nil)
		resp, err := tr.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(resp.Body)
		if gotErr := err != nil; gotErr != c.wantErr || gotErr != tr.exceeded.Load() {
			t.Errorf("%s: read %d bytes, %v (exceeded %v); want an error %v", c.name, len(b), err, tr.exceeded.Load(), c.wantErr)
		}
		if err != nil && (!errors.Is(err, errTooLarge) || len(b) > 1000) {
			t.Errorf("%s: %v after %d bytes, want errTooLarge within the bound", c.name, err, len(b))
		}
	}
}

func TestCollisions(t *testing.T) {
	ab := ServerTool{Server: "a_b", Tool: "c", Name: "mcp.a_b.c"}
	a := ServerTool{Server: "a", Tool: "b.c", Name: "mcp.a.b_c"}
	a2 := ServerTool{Server: "a", Tool: "b_c", Name: "mcp.a.b_c"}
	x := ServerTool{Server: "a", Tool: "x", Name: "mcp.a.x"}
	abx := ServerTool{Server: "a_b", Tool: "x", Name: "mcp.a_b.x"}
	three := ServerTool{Server: "a_b_c", Tool: "d", Name: "mcp.a_b_c.d"}
	threeB := ServerTool{Server: "a_b", Tool: "c.d", Name: "mcp.a_b.c_d"}
	for _, c := range []struct {
		name string
		in   []ServerTool
		want map[ServerTool][]string // refused, with what the reason must say
	}{
		{"none", nil, nil},
		{"distinct", []ServerTool{ab, x, abx}, nil},
		{"two servers meet", []ServerTool{ab, x, a}, map[ServerTool][]string{
			ab: {"mcp.a_b.c reads as mcp_a_b_c", `mcp.a.b_c (tool "b.c" of the server a)`, "mcp.servers.a.tools or mcp.servers.a_b.tools"},
			a:  {"mcp.a.b_c reads as mcp_a_b_c", `mcp.a_b.c (tool "c" of the server a_b)`, "neither is offered"},
		}},
		{"order does not matter", []ServerTool{a2, ab}, map[ServerTool][]string{ab: {`tool "b_c" of the server a`}, a2: {`tool "c" of the server a_b`}}},
		{"three names", []ServerTool{three, threeB, {Server: "a", Tool: "b_c_d", Name: "mcp.a.b_c_d"}}, map[ServerTool][]string{
			three:  {"mcp_a_b_c_d", "mcp.a.b_c_d", "mcp.a_b.c_d"},
			threeB: {"mcp.a.b_c_d", "mcp.a_b_c.d"},
			{Server: "a", Tool: "b_c_d", Name: "mcp.a.b_c_d"}: {"mcp.a_b.c_d", "mcp.a_b_c.d"},
		}},
	} {
		checkRefused(t, c.name+": Collisions", Collisions(c.in), c.want)
	}
}

func TestReachedServer(t *testing.T) {
	wrap := func(e error) error {
		return fmt.Errorf("calling \"tools/call\": %w: %w", errors.New("rejected by transport"), &url.Error{Op: "Post", URL: "http://h/", Err: e})
	}
	for _, c := range []struct {
		name string
		err  error
		want bool
	}{
		{"connection refused", wrap(&net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}), false},
		{"no such host", wrap(&net.OpError{Op: "dial", Net: "tcp", Err: &net.DNSError{Err: "no such host", Name: "h"}}), false},
		{"dropped after the request", wrap(io.EOF), true},
		{"reset while reading", wrap(&net.OpError{Op: "read", Net: "tcp", Err: syscall.ECONNRESET}), true},
		{"reset while writing", wrap(&net.OpError{Op: "write", Net: "tcp", Err: syscall.EPIPE}), true},
		{"timeout awaiting headers", wrap(errors.New("net/http: timeout awaiting response headers")), true},
	} {
		if got := reachedServer(c.err); got != c.want {
			t.Errorf("%s: reachedServer = %v, want %v", c.name, got, c.want)
		}
	}
}

func TestWireTellsWhenACancellationIsWritten(t *testing.T) {
	w := &wire{w: nopCloser{io.Discard}}
	closed := func(ch <-chan struct{}) bool {
		select {
		case <-ch:
			return true
		default:
			return false
		}
	}
	if !closed(w.cancelWritten("lemo-9")) {
		t.Error("a call never written waits for its cancellation")
	}
	for _, m := range []string{
		`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"_meta":{"progressToken":"lemo-1"},"name":"x","arguments":{"text":"notifications/cancelled"}}}`,
		`{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"_meta":{"progressToken":"lemo-2"},"name":"y","arguments":{}}}`,
	} {
		if _, err := w.Write([]byte(m + "\n")); err != nil {
			t.Fatal(err)
		}
	}
	one, two := w.cancelWritten("lemo-1"), w.cancelWritten("lemo-2")
	if closed(one) || closed(two) {
		t.Fatal("a cancellation seen before any was written")
	}
	_, _ = w.Write([]byte(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"reason":"x","requestId":8}}` + "\n"))
	if closed(one) || !closed(two) {
		t.Fatalf("after the cancellation of id 8: lemo-1 %v, lemo-2 %v; want only lemo-2", closed(one), closed(two))
	}
	w.forget("lemo-1")
	w.forget("lemo-2")
	if len(w.ids) != 0 || len(w.written) != 0 {
		t.Errorf("forget left %v %v", w.ids, w.written)
	}
}

// The background listing of a server whose tools were never listed backs
// off as its restarts do, then, once the policy would mark it failed,
// keeps trying at the longest backoff.
func TestListRetry(t *testing.T) {
	p := RestartPolicy{Backoff: time.Second, MaxBackoff: 8 * time.Second, Window: time.Minute, FailAfter: 3}
	t0 := time.Unix(1000, 0)
	at := func(secs ...int) []time.Time { return secondsAfter(t0, secs...) }
	for _, c := range []struct {
		name  string
		fails []time.Time
		now   int
		wait  time.Duration
		eager bool
	}{
		{"never failed", nil, 0, 0, true},
		{"failed once", at(0), 0, time.Second, true},
		{"twice: doubled", at(0, 1), 1, 2 * time.Second, true},
		{"backoff passed", at(0, 1), 5, 0, true},
		{"failed: the longest backoff", at(0, 1, 3), 3, 8 * time.Second, false},
		{"failed: the longest backoff after the last failure", at(0, 1, 3), 7, 4 * time.Second, false},
		{"failed: overdue", at(0, 1, 3), 20, 0, false},
		{"still failed at the longest backoff", at(0, 1, 3, 11, 19), 19, 8 * time.Second, false},
		{"failures age out: eager again", at(0, 1, 3), 62, 0, true},
		{"one recent failure", at(0, 1, 3, 70), 70, time.Second, true},
	} {
		wait, eager := p.listRetry(c.fails, t0.Add(time.Duration(c.now)*time.Second))
		if wait != c.wait || eager != c.eager {
			t.Errorf("%s: listRetry = %v, %v; want %v, %v", c.name, wait, eager, c.wait, c.eager)
		}
	}
}

func TestPendingState(t *testing.T) {
	for _, c := range []struct {
		why  string
		wait time.Duration
		want string
	}{
		{"connection refused", 7600 * time.Millisecond, "listing failed: connection refused; retrying in 8s"},
		{"503\nService Unavailable", 300 * time.Millisecond, "listing failed: 503 Service Unavailable; retrying in under a second"},
		{"x", 0, "listing failed: x; retrying now"},
	} {
		if got := pendingState(c.why, c.wait); got != c.want {
			t.Errorf("pendingState(%q, %v) = %q, want %q", c.why, c.wait, got, c.want)
		}
	}
}

// A server that lists its tools late: those whose names meet a registered
// one (as models see them) are refused and the registered one stays.
func TestAdmit(t *testing.T) {
	late := ServerTool{Server: "a", Tool: "b.c", Name: "mcp.a.b_c"}
	ok := ServerTool{Server: "a", Tool: "x", Name: "mcp.a.x"}
	for _, c := range []struct {
		name       string
		registered []string
		late       []ServerTool
		want       map[ServerTool][]string
	}{
		{"nothing registered", nil, []ServerTool{late, ok}, nil},
		{"distinct", []string{"mcp.b.x", "files.read"}, []ServerTool{late, ok}, nil},
		{"meets a registered tool", []string{"mcp.a_b.c", "files.read"}, []ServerTool{late, ok}, map[ServerTool][]string{
			late: {"mcp.a.b_c reads as mcp_a_b_c", "the tool mcp.a_b.c, offered before the server a listed its tools", "mcp.servers.a.tools"},
		}},
		{"the same name registered", []string{"mcp.a.x"}, []ServerTool{ok}, map[ServerTool][]string{ok: {"as the tool mcp.a.x"}}},
		{"meet each other", nil, []ServerTool{late, {Server: "a_b", Tool: "c", Name: "mcp.a_b.c"}}, map[ServerTool][]string{
			late: {"neither is offered"}, {Server: "a_b", Tool: "c", Name: "mcp.a_b.c"}: {"neither is offered"},
		}},
	} {
		checkRefused(t, c.name+": Admit", Admit(c.registered, c.late), c.want)
	}
}

// secondsAfter returns the times secs seconds after t0.
func secondsAfter(t0 time.Time, secs ...int) []time.Time {
	var out []time.Time
	for _, s := range secs {
		out = append(out, t0.Add(time.Duration(s)*time.Second))
	}
	return out
}

// checkRefused fails t unless got refuses exactly the tools of want, each
// with a reason holding every part want lists.
func checkRefused(t *testing.T, what string, got map[ServerTool]string, want map[ServerTool][]string) {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("%s = %v, want %d refused", what, got, len(want))
		return
	}
	for tool, parts := range want {
		why, ok := got[tool]
		if !ok {
			t.Errorf("%s: %s not refused: %v", what, tool.Name, got)
		}
		for _, p := range parts {
			if !strings.Contains(why, p) {
				t.Errorf("%s: the reason for %s lacks %q: %s", what, tool.Name, p, why)
			}
		}
	}
}
