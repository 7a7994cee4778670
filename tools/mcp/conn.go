package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	gomcp "github.com/modelcontextprotocol/go-sdk/mcp"

	"lemo/tools/internal/proc"
	"lemo/tools/isolation"
)

// TagVariable names the environment entry that tags the processes of one
// start of a stdio server, so that its descendants that left its process
// group are found when it stops.
const TagVariable = "LEMO_MCP_SERVER"

// errTooLarge: a server sent a message over the configured bound.
var errTooLarge = errors.New("mcp: the server sent a message over the size bound")

// conn is one live connection to a server: a started stdio process, or an
// HTTP session.
type conn struct {
	cs *gomcp.ClientSession
	// dead is closed once the connection is gone (the process ended, the
	// session closed, a message was too large).
	dead chan struct{}
	// stopping is set when the daemon stops the connection itself: not a
	// death.
	stopping atomic.Bool
	// reason says how it ended; set before dead is closed.
	reason string
	// verdict, when set, says why the daemon stopped it as hung: calls in
	// flight on it fail with it.
	verdict  atomic.Pointer[string]
	stopOnce sync.Once
	// Under the server's mu: the calls in flight on it; retired once it
	// takes no new calls (it is stopped when the last ends); gone once it
	// ended.
	inFlight int
	retired  bool
	gone     bool
	// HTTP only: its transport; endErr is what its session ended with
	// (set before reason).
	http   *headerTransport
	endErr error
	// stdio only
	child  *proc.Process
	stdin  *os.File
	wire   *wire
	tag    string
	stderr *tail
	limit  *lineLimit
}

func (c *conn) alive() bool {
	select {
	case <-c.dead:
		return false
	default:
		return true
	}
}

// why says how a dead connection ended, for errors and the server's state.
func (c *conn) why() string {
	if v := c.verdict.Load(); v != nil {
		return *v
	}
	if !c.alive() && c.reason != "" {
		return c.reason
	}
	var parts []string
	switch {
	case c.limit != nil && c.limit.exceeded.Load():
		parts = append(parts, fmt.Sprintf("it sent a message over %d bytes (mcp.servers.<name>.max_message_bytes)", c.limit.max))
	case c.http != nil && c.http.exceeded.Load():
		parts = append(parts, fmt.Sprintf("it sent a response over %d bytes (mcp.servers.<name>.max_message_bytes)", c.http.max))
	case c.child != nil:
		select {
		case <-c.child.Done():
			code, sig, _ := c.child.Exit()
			if sig != "" {
				parts = append(parts, "it was ended by "+sig)
			} else {
				parts = append(parts, fmt.Sprintf("it exited with code %d", code))
			}
		default:
			parts = append(parts, "its connection closed")
		}
	case c.endErr != nil:
		parts = append(parts, "its session ended: "+sanitize(c.endErr.Error(), 300))
	default:
		parts = append(parts, "its session closed")
	}
	if c.stderr != nil {
		if t := c.stderr.last(); t != "" {
			parts = append(parts, "its last words: "+t)
		}
	}
	return strings.Join(parts, "; ")
}

// connect starts (stdio) or reaches (HTTP) the server and initializes an
// MCP session with it. The caller owns the connection: it must stop it.
func (s *server) connect(ctx context.Context) (*conn, error) {
	client := gomcp.NewClient(&gomcp.Implementation{Name: "lemo", Version: s.m.cfg.Version}, &gomcp.ClientOptions{
		ProgressNotificationHandler: s.onProgress,
		Capabilities:                &gomcp.ClientCapabilities{},
	})
	if s.cfg.URL != "" {
		return s.connectHTTP(ctx, client)
	}
	return s.connectStdio(ctx, client)
}

func (s *server) connectHTTP(ctx context.Context, client *gomcp.Client) (*conn, error) {
	ht := &headerTransport{base: http.DefaultTransport, headers: s.cfg.Headers, max: s.cfg.MaxMessageBytes}
	hc := &http.Client{Transport: ht}
	t := &gomcp.StreamableClientTransport{Endpoint: s.cfg.URL, HTTPClient: hc, MaxEventSize: s.cfg.MaxMessageBytes}
	cs, err := client.Connect(ctx, t, nil)
	if err != nil {
		return nil, fmt.Errorf("connect to %s: %w", redactURL(s.cfg.URL), err)
	}
	c := &conn{cs: cs, dead: make(chan struct{}), http: ht}
	s.m.goroutine(func() {
		c.endErr = cs.Wait()
		c.reason = c.why()
		s.ended(c)
		close(c.dead)
	})
	return c, nil
}

// headerTransport adds the configured headers to every request, and
// bounds every response body that is not an event stream: the SDK reads
// such a body (one message) whole, where it bounds each event of a stream
// itself (MaxEventSize).
type headerTransport struct {
	base    http.RoundTripper
	headers map[string]string
	// max bounds a body (MaxMessageBytes); exceeded is set once a body
	// went over it.
	max      int
	exceeded atomic.Bool
}

