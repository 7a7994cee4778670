package tests

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"lemo/api"
	"lemo/client"
)

// mcpEverything is the npm server-everything that make mcp-deps installs
// (see mcpNPM).
func mcpEverything(t *testing.T) string { return mcpNPM(t, "mcp-server-everything") }

// mcpNPM is the command bin of the npm MCP servers that make mcp-deps
// installs: $MCP_TEST_NPM, else the repository's .cache/npm/mcp. Without
// Node or it the test skips, except under CI=true, where it fails.
func mcpNPM(t *testing.T, bin string) string {
	t.Helper()
	dir := os.Getenv("MCP_TEST_NPM")
	if dir == "" {
		wd, _ := os.Getwd()
		dir = filepath.Join(filepath.Dir(wd), ".cache", "npm", "mcp", "node_modules")
	}
	p := filepath.Join(dir, ".bin", bin)
	_, nodeErr := exec.LookPath("node")
	if _, err := os.Stat(p); err != nil || nodeErr != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%s is not installed at %s (or Node is missing); under CI=true the MCP tests must run (make test runs make mcp-deps)", bin, p)
		}
		t.Skipf("%s is not installed at %s (make mcp-deps installs it where Node is)", bin, p)
	}
	return p
}

// A Task of lemo serve whose scripted model calls a tool of an MCP server
// (server-everything over stdio, offered alone with --tools style
// restriction) finishes with the server's result, marked untrusted; the
// call's progress notifications reach a subscribed client as live tool
// state; lemo tools shows the server and its state; /metrics counts the
// call.
func TestMCPToolInATask(t *testing.T) {
	bin := mcpEverything(t)
	data := filepath.Join(t.TempDir(), "data")
	cfg := writeConfig(t, "mcp:\n  servers:\n    everything:\n      command: "+bin+"\n      args: [stdio]\n")
	d := serveRemote(t, data, "--config", cfg, "--http-listen", "127.0.0.1:0")
	c := d.connect(t, "")
	ctx := context.Background()
	const tool = "mcp.everything.trigger-long-running-operation"
	list, err := c.Tools(ctx)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, ti := range list {
		if ti.GetName() == tool {
			found = ti.GetServer() == "everything" && ti.GetServerState() == "idle" && ti.GetUntrusted()
		}
	}
	if !found {
		t.Fatalf("lemo tools does not list %s of server everything, idle and untrusted: %v", tool, list)
	}
	sub, err := c.Subscribe(ctx, client.SubscribeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	m, err := c.CreateTask(ctx, client.CreateTask{Request: tool + ` {"duration":0.3,"steps":3}`, Model: "fake/call", Tools: []string{tool}, ToolsRestricted: true})
	if err != nil {
		t.Fatal(err)
	}
	states := followToolStates(t, sub, m.GetTaskId(), d.logs)
	calls, answer := toolCalls(t, c, m.GetTaskId())
	if len(calls) != 1 || calls[0].tool != tool || calls[0].result == nil {
		t.Fatalf("calls %+v, want one result of %s", calls, tool)
	}
	res := calls[0].result
	if !res.GetUntrusted() || !strings.Contains(string(res.GetRetainedOutput()), "Long running operation completed") {
		t.Errorf("result: untrusted %v, retained %s", res.GetUntrusted(), res.GetRetainedOutput())
	}
	if !strings.Contains(answer, "Long running operation completed") {
		t.Errorf("the model was not shown the result:\n%s", answer)
	}
	if len(states) == 0 || !strings.Contains(states[0], `"progress":1`) || !strings.Contains(states[0], `"total":3`) {
		t.Errorf("progress states seen by the client: %v, want the server's notifications", states)
	}
	series := scrape(t, httpAddr(t, d.daemon))
	if n := series[`lemo_mcp_calls_total{outcome="ok",server="everything"}`]; n != 1 {
		t.Errorf("/metrics counts %v ok calls of server everything, want 1", n)
	}
	list, err = c.Tools(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, ti := range list {
		if ti.GetName() == tool && ti.GetServerState() != "running" {
			t.Errorf("after a call the server is %s, want running", ti.GetServerState())
		}
	}
	out, code := cli(t, data, "tools")
	if code != 0 || !strings.Contains(out, "SERVER") || !regexp.MustCompile(`(?m)^`+regexp.QuoteMeta(tool)+`\s+json\s+mcp everything \(running\)`).MatchString(out) {
		t.Errorf("lemo tools (exit %d) does not show the server's state:\n%s", code, out)
	}
}

// An MCP server started by a Task's call is stopped with the daemon: at a
// clean stop, and when the daemon is killed outright (SIGKILL).
func TestMCPServerStopsWithTheDaemon(t *testing.T) {
	bin := mcpEverything(t)
	data := filepath.Join(t.TempDir(), "data")
	marker := "MCPTEST_TREE=e2e-" + strconv.FormatInt(time.Now().UnixNano(), 10)
	cfg := writeConfig(t, "mcp:\n  servers:\n    everything:\n      command: "+bin+"\n      args: [stdio]\n      env: ["+marker+"]\n")
	const tool = "mcp.everything.echo"
	for _, how := range []string{"stop", "kill"} {
		d := serveRemote(t, data, "--config", cfg)
		c := d.connect(t, "")
		m, err := c.CreateTask(context.Background(), client.CreateTask{Request: tool + ` {"message":"hi"}`, Model: "fake/call", Tools: []string{tool}, ToolsRestricted: true})
		if err != nil {
			t.Fatal(err)
		}
		waitTask(t, c, m.GetTaskId(), "finished", statusIs(api.TaskStatus_TASK_STATUS_FINISHED))
		if len(taggedProcs(marker)) == 0 {
			t.Fatalf("%s: no server process runs after a call", how)
		}
		if how == "stop" {
			d.stop()
		} else {
			d.kill()
		}
		eventually(t, 20*time.Second, func() error {
			if ps := taggedProcs(marker); len(ps) > 0 {
				return fmt.Errorf("after the daemon's %s, server processes live on: %v", how, ps)
			}
			return nil
		})
	}
}

// A Task of lemo serve with the default tools finds an MCP server's tool
// with tools.search, loads it with tools.load (recorded in its history)
// and calls it, and finishes with its result; the server's progress
// notifications reach a subscribed client. Against the npm reference
// servers: server-everything over stdio and over streamable HTTP, and
// server-filesystem confined to a folder.
func TestMCPToolFoundAndLoaded(t *testing.T) {
	t.Run("everything over stdio", func(t *testing.T) {
		bin := mcpEverything(t)
		mcpFoundAndLoaded(t, "mcp:\n  servers:\n    everything:\n      command: "+bin+"\n      args: [stdio]\n",
			"mcp.everything.trigger-long-running-operation", `long running operation {"duration":0.3,"steps":3}`, "Long running operation completed", true)
	})
	t.Run("everything over streamable HTTP", func(t *testing.T) {
		bin := mcpEverything(t)
		port := strconv.Itoa(freePort(t))
		cmd := exec.Command(bin, "streamableHttp")
		cmd.Env = append(cleanEnv(), "PORT="+port)
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			_ = cmd.Wait()
		})
		eventually(t, 30*time.Second, func() error { // Node starts the server
			c, err := net.Dial("tcp", "127.0.0.1:"+port)
			if err == nil {
				c.Close()
			}
			return err
		})
		mcpFoundAndLoaded(t, "mcp:\n  servers:\n    web:\n      url: http://127.0.0.1:"+port+"/mcp\n",
			"mcp.web.trigger-long-running-operation", `long running operation {"duration":0.3,"steps":3}`, "Long running operation completed", true)
	})
	t.Run("filesystem confined to a folder", func(t *testing.T) {
		bin := mcpNPM(t, "mcp-server-filesystem")
		root, err := filepath.EvalSymlinks(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		note := filepath.Join(root, "note.txt")
		if err := os.WriteFile(note, []byte("the depot opens at seven"), 0o600); err != nil {
			t.Fatal(err)
		}
		mcpFoundAndLoaded(t, "mcp:\n  servers:\n    fs:\n      command: "+bin+"\n      args: ["+root+"]\n",
			"mcp.fs.read_text_file", `read_text_file complete contents as text {"path":"`+note+`"}`, "the depot opens at seven", false)
	})
}

// mcpFoundAndLoaded runs a Task of the demo model fake/discover on a
// daemon with the MCP servers of config: its request's words find tool,
// whose result must hold want; progress says whether the call's
// progress notifications must reach the client as tool state.
func mcpFoundAndLoaded(t *testing.T, config, tool, request, want string, progress bool) {
	t.Helper()
	data := filepath.Join(t.TempDir(), "data")
	cfg := writeConfig(t, config)
	// The demo models, and the tools a Task starts with by default.
	d := serveEnvArgs(t, data, []string{"LEMO_FAKE_ENABLED=true", "LEMO_OLLAMA_DISABLED=true"}, "--config", cfg)
	c := d.connect(t, "")
	ctx := context.Background()
	sub, err := c.Subscribe(ctx, client.SubscribeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	m, err := c.CreateTask(ctx, client.CreateTask{Request: request, Model: "fake/discover"})
	if err != nil {
		t.Fatal(err)
	}
	states := followToolStates(t, sub, m.GetTaskId(), d.logs)
	calls, answer := toolCalls(t, c, m.GetTaskId())
	if names := callNames(calls); fmt.Sprint(names) != fmt.Sprint([]string{"tools.search", "tools.load", tool}) {
		t.Fatalf("calls %v, want tools.search, tools.load and %s; answer:\n%s", names, tool, answer)
	}
	if !strings.Contains(answer, want) {
		t.Errorf("the model was not shown the MCP tool's result (%q):\n%s", want, answer)
	}
	if progress && (len(states) == 0 || !strings.Contains(states[0], `"total":3`)) {
		t.Errorf("progress states seen by the client: %v, want the server's notifications", states)
	}
	h, err := c.ReadHistory(ctx, m.GetTaskId(), 1)
	if err != nil {
		t.Fatal(err)
	}
	loaded := false
	for _, ev := range h {
		if tl := ev.GetToolsLoaded(); tl != nil && len(tl.GetTools()) == 1 && tl.GetTools()[0] == tool {
			loaded = true
		}
	}
	if !loaded {
		t.Errorf("the history does not record the load of %s", tool)
	}
}

// followToolStates follows Task id on sub until it finishes and returns the
// tool states (live deltas) a client saw; the Task failing or pausing, or
// not finishing within a minute, fails the test with the daemon's log.
func followToolStates(t *testing.T, sub *client.Subscription, id string, logs func() string) []string {
	t.Helper()
	var states []string
	deadline := time.After(60 * time.Second)
	for {
		select {
		case u, ok := <-sub.C:
			if !ok {
				t.Fatal("the subscription ended")
			}
			if dl := u.GetDelta(); dl != nil && dl.GetTaskId() == id && dl.GetKind() == api.DeltaKind_DELTA_KIND_TOOL_STATE {
				states = append(states, string(dl.GetData()))
			}
			if ev := u.GetEvent(); ev != nil && ev.GetTaskId() == id {
				switch ev.GetStatusChanged().GetStatus() {
				case api.TaskStatus_TASK_STATUS_FINISHED:
					return states
				case api.TaskStatus_TASK_STATUS_FAILED, api.TaskStatus_TASK_STATUS_PAUSED:
					t.Fatalf("the Task stopped: %v\n%s", ev, logs())
				}
			}
		case <-deadline:
			t.Fatalf("the Task did not finish; progress seen: %v\n%s", states, logs())
		}
	}
}
