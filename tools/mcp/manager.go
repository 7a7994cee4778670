package mcp

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	gomcp "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/rs/zerolog"

	"lemo/tools"
	"lemo/tools/isolation"
	"lemo/tools/mcp/mcpspec"
)

// ServerConfig is one configured MCP server: a command Lemo starts (stdio)
// or a URL (streamable HTTP). Zero durations and sizes take the defaults.
type ServerConfig struct {
	// Name is the server's part of its tools' names ([a-z0-9_-]).
	Name string
	// Command, Args, Env and Dir start a stdio server. Env lists what the
	// server gets besides PATH, HOME, USER, LOGNAME, LANG, LANGUAGE, LC_*,
	// TZ and TMPDIR: "NAME" passes the daemon's variable, "NAME=value"
	// sets one. Nothing else of the daemon's environment passes.
	Command string
	Args    []string
	Env     []string
	Dir     string
	// URL and Headers reach a streamable HTTP server.
	URL     string
	Headers map[string]string
	// Tools, when not empty, offers only these of the server's tools (by
	// the server's names).
	Tools []string
	// Retain is RetainExcerpt (default), RetainFull or RetainNone;
	// RetainBytes bounds an excerpt (default 8 KiB).
	Retain      string
	RetainBytes int
	// Approval is ApprovalAnnotations (default), ApprovalAsk or
	// ApprovalAllow.
	Approval string
	// CallTimeout bounds a call (default 60s); StartTimeout a start and
	// the MCP handshake (default 30s).
	CallTimeout  time.Duration
	StartTimeout time.Duration
	// MaxOutputBytes bounds a result's text and its structured content
	// (each; default 64 KiB). MaxMessageBytes bounds one message from the
	// server (default 16 MiB): a larger one ends the connection.
	MaxOutputBytes  int
	MaxMessageBytes int
}

// Defaults.
const (
	DefaultRetainBytes     = 8 << 10
	DefaultCallTimeout     = 60 * time.Second
	DefaultStartTimeout    = 30 * time.Second
	DefaultMaxOutputBytes  = 64 << 10
	DefaultMaxMessageBytes = 16 << 20
)

// Check reports every problem of c, located by its field's configuration
// key under prefix ("mcp.servers.fs").
func (c *ServerConfig) Check(prefix string) []error {
	var errs []error
	add := func(key, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s.%s: %s", prefix, key, fmt.Sprintf(format, args...)))
	}
	if !ValidServerName(c.Name) {
		errs = append(errs, fmt.Errorf("%s: the server's name %q: want 1 to 32 characters of a-z, 0-9, '_' and '-' (it becomes part of its tools' names, mcp.<server>.<tool>)", prefix, c.Name))
	}
	mcpspec.Server{
		Command: c.Command, URL: c.URL, Cwd: c.Dir, Args: c.Args, Env: c.Env, Tools: c.Tools, Headers: c.Headers,
		Retain: c.Retain, Approval: c.Approval, Timeout: c.CallTimeout, StartTimeout: c.StartTimeout,
		RetainBytes: c.RetainBytes, MaxOutputBytes: c.MaxOutputBytes, MaxMessageBytes: c.MaxMessageBytes,
	}.Problems(add)
	sort.Slice(errs, func(i, j int) bool { return errs[i].Error() < errs[j].Error() })
	return errs
}

func (c *ServerConfig) fill() {
	if c.Retain == "" {
		c.Retain = RetainExcerpt
	}
	if c.RetainBytes == 0 {
		c.RetainBytes = DefaultRetainBytes
	}
	if c.Approval == "" {
		c.Approval = ApprovalAnnotations
	}
	if c.CallTimeout == 0 {
		c.CallTimeout = DefaultCallTimeout
	}
	if c.StartTimeout == 0 {
		c.StartTimeout = DefaultStartTimeout
	}
	if c.MaxOutputBytes == 0 {
		c.MaxOutputBytes = DefaultMaxOutputBytes
	}
	if c.MaxMessageBytes == 0 {
		c.MaxMessageBytes = DefaultMaxMessageBytes
	}
}

// Observer counts calls by server and outcome, and the failed listings
// of a server's tools (at the daemon's start and each background retry):
// metrics.
type Observer interface {
	MCPCall(server, outcome string)
	MCPListFailed(server string)
}

// Registrar is where Offer registers the servers' tools (*tools.Registry).
type Registrar interface {
	Register(tools.Tool) error
	List() []*tools.Registered
}

// Config configures a Manager.
type Config struct {
	Servers []ServerConfig
	// Environ is the daemon's environment (os.Environ()), from which a
	// stdio server gets only what ServerConfig.Env names and the base
	// variables.
	Environ []string
	// RunTag ("NAME=value", isolation.RunTag) tags every server process.
	RunTag string
	// Namespaces, when set, returns the namespaces a server whose folder
	// is dir runs in; nil: none.
	Namespaces func(dir string) *isolation.Namespaces
	// ExitGrace is how long a stopping server has after its stdin closed
	// (default 2s); KillGrace after SIGTERM (default 2s).
	ExitGrace, KillGrace time.Duration
	// Restart is the restart policy (zero: DefaultRestartPolicy).
	Restart RestartPolicy
	// Version is Lemo's, told to servers.
	Version  string
	Observer Observer
	Log      zerolog.Logger
	// Now is the clock (nil: time.Now).
	Now func() time.Time
}

