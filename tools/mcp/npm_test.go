package mcp

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The reference MCP servers from npm, at the versions testdata/npm pins:
// $MCP_TEST_NPM (make test sets it after make mcp-deps installed them;
// then the tests must run), else the repository's .cache/npm/mcp install.
// Without Node or the servers the tests skip, except under CI=true, where
// they fail.
func npmBin(t *testing.T, name string) string {
	t.Helper()
	dir := os.Getenv("MCP_TEST_NPM")
	if dir == "" {
		if _, err := exec.LookPath("node"); err != nil {
			npmUnavailable(t, "Node is not installed")
		}
		wd, _ := os.Getwd()
		for ; wd != "/"; wd = filepath.Dir(wd) {
			if _, err := os.Stat(filepath.Join(wd, "go.mod")); err == nil {
				break
			}
		}
		dir = filepath.Join(wd, ".cache", "npm", "mcp", "node_modules")
	}
	p := filepath.Join(dir, ".bin", name)
	if _, err := os.Stat(p); err != nil {
		npmUnavailable(t, name+" is not installed at "+p)
	}
	return p
}

func npmUnavailable(t *testing.T, why string) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatalf("%s; under CI=true the tests against the npm MCP servers must run (make test runs make mcp-deps, which installs them with npm)", why)
	}
	t.Skipf("%s: skipping the tests against the npm MCP servers (make mcp-deps installs them where Node is; make test runs it)", why)
}

// everythingChecks calls echo and the long-running operation (with
// progress) of a server-everything named name.
func everythingChecks(t *testing.T, m *Manager, name string) {
	t.Helper()
	ts, err := listed(t, m)
	if err != nil {
		t.Fatalf("Tools: %v", err)
	}
	echo := ts["mcp."+name+".echo"]
	long := ts["mcp."+name+".trigger-long-running-operation"]
	if echo == nil || long == nil {
		t.Fatalf("tools = %v", keys(ts))
	}
	if a := long.Tool.(*Tool).Approval(nil); a.Required {
		t.Errorf("a read-only tool asks for approval: %+v", a)
	}
	out, err := call(t, context.Background(), echo, `{"message":"hello from lemo"}`, nil)
	if err != nil || !strings.Contains(out.Text, "hello from lemo") {
		t.Fatalf("echo = %+v, %v", out, err)
	}
	st := &states{}
	out, err = call(t, context.Background(), long, `{"duration":0.3,"steps":3}`, st)
	if err != nil || out.IsError {
		t.Fatalf("trigger-long-running-operation = %+v, %v", out, err)
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	if len(st.got) == 0 || st.got[0].Total != 3 {
		t.Errorf("progress = %+v, want updates of 3 steps", st.got)
	}
}

func TestNPMEverythingStdio(t *testing.T) {
	bin := npmBin(t, "mcp-server-everything")
	tree := "MCPTEST_TREE=npm-" + strconv.FormatInt(time.Now().UnixNano(), 10)
	m := newManager(t, ServerConfig{Name: "everything", Command: bin, Args: []string{"stdio"}, Env: []string{tree, "OPENROUTER_API_KEY"}})
	everythingChecks(t, m, "everything")
	ts, _ := listed(t, m)
	out, err := call(t, context.Background(), ts["mcp.everything.get-env"], `{}`, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, absent := range []string{"planted-lemo-token", "planted-plain", "planted-password"} {
		if strings.Contains(out.Text, absent) {
			t.Errorf("the server sees %q: %s", absent, out.Text)
		}
	}
	if !strings.Contains(out.Text, "planted-provider-key") {
		t.Errorf("the variable config passes is missing: %s", out.Text)
	}
	m.Close()
	noSurvivors(t, tree)
}

func TestNPMEverythingStreamableHTTP(t *testing.T) {
	bin := npmBin(t, "mcp-server-everything")
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
	l.Close()
	cmd := exec.Command(bin, "streamableHttp")
	cmd.Env = append(os.Environ(), "PORT="+port)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		_ = cmd.Wait()
	})
	eventually(t, 30*time.Second, func() error {
		c, err := net.Dial("tcp", "127.0.0.1:"+port)
		if err == nil {
			c.Close()
		}
		return err
	})
	m := newManager(t, ServerConfig{Name: "web", URL: "http://127.0.0.1:" + port + "/mcp"})
	everythingChecks(t, m, "web")
}

func TestNPMFilesystemConfined(t *testing.T) {
	bin := npmBin(t, "mcp-server-filesystem")
	root, outside := t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(root, "in.txt"), []byte("inside the root"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(outside, "secret.txt"), []byte("outside the root"), 0o600); err != nil {
		t.Fatal(err)
	}
	sc := ServerConfig{Name: "fs", Command: bin, Args: []string{root}}
	m := newManager(t, sc)
	ts, err := listed(t, m)
	if err != nil {
		t.Fatalf("Tools: %v", err)
	}
	read, write := ts["mcp.fs.read_text_file"], ts["mcp.fs.write_file"]
	if read == nil || write == nil {
		t.Fatalf("tools = %v", keys(ts))
	}
	if a := read.Tool.(*Tool).Approval(nil); a.Required {
		t.Errorf("read_text_file (read-only) asks: %+v", a)
	}
	if a := write.Tool.(*Tool).Approval(nil); !a.Required || !strings.Contains(a.Reason, "destructive") {
		t.Errorf("write_file (destructive) does not ask: %+v", a)
	}
	out, err := call(t, context.Background(), read, fmt.Sprintf(`{"path":%q}`, filepath.Join(root, "in.txt")), nil)
	if err != nil || out.IsError || !strings.Contains(out.Text, "inside the root") || !strings.Contains(string(out.Structured), "inside the root") {
		t.Fatalf("read inside = %+v, %v", out, err)
	}
	out, err = call(t, context.Background(), read, fmt.Sprintf(`{"path":%q}`, filepath.Join(outside, "secret.txt")), nil)
	if err != nil || !out.IsError || strings.Contains(out.Text, "outside the root") {
		t.Fatalf("read outside = %+v, %v; want the server's refusal", out, err)
	}
}
