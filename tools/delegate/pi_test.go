package delegate

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"lemo/actors"
	"lemo/api"
	"lemo/providers"
	"lemo/providers/fake"
	"lemo/tools/isolation"
)

// piBinary is the real pi agent: $DELEGATE_TEST_PI (make test sets it
// after make delegate-deps installed pi; then the tests must run), else the
// repository's .cache/npm/pi install. Without Node or pi the tests skip,
// except under CI=true, where they fail: CI never passes without pi (as the
// tiny-ollama tests do without their kit).
func piBinary(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("DELEGATE_TEST_PI"); p != "" {
		return p
	}
	if _, err := exec.LookPath("node"); err != nil {
		piUnavailable(t, "Node is not installed")
	}
	dir, _ := os.Getwd()
	for ; dir != "/"; dir = filepath.Dir(dir) {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			break
		}
	}
	p := filepath.Join(dir, ".cache", "npm", "pi", "node_modules", ".bin", "pi")
	if _, err := os.Stat(p); err != nil {
		piUnavailable(t, "pi is not installed at "+p)
	}
	return p
}

// piUnavailable skips the test, saying why, or fails it under CI=true.
func piUnavailable(t *testing.T, why string) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatalf("%s; under CI=true the tests against the real pi agent must run (make test runs make delegate-deps, which installs pi with npm)", why)
	}
	t.Skipf("%s: skipping the tests against the real pi agent (make delegate-deps installs pi where Node is; make test runs it)", why)
}

// startPiProvider serves the fake OpenAI-compatible provider for pi. pi
// sends a user message's content as an array of text parts, which the fake
// does not decode (it expects a string): the handler in front joins the
// parts into a string first.
func startPiProvider(t *testing.T, script []fake.Scenario) (*fake.Server, string) {
	t.Helper()
	srv, err := fake.NewServer(fake.Options{Flavor: fake.FlavorOpenAI, Script: script})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var req map[string]any
		if json.Unmarshal(body, &req) == nil {
			msgs, _ := req["messages"].([]any)
			for _, m := range msgs {
				mm, _ := m.(map[string]any)
				if parts, ok := mm["content"].([]any); ok {
					var text []string
					for _, p := range parts {
						if pm, ok := p.(map[string]any); ok && pm["type"] == "text" {
							s, _ := pm["text"].(string)
							text = append(text, s)
						}
					}
					mm["content"] = strings.Join(text, "\n")
				}
			}
			body, _ = json.Marshal(req)
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		r.ContentLength = int64(len(body))
		srv.ServeHTTP(w, r)
	}))
	t.Cleanup(func() {
		srv.Close() // releases held streams first
		hs.Close()
	})
	return srv, hs.URL + "/v1"
}

