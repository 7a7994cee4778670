package mcp

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"go.uber.org/goleak"

	"lemo/internal/testwait"
	"lemo/tools"
	"lemo/tools/internal/proc"
)

func TestMain(m *testing.M) {
	switch os.Getenv(roleVariable) {
	case "server":
		os.Exit(serveTestStdio())
	case "http-server":
		os.Exit(serveTestHTTP())
	}
	// The in-test HTTP server that "goes away" (TestHTTPServerGoneAndBack)
	// keeps the server side of the session its client gave up: a goroutine
	// of the SDK's server, which Lemo never runs.
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction("github.com/modelcontextprotocol/go-sdk/mcp.(*streamableServerConn).Read"))
}

// planted are secrets in the daemon's environment that no server may see.
var planted = []string{"OPENROUTER_API_KEY=planted-provider-key", "LEMO_AUTH_TOKEN=planted-lemo-token", "PLANTED_PLAIN=planted-plain", "DB_PASSWORD=planted-password"}

// stdioServer is the in-test server's configuration; dir receives its
// markers.
func stdioServer(t testing.TB, name, dir string, env ...string) ServerConfig {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return ServerConfig{Name: name, Command: self, Env: append([]string{roleVariable + "=server", "MCPTEST_DIR=" + dir}, env...), Approval: ApprovalAllow}
}

// httpServerProcess starts the in-test server over streamable HTTP in a
// process of its own (so that what it allocates is not counted as the
// daemon's) and returns its URL; env adds to its environment.
func httpServerProcess(t testing.TB, env ...string) string {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(self)
	cmd.Env = append(os.Environ(), append([]string{roleVariable + "=http-server"}, env...)...)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = stdin.Close()
		_ = cmd.Wait()
	})
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		t.Fatalf("the HTTP test server did not say its URL: %v", err)
	}
	return strings.TrimSpace(line)
}

// fastRestart lets tests see restarts and failures quickly.
var fastRestart = RestartPolicy{Backoff: 10 * time.Millisecond, MaxBackoff: 40 * time.Millisecond, Window: time.Hour, FailAfter: 3}

func newManager(t testing.TB, servers ...ServerConfig) *Manager {
	t.Helper()
	m, err := New(Config{Servers: servers, Environ: append(os.Environ(), planted...), RunTag: "LEMO_RUN_TAG=mcp-test",
		ExitGrace: time.Second, KillGrace: time.Second, Restart: fastRestart, Version: "test", Log: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Close)
	return m
}

// listed returns the manager's tools by name, registered in a registry as
// the daemon does, and the listing's error.
func listed(t testing.TB, m *Manager) (map[string]*tools.Registered, error) {
	t.Helper()
	ts, err := m.Tools(context.Background())
	reg := tools.NewRegistry()
	out := make(map[string]*tools.Registered)
	for _, tool := range ts {
		if rerr := reg.Register(tool); rerr != nil {
			t.Fatalf("Register(%s): %v", tool.Name(), rerr)
		}
		r, _ := reg.Get(tool.Name())
		out[tool.Name()] = r
	}
	return out, err
}

// states collects a call's state updates, validated as the Tool actor
// validates them.
type states struct {
	mu  sync.Mutex
	got []Progress
	// seen, when set, is created once the third update arrived (the
	// in-test echo answers after that).
	seen string
}

func (s *states) emit(r *tools.Registered) tools.Emit {
	return func(b json.RawMessage) error {
		if err := r.ValidateState(b); err != nil {
			return err
		}
		var p Progress
		if err := json.Unmarshal(b, &p); err != nil {
			return err
		}
		s.mu.Lock()
		s.got = append(s.got, p)
		n := len(s.got)
		s.mu.Unlock()
		if n == 3 && s.seen != "" {
			return os.WriteFile(s.seen, nil, 0o600)
		}
		return nil
	}
}

// call validates input, runs the tool and validates its output, as the
// Tool actor does.
func call(t testing.TB, ctx context.Context, r *tools.Registered, input string, st *states) (Output, error) {
	t.Helper()
	if err := r.ValidateInput(json.RawMessage(input)); err != nil {
		return Output{}, err
	}
	if st == nil {
		st = &states{}
	}
	raw, err := r.Tool.Execute(ctx, tools.Call{TaskID: "t", CallID: "c", Input: json.RawMessage(input)}, st.emit(r))
	if err != nil {
		return Output{}, err
	}
	if err := r.ValidateOutput(raw); err != nil {
		t.Fatalf("output fails the result schema: %v\n%s", err, raw)
	}
	var o Output
	if err := json.Unmarshal(raw, &o); err != nil {
		t.Fatal(err)
	}
	return o, nil
}

func readMarker(dir, name string) []string {
	b, _ := os.ReadFile(dir + "/" + name)
	s := strings.TrimSpace(string(b))
	if s == "" {
		return nil
	}
	return strings.Split(s, "\n")
}

// eventually polls f until it returns nil or the deadline passes.
func eventually(t testing.TB, d time.Duration, f func() error) {
	t.Helper()
	testwait.Until(t, d, "the condition", f)
}

// procSurvivors lists the live processes whose environment holds kv.
func procSurvivors(kv string) ([]proc.Proc, error) { return proc.Survivors(proc.WithEnv(kv)) }
