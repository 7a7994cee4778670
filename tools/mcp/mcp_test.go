package mcp

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"lemo/supervision"
	"lemo/tools"
)

func TestStdioToolsCallAndProgress(t *testing.T) {
	dir := t.TempDir()
	m := newManager(t, stdioServer(t, "local", dir))
	ts, err := listed(t, m)
	if err != nil {
		t.Fatalf("Tools: %v", err)
	}
	for _, want := range []string{"mcp.local.echo", "mcp.local.crash", "mcp.local.big", "mcp.local.env"} {
		if ts[want] == nil {
			t.Fatalf("tool %s missing; got %v", want, keys(ts))
		}
	}
	echo := ts["mcp.local.echo"]
	if d := echo.Tool.Description(); d != "Echo the text back. Second line. (MCP server local)" {
		t.Errorf("Description() = %q", d)
	}
	// Listing started the server to learn its tools, then stopped it: it
	// starts on first use.
	if st := m.Status()[0].State; st != StateIdle {
		t.Errorf("state after listing = %s, want %s", st, StateIdle)
	}
	if _, err := call(t, context.Background(), echo, `{"text": 5}`, nil); err == nil || !strings.Contains(err.Error(), "invalid input") {
		t.Fatalf("a call with invalid input: %v, want an input validation error", err)
	}
	if got := readMarker(dir, "echo"); len(got) != 0 {
		t.Fatalf("invalid input reached the server: %v", got)
	}
	st := &states{seen: filepath.Join(dir, "seen")}
	out, err := call(t, context.Background(), echo, fmt.Sprintf(`{"text":"hi","seen_file":%q}`, st.seen), st)
	if err != nil {
		t.Fatal(err)
	}
	if out.Text != "echo: hi" || out.Server != "local" || out.Tool != "echo" {
		t.Errorf("output = %+v", out)
	}
	if len(out.Content) != 2 || out.Content[0].Type != "image" || out.Content[0].Bytes != 1234 || out.Content[1].Type != "resource" || out.Content[1].Bytes != 5 {
		t.Errorf("content metadata = %+v, want an image of 1234 bytes and a resource of 5", out.Content)
	}
	if len(st.got) != 3 || st.got[2].Progress != 3 || st.got[2].Total != 3 || st.got[2].Message != "step 3" {
		t.Errorf("progress updates = %+v, want 3 of 3", st.got)
	}
	if s := m.Status()[0].State; s != StateRunning {
		t.Errorf("state after a call = %s, want %s", s, StateRunning)
	}
	if !echo.Tool.(tools.Untrusted).Untrusted() {
		t.Error("an MCP tool's output is not marked untrusted")
	}
	// The server reports a failure in its result: a result, cleaned.
	out, err = call(t, context.Background(), ts["mcp.local.fails"], `{}`, nil)
	if err != nil || !out.IsError || out.Text != "no such thing" {
		t.Errorf("a failing result = %+v, %v; want is_error and the cleaned text", out, err)
	}
}

func TestHTTPServerWithHeaders(t *testing.T) {
	srv := httptest.NewServer(testHTTPHandler(nil))
	t.Cleanup(srv.Close) // after the managers' Close (cleanups run last first)
	bad := newManager(t, ServerConfig{Name: "web", URL: srv.URL, StartTimeout: 10 * time.Second})
	if _, err := bad.Tools(context.Background()); err == nil || !strings.Contains(err.Error(), "web") {
		t.Fatalf("Tools without the header: %v, want an error naming the server", err)
	}
	m := newManager(t, ServerConfig{Name: "web", URL: srv.URL, Headers: map[string]string{"X-Test": "yes"}})
	ts, err := listed(t, m)
	if err != nil {
		t.Fatal(err)
	}
	st := &states{seen: filepath.Join(t.TempDir(), "seen")}
	out, err := call(t, context.Background(), ts["mcp.web.echo"], fmt.Sprintf(`{"text":"over http","seen_file":%q}`, st.seen), st)
	if err != nil {
		t.Fatal(err)
	}
	if out.Text != "echo: over http" || len(st.got) != 3 || st.got[0].Message != "step 1" {
		t.Fatalf("output %+v, progress %+v", out, st.got)
	}
	if m.Status()[0].Transport != "http" {
		t.Errorf("transport = %s", m.Status()[0].Transport)
	}
	// The structured content is validated against the output schema.
	out, err = call(t, context.Background(), ts["mcp.web.goodout"], `{}`, nil)
	if err != nil || string(out.Structured) != `{"n":7}` {
		t.Errorf("goodout = %+v, %v", out, err)
	}
}

