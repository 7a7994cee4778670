package config

import (
	"fmt"
	"regexp"
	"sort"
	"time"

	"lemo/tools/mcp/mcpspec"
)

// MCP configures the tools that come from MCP servers: each tool of a
// server named here becomes the tool mcp.<server>.<tool>. A server is a
// command Lemo starts (stdio) or a URL (streamable HTTP). The keys are
// file-only (no variables). The rules are mcpspec's, which the tools/mcp
// package applies again to what it is given.
type MCP struct {
	Servers map[string]MCPServer `yaml:"servers"`
}

// MCPServer is one server under mcp.servers.<name>.
type MCPServer struct {
	Enabled         *bool             `yaml:"enabled" help:"offer this server's tools (default true)"`
	Command         string            `yaml:"command" help:"the stdio server's executable: an absolute path or a name on PATH (npx)"`
	Args            []string          `yaml:"args" help:"its arguments"`
	Env             []string          `yaml:"env" help:"its environment besides PATH, HOME, USER, LOGNAME, LANG, LANGUAGE, LC_*, TZ and TMPDIR: NAME passes the daemon's variable (name a key to pass it), NAME=value sets one; nothing else of the daemon's environment passes, never LEMO_*"`
	Cwd             string            `yaml:"cwd" help:"its working folder (absolute); empty: the daemon's"`
	URL             string            `yaml:"url" help:"a streamable HTTP server's URL (instead of command)"`
	Headers         map[string]string `yaml:"headers" help:"HTTP headers sent to a url server (Authorization: ...); never logged"`
	Tools           []string          `yaml:"tools" help:"offer only these of the server's tools (as the server names them); empty: all"`
	Retain          string            `yaml:"retain" help:"what of a result the Task's history keeps: excerpt (the text's head and tail within retain_bytes, small structured content, content sizes), full (the bounded result) or none; empty: excerpt"`
	RetainBytes     int               `yaml:"retain_bytes" help:"bound of a retained excerpt; 0: 8192"`
	Approval        string            `yaml:"approval" help:"annotations (read-only tools run unasked, destructive or open-world ones ask, the rest follow approvals.*), ask (every call) or allow (approvals.* alone decides); empty: annotations"`
	Timeout         time.Duration     `yaml:"timeout" help:"longest a call may take; after it the server is sent MCP's cancellation, the outcome is unknown, and a stdio server is stopped as hung with its processes (a death for the restart backoff; its other calls in flight are outcome unknown too) and starts again on the next call; 0: 60s"`
	StartTimeout    time.Duration     `yaml:"start_timeout" help:"longest a start and the MCP handshake may take; 0: 30s"`
	MaxOutputBytes  int               `yaml:"max_output_bytes" help:"bound of a result's text and of its structured content (each) shown to the model; 0: 65536"`
	MaxMessageBytes int               `yaml:"max_message_bytes" help:"largest message accepted from the server; a larger one ends its connection; 0: 16 MiB"`
}

// On reports whether the server is enabled (the default).
func (s MCPServer) On() bool { return s.Enabled == nil || *s.Enabled }

var mcpServerName = regexp.MustCompile(`^[a-z0-9_-]{1,32}$`)

// maxMCPServers bounds mcp.servers.
const maxMCPServers = 64

// Problems checks the mcp keys and returns every problem, located by key
// ("mcp.servers.fs.command").
func (m *MCP) Problems() []error {
	var ps []error
	if len(m.Servers) > maxMCPServers {
		return []error{Problem{Where: "mcp.servers", What: fmt.Sprintf("%d servers: at most %d are accepted", len(m.Servers), maxMCPServers)}}
	}
	names := make([]string, 0, len(m.Servers))
	for n := range m.Servers {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, name := range names {
		s := m.Servers[name]
		at := "mcp.servers." + name
		add := func(key, format string, args ...any) {
			ps = append(ps, Problem{Where: at + "." + key, What: fmt.Sprintf(format, args...)})
		}
		if !mcpServerName.MatchString(name) {
			ps = append(ps, Problem{Where: at, What: fmt.Sprintf("%q: a server's name is 1 to 32 characters of a-z, 0-9, '_' and '-' (its tools are mcp.<server>.<tool>)", name)})
		}
		mcpspec.Server{
			Command: s.Command, URL: s.URL, Cwd: s.Cwd, Args: s.Args, Env: s.Env, Tools: s.Tools, Headers: s.Headers,
			Retain: s.Retain, Approval: s.Approval, Timeout: s.Timeout, StartTimeout: s.StartTimeout,
			RetainBytes: s.RetainBytes, MaxOutputBytes: s.MaxOutputBytes, MaxMessageBytes: s.MaxMessageBytes,
		}.Problems(add)
	}
	return ps
}