// Manager owns the configured servers: their connections, shared by every
// Task's calls, and their lifecycle. It is safe for concurrent use.
type Manager struct {
	cfg     Config
	servers []*server
	// id tells this manager's server processes from another's (another
	// daemon on the host, or one before): a stop sweeps the processes that
	// carry its start's tag, and a tag of the server's name and start
	// number alone was another manager's too.
	id     string
	starts atomic.Uint64
	wg     sync.WaitGroup
	// ctx ends at Close: it stops the background listings.
	ctx    context.Context
	cancel context.CancelFunc
	// regMu orders the registrations of Offer and of its retries, so that
	// each sees what the others registered.
	regMu sync.Mutex
}

// New checks the configuration and returns a manager; nothing starts yet.
func New(cfg Config) (*Manager, error) {
	var errs []error
	seen := make(map[string]bool)
	m := &Manager{cfg: cfg, id: rand.Text()[:12]}
	m.ctx, m.cancel = context.WithCancel(context.Background())
	if m.cfg.ExitGrace <= 0 {
		m.cfg.ExitGrace = 2 * time.Second
	}
	if m.cfg.KillGrace <= 0 {
		m.cfg.KillGrace = 2 * time.Second
	}
	if m.cfg.Restart == (RestartPolicy{}) {
		m.cfg.Restart = DefaultRestartPolicy
	}
	if !isolation.ValidRunTag(cfg.RunTag) {
		errs = append(errs, fmt.Errorf("mcp: run tag %q: want NAME=value", cfg.RunTag))
	}
	for _, sc := range cfg.Servers {
		errs = append(errs, sc.Check("mcp.servers."+sc.Name)...)
		if seen[sc.Name] {
			errs = append(errs, fmt.Errorf("mcp.servers.%s: configured twice", sc.Name))
		}
		seen[sc.Name] = true
		sc.fill()
		m.servers = append(m.servers, &server{cfg: sc, m: m})
	}
	if len(errs) > 0 {
		m.cancel()
		return nil, errors.Join(errs...)
	}
	return m, nil
}

func (m *Manager) now() time.Time {
	if m.cfg.Now != nil {
		return m.cfg.Now()
	}
	return time.Now()
}

func (m *Manager) observe(server, outcome string) {
	if m.cfg.Observer != nil {
		m.cfg.Observer.MCPCall(server, outcome)
	}
}

// goroutine runs f on a goroutine that Close waits for.
func (m *Manager) goroutine(f func()) {
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		f()
	}()
}

// Tools starts every server (in parallel, each within its start timeout),
// lists its tools and returns them as Lemo tools, sorted by name. A stdio
// server is then stopped again: it starts on its first call. A server that
// cannot be reached offers no tools; its error is in the joined error (and
// in Status), as is every tool refused (a name that collides after mapping,
// within a server or with another server's tool as models see them, a
// schema Lemo cannot use). The tools returned are usable either way. It
// lists once (lemo doctor); Offer registers them and keeps trying the
// servers that could not be reached.
func (m *Manager) Tools(ctx context.Context) ([]*Tool, error) {
	type found struct {
		tools []*Tool
		err   error
	}
	results := make([]found, len(m.servers))
	var wg sync.WaitGroup
	for i, s := range m.servers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ts, ok, err := s.discover(ctx, false)
			results[i] = found{ts, err}
			if ok {
				s.mu.Lock()
				s.listed = true
				s.mu.Unlock()
			}
		}()
	}
	wg.Wait()
	var all []*Tool
	var errs []error
	var offered []ServerTool
	for _, r := range results {
		for _, t := range r.tools {
			offered = append(offered, ServerTool{Server: t.srv.cfg.Name, Tool: t.remote, Name: t.name})
		}
		if r.err != nil {
			errs = append(errs, r.err)
		}
	}
	refused := Collisions(offered)
	for _, r := range results {
		for _, t := range r.tools {
			why, ok := refused[ServerTool{Server: t.srv.cfg.Name, Tool: t.remote, Name: t.name}]
			if !ok {
				all = append(all, t)
				continue
			}
			t.srv.refuse(t, why)
			errs = append(errs, fmt.Errorf("mcp server %s: tool %q is not offered: %s", t.srv.cfg.Name, t.remote, why))
		}
	}
	sort.Slice(all, func(i, j int) bool { return all[i].name < all[j].name })
	return all, errors.Join(errs...)
}

// refuse takes t out of the server's offered tools, with why.
func (s *server) refuse(t *Tool, why string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, n := range s.tools {
		if n == t.name {
			s.tools = append(s.tools[:i:i], s.tools[i+1:]...)
			break
		}
	}
	s.refused = append(s.refused, Refused{Tool: t.remote, Reason: why})
	sort.Slice(s.refused, func(i, j int) bool { return s.refused[i].Tool < s.refused[j].Tool })
}