func (t *headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for k, v := range t.headers {
		r.Header.Set(k, v)
	}
	resp, err := t.base.RoundTrip(r)
	if err != nil || t.max <= 0 {
		return resp, err
	}
	if mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); mt != "text/event-stream" {
		b := &boundedBody{rc: resp.Body, left: t.max, exceeded: &t.exceeded}
		if resp.ContentLength > int64(t.max) {
			b.left = -1 // said too large: not one byte read
			t.exceeded.Store(true)
		}
		resp.Body = b
	}
	return resp, nil
}

// boundedBody fails reading once more than left bytes came, handing on
// none of them.
type boundedBody struct {
	rc       io.ReadCloser
	left     int
	exceeded *atomic.Bool
}

func (b *boundedBody) Read(p []byte) (int, error) {
	if b.left < 0 {
		return 0, errTooLarge
	}
	if len(p) > b.left+1 {
		p = p[:b.left+1]
	}
	n, err := b.rc.Read(p)
	b.left -= n
	if b.left < 0 {
		b.exceeded.Store(true)
		return 0, errTooLarge
	}
	return n, err
}

func (b *boundedBody) Close() error { return b.rc.Close() }

// redactURL drops a URL's user information and query (they may hold
// secrets) for messages.
func redactURL(u string) string {
	if i := strings.Index(u, "?"); i >= 0 {
		u = u[:i]
	}
	if i := strings.Index(u, "://"); i >= 0 {
		if j := strings.Index(u[i+3:], "@"); j >= 0 {
			u = u[:i+3] + u[i+3+j+1:]
		}
	}
	return u
}

func (s *server) connectStdio(ctx context.Context, client *gomcp.Client) (*conn, error) {
	inR, inW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		closeFiles(inR, inW)
		return nil, err
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		closeFiles(inR, inW, outR, outW)
		return nil, err
	}
	tag := fmt.Sprintf("%s=%s/%s.%d", TagVariable, s.cfg.Name, s.m.id, s.m.starts.Add(1))
	extra := append(isolation.Tags(s.m.cfg.RunTag, "mcp", s.cfg.Name), tag)
	cmd := exec.Command(s.cfg.Command, s.cfg.Args...)
	cmd.Dir = s.cfg.Dir
	cmd.Env = serverEnv(s.m.cfg.Environ, s.cfg.Env, extra)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = inR, outW, errW
	var ns *isolation.Namespaces
	if s.m.cfg.Namespaces != nil {
		ns = s.m.cfg.Namespaces(s.cfg.Dir)
	}
	child, err := isolation.Start(cmd, ns)
	closeFiles(inR, outW, errW)
	if err != nil {
		closeFiles(inW, outR, errR)
		return nil, fmt.Errorf("start %s: %w", s.cfg.Command, err)
	}
	c := &conn{child: child, stdin: inW, tag: tag, stderr: &tail{max: 2048}, dead: make(chan struct{})}
	s.m.goroutine(func() {
		defer errR.Close()
		_, _ = io.Copy(c.stderr, errR)
	})
	c.limit = &lineLimit{r: outR, max: s.cfg.MaxMessageBytes}
	c.wire = &wire{w: inW}
	t := &gomcp.IOTransport{Reader: c.limit, Writer: c.wire, MaxLineLength: -1}
	cs, err := client.Connect(ctx, t, nil)
	if err != nil {
		s.stopStdio(c)
		return nil, fmt.Errorf("initialize %s: %w (%s)", s.cfg.Command, err, c.why())
	}
	c.cs = cs
	sessionDone := make(chan struct{})
	s.m.goroutine(func() {
		_ = cs.Wait()
		close(sessionDone)
	})
	s.m.goroutine(func() {
		select {
		case <-child.Done():
		case <-sessionDone:
			// The process usually follows its stdout: give it the exit
			// grace to say how it ended.
			child.WaitFor(s.m.cfg.ExitGrace)
		}
		c.reason = c.why()
		s.ended(c)
		close(c.dead)
		// The session without its process, or the process without a
		// usable session: either way both go.
		s.stopStdio(c)
	})
	return c, nil
}

// stopStdio ends a stdio server: its stdin closes (the MCP way to ask it
// to exit), then after the exit grace SIGTERM and SIGKILL to its process
// group, then every descendant that carries its tag, then its namespace.
// The session closes once the process is gone.
func (s *server) stopStdio(c *conn) {
	c.stopOnce.Do(func() { s.stopProcess(c) })
}

func (s *server) stopProcess(c *conn) {
	_ = c.stdin.Close()
	if !c.child.WaitFor(s.m.cfg.ExitGrace) {
		c.child.Terminate(s.m.cfg.KillGrace)
	}
	proc.Sweep(c.child.Pid(), c.tag, c.child.Since(), s.m.cfg.KillGrace)
	c.child.Close()
	if c.cs != nil {
		_ = c.cs.Close()
	}
}

