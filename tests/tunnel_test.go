package tests

import (
	"io"
	"net"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

// forwarder relays every TCP connection it accepts on 127.0.0.1 to target,
// as an SSH tunnel's end does, and counts them.
type forwarder struct {
	l        net.Listener
	target   string
	accepted atomic.Int64
	wg       sync.WaitGroup
	mu       sync.Mutex
	conns    map[net.Conn]bool
}

func startForwarder(t testing.TB, target string) *forwarder {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := &forwarder{l: l, target: target, conns: make(map[net.Conn]bool)}
	f.wg.Add(1)
	go f.serve()
	t.Cleanup(func() {
		_ = l.Close()
		f.mu.Lock()
		for c := range f.conns {
			_ = c.Close()
		}
		f.mu.Unlock()
		f.wg.Wait()
	})
	return f
}

func (f *forwarder) addr() string { return f.l.Addr().String() }

func (f *forwarder) track(c net.Conn, on bool) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if on && f.conns == nil {
		return false
	}
	if on {
		f.conns[c] = true
	} else {
		delete(f.conns, c)
	}
	return true
}

func (f *forwarder) serve() {
	defer f.wg.Done()
	for {
		in, err := f.l.Accept()
		if err != nil {
			return
		}
		f.accepted.Add(1)
		out, err := net.Dial("tcp", f.target)
		if err != nil {
			_ = in.Close()
			continue
		}
		f.track(in, true)
		f.track(out, true)
		f.wg.Add(2)
		for _, p := range [][2]net.Conn{{in, out}, {out, in}} {
			go func(dst, src net.Conn) {
				defer f.wg.Done()
				_, _ = io.Copy(dst, src)
				_ = dst.Close()
				_ = src.Close()
				f.track(dst, false)
				f.track(src, false)
			}(p[0], p[1])
		}
	}
}

// freePort returns a port of 127.0.0.1 that nothing listens on now.
func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// A client reaches a daemon through tunnels in both directions, as with
// ssh -L (client → daemon, at another port than the daemon's) and ssh -R
// (the daemon's dial-back): the client listens on a fixed port and
// advertises the tunnel's end on the daemon's side, which is where the
// daemon dials (docs/quickstart-remote.md). The flags and the
// LEMO_CLIENT_* variables both work; bad values are usage errors that say
// what is accepted.
func TestClientThroughTunnels(t *testing.T) {
	data := filepath.Join(t.TempDir(), "data")
	d := serveRemote(t, data)
	toDaemon := startForwarder(t, d.addr) // ssh -L
	listen := "127.0.0.1:" + strconv.Itoa(freePort(t))
	toClient := startForwarder(t, listen) // ssh -R

	env := cleanEnv("HOME=" + t.TempDir())
	out, code := lemo(t, env, "run", "--addr", toDaemon.addr(), "--token", d.token,
		"--client-listen", listen, "--client-advertise", toClient.addr(), "-m", "fake/echo", "through tunnels")
	if code != 0 || !strings.Contains(out, "echo: through tunnels") {
		t.Fatalf("lemo run through the tunnels: exit %d\n%s\nthe daemon:\n%s", code, out, d.logs())
	}
	if toDaemon.accepted.Load() == 0 || toClient.accepted.Load() == 0 {
		t.Fatalf("connections through the tunnel to the daemon %d, to the client %d: want both used", toDaemon.accepted.Load(), toClient.accepted.Load())
	}
	// The daemon dialed nothing but the client's tunnel (never the
	// address the client dialed it at), and the client nothing but the
	// tunnel to the daemon (never the daemon's own address, which it
	// names in its messages: here that would reach the daemon without a
	// token).
	if logs := d.logs(); strings.Contains(logs, toDaemon.addr()) || strings.Contains(logs, "without a valid token") {
		t.Fatalf("the daemon dialed the tunnel's local end %s, or the client the daemon's own address:\n%s", toDaemon.addr(), logs)
	}

	// The same through the variables.
	before := toClient.accepted.Load()
	out, code = lemo(t, append(env, "LEMO_ADDR="+toDaemon.addr(), "LEMO_TOKEN="+d.token,
		"LEMO_CLIENT_LISTEN="+listen, "LEMO_CLIENT_ADVERTISE="+toClient.addr()), "tasks")
	if code != 0 || !strings.Contains(out, "through tunnels") {
		t.Fatalf("lemo tasks with LEMO_CLIENT_*: exit %d\n%s", code, out)
	}
	if toClient.accepted.Load() == before {
		t.Fatalf("the daemon did not dial through the client's tunnel for the second command")
	}

	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--client-listen", "127.0.0.1:99999"}, "65535"},
		{[]string{"--client-listen", "127.0.0.1"}, "want host:port"},
		{[]string{"--client-listen", "0.0.0.0:7466"}, "names every interface"},
		{[]string{"--client-advertise", "10.0.0.5"}, "has no port"},
	} {
		out, code := lemo(t, env, append([]string{"tasks", "--addr", toDaemon.addr(), "--token", d.token}, tc.args...)...)
		if code != 2 || !strings.Contains(out, tc.want) || !strings.Contains(out, "--client-listen") {
			t.Errorf("lemo tasks %v: exit %d, want 2 and %q:\n%s", tc.args, code, tc.want, out)
		}
	}
}
