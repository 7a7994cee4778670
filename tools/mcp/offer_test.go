package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"go.uber.org/goleak"

	"lemo/tools"
)

// unavailable answers 503 until up is set, then serves the in-test server.
type unavailable struct {
	up atomic.Bool
	h  http.Handler
}

func (u *unavailable) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !u.up.Load() {
		http.Error(w, "starting up", http.StatusServiceUnavailable)
		return
	}
	u.h.ServeHTTP(w, r)
}

// listObserver counts failed listings by server.
type listObserver struct{ fails atomic.Int64 }

func (*listObserver) MCPCall(string, string) {}
func (o *listObserver) MCPListFailed(string) { o.fails.Add(1) }

// stubTool is a daemon tool that does nothing.
type stubTool struct{ name string }

func (s stubTool) Name() string                              { return s.name }
func (stubTool) Description() string                         { return "A stub." }
func (stubTool) InputSchema() json.RawMessage                { return json.RawMessage(`{"type":"object"}`) }
func (stubTool) StateSchema() json.RawMessage                { return nil }
func (stubTool) ResultSchema() json.RawMessage               { return json.RawMessage(`{}`) }
func (stubTool) View() string                                { return "" }
func (stubTool) Retain(o, _ json.RawMessage) json.RawMessage { return o }
func (stubTool) Execute(context.Context, tools.Call, tools.Emit) (json.RawMessage, error) {
	return json.RawMessage(`{}`), nil
}

// pendingOf returns the state Pending gives the server, "" when none.
func pendingOf(m *Manager, server string) string {
	for _, p := range m.Pending() {
		if p.Prefix == Prefix+server+"." {
			return p.State
		}
	}
	return ""
}

