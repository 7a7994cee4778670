package main

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	gomcp "github.com/modelcontextprotocol/go-sdk/mcp"

	"lemo/config"
)

// serveTestMCP serves an MCP server over stdio with the tools "ping" and
// the colliding "getUser" and "get_user".
func serveTestMCP() int {
	s := gomcp.NewServer(&gomcp.Implementation{Name: "doctor-test", Version: "1"}, nil)
	schema := map[string]any{"type": "object"}
	for _, n := range []string{"ping", "getUser", "get_user"} {
		s.AddTool(&gomcp.Tool{Name: n, Description: n, InputSchema: schema}, func(context.Context, *gomcp.CallToolRequest) (*gomcp.CallToolResult, error) {
			return &gomcp.CallToolResult{Content: []gomcp.Content{&gomcp.TextContent{Text: n}}}, nil
		})
	}
	if err := s.Run(context.Background(), &gomcp.StdioTransport{}); err != nil {
		return 1
	}
	return 0
}

func TestDoctorMCPServers(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cfg := doctorConfig(filepath.Join(t.TempDir(), "data"))
	off := false
	cfg.MCP.Servers = map[string]config.MCPServer{
		"good":    {Command: self, Env: []string{"LEMOTEST_MCP_SERVER=1"}},
		"missing": {Command: "/nonexistent/mcp-server"},
		"web":     {URL: "http://127.0.0.1:1/mcp"},
		"off":     {Command: "/nonexistent/other", Enabled: &off},
	}
	got := runDoctor(t, cfg, func(e *doctorEnv) { e.environ = os.Environ() })
	expect(t, got, "mcp server good", checkOK, "stdio", "1 tools: ping")
	expect(t, got, "mcp server good", checkWarn, `tool "getUser" is not offered`, "maps to mcp.good.get_user", "mcp.servers.good.tools")
	expect(t, got, "mcp server missing", checkFail, "/nonexistent/mcp-server", "fix: run /nonexistent/mcp-server by hand")
	expect(t, got, "mcp server web", checkFail, "http http://127.0.0.1:1/mcp", "fix: check that the server answers at http://127.0.0.1:1/mcp")
	if _, ok := got["mcp server off"]; ok {
		t.Error("a disabled server was checked")
	}
}
