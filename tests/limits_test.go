package tests

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"lemo/client"
)

// Hostile connection floods and one token's session and subscription
// floods against a real lemo serve: every resource stays bounded, and
// authenticated clients still get in.

// http2Preface is what a gRPC client sends first: the HTTP/2 connection
// preface and an empty SETTINGS frame. A connection that sent it and
// nothing more is a gRPC connection that never presents a token.
var http2Preface = append([]byte("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"), 0, 0, 0, 4, 0, 0, 0, 0, 0)

// openSilent opens n connections to addr that present no token: silent TCP
// ones when preface is false, else ones that start HTTP/2 and stop there.
func openSilent(t testing.TB, addr string, n int, preface bool) []net.Conn {
	t.Helper()
	out := make([]net.Conn, 0, n)
	for i := 0; i < n; i++ {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatalf("connection %d: %v", i, err)
		}
		t.Cleanup(func() { c.Close() })
		if preface {
			if _, err := c.Write(http2Preface); err != nil {
				t.Fatalf("connection %d: preface: %v", i, err)
			}
		}
		out = append(out, c)
	}
	return out
}

// closedWithin reads c (discarding what the daemon sends) until the daemon
// closes it, or reports false when within passes first.
func closedWithin(c net.Conn, within time.Duration) bool {
	_ = c.SetReadDeadline(time.Now().Add(within))
	buf := make([]byte, 4096)
	for {
		if _, err := c.Read(buf); err != nil {
			var ne net.Error
			return !(errors.As(err, &ne) && ne.Timeout())
		}
	}
}

// procFDs counts the open file descriptors of pid.
func procFDs(t testing.TB, pid int) int {
	t.Helper()
	ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		t.Fatal(err)
	}
	return len(ents)
}

// procRSS returns the resident set of pid in MiB.
func procRSS(t testing.TB, pid int) float64 {
	t.Helper()
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			kb, err := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(rest), " kB"))
			if err != nil {
				t.Fatalf("VmRSS %q: %v", rest, err)
			}
			return float64(kb) / 1024
		}
	}
	t.Fatal("no VmRSS in /proc/<pid>/status")
	return 0
}

// metricsAddr reads where the daemon's health and metrics listener is.
func metricsAddr(t testing.TB, d *daemon) string {
	t.Helper()
	var addr string
	eventually(t, 10*time.Second, func() error {
		for _, line := range strings.Split(d.logs(), "\n") {
			if strings.Contains(line, "health and metrics listening") {
				if i := strings.Index(line, `"address":"`); i >= 0 {
					rest := line[i+len(`"address":"`):]
					addr = rest[:strings.IndexByte(rest, '"')]
					return nil
				}
			}
		}
		return errors.New("the daemon has not logged its metrics address")
	})
	return addr
}

// Connections that present no token are closed once remote.auth_timeout
// passes, silent ones and ones that started HTTP/2 alike (gRPC alone kept
// the latter open for ever), and the daemon's descriptors come back.
func TestUnauthenticatedConnectionsAreClosed(t *testing.T) {
	data := filepath.Join(t.TempDir(), "data")
	d := serveRemote(t, data, "--config", writeConfig(t, "remote:\n  auth_timeout: 300ms\n"), "--http-listen", "127.0.0.1:0")
	maddr := metricsAddr(t, d.daemon)
	pid := d.cmd.Process.Pid
	base := procFDs(t, pid)
	conns := append(openSilent(t, d.addr, 50, false), openSilent(t, d.addr, 50, true)...)
	// gRPC's own handshake timeout (10s) would close the silent ones; the
	// auth timeout must close them all well before.
	for i, c := range conns {
		if !closedWithin(c, 5*time.Second) {
			t.Fatalf("connection %d (preface %v) is still open 5s after it was opened, with a 300ms auth timeout", i, i >= 50)
		}
	}
	eventually(t, 10*time.Second, func() error {
		if n := procFDs(t, pid); n > base+2 {
			return fmt.Errorf("the daemon holds %d descriptors, %d before the connections", n, base)
		}
		m := scrape(t, maddr)
		if got := m[`lemo_remote_connections_closed_total{reason="timed_out"}`]; got != 100 {
			return fmt.Errorf("timed out = %v, want 100", got)
		}
		if got := m[`lemo_remote_connections{state="unauthenticated"}`]; got != 0 {
			return fmt.Errorf("unauthenticated = %v, want 0", got)
		}
		return nil
	})
	// A client that presents its token is not closed by the timeout.
	c := d.connect(t, "")
	if _, _, err := c.ListTasks(context.Background(), "", 10); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, func() error {
		if got := scrape(t, maddr)[`lemo_remote_connections{state="authenticated"}`]; got < 1 {
			return fmt.Errorf("authenticated = %v, want the test's connection", got)
		}
		return nil
	})
	if got := scrape(t, maddr)[`lemo_remote_connections_closed_total{reason="timed_out"}`]; got != 100 {
		t.Fatalf("timed out = %v after a client connected, want still 100", got)
	}
}