// An HTTP server that answers 503 when the daemon starts offers its tools
// once it is up, without a restart: Pending says why they are missing
// until then; the tools registered late are callable, and the tool whose
// name meets one registered before it is refused.
func TestHTTPServerUpLateGetsItsToolsRegistered(t *testing.T) {
	u := &unavailable{h: testHTTPHandler(nil)}
	srv := httptest.NewServer(u)
	t.Cleanup(srv.Close)
	obs := &listObserver{}
	m, err := New(Config{Servers: []ServerConfig{{Name: "late", URL: srv.URL, Headers: map[string]string{"X-Test": "yes"}, Approval: ApprovalAllow}},
		Restart: fastRestart, Observer: obs, Log: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Close)
	reg := tools.NewRegistry()
	// A tool registered before whose name meets mcp.late.env as models
	// see it: it stays, the server's is refused.
	if err := reg.Register(stubTool{name: "mcp_late.env"}); err != nil {
		t.Fatal(err)
	}
	reg.SetPending(m.Pending)
	if err := m.Offer(context.Background(), reg); err == nil || !strings.Contains(err.Error(), "Service Unavailable") {
		t.Fatalf("Offer with the server down: %v, want its Service Unavailable", err)
	}
	if _, ok := reg.Get("mcp.late.echo"); ok {
		t.Fatal("a server answering 503 has tools registered")
	}
	eventually(t, 10*time.Second, func() error {
		if st := pendingOf(m, "late"); !strings.HasPrefix(st, "listing failed: ") || !strings.Contains(st, "; retrying ") {
			return fmt.Errorf("pending state %q, want listing failed ...; retrying ...", st)
		}
		return nil
	})
	if _, err := reg.Select([]string{"mcp.late.echo"}, true); err == nil || !strings.Contains(err.Error(), "the mcp server late has not listed its tools (listing failed: ") {
		t.Fatalf("Select of a tool of the pending server: %v", err)
	}
	// A few retries fail while it is down, and are counted.
	eventually(t, 10*time.Second, func() error {
		if n := obs.fails.Load(); n < 3 {
			return fmt.Errorf("%d listing failures counted", n)
		}
		return nil
	})
	u.up.Store(true)
	eventually(t, 10*time.Second, func() error {
		if _, ok := reg.Get("mcp.late.echo"); !ok {
			return fmt.Errorf("mcp.late.echo is not registered; pending: %v", m.Pending())
		}
		return nil
	})
	if p := m.Pending(); len(p) != 0 {
		t.Errorf("Pending() = %v after the listing, want none", p)
	}
	r, _ := reg.Get("mcp.late.echo")
	out, err := call(t, context.Background(), r, `{"text":"late"}`, nil)
	if err != nil || out.Text != "echo: late" {
		t.Fatalf("call of the late tool: %+v, %v", out, err)
	}
	if _, ok := reg.Get("mcp.late.env"); ok {
		t.Error("mcp.late.env was registered though mcp_late.env was offered before it")
	}
	st := m.Status()[0]
	found := false
	for _, rf := range st.Refused {
		found = found || rf.Tool == "env" && strings.Contains(rf.Reason, "mcp_late.env")
	}
	if !found || st.State != StateRunning {
		t.Errorf("status %+v: want env refused naming mcp_late.env, and running", st)
	}
}

// A stdio server whose command fails its first starts (more than the
// restart policy allows before it marks it failed) gets its tools
// registered once a start works; its calls are not refused as failed.
func TestStdioServerFailingItsFirstStartsGetsItsToolsRegistered(t *testing.T) {
	dir := t.TempDir()
	n := fastRestart.FailAfter + 2
	m := newManager(t, stdioServer(t, "flaky", dir, "MCPTEST_FAIL_STARTS="+strconv.Itoa(n)))
	reg := tools.NewRegistry()
	if err := m.Offer(context.Background(), reg); err == nil {
		t.Fatal("Offer: no error though the server's first start failed")
	}
	if _, ok := reg.Get("mcp.flaky.echo"); ok {
		t.Fatal("tools registered from a start that failed")
	}
	eventually(t, 20*time.Second, func() error {
		if _, ok := reg.Get("mcp.flaky.echo"); !ok {
			return fmt.Errorf("mcp.flaky.echo is not registered; pending: %v", m.Pending())
		}
		return nil
	})
	if got := len(readMarker(dir, "starts")); got != n+1 {
		t.Errorf("%d starts, want %d failed and one that listed", got, n)
	}
	r, _ := reg.Get("mcp.flaky.echo")
	out, err := call(t, context.Background(), r, `{"text":"works"}`, nil)
	if err != nil || out.Text != "echo: works" {
		t.Fatalf("call of the late tool: %+v, %v", out, err)
	}
}

// Close while a server's listing waits for its retry, or while a retry's
// start is under way, ends the retries and leaves no goroutine and no
// process of the server.
func TestCloseStopsTheListingRetries(t *testing.T) {
	for _, c := range []struct {
		name string
		env  string
		// ready: the retry is where Close must stop it.
		ready func(m *Manager, dir string) error
	}{
		{"waiting for the retry", "MCPTEST_FAIL_STARTS=1000", func(m *Manager, _ string) error {
			if st := pendingOf(m, "down"); !strings.Contains(st, "retrying in") {
				return fmt.Errorf("pending %q", st)
			}
			return nil
		}},
		{"a retry's start under way", "MCPTEST_FAIL_STARTS=1 MCPTEST_START_HANG=1", func(_ *Manager, dir string) error {
			// The start at Offer failed; the retry's hangs.
			if got := readMarker(dir, "starts"); !slices.Contains(got, "hang") {
				return fmt.Errorf("starts %q", got)
			}
			return nil
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
			dir := t.TempDir()
			tag := "MCPTEST_TREE=offer-" + strconv.FormatInt(time.Now().UnixNano(), 10)
			sc := stdioServer(t, "down", dir, append(strings.Fields(c.env), tag)...)
			sc.StartTimeout = time.Hour
			// A long backoff, but for the first retry of the hanging one.
			policy := RestartPolicy{Backoff: time.Hour, MaxBackoff: time.Hour, Window: time.Hour, FailAfter: 3}
			if strings.Contains(c.env, "HANG") {
				policy.Backoff = time.Millisecond
			}
			m, err := New(Config{Servers: []ServerConfig{sc}, Environ: append([]string{}, planted...), RunTag: "LEMO_RUN_TAG=mcp-test",
				ExitGrace: time.Second, KillGrace: time.Second, Restart: policy, Log: zerolog.Nop()})
			if err != nil {
				t.Fatal(err)
			}
			if err := m.Offer(context.Background(), tools.NewRegistry()); err == nil {
				t.Fatal("Offer: no error from a server that cannot start")
			}
			eventually(t, 20*time.Second, func() error { return c.ready(m, dir) })
			var closed atomic.Bool
			go func() {
				m.Close()
				closed.Store(true)
			}()
			eventually(t, 30*time.Second, func() error {
				if !closed.Load() {
					return errors.New("Close has not returned")
				}
				return nil
			})
			noSurvivors(t, tag)
			if p := m.Pending(); len(p) != 0 {
				t.Errorf("Pending() = %v after Close", p)
			}
		})
	}
}
