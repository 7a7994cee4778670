package mcp

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	gomcp "github.com/modelcontextprotocol/go-sdk/mcp"

	"lemo/tools"
)

// Server states, as lemo tools and lemo doctor show them.
const (
	// StateIdle: not running; it starts on the next call.
	StateIdle     = "idle"
	StateStarting = "starting"
	StateRunning  = "running"
	// StateRestarting: it died; the next call starts it again after a
	// backoff.
	StateRestarting = "restarting"
	// StateFailed: it died too often lately; calls fail until the deaths
	// age out of the restart window.
	StateFailed = "failed"
	// StateStopped: the daemon stopped it for good (shutdown).
	StateStopped = "stopped"
)

// ErrServerFailed is wrapped by the errors of calls refused because their
// server keeps dying.
var ErrServerFailed = errors.New("mcp: server failed")

// ErrClosed is returned by calls after the manager was closed.
var ErrClosed = errors.New("mcp: the daemon is stopping its MCP servers")

// server is one configured MCP server: its live connection (at most one,
// shared by every call of every Task), its deaths and its listed tools.
type server struct {
	cfg ServerConfig
	m   *Manager

	mu  sync.Mutex
	cur *conn
	// retired are connections that take no new calls and are being
	// stopped or wait for their last call (afterCall); Close stops them.
	retired  map[*conn]bool
	starting chan struct{} // closed when the start under way ends
	deaths   []time.Time
	lastErr  string
	closed   bool
	progress map[string]*progressSink
	token    uint64
	tools    []string
	refused  []Refused
	// The listing of its tools: listed once they were (at the daemon's
	// start or by a retry); until then, while retrying (Manager.Offer),
	// listing is set during an attempt, listFails holds the failures
	// within the restart window, listErr the last one's reason and
	// listNext when the next attempt starts.
	listed    bool
	retrying  bool
	listing   bool
	listFails []time.Time
	listErr   string
	listNext  time.Time
}

// session returns the live connection, starting the server when it has
// none (after the restart policy's backoff; never while it is failed). A
// start under way is shared. With call set, a call is counted in flight on
// the connection as it is handed out (so that no decision to stop it falls
// between the two); the caller ends it with finish.
func (s *server) session(ctx context.Context, call bool) (*conn, error) {
	return s.open(ctx, call, false)
}

// open is session; with probe set it starts the server at once, whatever
// its deaths (the background listing keeps its own backoff, listRetry).
func (s *server) open(ctx context.Context, call, probe bool) (*conn, error) {
	for {
		s.mu.Lock()
		switch {
		case s.closed:
			s.mu.Unlock()
			return nil, ErrClosed
		case s.cur != nil && s.cur.alive():
			c := s.cur
			if call {
				c.inFlight++
			}
			s.mu.Unlock()
			return c, nil
		case s.starting != nil:
			ch := s.starting
			s.mu.Unlock()
			select {
			case <-ch:
				continue
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		wait, failed := s.m.cfg.Restart.Next(s.deaths, s.m.now())
		if probe {
			wait, failed = 0, false
		}
		if failed {
			err := s.failedError()
			s.mu.Unlock()
			return nil, err
		}
		ch := make(chan struct{})
		s.starting = ch
		s.mu.Unlock()
		c, err := s.start(ctx, wait)
		s.mu.Lock()
		s.starting = nil
		close(ch)
		if err == nil && s.closed {
			s.mu.Unlock()
			s.stop(c)
			return nil, ErrClosed
		}
		if err != nil {
			if ctx.Err() == nil {
				s.deaths = append(s.m.cfg.Restart.recent(s.deaths, s.m.now()), s.m.now())
				s.lastErr = err.Error()
			}
			s.mu.Unlock()
			return nil, err
		}
		s.cur = c
		if call {
			c.inFlight++
		}
		s.mu.Unlock()
		return c, nil
	}
}

func (s *server) start(ctx context.Context, wait time.Duration) (*conn, error) {
	if wait > 0 {
		if err := sleepCtx(ctx, wait); err != nil {
			return nil, err
		}
	}
	sctx, cancel := context.WithTimeout(ctx, s.cfg.StartTimeout)
	defer cancel()
	c, err := s.connect(sctx)
	if err != nil {
		if sctx.Err() != nil && ctx.Err() == nil {
			return nil, fmt.Errorf("mcp server %s did not answer within %s (mcp.servers.%s.start_timeout): %w", s.cfg.Name, s.cfg.StartTimeout, s.cfg.Name, err)
		}
		return nil, fmt.Errorf("mcp server %s: %w", s.cfg.Name, err)
	}
	return c, nil
}

// ended records that c is gone; a connection the daemon did not stop
// itself counts as a death.
func (s *server) ended(c *conn) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c.gone = true
	delete(s.retired, c)
	if s.cur == c {
		s.cur = nil
	}
	if c.stopping.Load() {
		return
	}
	now := s.m.now()
	s.deaths = append(s.m.cfg.Restart.recent(s.deaths, now), now)
	s.lastErr = "it ended: " + c.why()
	s.m.cfg.Log.Warn().Str("mcp_server", s.cfg.Name).Str("why", c.why()).Msg("MCP server ended; it starts again on the next call")
}

func (s *server) failedError() error {
	return fmt.Errorf("%w: %s ended %d times within %s (last: %s); its tools are unavailable until it has not failed for %s; check it with lemo doctor", ErrServerFailed, s.cfg.Name, len(s.m.cfg.Restart.recent(s.deaths, s.m.now())), s.m.cfg.Restart.Window, s.lastErr, s.m.cfg.Restart.Window)
}

// close stops the server for good.
func (s *server) close() {
	s.mu.Lock()
	s.closed = true
	ch := s.starting
	s.mu.Unlock()
	if ch != nil {
		<-ch // a start under way ends within its start timeout
	}
	s.mu.Lock()
	c := s.cur
	s.cur = nil
	var retired []*conn
	for r := range s.retired {
		retired = append(retired, r)
	}
	s.mu.Unlock()
	if c != nil {
		s.stop(c)
	}
	for _, r := range retired {
		s.stop(r)
	}
}

// release stops the live connection, if any, without counting a death:
// the server starts again on the next call.
func (s *server) release() {
	s.mu.Lock()
	c := s.cur
	s.cur = nil
	s.mu.Unlock()
	if c != nil {
		s.stop(c)
	}
}

// cancelWriteBound bounds the wait of a call that ended early for its
// cancellation to be written to a stdio server before the server is
// stopped (a server that does not read may hold the write up).
const cancelWriteBound = time.Second

// finish ends a call on c counted by session (token: its progress token;
// tool: its name) and
// carries out what afterCall decides for c: a stdio server is stopped in
// the background once the call's cancellation was written, as a death when
// it hung.
func (s *server) finish(c *conn, end callEnd, token, tool string) {
	if c.wire != nil {
		if end != endDone {
			t := time.NewTimer(cancelWriteBound)
			select {
			case <-c.wire.cancelWritten(token):
			case <-t.C:
			}
			t.Stop()
		}
		c.wire.forget(token)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	c.inFlight--
	// A connection stopped as hung is as good as gone.
	act := afterCall(end, c.child != nil, c.gone || c.verdict.Load() != nil, c.retired, c.inFlight)
	if act == keepConn {
		return
	}
	c.retired = true
	if s.cur == c {
		s.cur = nil
	}
	if s.retired == nil {
		s.retired = make(map[*conn]bool)
	}
	s.retired[c] = true
	switch act {
	case retireConn:
		return
	case killConn:
		why := fmt.Sprintf("it did not answer %s within %s (mcp.servers.%s.timeout), so the daemon stopped it as hung", tool, s.cfg.CallTimeout, s.cfg.Name)
		c.verdict.Store(&why)
		now := s.m.now()
		s.deaths = append(s.m.cfg.Restart.recent(s.deaths, now), now)
		s.lastErr = why
		s.m.cfg.Log.Warn().Str("mcp_server", s.cfg.Name).Str("tool", tool).Dur("timeout", s.cfg.CallTimeout).Msg("MCP server hung; stopping it, it starts again on the next call")
	}
	if s.closed {
		return // Close stops it
	}
	s.m.goroutine(func() { s.stop(c) })
}

// State is the server's state now.
func (s *server) state() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.closed:
		return StateStopped
	case s.starting != nil:
		return StateStarting
	case s.cur != nil && s.cur.alive():
		return StateRunning
	}
	if _, failed := s.m.cfg.Restart.Next(s.deaths, s.m.now()); failed {
		return StateFailed
	}
	if len(s.m.cfg.Restart.recent(s.deaths, s.m.now())) > 0 {
		return StateRestarting
	}
	return StateIdle
}

