package gateway

import (
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"github.com/rs/zerolog"
)

func TestAdmitOne(t *testing.T) {
	q := quota{perToken: 2, total: 5, perTokenKey: "k.token", totalKey: "k.total", noun: "things", hint: "drop some"}
	for _, tc := range []struct {
		name string
		h    held
		key  string // "" admitted
	}{
		{"empty", held{0, 0}, ""},
		{"below both", held{1, 4}, ""},
		{"token at its limit", held{2, 2}, "k.token"},
		{"token at its limit on a full daemon", held{2, 5}, "k.token"},
		{"daemon full", held{0, 5}, "k.total"},
		{"daemon over full (limit lowered)", held{1, 9}, "k.total"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := admitOne(tc.h, q)
			if tc.key == "" {
				if err != nil {
					t.Fatalf("admitOne = %v, want nil", err)
				}
				return
			}
			var le *LimitError
			if !errors.As(err, &le) || le.Key != tc.key || !errors.Is(err, ErrLimit) {
				t.Fatalf("admitOne = %v, want the limit %s", err, tc.key)
			}
		})
	}
}

func TestLimitsDefaultsAndCheck(t *testing.T) {
	for _, tc := range []struct {
		in      Limits
		reserve int
		ok      bool
	}{
		{Limits{}, 32, true},
		{Limits{MaxConnections: 40}, 5, true},
		{Limits{MaxConnections: 4}, 1, true},
		{Limits{MaxConnections: 1}, 1, false},
		{Limits{MaxConnections: 10, ConnectionReserve: 10}, 10, false},
	} {
		l := tc.in
		l.defaults()
		if err := l.check(); l.ConnectionReserve != tc.reserve || (err == nil) != tc.ok {
			t.Errorf("%+v: reserve %d, check %v; want reserve %d, ok %v", tc.in, l.ConnectionReserve, err, tc.reserve, tc.ok)
		}
	}
}

func TestAdmitConn(t *testing.T) {
	const max, reserve = 10, 3 // at most 7 unauthenticated
	for _, tc := range []struct {
		name         string
		open, unauth int
		want         connVerdict
	}{
		{"none open", 0, 0, connAdmit},
		{"room for an unauthenticated one", 6, 6, connAdmit},
		{"unauthenticated quota full", 7, 7, connAdmitEvict},
		{"quota full, reserve partly held", 9, 7, connAdmitEvict},
		{"all authenticated but one, cap reached", 10, 1, connAdmitEvict},
		{"every open connection authenticated, cap reached", 10, 0, connRefuse},
		{"authenticated ones hold the reserve, room left", 9, 0, connAdmit},
		{"over the cap (lowered) with none to evict", 12, 0, connRefuse},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := admitConn(tc.open, tc.unauth, max, reserve); got != tc.want {
				t.Fatalf("admitConn(%d, %d) = %v, want %v", tc.open, tc.unauth, got, tc.want)
			}
		})
	}
}

// dialTracked dials n loopback connections and hands the daemon's ends to
// c; it returns the client ends, the tracked ends and c's refusals.
func dialTracked(t *testing.T, c *conns, n int) ([]net.Conn, []*trackedConn, []error) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	var clients []net.Conn
	var tracked []*trackedConn
	var errs []error
	for i := 0; i < n; i++ {
		cc, err := net.Dial("tcp", l.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cc.Close() })
		raw, err := l.Accept()
		if err != nil {
			t.Fatal(err)
		}
		tc, err := c.accept(raw)
		if err != nil {
			raw.Close()
		} else {
			t.Cleanup(func() { tc.Close() })
		}
		clients, tracked, errs = append(clients, cc), append(tracked, tc), append(errs, err)
	}
	return clients, tracked, errs
}

// closedByPeer waits until the daemon's end closed cc.
func closedByPeer(t *testing.T, cc net.Conn, within time.Duration) bool {
	t.Helper()
	_ = cc.SetReadDeadline(time.Now().Add(within))
	_, err := cc.Read(make([]byte, 1))
	return errors.Is(err, io.EOF) || errors.Is(err, net.ErrClosed) || (err != nil && !isTimeout(err))
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// Unauthenticated connections are closed after the auth timeout; an
// authenticated one stays.
func TestConnsAuthTimeout(t *testing.T) {
	c := newConns(Limits{MaxConnections: 10, ConnectionReserve: 2, AuthTimeout: 100 * time.Millisecond}, zerolog.Nop())
	defer c.close()
	clients, tracked, _ := dialTracked(t, c, 3)
	c.authenticated(tracked[1].addr)
	if !closedByPeer(t, clients[0], 10*time.Second) || !closedByPeer(t, clients[2], 10*time.Second) {
		t.Fatal("an unauthenticated connection was still open 10s after its 100ms auth timeout")
	}
	// The authenticated one is still open, and no timer is left to close
	// it.
	c.mu.Lock()
	open := c.byAddr[tracked[1].addr] == tracked[1] && tracked[1].pending == nil && !tracked[1].timer.Stop()
	c.mu.Unlock()
	if !open {
		t.Fatal("the authenticated connection was closed or is still timed")
	}
	if s := c.snapshot(); s.Open != 1 || s.Unauthenticated != 0 || s.TimedOut != 2 || s.Authenticated != 1 {
		t.Fatalf("stats = %+v, want 1 open, 2 timed out, 1 authenticated", s)
	}
}

// With the unauthenticated quota full, a new connection takes the place of
// the oldest unauthenticated one; with every connection authenticated, a
// new one is refused.
func TestConnsQuotaAndReserve(t *testing.T) {
	c := newConns(Limits{MaxConnections: 4, ConnectionReserve: 2, AuthTimeout: time.Hour}, zerolog.Nop())
	defer c.close()
	clients, tracked, errs := dialTracked(t, c, 3)
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	// The third evicted the first; it authenticates and so does the second.
	if !closedByPeer(t, clients[0], 10*time.Second) {
		t.Fatal("the oldest unauthenticated connection was not closed for a new one")
	}
	c.authenticated(tracked[1].addr)
	c.authenticated(tracked[2].addr)
	more, tracked2, errs := dialTracked(t, c, 2)
	if errs[0] != nil || errs[1] != nil {
		t.Fatalf("connections into the reserve: %v", errs)
	}
	c.authenticated(tracked2[0].addr)
	if s := c.snapshot(); s.Open != 4 || s.Unauthenticated != 1 {
		t.Fatalf("stats = %+v, want 4 open, 1 unauthenticated", s)
	}
	// 4 open: 3 authenticated, 1 not. A new one evicts that one.
	_, _, errs = dialTracked(t, c, 1)
	if errs[0] != nil || !closedByPeer(t, more[1], 10*time.Second) {
		t.Fatalf("at the cap with one unauthenticated: %v", errs[0])
	}
	c.authenticated(c.pending.Front().Value.(*trackedConn).addr)
	_, _, errs = dialTracked(t, c, 1)
	var le *LimitError
	if !errors.As(errs[0], &le) || le.Key != "remote.max_connections" {
		t.Fatalf("at the cap, all authenticated: %v, want a refusal", errs[0])
	}
	if s := c.snapshot(); s.Open != 4 || s.Unauthenticated != 0 || s.Refused != 1 || s.Evicted != 2 {
		t.Fatalf("stats = %+v", s)
	}
}