// discover lists the server's tools and maps them; a stdio server is
// stopped afterwards. ok says whether the listing itself succeeded (the
// error may then name refused tools); a failed one is recorded for the
// background listing (listRetry) and counted.
func (s *server) discover(ctx context.Context, probe bool) (_ []*Tool, ok bool, _ error) {
	listed, err := s.list(ctx, probe)
	if s.cfg.Command != "" {
		s.release()
	}
	if err != nil {
		if ctx.Err() == nil {
			now := s.m.now()
			s.mu.Lock()
			s.listFails = append(s.m.cfg.Restart.recent(s.listFails, now), now)
			s.listErr = err.Error()
			s.mu.Unlock()
			if o := s.m.cfg.Observer; o != nil {
				o.MCPListFailed(s.cfg.Name)
			}
		}
		return nil, false, err
	}
	byName := make(map[string]*gomcp.Tool, len(listed))
	var names []string
	for _, t := range listed {
		if _, dup := byName[t.Name]; dup {
			continue
		}
		byName[t.Name] = t
		names = append(names, t.Name)
	}
	offered, refused := Plan(s.cfg.Name, names, s.cfg.Tools)
	var out []*Tool
	for _, n := range names {
		full, ok := offered[n]
		if !ok {
			continue
		}
		t, err := s.newTool(full, byName[n])
		if err != nil {
			refused = append(refused, Refused{Tool: n, Reason: err.Error()})
			continue
		}
		out = append(out, t)
	}
	var missing []string
	for _, a := range s.cfg.Tools {
		if _, ok := byName[a]; !ok {
			missing = append(missing, a)
		}
	}
	sort.Slice(refused, func(i, j int) bool { return refused[i].Tool < refused[j].Tool })
	s.mu.Lock()
	s.tools = nil
	for _, t := range out {
		s.tools = append(s.tools, t.name)
	}
	s.refused = refused
	s.mu.Unlock()
	var errs []error
	for _, r := range refused {
		errs = append(errs, fmt.Errorf("mcp server %s: tool %q is not offered: %s", s.cfg.Name, r.Tool, r.Reason))
	}
	if len(missing) > 0 {
		errs = append(errs, fmt.Errorf("mcp.servers.%s.tools names tools the server does not list: %q", s.cfg.Name, missing))
	}
	return out, true, errors.Join(errs...)
}

// newTool makes the Lemo tool of a listed tool, or says why it cannot be.
func (s *server) newTool(name string, t *gomcp.Tool) (*Tool, error) {
	in, err := json.Marshal(t.InputSchema)
	if err != nil || t.InputSchema == nil {
		return nil, errors.New("its input schema is missing or not JSON")
	}
	tool := &Tool{srv: s, name: name, remote: t.Name, input: in, ann: t.Annotations, timeout: s.cfg.CallTimeout}
	desc := t.Description
	if desc == "" && t.Annotations != nil {
		desc = t.Annotations.Title
	}
	if desc == "" {
		desc = t.Title
	}
	tool.desc = sanitize(desc, 300)
	if tool.desc == "" {
		tool.desc = sanitize(t.Name, 100)
	}
	tool.desc += " (MCP server " + s.cfg.Name + ")"
	if t.OutputSchema != nil {
		out, err := json.Marshal(t.OutputSchema)
		if err != nil {
			return nil, fmt.Errorf("its output schema is not JSON: %v", err)
		}
		if tool.output, err = tools.CompileSchema(name+" output", out); err != nil {
			return nil, fmt.Errorf("its output schema: %v", err)
		}
	}
	// What the registry will refuse, said here with the server named.
	if err := tools.NewRegistry().Register(tool); err != nil {
		return nil, err
	}
	return tool, nil
}

// Status is a server's state for lemo tools and lemo doctor.
type Status struct {
	Name      string
	Transport string // "stdio" or "http"
	State     string
	Tools     []string
	Refused   []Refused
	// LastError says why it last ended or could not start.
	LastError string
}

// Status returns every server's status, in configuration order.
func (m *Manager) Status() []Status {
	var out []Status
	for _, s := range m.servers {
		st := Status{Name: s.cfg.Name, Transport: "stdio", State: s.state()}
		if s.cfg.URL != "" {
			st.Transport = "http"
		}
		s.mu.Lock()
		st.Tools = append([]string(nil), s.tools...)
		st.Refused = append([]Refused(nil), s.refused...)
		st.LastError = s.lastErr
		s.mu.Unlock()
		out = append(out, st)
	}
	return out
}

// Close stops every server and its processes (with their descendants) and
// waits for the manager's goroutines. Calls still running fail. A nil
// manager has nothing to close; closing again does nothing more.
func (m *Manager) Close() {
	if m == nil {
		return
	}
	m.cancel() // the background listings end
	var wg sync.WaitGroup
	for _, s := range m.servers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.close()
		}()
	}
	wg.Wait()
	m.wg.Wait()
}
