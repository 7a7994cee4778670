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

	mu       sync.Mutex
	cur      *conn
	starting chan struct{} // closed when the start under way ends
	deaths   []time.Time
	lastErr  string
	closed   bool
	progress map[string]*progressSink
	token    uint64
	tools    []string
	refused  []Refused
}

// session returns the live connection, starting the server when it has
// none (after the restart policy's backoff; never while it is failed). A
// start under way is shared.
func (s *server) session(ctx context.Context) (*conn, error) {
	for {
		s.mu.Lock()
		switch {
		case s.closed:
			s.mu.Unlock()
			return nil, ErrClosed
		case s.cur != nil && s.cur.alive():
			c := s.cur
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
	s.mu.Unlock()
	if c != nil {
		s.stop(c)
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

// list returns the server's tools, every page of them.
func (s *server) list(ctx context.Context) ([]*gomcp.Tool, error) {
	c, err := s.session(ctx)
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