// list returns the server's tools, every page of them; probe as open's.
func (s *server) list(ctx context.Context, probe bool) ([]*gomcp.Tool, error) {
	c, err := s.open(ctx, false, probe)
	if err != nil {
		return nil, err
	}
	var out []*gomcp.Tool
	for t, err := range c.cs.Tools(ctx, nil) {
		if err != nil {
			return nil, fmt.Errorf("mcp server %s: list tools: %w", s.cfg.Name, err)
		}
		out = append(out, t)
		if len(out) > maxTools {
			return nil, fmt.Errorf("mcp server %s: lists more than %d tools", s.cfg.Name, maxTools)
		}
	}
	return out, nil
}

// maxTools bounds the tools one server may list.
const maxTools = 1024

// watchProgress routes the progress notifications of one call to fn until
// the returned function is called; the token goes in the call's request.
func (s *server) watchProgress(fn func(Progress)) (token string, done func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.token++
	token = "lemo-" + strconv.FormatUint(s.token, 10)
	if s.progress == nil {
		s.progress = make(map[string]*progressSink)
	}
	sink := &progressSink{fn: fn}
	s.progress[token] = sink
	return token, func() {
		s.mu.Lock()
		delete(s.progress, token)
		s.mu.Unlock()
		// A notification being delivered finishes first; none follows.
		sink.mu.Lock()
		sink.closed = true
		sink.mu.Unlock()
	}
}

// progressSink delivers one call's progress until the call ends.
type progressSink struct {
	mu     sync.Mutex
	fn     func(Progress)
	closed bool
}

func (s *server) onProgress(_ context.Context, req *gomcp.ProgressNotificationClientRequest) {
	p := req.Params
	if p == nil {
		return
	}
	var token string
	switch t := p.ProgressToken.(type) {
	case string:
		token = t
	default:
		return
	}
	s.mu.Lock()
	sink := s.progress[token]
	s.mu.Unlock()
	if sink == nil {
		return
	}
	sink.mu.Lock()
	defer sink.mu.Unlock()
	if !sink.closed {
		sink.fn(Progress{Progress: p.Progress, Total: p.Total, Message: sanitize(p.Message, 500)})
	}
}

// sanitize puts text from a server on one bounded line.
func sanitize(s string, max int) string { return tools.SanitiseReason(s, max) }
