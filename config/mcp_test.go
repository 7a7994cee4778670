package config

import (
	"strings"
	"testing"
)

func TestLoadMCPServers(t *testing.T) {
	c := Default()
	errs := c.LoadYAML("lemo.yaml", []byte(`
mcp:
  servers:
    everything:
      command: npx
      args: [-y, "@modelcontextprotocol/server-everything"]
      env: [OPENAI_API_KEY, MODE=stdio]
      tools: [echo]
      approval: allow
      timeout: 5s
    web:
      url: http://127.0.0.1:3001/mcp
      headers: {Authorization: Bearer x}
      enabled: false
`))
	errs = append(errs, c.Validate()...)
	if len(errs) > 0 {
		t.Fatal(Join(errs))
	}
	ev, web := c.MCP.Servers["everything"], c.MCP.Servers["web"]
	if ev.Command != "npx" || len(ev.Args) != 2 || ev.Timeout.Seconds() != 5 || !ev.On() || web.On() || web.Headers["Authorization"] != "Bearer x" {
		t.Fatalf("servers = %+v", c.MCP.Servers)
	}
}

func TestMCPProblems(t *testing.T) {
	errs := Default().LoadYAML("lemo.yaml", []byte(`
mcp:
  servers:
    fs:
      comand: x
    web:
      url: http://x
      timeout: soon
`))
	joined := Join(errs).Error()
	for _, want := range []string{"lemo.yaml:5: mcp.servers.fs.comand: unknown key; accepted here: enabled, command", "mcp.servers.web.timeout: want a duration"} {
		if !strings.Contains(joined, want) {
			t.Errorf("problems lack %q:\n%s", want, joined)
		}
	}
	c := Default()
	c.MCP.Servers = map[string]MCPServer{
		"Bad.Name": {Command: "x"},
		"none":     {},
		"both":     {Command: "x", URL: "http://y"},
		"rel":      {Command: "bin/x", Cwd: "rel", Env: []string{"LEMO_TOKEN", "=v"}, Retain: "most", Approval: "never", RetainBytes: 10, MaxMessageBytes: 1},
		"web":      {URL: "ftp://x", Args: []string{"a"}},
		"hdr":      {Command: "x", Headers: map[string]string{"A": "b"}},
	}
	joined = Join(c.Validate()).Error()
	for _, want := range []string{
		`mcp.servers.Bad.Name: "Bad.Name": a server's name`,
		"mcp.servers.none.command: set command",
		"mcp.servers.both.url: set command or url, not both",
		`mcp.servers.rel.command: "bin/x": want an absolute path`,
		`mcp.servers.rel.cwd: "rel": want an absolute path`,
		`mcp.servers.rel.env[0]: "LEMO_TOKEN": LEMO_* variables are never passed`,
		`mcp.servers.rel.env[1]: "=v": want NAME`,
		`mcp.servers.rel.retain: "most": want excerpt, full or none`,
		`mcp.servers.rel.approval: "never": want annotations, ask or allow`,
		"mcp.servers.rel.retain_bytes: 10: want at least 1024",
		"mcp.servers.rel.max_message_bytes: 1: want at least 65536",
		"mcp.servers.web.url: want an http:// or https:// URL",
		"mcp.servers.web.url: args, env and cwd are for a command",
		"mcp.servers.hdr.headers: headers are for a url server",
	} {
		if !strings.Contains(joined, want) {
			t.Errorf("problems lack %q:\n%s", want, joined)
		}
	}
}