// A flood of connections that never authenticate (the 3,000) is
// held to the unauthenticated quota (remote.max_connections minus
// remote.connection_reserve): the daemon's descriptors and memory stay
// bounded, and an authenticated client, lemo tasks and lemo doctor still
// get in, during the flood and after more of it.
func TestConnectionFloodIsBounded(t *testing.T) {
	const flood, max, reserve = 3000, 64, 8
	data := filepath.Join(t.TempDir(), "data")
	cfg := fmt.Sprintf("remote:\n  max_connections: %d\n  connection_reserve: %d\n  auth_timeout: 1h\n", max, reserve)
	d := serveRemote(t, data, "--config", writeConfig(t, cfg), "--http-listen", "127.0.0.1:0")
	maddr := metricsAddr(t, d.daemon)
	pid := d.cmd.Process.Pid
	baseFDs, baseRSS := procFDs(t, pid), procRSS(t, pid)

	openSilent(t, d.addr, flood, true)
	// Once the daemon has taken in every connection, it holds the quota,
	// plus the metrics scrape's connection and a little slack.
	bound := baseFDs + max - reserve + 8
	var fds int
	eventually(t, 30*time.Second, func() error {
		fds = procFDs(t, pid)
		m := scrape(t, maddr)
		taken := m["lemo_remote_connections_accepted_total"] + m[`lemo_remote_connections_closed_total{reason="refused"}`]
		if fds > bound || taken < flood {
			return fmt.Errorf("the daemon holds %d descriptors under a flood of %d, %d before: want at most %d (connections taken in: %v)", fds, flood, baseFDs, bound, taken)
		}
		return nil
	})
	rss := procRSS(t, pid)
	m := scrape(t, maddr)
	held := int(m[`lemo_remote_connections{state="unauthenticated"}`])
	if evicted := m[`lemo_remote_connections_closed_total{reason="evicted"}`]; held != max-reserve || evicted != flood-(max-reserve) {
		t.Fatalf("unauthenticated = %d, evicted = %v; want %d and %d", held, evicted, max-reserve, flood-(max-reserve))
	}

	env := cleanEnv("LEMO_DATA="+data, "LEMO_FAKE_ENABLED=true", "LEMO_OLLAMA_DISABLED=true")
	if out, code := lemo(t, env, "tasks"); code != 0 {
		t.Fatalf("lemo tasks under the flood: exit %d\n%s", code, out)
	}
	if out, _ := lemo(t, env, "doctor", "--data", data); !strings.Contains(out, "ok    remote API") {
		t.Fatalf("lemo doctor under the flood does not reach the remote API:\n%s", out)
	}
	c := d.connect(t, "")
	// More flood: the authenticated client keeps its connection.
	openSilent(t, d.addr, 500, true)
	if _, _, err := c.ListTasks(context.Background(), "", 10); err != nil {
		t.Fatalf("the authenticated client after more flood: %v", err)
	}
	if out, code := lemo(t, env, "tasks"); code != 0 {
		t.Fatalf("lemo tasks after more flood: exit %d\n%s", code, out)
	}
	t.Logf("flood of %d unauthenticated connections (max_connections %d, reserve %d): held %d; daemon fds %d -> %d, RSS %.1f -> %.1f MiB",
		flood, max, reserve, held, baseFDs, fds, baseRSS, rss)
}

// One token's sessions are bounded whatever address they come from (this
// test process and lemo CLI processes, each its own port), with an error
// that names the limit; another token still gets in; so are its
// subscriptions over all its sessions.
func TestOneTokenIsBounded(t *testing.T) {
	const sessions, subs = 6, 10
	dir := t.TempDir()
	tokens := filepath.Join(dir, "tokens")
	if err := os.WriteFile(tokens, []byte("bob "+bobToken+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	data := filepath.Join(dir, "data")
	cfg := fmt.Sprintf("auth:\n  tokens_file: %s\nremote:\n  max_sessions_per_token: %d\n  max_subscriptions_per_token: %d\n", tokens, sessions, subs)
	d := serveRemote(t, data, "--config", writeConfig(t, cfg))
	pid := d.cmd.Process.Pid
	baseRSS := procRSS(t, pid)
	ctx := context.Background()

	var conns []*client.Conn
	for i := 0; i < sessions; i++ {
		conns = append(conns, d.connect(t, ""))
	}
	_, err := testNode(t).Connect(ctx, client.Options{Addr: d.addr, Token: d.token, Name: "e2e"})
	if err == nil || !strings.Contains(err.Error(), "remote.max_sessions_per_token") || !strings.Contains(err.Error(), fmt.Sprint(sessions)) {
		t.Fatalf("a session beyond the token's limit: %v, want an error naming remote.max_sessions_per_token and %d", err, sessions)
	}
	// From another process (another source port), same token: refused too.
	if out, code := cli(t, data, "tasks"); code == 0 || !strings.Contains(out, "remote.max_sessions_per_token") {
		t.Fatalf("lemo tasks with the full token: exit %d\n%s", code, out)
	}
	// Another token gets in.
	if out, code := lemo(t, cleanEnv("LEMO_DATA="+data, "LEMO_TOKEN="+bobToken), "tasks"); code != 0 {
		t.Fatalf("another token: exit %d\n%s", code, out)
	}

	// Subscriptions: spread over the sessions, refused beyond the token's
	// limit, with the limit named.
	for i := 0; i < subs; i++ {
		if _, err := conns[i%sessions].Subscribe(ctx, client.SubscribeOptions{}); err != nil {
			t.Fatalf("subscription %d: %v", i+1, err)
		}
	}
	if _, err := conns[sessions-1].Subscribe(ctx, client.SubscribeOptions{}); err == nil || !strings.Contains(err.Error(), "remote.max_subscriptions_per_token") {
		t.Fatalf("a subscription beyond the token's limit: %v", err)
	}

	// A session that ends gives its place back.
	_ = conns[0].Close()
	eventually(t, 20*time.Second, func() error {
		if out, code := cli(t, data, "tasks"); code != 0 {
			return fmt.Errorf("lemo tasks after a session ended: exit %d\n%s", code, out)
		}
		return nil
	})
	t.Logf("one token at its limits (%d sessions, %d subscriptions): RSS %.1f -> %.1f MiB", sessions, subs, baseRSS, procRSS(t, pid))
}