// stop ends c as the daemon's decision (not a death).
func (s *server) stop(c *conn) {
	c.stopping.Store(true)
	if c.child != nil {
		s.stopStdio(c)
		<-c.dead
		return
	}
	_ = c.cs.Close()
	<-c.dead
}

func closeFiles(fs ...*os.File) {
	for _, f := range fs {
		_ = f.Close()
	}
}

// lineLimit fails reading once a line (one stdio message) exceeds max
// bytes, before the decoder could buffer more of it.
type lineLimit struct {
	r        io.ReadCloser
	max      int
	run      int
	exceeded atomic.Bool
}

func (l *lineLimit) Read(p []byte) (int, error) {
	if l.exceeded.Load() {
		return 0, errTooLarge
	}
	n, err := l.r.Read(p)
	rest := p[:n]
	for len(rest) > 0 {
		i := bytes.IndexByte(rest, '\n')
		if i < 0 {
			l.run += len(rest)
			break
		}
		l.run += i
		if l.run > l.max {
			break
		}
		l.run = 0
		rest = rest[i+1:]
	}
	if l.max > 0 && l.run > l.max {
		l.exceeded.Store(true)
		return 0, errTooLarge
	}
	return n, err
}

func (l *lineLimit) Close() error { return l.r.Close() }

// wire writes Lemo's messages to a stdio server (the SDK writes each in
// one Write) and notes the request id of every tools/call by its progress
// token, and which cancellations were written, so that a call that ended
// early can tell when the server was sent its cancellation (the SDK sends
// it on a goroutine of its own).
type wire struct {
	w       io.WriteCloser
	mu      sync.Mutex
	ids     map[string]string        // progress token → request id
	written map[string]chan struct{} // request id → closed once its cancellation is written
}

var (
	cancelledMethod = []byte(`"notifications/cancelled"`)
	callMethod      = []byte(`"tools/call"`)
)

func (w *wire) Write(p []byte) (int, error) {
	n, err := w.w.Write(p)
	if err == nil {
		w.note(p)
	}
	return n, err
}

func (w *wire) Close() error { return w.w.Close() }

func (w *wire) note(p []byte) {
	if !bytes.Contains(p, cancelledMethod) && !bytes.Contains(p, callMethod) {
		return
	}
	var m struct {
		ID     json.RawMessage
		Method string
		Params struct {
			RequestID json.RawMessage `json:"requestId"`
			Meta      struct {
				ProgressToken any `json:"progressToken"`
			} `json:"_meta"`
		}
	}
	if json.Unmarshal(p, &m) != nil {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	switch m.Method {
	case "notifications/cancelled":
		if ch, ok := w.written[compactID(m.Params.RequestID)]; ok {
			select {
			case <-ch:
			default:
				close(ch)
			}
		}
	case "tools/call":
		token, ok := m.Params.Meta.ProgressToken.(string)
		if !ok {
			return
		}
		id := compactID(m.ID)
		if w.ids == nil {
			w.ids = make(map[string]string)
			w.written = make(map[string]chan struct{})
		}
		w.ids[token] = id
		w.written[id] = make(chan struct{})
	}
}

// cancelWritten is closed once the cancellation of the call with the
// progress token was written; already when the call itself never was.
func (w *wire) cancelWritten(token string) <-chan struct{} {
	w.mu.Lock()
	defer w.mu.Unlock()
	if ch, ok := w.written[w.ids[token]]; ok {
		return ch
	}
	ch := make(chan struct{})
	close(ch)
	return ch
}

// forget drops what w noted of the call with the progress token.
func (w *wire) forget(token string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if id, ok := w.ids[token]; ok {
		delete(w.written, id)
		delete(w.ids, token)
	}
}

func compactID(raw json.RawMessage) string {
	var b bytes.Buffer
	if json.Compact(&b, raw) != nil {
		return string(raw)
	}
	return b.String()
}

// tail keeps the last max bytes written to it (a server's stderr).
type tail struct {
	mu  sync.Mutex
	max int
	buf []byte
}

func (t *tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if len(t.buf) > t.max {
		t.buf = append(t.buf[:0:0], t.buf[len(t.buf)-t.max:]...)
	}
	return len(p), nil
}

// last is the end of what was written, on one line, cleaned.
func (t *tail) last() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := strings.TrimSpace(string(t.buf))
	if i := strings.LastIndexByte(s, '\n'); i >= 0 && len(s)-i < 120 {
		// a short last line: keep the one before too
		if j := strings.LastIndexByte(s[:i], '\n'); j >= 0 {
			s = s[j+1:]
		}
	}
	return sanitize(s, 300)
}

// sleepCtx waits d or until ctx ends.
func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