// piConfig points pi, with an isolated HOME and agent folder, at the fake
// OpenAI-compatible provider.
func piConfig(t *testing.T, bin, providerURL, mark string) Config {
	t.Helper()
	home := t.TempDir()
	agentDir := filepath.Join(home, ".pi", "agent")
	if err := os.MkdirAll(filepath.Join(home, "tmp"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(agentDir, 0o700); err != nil {
		t.Fatal(err)
	}
	models := map[string]any{"providers": map[string]any{"fake": map[string]any{
		"baseUrl": providerURL, "api": "openai-completions", "apiKey": "fake-key",
		"compat": map[string]any{"supportsDeveloperRole": false, "supportsReasoningEffort": false},
		"models": []any{map[string]any{"id": "local-model", "name": "Local Model", "reasoning": false, "input": []string{"text"},
			"contextWindow": 32000, "maxTokens": 4096, "cost": map[string]any{"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0}}},
	}}}
	settings := map[string]any{"defaultProvider": "fake", "defaultModel": "local-model", "enableInstallTelemetry": false, "quietStartup": true,
		"retry": map[string]any{"enabled": false, "provider": map[string]any{"maxRetries": 0}}}
	for name, v := range map[string]any{"models.json": models, "settings.json": settings} {
		b, _ := json.MarshalIndent(v, "", "  ")
		if err := os.WriteFile(filepath.Join(agentDir, name), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	// pi runs in namespaces of its own where the kernel allows, as under
	// the daemon (this test binary is the init).
	// Like the daemon's data folder, the folder around the delegate's own
	// is hidden from pi but for that one.
	data, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(data, "delegate")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	ns, err := isolation.Detect(os.Args[0])
	if err != nil {
		t.Logf("pi runs without namespaces: %v", err)
	} else {
		ns = ns.With([]string{data}, []string{dir})
	}
	return Config{
		Namespaces:     ns,
		Binary:         bin,
		Args:           []string{"--provider", "fake", "--model", "local-model", "--no-context-files"},
		Dir:            dir,
		Environ:        []string{"PATH=" + os.Getenv("PATH"), "HOME=" + home, "TMPDIR=" + filepath.Join(home, "tmp"), "LANG=C.UTF-8", "LEMO_TOKEN=x", "OPENAI_API_KEY=sk-x"},
		SetEnv:         []string{"PI_CODING_AGENT_DIR=" + agentDir, markVar + "=" + mark},
		StartTimeout:   90 * time.Second,
		CommandTimeout: 30 * time.Second,
		ExitGrace:      5 * time.Second,
		KillGrace:      2 * time.Second,
	}
}

// The real pi, through the daemon: a prompt with one tool execution whose
// approval is bridged to Lemo and answered, a steer, an abort, shutdown by
// stdin EOF, then a new invocation that resumes the finished session in
// place.
func TestRealPi(t *testing.T) {
	bin := piBinary(t)
	srv, url := startPiProvider(t, []fake.Scenario{
		{Match: "please run the tool", ToolCalls: []fake.Call{{Name: "bash", Arguments: `{"command":"echo delegated-tool-ran"}`}}},
		{Match: "STEERED-MSG", Text: []string{"working ", "slowly"}, Hold: true},
		{Match: "continue please", Text: []string{"resumed ", "answer"}},
	})
	mark := randomHex()
	dt, err := New(piConfig(t, bin, url, mark))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { checkNoAgents(t, mark) })
	h := startDaemon(t, dt, func(n int, req *providers.Request) fake.Turn {
		trs := toolResults(req)
		switch len(trs) {
		case 0:
			return fake.Turn{ToolCalls: []providers.ToolCall{delegateCall("p1", map[string]any{"prompt": "please run the tool"})}}
		case 1:
			// Like a model would: continue the session the result names.
			session := ""
			if m := regexp.MustCompile(`"session_id":"([^"]+)"`).FindStringSubmatch(trs[0]); m != nil {
				session = m[1]
			}
			return fake.Turn{ToolCalls: []providers.ToolCall{delegateCall("p2", map[string]any{"prompt": "continue please", "resume": session})}}
		}
		return fake.Turn{Text: "done"}
	})
	id := h.create("use pi")
	ctx := context.Background()

	// pi's tool call waits for a person: steer meanwhile, then approve.
	ps := h.pending(1)
	ar := ps[0].GetApprovalRequested()
	if !strings.Contains(ar.GetReason(), "Command: echo delegated-tool-ran") || !strings.Contains(ar.GetReason(), "bash") {
		t.Fatalf("approval reason = %q", ar.GetReason())
	}
	// pi runs with the allow-listed environment only.
	procs := marked(t, mark)
	if len(procs) == 0 {
		t.Fatal("no pi process while its tool call waits")
	}
	for _, p := range procs {
		env, _ := os.ReadFile(filepath.Join("/proc", strconv.Itoa(p.Pid), "environ"))
		if strings.Contains(string(env), "LEMO_TOKEN") || strings.Contains(string(env), "OPENAI_API_KEY") || !strings.Contains(string(env), TagVariable+"=") {
			t.Fatalf("pi's environment: %q", env)
		}
	}
	if err := h.d.Steer(ctx, actors.Operator, id, "call-1-1", json.RawMessage(`{"kind":"steer","message":"STEERED-MSG keep it short"}`)); err != nil {
		t.Fatalf("steer: %v", err)
	}
	if _, err := h.d.ResolveApproval(ctx, actors.Operator, ar.GetApprovalId(), true, ""); err != nil {
		t.Fatal(err)
	}
	// The steer reaches the model after the tool ran; that answer is held
	// open until pi aborts it.
	eventually(t, 60*time.Second, "the steered model call", func() error {
		if srv.Holding() != 1 {
			return errNotYet
		}
		return nil
	})
	if err := h.d.Steer(ctx, actors.Operator, id, "call-1-1", json.RawMessage(`{"kind":"abort"}`)); err != nil {
		t.Fatalf("abort: %v", err)
	}
	evs := h.waitFor(id, "the first run's result", 60*time.Second, func(evs []*api.Event) bool { return len(results(t, evs)) == 1 })
	first := results(t, evs)[0]
	s := first.Summary
	if first.Status != StatusAborted || !validSessionID.MatchString(first.SessionID) || s.ToolExecutions != 1 || s.Tools[0].Tool != "bash" ||
		s.Tools[0].IsError || !strings.Contains(s.Tools[0].Output, "delegated-tool-ran") || s.Approvals.Approved != 1 || s.Steers != 1 || s.Aborts != 1 {
		t.Fatalf("first run = %+v", first)
	}
	if first.Exit == nil || first.Exit.Code != 0 || first.Exit.Term || first.Exit.Kill {
		t.Fatalf("pi did not exit on stdin EOF: %+v", first.Exit)
	}
	// The first run's processes are gone (the model may already have
	// started the second invocation, whose pi is marked too).
	for _, p := range marked(t, mark) {
		for _, q := range procs {
			if p.Stat.Pid == q.Stat.Pid {
				t.Fatalf("pi is still running after its run ended: %+v", p)
			}
		}
	}
	var steered string
	for _, r := range srv.ChatRequests() {
		if strings.Contains(string(r.Body), "STEERED-MSG") {
			steered = string(r.Body)
		}
	}
	if !strings.Contains(steered, "delegated-tool-ran") {
		t.Fatalf("the steered request lacks the tool result: %.2000s", steered)
	}

	// A new invocation resumes the finished session in place.
	evs = h.waitStatus(id, api.TaskStatus_TASK_STATUS_FINISHED, 90*time.Second)
	all := results(t, evs)
	if len(all) != 2 {
		t.Fatalf("results = %+v\n%s", all, dump(evs))
	}
	second := all[1]
	if second.Status != StatusFinished || !second.Resumed || second.SessionID != first.SessionID || second.FinalAnswer != "resumed answer" || second.Invocation == first.Invocation {
		t.Fatalf("resumed run = %+v", second)
	}
	reqs := srv.ChatRequests()
	last := string(reqs[len(reqs)-1].Body)
	if !strings.Contains(last, "continue please") || !strings.Contains(last, "please run the tool") || !strings.Contains(last, "delegated-tool-ran") {
		t.Fatalf("pi did not continue the session: %.3000s", last)
	}
	files, _ := filepath.Glob(filepath.Join(dt.catalog.lemoDir, "*.jsonl"))
	if len(files) != 1 || !strings.Contains(files[0], first.SessionID) {
		t.Fatalf("session files = %v", files)
	}
	if b, _ := os.ReadFile(files[0]); !strings.Contains(string(b), "please run the tool") || !strings.Contains(string(b), "resumed answer") {
		t.Fatalf("the session file does not hold both runs")
	}
	// pi's own session folders got nothing.
	own, _ := filepath.Glob(filepath.Join(lookupEnv(dt.env, "PI_CODING_AGENT_DIR"), "sessions", "*", "*.jsonl"))
	if len(own) != 0 {
		t.Fatalf("pi wrote into its default folders: %v", own)
	}
}

// Without Node (so without pi), the real-pi test skips, except under
// CI=true, where it fails: CI cannot pass without running it. The test
// binary runs TestRealPi alone with a PATH that holds only the go command
// (TestMain builds the fake agent with it).
func TestRealPiMissingFailsUnderCI(t *testing.T) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("the go command is not on PATH")
	}
	path := t.TempDir()
	if err := os.Symlink(goBin, filepath.Join(path, "go")); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		ci       string
		wantFail bool
		want     string
	}{
		{ci: "true", wantFail: true, want: "Node is not installed; under CI=true the tests against the real pi agent must run"},
		{ci: "", want: "--- SKIP: TestRealPi"},
	} {
		cmd := exec.Command(os.Args[0], "-test.run", "^TestRealPi$", "-test.count", "1", "-test.v")
		cmd.Env = []string{"PATH=" + path, "HOME=" + os.Getenv("HOME"), "GOCACHE=" + goEnv(t, "GOCACHE"), "GOPATH=" + goEnv(t, "GOPATH"), "GOFLAGS=" + os.Getenv("GOFLAGS"), "CI=" + tc.ci}
		out, err := cmd.CombinedOutput()
		if failed := err != nil; failed != tc.wantFail || !strings.Contains(string(out), tc.want) {
			t.Errorf("CI=%q: TestRealPi without Node: err %v, want failure %v, output containing %q:\n%s", tc.ci, err, tc.wantFail, tc.want, out)
		}
	}
}

// goEnv is `go env name`.
func goEnv(t *testing.T, name string) string {
	t.Helper()
	out, err := exec.Command("go", "env", name).Output()
	if err != nil {
		t.Fatalf("go env %s: %v", name, err)
	}
	return strings.TrimSpace(string(out))
}
