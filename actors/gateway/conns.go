package gateway

import (
	"container/list"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/rs/zerolog"
	"google.golang.org/grpc/credentials"
)

// ConnStats counts the remote API's connections.
type ConnStats struct {
	// Open connections, and how many of them have not presented a valid
	// token yet.
	Open, Unauthenticated int
	// Since start: connections accepted, authenticated, refused at once
	// (every open one was authenticated), closed to make room for a newer
	// one (evicted), and closed because they presented no valid token
	// within the auth timeout.
	Accepted, Authenticated, Refused, Evicted, TimedOut uint64
}

// conns bounds the connections to the gateway's gRPC server: it sees each
// one as gRPC hands it to the transport credentials (before any TLS
// handshake and before any byte of HTTP/2), closes those that present no
// valid token within the auth timeout, and keeps a reserve only
// authenticated connections may hold (admitConn). The guard tells it which
// connections authenticated. It is shared by gRPC's goroutines, hence its
// mutex.
type conns struct {
	max, reserve int
	authTimeout  time.Duration
	log          zerolog.Logger

	mu sync.Mutex
	// byAddr maps a connection's remote address (what gRPC reports as the
	// call's peer) to the connection.
	byAddr map[string]*trackedConn
	// pending lists the unauthenticated connections, oldest first.
	pending  *list.List
	stats    ConnStats
	closed   bool
	lastWarn time.Time
}

func newConns(lim Limits, log zerolog.Logger) *conns {
	return &conns{max: lim.MaxConnections, reserve: lim.ConnectionReserve, authTimeout: lim.AuthTimeout, log: log,
		byAddr: make(map[string]*trackedConn), pending: list.New()}
}

// trackedConn is one accepted connection.
type trackedConn struct {
	net.Conn
	c    *conns
	addr string
	// pending is its element in c.pending while it is unauthenticated;
	// timer closes it when the auth timeout passes. Both guarded by c.mu.
	pending *list.Element
	timer   *time.Timer
	once    sync.Once
}

// accept registers raw, or refuses it (the caller closes it). It may close
// the oldest unauthenticated connection to make room.
func (c *conns) accept(raw net.Conn) (*trackedConn, error) {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil, fmt.Errorf("%w: the daemon is stopping", ErrLimit)
	}
	v := admitConn(len(c.byAddr), c.pending.Len(), c.max, c.reserve)
	var victims []*trackedConn
	switch v {
	case connRefuse:
		c.stats.Refused++
		c.warnLocked("a connection was refused: every connection is authenticated and the limit is reached")
		c.mu.Unlock()
		return nil, &LimitError{What: "connections", Limit: c.max, Key: "remote.max_connections", Hint: "close other clients, or raise the limit"}
	case connAdmitEvict:
		victim := c.pending.Front().Value.(*trackedConn)
		c.unpendLocked(victim)
		victims = append(victims, victim)
		c.stats.Evicted++
		c.warnLocked("the oldest unauthenticated connection was closed to make room for a new one")
	}
	t := &trackedConn{Conn: raw, c: c, addr: raw.RemoteAddr().String()}
	if old := c.byAddr[t.addr]; old != nil {
		// The same remote address twice means the first one is gone and
		// gRPC has not closed it yet; it is closed below, as a victim.
		c.unpendLocked(old)
		delete(c.byAddr, old.addr)
		victims = append(victims, old)
	}
	c.byAddr[t.addr] = t
	t.pending = c.pending.PushBack(t)
	t.timer = time.AfterFunc(c.authTimeout, func() { c.expire(t) })
	c.stats.Accepted++
	c.mu.Unlock()
	for _, v := range victims {
		_ = v.Close()
	}
	return t, nil
}

// warnLocked logs trouble at most every ten seconds (a flood would
// otherwise flood the log too).
func (c *conns) warnLocked(msg string) {
	now := time.Now()
	if now.Sub(c.lastWarn) < 10*time.Second {
		return
	}
	c.lastWarn = now
	s := c.stats
	c.log.Warn().Int("open", len(c.byAddr)).Int("unauthenticated", c.pending.Len()).Int("max", c.max).Int("reserve", c.reserve).
		Uint64("refused", s.Refused).Uint64("evicted", s.Evicted).Uint64("timed_out", s.TimedOut).Msg(msg)
}

func (c *conns) unpendLocked(t *trackedConn) {
	if t.pending != nil {
		c.pending.Remove(t.pending)
		t.pending = nil
	}
	if t.timer != nil {
		t.timer.Stop()
	}
}

// expire closes t if it is still unauthenticated.
func (c *conns) expire(t *trackedConn) {
	c.mu.Lock()
	if t.pending == nil {
		c.mu.Unlock()
		return
	}
	c.unpendLocked(t)
	c.stats.TimedOut++
	c.log.Debug().Str("peer", t.addr).Dur("auth_timeout", c.authTimeout).Msg("a connection presented no valid token in time and was closed")
	c.mu.Unlock()
	_ = t.Close()
}

// authenticated records that the connection from addr presented a valid
// token. Unknown addresses (calls not over a tracked connection) are
// ignored.
func (c *conns) authenticated(addr string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := c.byAddr[addr]
	if t == nil || t.pending == nil {
		return
	}
	c.unpendLocked(t)
	c.stats.Authenticated++
}

// Close forgets the connection and closes it; safe to call more than once
// (gRPC closes it too).
func (t *trackedConn) Close() error {
	err := error(nil)
	t.once.Do(func() {
		c := t.c
		c.mu.Lock()
		c.unpendLocked(t)
		if c.byAddr[t.addr] == t {
			delete(c.byAddr, t.addr)
		}
		c.mu.Unlock()
		err = t.Conn.Close()
	})
	return err
}

// close stops the timers; the gRPC server closes the connections.
func (c *conns) close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closed = true
	for _, t := range c.byAddr {
		if t.timer != nil {
			t.timer.Stop()
		}
	}
}

func (c *conns) snapshot() ConnStats {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.stats
	s.Open, s.Unauthenticated = len(c.byAddr), c.pending.Len()
	return s
}

// limitedCreds are the server's transport credentials (TLS or none) with
// every connection going through conns first.
type limitedCreds struct {
	credentials.TransportCredentials
	c *conns
}

func (l limitedCreds) ServerHandshake(raw net.Conn) (net.Conn, credentials.AuthInfo, error) {
	t, err := l.c.accept(raw)
	if err != nil {
		return nil, nil, err // gRPC closes raw
	}
	conn, info, err := l.TransportCredentials.ServerHandshake(t)
	if err != nil {
		_ = t.Close()
		return nil, nil, err
	}
	return conn, info, nil
}

func (l limitedCreds) Clone() credentials.TransportCredentials {
	return limitedCreds{TransportCredentials: l.TransportCredentials.Clone(), c: l.c}
}
