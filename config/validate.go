package config

import (
	"fmt"
	"net"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"

	"lemo/logging"
)

// maxReadHold bounds tasks.read_hold: clients see an answer whose
// read-only calls run at most this late.
const maxReadHold = 10 * time.Second

// Validate checks every key and returns every problem found.
func (c *Config) Validate() []error {
	var ps []error
	add := func(where, format string, args ...any) {
		ps = append(ps, Problem{Where: where, What: fmt.Sprintf(format, args...)})
	}
	if c.Data != "" && strings.TrimSpace(c.Data) == "" {
		add("data", "must name a folder, or be empty for the user's data home")
	}
	if !oneOf(strings.ToLower(c.Log.Level), logging.Levels...) {
		add("log.level", "%q: want one of %s", c.Log.Level, strings.Join(logging.Levels, ", "))
	}
	if !oneOf(c.Log.Format, logging.FormatAuto, logging.FormatConsole, logging.FormatJSON) {
		add("log.format", "%q: want auto, console or json", c.Log.Format)
	}
	if !oneOf(c.Log.Output, LogStderr, LogStdout) {
		add("log.output", "%q: want stderr or stdout", c.Log.Output)
	}
	host, port, err := net.SplitHostPort(c.Listen)
	switch {
	case err != nil:
		add("listen", "%q: want host:port, for example 127.0.0.1:7465", c.Listen)
	case port == "":
		add("listen", "%q: missing port", c.Listen)
	case !validPort(port):
		add("listen", "%q: port %s: want a number from 0 to 65535 (0: any free port)", c.Listen, port)
	case !isLoopback(host) && (c.TLS.Cert == "" || c.TLS.Key == ""):
		add("listen", "%q is not a loopback address: set tls.cert and tls.key to listen on it", c.Listen)
	case host == "" || net.ParseIP(host).IsUnspecified():
		// protoactor remote takes the listen address as the daemon's own:
		// a message a client addresses to host:port (what it dialled)
		// would be sent on to "another" daemon, itself, and fail.
		add("listen", "%q: an unspecified address (every interface) cannot be used: clients address the daemon by the address they dial, so listen on that one (the machine's IP address or name)", c.Listen)
	}
	if (c.TLS.Cert == "") != (c.TLS.Key == "") {
		add("tls", "cert and key must be set together")
	}
	positive := func(where string, n int) {
		if n < 1 {
			add(where, "must be at least 1 (got %d)", n)
		}
	}
	if c.Storage.MinFreeMiB < 0 {
		add("storage.min_free_mib", "must not be negative (got %d)", c.Storage.MinFreeMiB)
	}
	positive("tasks.max_cycles", c.Tasks.MaxCycles)
	positive("tasks.max_parallel_tools", c.Tasks.MaxParallelTools)
	positive("tasks.max_request_bytes", c.Tasks.MaxRequestBytes)
	positive("tasks.max_depth", c.Tasks.MaxDepth)
	positive("tasks.max_children", c.Tasks.MaxChildren)
	positive("tasks.max_running_children", c.Tasks.MaxRunningChildren)
	durations := map[string]time.Duration{
		"tasks.tool_grace":       c.Tasks.ToolGrace,
		"tasks.idle_timeout":     c.Tasks.IdleTimeout,
		"tasks.shutdown_timeout": c.Tasks.ShutdownTimeout,
		"tools.shell.timeout":    c.Tools.Shell.Timeout,
	}
	for _, k := range sortedKeys(durations) {
		if durations[k] <= 0 {
			add(k, "must be a positive duration (got %s)", durations[k])
		}
	}
	if h := c.Tasks.ReadHold; h < 0 || h > maxReadHold {
		add("tasks.read_hold", "must be between 0 (never hold) and %s (got %s)", maxReadHold, h)
	}
	if c.Models.Default != "" {
		if p, n, ok := strings.Cut(c.Models.Default, "/"); !ok || p == "" || n == "" {
			add("models.default", "%q: want provider/model, for example ollama/qwen3:8b", c.Models.Default)
		}
	}
	all := c.Providers.All()
	for _, name := range sortedKeys(all) {
		p := all[name]
		where := "providers." + name
		if p.BaseURL != "" {
			u, err := url.Parse(p.BaseURL)
			if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
				add(where+".base_url", "%q: want an http:// or https:// URL", p.BaseURL)
			}
		}
		if p.Timeout <= 0 {
			add(where+".timeout", "must be a positive duration (got %s)", p.Timeout)
		}
		if p.IdleTimeout <= 0 {
			add(where+".idle_timeout", "must be a positive duration (got %s): how long a model stream may send nothing", p.IdleTimeout)
		}
		if p.CacheTTL < 0 {
			add(where+".cache_ttl", "must not be negative")
		}
		if p.NumCtx < 0 {
			add(where+".num_ctx", "must not be negative")
		}
		if p.MaxRetries < 1 {
			add(where+".max_retries", "must be at least 1 (got %d)", p.MaxRetries)
		}
		if p.MaxRetryWait < 0 {
			add(where+".max_retry_wait", "must not be negative")
		}
	}
	ps = append(ps, c.Delegate.Problems()...)
	ps = append(ps, c.HTTP.Problems()...)
	ps = append(ps, c.Remote.Problems()...)
	ps = append(ps, c.Live.Problems()...)
	ps = append(ps, c.Approvals.Problems()...)
	if strings.TrimSpace(c.Data) != "" {
		ps = append(ps, c.Workspaces.Problems(c.Data)...)
	}
	if !oneOf(c.Tools.Namespaces, "auto", "off") {
		add("tools.namespaces", "%q: want auto or off", c.Tools.Namespaces)
	}
	if !oneOf(c.Tools.Shell.Approval, "ask", "allow", "deny") {
		add("tools.shell.approval", "%q: want ask, allow or deny", c.Tools.Shell.Approval)
	}
	ps = append(ps, c.Tools.initialProblems()...)
	ps = append(ps, c.MCP.Problems()...)
	ps = append(ps, c.budgetProblems()...)
	c.Memory.validate(add)
	return ps
}

// maxInitialTools bounds tools.initial.
const maxInitialTools = 64

// initialProblems checks tools.initial: tool names or patterns. Whether a
// name is a registered tool is checked at startup, when the tools are
// known.
func (t *Tools) initialProblems() []error {
	var ps []error
	if len(t.Initial) > maxInitialTools {
		ps = append(ps, Problem{Where: "tools.initial", What: fmt.Sprintf("%d entries: at most %d are accepted", len(t.Initial), maxInitialTools)})
	}
	for i, p := range t.Initial {
		if !toolPattern.MatchString(p) {
			ps = append(ps, Problem{Where: fmt.Sprintf("tools.initial[%d]", i), What: fmt.Sprintf("%q: want a tool name (1 to 64 characters of a-z, 0-9, '_', '.' or '-', such as files.read) or a pattern with '*' (files.*, *)", p)})
		}
	}
	return ps
}

// All returns the configured providers by file key.
func (p *Providers) All() map[string]*Provider {
	return map[string]*Provider{
		"ollama": &p.Ollama, "ollama_cloud": &p.OllamaCloud, "openrouter": &p.OpenRouter,
		"nvidia": &p.NVIDIA, "zen": &p.Zen, "openai": &p.OpenAI,
	}
}

func validPort(port string) bool {
	n, err := strconv.Atoi(port)
	return err == nil && n >= 0 && n <= 65535
}

func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

func oneOf(s string, options ...string) bool {
	for _, o := range options {
		if s == o {
			return true
		}
	}
	return false
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
