package tests

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	gomcp "github.com/modelcontextprotocol/go-sdk/mcp"

	"lemo/api"
	"lemo/client"
)

// lateServer is an MCP server over streamable HTTP, built with the SDK,
// that answers 503 until up is set.
type lateServer struct {
	up atomic.Bool
	h  http.Handler
}

func newLateServer() *lateServer {
	s := gomcp.NewServer(&gomcp.Implementation{Name: "late", Version: "1"}, nil)
	s.AddTool(&gomcp.Tool{Name: "latecomer", Description: "Answer with the text given, from the latecomer server.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"text":{"type":"string"}},"required":["text"]}`),
		Annotations: &gomcp.ToolAnnotations{ReadOnlyHint: true}},
		func(_ context.Context, req *gomcp.CallToolRequest) (*gomcp.CallToolResult, error) {
			var in struct{ Text string }
			_ = json.Unmarshal(req.Params.Arguments, &in)
			return &gomcp.CallToolResult{Content: []gomcp.Content{&gomcp.TextContent{Text: "latecomer says " + in.Text}}}, nil
		})
	return &lateServer{h: gomcp.NewStreamableHTTPHandler(func(*http.Request) *gomcp.Server { return s }, nil)}
}

func (l *lateServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !l.up.Load() {
		http.Error(w, "starting up", http.StatusServiceUnavailable)
		return
	}
	l.h.ServeHTTP(w, r)
}

// An MCP server that is not up when the daemon starts (it answers 503)
// offers its tools once it is, without a restart. Until then lemo tools
// shows it with why, a Task that names one of its tools is refused with
// the server's state, and a search says why its tools are missing. A Task
// created before its tools appeared finds one with tools.search once they
// are registered, loads and calls it. /metrics counts the failed listings.
func TestMCPServerUpLateOffersItsTools(t *testing.T) {
	late := newLateServer()
	srv := httptest.NewServer(late)
	t.Cleanup(srv.Close)
	data := filepath.Join(t.TempDir(), "data")
	// tools.search asks for approval: the Task created before the tools
	// appeared searches only once the test lets it.
	cfg := writeConfig(t, "approvals:\n  ask: [tools.search]\n  timeout: 10m\nmcp:\n  servers:\n    late:\n      url: "+srv.URL+"\n")
	d := serveEnvArgs(t, data, []string{"LEMO_FAKE_ENABLED=true", "LEMO_OLLAMA_DISABLED=true"}, "--http-listen", "127.0.0.1:0", "--config", cfg)
	c := d.connect(t, "")
	ctx := context.Background()
	const tool = "mcp.late.latecomer"

	eventually(t, 30*time.Second, func() error {
		out, code := cli(t, data, "tools")
		if code != 0 || !strings.Contains(out, "mcp.late.*") || !strings.Contains(out, "mcp server late (listing failed: ") || !strings.Contains(out, "; retrying ") {
			return fmt.Errorf("lemo tools (exit %d) does not show the server's state:\n%s", code, out)
		}
		return nil
	})
	_, err := c.CreateTask(ctx, client.CreateTask{Request: tool + ` {"text":"x"}`, Model: "fake/call", Tools: []string{tool}, ToolsRestricted: true})
	if err == nil || !strings.Contains(err.Error(), "mcp server late has not listed its tools (listing failed: ") {
		t.Fatalf("a Task naming a tool of the server not up yet: %v, want refused with the server's state", err)
	}

	// A Task that searches while the server is down is told why its tools
	// are missing.
	early, err := c.CreateTask(ctx, client.CreateTask{Request: `latecomer {"text":"early"}`, Model: "fake/discover"})
	if err != nil {
		t.Fatal(err)
	}
	if out, code := cli(t, data, "approve", searchApproval(t, data, early.GetTaskId())); code != 0 {
		t.Fatalf("lemo approve: exit %d\n%s", code, out)
	}
	waitTask(t, c, early.GetTaskId(), "finished", statusIs(api.TaskStatus_TASK_STATUS_FINISHED))
	if _, answer := toolCalls(t, c, early.GetTaskId()); !strings.Contains(answer, "mcp.late.* (the mcp server late: listing failed: ") {
		t.Errorf("a search while the server is down does not say why its tools are missing:\n%s", answer)
	}

	// A Task created before the tools appear searches once they are.
	m, err := c.CreateTask(ctx, client.CreateTask{Request: `latecomer {"text":"hello"}`, Model: "fake/discover"})
	if err != nil {
		t.Fatal(err)
	}
	id := m.GetTaskId()
	approval := searchApproval(t, data, id)
	late.up.Store(true)
	eventually(t, 60*time.Second, func() error {
		list, err := c.Tools(ctx)
		if err != nil {
			return err
		}
		for _, ti := range list {
			if ti.GetName() == tool && ti.GetServer() == "late" {
				return nil
			}
		}
		return fmt.Errorf("%s is not offered yet", tool)
	})
	out, code := cli(t, data, "tools")
	if code != 0 || strings.Contains(out, "mcp.late.*") || !strings.Contains(out, tool) {
		t.Errorf("lemo tools (exit %d) once the server listed its tools:\n%s", code, out)
	}
	if out, code := cli(t, data, "approve", approval); code != 0 {
		t.Fatalf("lemo approve: exit %d\n%s", code, out)
	}
	waitTask(t, c, id, "finished", statusIs(api.TaskStatus_TASK_STATUS_FINISHED))
	calls, answer := toolCalls(t, c, id)
	if names := callNames(calls); fmt.Sprint(names) != fmt.Sprint([]string{"tools.search", "tools.load", tool}) {
		t.Fatalf("calls %v, want tools.search, tools.load and %s; answer:\n%s", names, tool, answer)
	}
	if !strings.Contains(answer, "latecomer says hello") {
		t.Errorf("the model was not shown the late tool's result:\n%s", answer)
	}
	series := scrape(t, httpAddr(t, d.daemon))
	if n := series[`lemo_mcp_list_failures_total{server="late"}`]; n < 1 {
		t.Errorf("/metrics counts %v failed listings of server late, want at least 1", n)
	}
	// A fixed set naming it is accepted now.
	if _, err := c.CreateTask(ctx, client.CreateTask{Request: tool + ` {"text":"x"}`, Model: "fake/call", Tools: []string{tool}, ToolsRestricted: true}); err != nil {
		t.Errorf("a Task naming the late tool once offered: %v", err)
	}
}

// searchApproval waits for Task id's approval of a tools.search call and
// returns its id.
func searchApproval(t *testing.T, data, id string) string {
	t.Helper()
	approval := ""
	eventually(t, 30*time.Second, func() error {
		out, code := cli(t, data, "approvals", "--json")
		var list []struct {
			TaskID            string `json:"task_id"`
			ApprovalRequested struct {
				ApprovalID string `json:"approval_id"`
				Tool       string `json:"tool"`
			} `json:"approval_requested"`
		}
		if code != 0 || json.Unmarshal([]byte(out), &list) != nil {
			return fmt.Errorf("lemo approvals --json: exit %d\n%s", code, out)
		}
		for _, a := range list {
			if a.TaskID == id && a.ApprovalRequested.Tool == "tools.search" {
				approval = a.ApprovalRequested.ApprovalID
				return nil
			}
		}
		return fmt.Errorf("no approval of tools.search for %s:\n%s", id, out)
	})
	return approval
}