func TestNameCollisionRefused(t *testing.T) {
	m := newManager(t, stdioServer(t, "clash", t.TempDir(), "MCPTEST_COLLIDE=1"))
	ts, err := listed(t, m)
	if err == nil {
		t.Fatal("Tools accepted two tools that map to one name")
	}
	for _, want := range []string{`tool "getUser" is not offered: its name maps to mcp.clash.get_user, as "get_user" does`, `tool "get_user" is not offered`, "mcp.servers.clash.tools"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
	if ts["mcp.clash.get_user"] != nil {
		t.Error("a colliding tool is offered")
	}
	if ts["mcp.clash.echo"] == nil {
		t.Error("the other tools of the server are not offered")
	}
	if r := m.Status()[0].Refused; len(r) != 2 {
		t.Errorf("Status().Refused = %+v, want both", r)
	}
}

// Tools of two servers whose names read the same to models (mcp.a_b.echo
// and mcp.a.b.echo mapped to mcp.a.b_echo, both mcp_a_b_echo) are both
// refused, whichever server answers first; the rest are offered.
func TestNameCollisionAcrossServersRefused(t *testing.T) {
	dir := t.TempDir()
	m := newManager(t, stdioServer(t, "a_b", dir), stdioServer(t, "a", dir, "MCPTEST_TOOL=b.echo"))
	ts, err := listed(t, m)
	if err == nil {
		t.Fatal("Tools accepted two tools whose names read the same to models")
	}
	for _, want := range []string{
		`mcp server a: tool "b.echo" is not offered: its name mcp.a.b_echo reads as mcp_a_b_echo to models, as mcp.a_b.echo (tool "echo" of the server a_b) does`,
		`mcp server a_b: tool "echo" is not offered: its name mcp.a_b.echo reads as mcp_a_b_echo to models, as mcp.a.b_echo (tool "b.echo" of the server a) does`,
		"mcp.servers.a.tools or mcp.servers.a_b.tools",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
	for _, refused := range []string{"mcp.a_b.echo", "mcp.a.b_echo"} {
		if ts[refused] != nil {
			t.Errorf("%s is offered", refused)
		}
	}
	if ts["mcp.a.echo"] == nil || ts["mcp.a_b.env"] == nil {
		t.Errorf("the servers' other tools are not offered: %v", keys(ts))
	}
	for _, st := range m.Status() {
		if len(st.Refused) != 1 || !strings.Contains(st.Refused[0].Reason, "reads as mcp_a_b_echo") {
			t.Errorf("%s: Status().Refused = %+v, want the collision", st.Name, st.Refused)
		}
		for _, n := range st.Tools {
			if n == "mcp.a_b.echo" || n == "mcp.a.b_echo" {
				t.Errorf("%s: Status().Tools lists the refused %s", st.Name, n)
			}
		}
	}
}

func TestCrashMidCallIsOutcomeUnknownAndNotResent(t *testing.T) {
	dir := t.TempDir()
	m := newManager(t, stdioServer(t, "local", dir))
	ts, err := listed(t, m)
	if err != nil {
		t.Fatal(err)
	}
	_, err = call(t, context.Background(), ts["mcp.local.crash"], `{}`, nil)
	if !errors.Is(err, supervision.ErrOutcomeUnknown) || supervision.ToolFailureKind(err).String() != "TOOL_FAILURE_KIND_OUTCOME_UNKNOWN" {
		t.Fatalf("crash: %v, want outcome unknown", err)
	}
	if !strings.Contains(err.Error(), "exited with code 3") || !strings.Contains(err.Error(), "not sent again") {
		t.Errorf("error does not say how the server ended: %v", err)
	}
	// The next call starts the server again; the crashed call is not
	// re-sent.
	if _, err := call(t, context.Background(), ts["mcp.local.echo"], `{"text":"after"}`, nil); err != nil {
		t.Fatalf("the call after a crash: %v", err)
	}
	if got := readMarker(dir, "crash"); len(got) != 1 {
		t.Fatalf("crash was executed %d times, want 1", len(got))
	}
	if st := m.Status()[0]; st.State != StateRunning || !strings.Contains(st.LastError, "exited with code 3") {
		t.Errorf("status = %+v", st)
	}
}

func TestKeepsDyingMarksFailed(t *testing.T) {
	dir := t.TempDir()
	m := newManager(t, stdioServer(t, "local", dir))
	ts, err := listed(t, m)
	if err != nil {
		t.Fatal(err)
	}
	for i := range fastRestart.FailAfter {
		if _, err := call(t, context.Background(), ts["mcp.local.crash"], `{}`, nil); !errors.Is(err, supervision.ErrOutcomeUnknown) {
			t.Fatalf("crash %d: %v", i, err)
		}
		eventually(t, 10*time.Second, func() error {
			if s := m.Status()[0].State; s == StateRunning {
				return fmt.Errorf("state %s", s)
			}
			return nil
		})
	}
	_, err = call(t, context.Background(), ts["mcp.local.echo"], `{"text":"x"}`, nil)
	if !errors.Is(err, ErrServerFailed) || !strings.Contains(err.Error(), "lemo doctor") {
		t.Fatalf("a call to a server that keeps dying: %v, want ErrServerFailed", err)
	}
	if s := ts["mcp.local.echo"].Tool.(*Tool).ServerState(); s != StateFailed {
		t.Errorf("ServerState() = %s, want %s", s, StateFailed)
	}
	if got := readMarker(dir, "echo"); len(got) != 0 {
		t.Errorf("a failed server was called: %v", got)
	}
}

// A call that times out leaves the server hung: it is sent MCP's
// cancellation, then stopped with its process tree (before the daemon
// stops), failing the other call in flight as outcome unknown; the next
// call starts it again. A cancelled call stops the server too once no
// other call is in flight on it.
func TestHangTimesOutCancelsAndLeavesNoProcess(t *testing.T) {
	dir := t.TempDir()
	tree := "MCPTEST_TREE=" + strconv.FormatInt(time.Now().UnixNano(), 10)
	sc := stdioServer(t, "local", dir, tree)
	sc.CallTimeout = 500 * time.Millisecond
	m := newManager(t, sc)
	ts, err := listed(t, m)
	if err != nil {
		t.Fatal(err)
	}
	// A call in flight on the same server, whose own timeout is far away.
	waitDone := make(chan error, 1)
	go func() {
		_, err := call(t, context.Background(), withTimeout(ts["mcp.local.wait"], time.Minute), `{}`, nil)
		waitDone <- err
	}()
	eventually(t, 10*time.Second, func() error {
		if got := readMarker(dir, "wait"); len(got) != 1 {
			return fmt.Errorf("wait markers %v", got)
		}
		return nil
	})
	_, err = call(t, context.Background(), ts["mcp.local.hang"], `{}`, nil)
	if !errors.Is(err, supervision.ErrOutcomeUnknown) || !strings.Contains(err.Error(), "timed out after 500ms (mcp.servers.local.timeout)") || !strings.Contains(err.Error(), "stopped as hung") {
		t.Fatalf("hang: %v, want a timeout with outcome unknown that says the server was stopped", err)
	}
	err = <-waitDone
	if !errors.Is(err, supervision.ErrOutcomeUnknown) || !strings.Contains(err.Error(), "did not answer mcp.local.hang within 500ms") {
		t.Fatalf("the call in flight on the hung server: %v, want outcome unknown saying the server hung", err)
	}
	// The hung call started a child that left the server's process group;
	// it is gone with the server, before the daemon stops.
	if got := readMarker(dir, "hang"); len(got) == 0 || !strings.HasPrefix(got[0], "child ") {
		t.Fatalf("hang markers %v, want its child started", got)
	}
	noSurvivors(t, tree)
	// The server was sent MCP's cancellation before it was stopped.
	if got := readMarker(dir, "received"); len(got) != 1 {
		t.Errorf("the server read cancellations %v, want one", got)
	}
	if st := m.Status()[0]; st.State != StateRestarting || !strings.Contains(st.LastError, "stopped it as hung") {
		t.Errorf("status after the hang = %+v, want restarting and why", st)
	}
	// A cancelled call sends the cancellation, and the server (started
	// again by this call) is stopped, as no other call is in flight.
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { _, err := call(t, ctx, withTimeout(ts["mcp.local.hang"], time.Minute), `{}`, nil); done <- err }()
	eventually(t, 10*time.Second, func() error {
		if got := readMarker(dir, "hang"); len(got) < 3 {
			return fmt.Errorf("second hang not started: %v", got)
		}
		return nil
	})
	if ps, _ := procSurvivors(tree); len(ps) < 2 {
		t.Fatalf("want the started server and its child alive during the call, got %+v", ps)
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled call: %v", err)
	}
	noSurvivors(t, tree)
	if got := readMarker(dir, "received"); len(got) != 2 {
		t.Errorf("the server read cancellations %v, want two", got)
	}
	// The next call starts the server again (its timeout, which covers the
	// start, is not the 500 ms of the hangs: a start on a loaded machine
	// took longer).
	if _, err := call(t, context.Background(), withTimeout(ts["mcp.local.echo"], time.Minute), `{"text":"again"}`, nil); err != nil {
		t.Fatalf("the call after the stops: %v", err)
	}
	if st := m.Status()[0].State; st != StateRunning {
		t.Errorf("state after the next call = %s, want %s", st, StateRunning)
	}
}

// A timeout counts as a death: a server that keeps hanging is failed.
func TestRepeatedTimeoutsMarkFailed(t *testing.T) {
	dir := t.TempDir()
	sc := stdioServer(t, "local", dir)
	// The timeout covers starting the server again after each hang: 2 s
	// keeps a start on a loaded machine inside it (300 ms did not: the
	// call timed out before the server was ready, and was not sent).
	sc.CallTimeout = 2 * time.Second
	m := newManager(t, sc)
	ts, err := listed(t, m)
	if err != nil {
		t.Fatal(err)
	}
	for i := range fastRestart.FailAfter {
		if _, err := call(t, context.Background(), ts["mcp.local.hang"], `{}`, nil); !errors.Is(err, supervision.ErrOutcomeUnknown) {
			t.Fatalf("hang %d: %v, want outcome unknown", i, err)
		}
	}
	_, err = call(t, context.Background(), ts["mcp.local.echo"], `{"text":"x"}`, nil)
	if !errors.Is(err, ErrServerFailed) || !strings.Contains(err.Error(), "stopped it as hung") {
		t.Fatalf("a call to a server that keeps hanging: %v, want ErrServerFailed saying why", err)
	}
}

// withTimeout is r with its tool's call timeout set to d.
func withTimeout(r *tools.Registered, d time.Duration) *tools.Registered {
	tool := *r.Tool.(*Tool)
	tool.timeout = d
	c := *r
	c.Tool = &tool
	return &c
}

// noSurvivors waits until no process whose environment holds kv is left.
func noSurvivors(t testing.TB, kv string) {
	t.Helper()
	eventually(t, 20*time.Second, func() error {
		ps, err := procSurvivors(kv)
		if err != nil {
			return err
		}
		if len(ps) > 0 {
			return fmt.Errorf("processes of the server outlived its stop: %+v", ps)
		}
		return nil
	})
}

func TestOutputSchemaFailure(t *testing.T) {
	m := newManager(t, stdioServer(t, "local", t.TempDir()))
	ts, err := listed(t, m)
	if err != nil {
		t.Fatal(err)
	}
	_, err = call(t, context.Background(), ts["mcp.local.badout"], `{}`, nil)
	var ve *tools.ValidationError
	if !errors.As(err, &ve) || ve.What != "output" || !strings.Contains(err.Error(), "at /n") {
		t.Fatalf("badout: %v, want an output validation error at /n", err)
	}
	if k := supervision.ToolFailureKind(err).String(); k != "TOOL_FAILURE_KIND_INVALID_OUTPUT" {
		t.Errorf("failure kind = %s", k)
	}
}

func TestLargeResultsAreBounded(t *testing.T) {
	dir := t.TempDir()
	sc := stdioServer(t, "local", dir)
	m := newManager(t, sc)
	ts, err := listed(t, m)
	if err != nil {
		t.Fatal(err)
	}
	// Within the message bound: the text is cut to max_output_bytes.
	out, err := call(t, context.Background(), ts["mcp.local.big"], `{"bytes": 4000000}`, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !out.Truncated || out.TextBytes != 4000000 || len(out.Text) > DefaultMaxOutputBytes || !strings.HasPrefix(out.Text, "HEAD") || !strings.HasSuffix(out.Text, "TAIL") {
		t.Fatalf("4 MB result: truncated %v, text_bytes %d, len %d", out.Truncated, out.TextBytes, len(out.Text))
	}
	// 100 MB: the connection ends at the message bound, without holding
	// the message.
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	_, err = call(t, context.Background(), ts["mcp.local.big"], `{"bytes": 100000000}`, nil)
	runtime.ReadMemStats(&after)
	t.Logf("100 MB call ended: %v", err)
	if !errors.Is(err, supervision.ErrOutcomeUnknown) || !strings.Contains(err.Error(), "over 16777216 bytes") {
		t.Fatalf("100 MB result: %v, want the message bound", err)
	}
	alloc := after.TotalAlloc - before.TotalAlloc
	t.Logf("a 100 MB result allocated %d MiB in the daemon", alloc>>20)
	if alloc > 64<<20 {
		t.Errorf("a 100 MB result allocated %d MiB, want under 64", alloc>>20)
	}
	// The server starts again on the next call.
	if _, err := call(t, context.Background(), ts["mcp.local.echo"], `{"text":"again"}`, nil); err != nil {
		t.Fatal(err)
	}
}

// Over streamable HTTP a result is bounded as on stdio: a response that is
// one JSON message by the transport's body bound, an event stream by the
// SDK's event bound. The bound is 4 MiB here so that what a 100 MB result
// costs is seen to follow the bound, not the result: the SDK's io.ReadAll
// keeps its chunks and makes a final copy even on an error (about twice
// the bound, four times under -race), and its event scanner grows a line
// by append (about six times the bound).
func TestLargeHTTPResultsAreBounded(t *testing.T) {
	const bound = 4 << 20
	for _, c := range []struct {
		name string
		json bool
		want string
	}{
		{"json", true, "it sent a response over 4194304 bytes (mcp.servers.<name>.max_message_bytes)"},
		{"sse", false, "SSE event exceeded 4194304 bytes"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var env []string
			if c.json {
				env = append(env, "MCPTEST_JSON=1")
			}
			url := httpServerProcess(t, env...)
			m := newManager(t, ServerConfig{Name: "web", URL: url, Headers: map[string]string{"X-Test": "yes"}, MaxMessageBytes: bound})
			ts, err := listed(t, m)
			if err != nil {
				t.Fatal(err)
			}
			out, err := call(t, context.Background(), ts["mcp.web.big"], `{"bytes": 1000000}`, nil)
			if err != nil {
				t.Fatal(err)
			}
			if !out.Truncated || out.TextBytes != 1000000 {
				t.Fatalf("1 MB result: truncated %v, text_bytes %d", out.Truncated, out.TextBytes)
			}
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			_, err = call(t, context.Background(), ts["mcp.web.big"], `{"bytes": 100000000}`, nil)
			runtime.ReadMemStats(&after)
			t.Logf("100 MB call ended: %v", err)
			if !errors.Is(err, supervision.ErrOutcomeUnknown) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("100 MB result: %v, want outcome unknown naming the bound (%s)", err, c.want)
			}
			alloc := after.TotalAlloc - before.TotalAlloc
			t.Logf("a 100 MB result allocated %d MiB in the daemon", alloc>>20)
			if alloc > 8*bound {
				t.Errorf("a 100 MB result allocated %d MiB, want under %d (8 times the bound)", alloc>>20, 8*bound>>20)
			}
			// The session is started again on the next call.
			eventually(t, 20*time.Second, func() error {
				_, err := call(t, context.Background(), ts["mcp.web.echo"], `{"text":"again"}`, nil)
				return err
			})
		})
	}
}

func TestServerEnvironmentHoldsOnlyWhatConfigPasses(t *testing.T) {
	m := newManager(t, stdioServer(t, "local", t.TempDir(), "OPENROUTER_API_KEY", "SET_BY_CONFIG=yes"))
	ts, err := listed(t, m)
	if err != nil {
		t.Fatal(err)
	}
	out, err := call(t, context.Background(), ts["mcp.local.env"], `{}`, nil)
	if err != nil {
		t.Fatal(err)
	}
	env := "\n" + out.Text + "\n"
	for _, absent := range []string{"planted-lemo-token", "planted-plain", "planted-password", "LEMO_AUTH_TOKEN", "GOPATH="} {
		if strings.Contains(env, absent) {
			t.Errorf("the server sees %q:\n%s", absent, out.Text)
		}
	}
	for _, present := range []string{"\nOPENROUTER_API_KEY=planted-provider-key\n", "\nSET_BY_CONFIG=yes\n", "\nPATH=", "\nLEMO_RUN_TAG=mcp-test\n", "\n" + TagVariable + "=local/"} {
		if !strings.Contains(env, present) {
			t.Errorf("the server lacks %q:\n%s", strings.TrimSpace(present), out.Text)
		}
	}
}

// A stdio server runs in its configured folder (cwd), and without one in
// the daemon's.
func TestServerRunsInItsFolder(t *testing.T) {
	dir := t.TempDir()
	work := filepath.Join(t.TempDir(), "work")
	if err := os.Mkdir(work, 0o700); err != nil {
		t.Fatal(err)
	}
	sc := stdioServer(t, "local", dir)
	sc.Dir = work
	m := newManager(t, sc, stdioServer(t, "plain", dir))
	ts, err := listed(t, m)
	if err != nil {
		t.Fatal(err)
	}
	own, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for tool, want := range map[string]string{"mcp.local.cwd": work, "mcp.plain.cwd": own} {
		out, err := call(t, context.Background(), ts[tool], `{}`, nil)
		if err != nil {
			t.Fatal(err)
		}
		got, err := filepath.EvalSymlinks(out.Text)
		if err != nil {
			t.Fatalf("%s said %q: %v", tool, out.Text, err)
		}
		if want, _ = filepath.EvalSymlinks(want); got != want {
			t.Errorf("%s: the server runs in %s, want %s", tool, got, want)
		}
	}
}

func keys[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// flaky serves h until down is set; then it drops every connection.
type flaky struct {
	h    atomic.Pointer[http.Handler]
	down atomic.Bool
}

func (f *flaky) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if f.down.Load() {
		panic(http.ErrAbortHandler)
	}
	(*f.h.Load()).ServeHTTP(w, r)
}

// An HTTP server that goes away fails the call as outcome unknown; once it
// is back (with none of the old sessions), the next call connects again.
func TestHTTPServerGoneAndBack(t *testing.T) {
	f := &flaky{}
	h := testHTTPHandler(nil)
	f.h.Store(&h)
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	m, err := New(Config{Servers: []ServerConfig{{Name: "web", URL: srv.URL, Headers: map[string]string{"X-Test": "yes"}}},
		Restart: RestartPolicy{Backoff: 10 * time.Millisecond, MaxBackoff: 40 * time.Millisecond, Window: time.Hour, FailAfter: 1000}, Log: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Close)
	ts, err := listed(t, m)
	if err != nil {
		t.Fatal(err)
	}
	echo := ts["mcp.web.echo"]
	if _, err := call(t, context.Background(), echo, `{"text":"before"}`, nil); err != nil {
		t.Fatal(err)
	}
	f.down.Store(true)
	srv.CloseClientConnections()
	if _, err := call(t, context.Background(), echo, `{"text":"while down"}`, nil); !errors.Is(err, supervision.ErrOutcomeUnknown) {
		t.Fatalf("a call to a server that is gone: %v, want outcome unknown", err)
	}
	h2 := testHTTPHandler(nil)
	f.h.Store(&h2)
	f.down.Store(false)
	eventually(t, 20*time.Second, func() error {
		out, err := call(t, context.Background(), echo, `{"text":"after"}`, nil)
		if err != nil {
			return err
		}
		if out.Text != "echo: after" {
			return fmt.Errorf("output %+v", out)
		}
		return nil
	})
}
