package config

import (
	"fmt"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"time"
)

// MCP configures the tools that come from MCP servers: each tool of a
// server named here becomes the tool mcp.<server>.<tool>. A server is a
// command Lemo starts (stdio) or a URL (streamable HTTP). The keys are
// file-only (no variables). The tools/mcp package checks them again when
// the daemon builds its tools.
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
	Timeout         time.Duration     `yaml:"timeout" help:"longest a call may take; after it the server is sent MCP's cancellation and the outcome is unknown; 0: 60s"`
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
		switch {
		case s.Command == "" && s.URL == "":
			add("command", "set command (a stdio server Lemo starts) or url (a streamable HTTP server)")
		case s.Command != "" && s.URL != "":
			add("url", "set command or url, not both")
		}
		if s.URL != "" {
			if !strings.HasPrefix(s.URL, "http://") && !strings.HasPrefix(s.URL, "https://") {
				add("url", "want an http:// or https:// URL")
			}
			if len(s.Args) > 0 || len(s.Env) > 0 || s.Cwd != "" {
				add("url", "args, env and cwd are for a command; a url server takes headers")
			}
		}
		if s.Command != "" && len(s.Headers) > 0 {
			add("headers", "headers are for a url server")
		}
		if strings.Contains(s.Command, "/") && !filepath.IsAbs(s.Command) {
			add("command", "%q: want an absolute path or a name on PATH", s.Command)
		}
		if s.Cwd != "" && !filepath.IsAbs(s.Cwd) {
			add("cwd", "%q: want an absolute path", s.Cwd)
		}
		for i, e := range s.Env {
			n, _, _ := strings.Cut(e, "=")
			switch {
			case n == "" || strings.ContainsAny(n, " \t\n\x00"):
				add(fmt.Sprintf("env[%d]", i), "%q: want NAME (passes the daemon's variable) or NAME=value", e)
			case strings.HasPrefix(strings.ToUpper(n), "LEMO_"):
				add(fmt.Sprintf("env[%d]", i), "%q: LEMO_* variables are never passed to a server", n)
			}
		}
		for k := range s.Headers {
			if k == "" || strings.ContainsAny(k, " :\t\r\n") {
				add("headers", "%q: not a header name", k)
			}
		}
		for i, t := range s.Tools {
			if t == "" {
				add(fmt.Sprintf("tools[%d]", i), "empty: want a tool name as the server lists it")
			}
		}
		if !oneOf(s.Retain, "", "excerpt", "full", "none") {
			add("retain", "%q: want excerpt, full or none", s.Retain)
		}
		if !oneOf(s.Approval, "", "annotations", "ask", "allow") {
			add("approval", "%q: want annotations, ask or allow", s.Approval)
		}
		if s.Timeout < 0 {
			add("timeout", "must not be negative (0 takes the default)")
		}
		if s.StartTimeout < 0 {
			add("start_timeout", "must not be negative (0 takes the default)")
		}
		if s.RetainBytes != 0 && s.RetainBytes < 1024 {
			add("retain_bytes", "%d: want at least 1024 (0 takes the default)", s.RetainBytes)
		}
		if s.MaxOutputBytes != 0 && s.MaxOutputBytes < 1024 {
			add("max_output_bytes", "%d: want at least 1024 (0 takes the default)", s.MaxOutputBytes)
		}
		if s.MaxMessageBytes != 0 && s.MaxMessageBytes < 64<<10 {
			add("max_message_bytes", "%d: want at least 65536 (0 takes the default)", s.MaxMessageBytes)
		}
	}
	return ps
}
