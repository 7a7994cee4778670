// Package mcpspec holds the rules an MCP server's settings must meet, in
// one place for the two that check them: the configuration (config, which
// reports every problem of mcp.servers.<name> by key when the file is
// read) and the tools/mcp package (which checks what it is given before it
// starts anything). It depends on the standard library alone, so that the
// configuration package stays a leaf.
package mcpspec

import (
	"fmt"
	"path/filepath"
	"strings"
	"time"
)

// Server is what the rules look at of one server's settings; the keys in
// the messages are the configuration's (mcp.servers.<name>.<key>).
type Server struct {
	Command, URL, Cwd                            string
	Args, Env, Tools                             []string
	Headers                                      map[string]string
	Retain, Approval                             string
	Timeout, StartTimeout                        time.Duration
	RetainBytes, MaxOutputBytes, MaxMessageBytes int
}

// Problems calls add for every rule s breaks, with the key it concerns
// ("command", "env[2]") and what is wrong and what is accepted. The
// server's name is checked by each caller (its rule is ValidName).
func (s Server) Problems(add func(key, format string, args ...any)) {
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

func oneOf(v string, allowed ...string) bool {
	for _, a := range allowed {
		if v == a {
			return true
		}
	}
	return false
}
