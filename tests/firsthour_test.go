package tests

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"lemo/api"
	"lemo/client"
	"lemo/providers/fake"
)

// A daemon that can run no Task says so at startup, with what to do (the
// demo models, lemo models, Ollama or a key), and lemo run without a model
// points to the same; with the demo models on it names them usable.
func TestStartupSaysWhichProvidersAreUsable(t *testing.T) {
	// A port nothing listens on: Ollama "is not running".
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := l.Addr().String()
	l.Close()

	data := filepath.Join(t.TempDir(), "data")
	d := launchDaemonEnv(t, lemoBin, data, []string{"LEMO_OLLAMA_BASE_URL=http://" + closed})
	d.waitServing()
	eventually(t, 30*time.Second, func() error {
		logs := d.logs()
		for _, want := range []string{"provider not usable", "no model provider is usable", "LEMO_FAKE_ENABLED=true", "lemo models"} {
			if !strings.Contains(logs, want) {
				return fmt.Errorf("the log lacks %q:\n%s", want, logs)
			}
		}
		return nil
	})
	out, code := lemo(t, cleanEnv("LEMO_DATA="+data), "run", "hello")
	if code == 0 || !strings.Contains(out, "LEMO_FAKE_ENABLED=true") || !strings.Contains(out, "lemo models") {
		t.Fatalf("lemo run without a model: exit %d, want an error pointing to the demo models and lemo models:\n%s", code, out)
	}
	d.stop()

	demo := startDaemon(t, filepath.Join(t.TempDir(), "data"))
	eventually(t, 30*time.Second, func() error {
		logs := demo.logs()
		if !strings.Contains(logs, `"provider":"fake"`) || !strings.Contains(logs, "provider usable") {
			return fmt.Errorf("the log does not name fake usable:\n%s", logs)
		}
		if strings.Contains(logs, "no model provider is usable") {
			return fmt.Errorf("the log says none is usable:\n%s", logs)
		}
		return nil
	})
}

// Every command that takes a Task id takes a unique beginning or end of it
// (as the console shows); an ambiguous one is an error that lists the
// matches; another owner's Tasks are never matched.
func TestShortTaskIDs(t *testing.T) {
	o := serveOwners(t)
	a := o.alice
	ctx := context.Background()
	var ids []string
	for range 2 {
		m, err := a.CreateTask(ctx, client.CreateTask{Request: "hello", Model: "fake/echo"})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, m.GetTaskId())
		waitTask(t, a, m.GetTaskId(), "finished", statusIs(api.TaskStatus_TASK_STATUS_FINISHED))
	}
	alice := func(args ...string) (string, int) { return o.as(t, aliceToken, args...) }
	bob := func(args ...string) (string, int) { return o.as(t, bobToken, args...) }
	// A unique suffix, lower case as typed, and a unique prefix.
	suffix := strings.ToLower(ids[1][len(ids[1])-6:])
	if out, code := alice("attach", suffix); code != 0 || !strings.Contains(out, "task "+ids[1]) || !strings.Contains(out, "echo: hello") {
		t.Fatalf("attach %s: exit %d\n%s", suffix, code, out)
	}
	prefix := ids[0]
	for i := 1; i <= len(ids[0]); i++ {
		if ids[0][:i] != ids[1][:i] {
			prefix = ids[0][:i]
			break
		}
	}
	if out, code := alice("send", prefix, "again"); code != 0 || !strings.Contains(out, ids[0]) {
		t.Fatalf("send %s: exit %d\n%s", prefix, code, out)
	}
	// Both begin with the same characters: ambiguous, the matches listed.
	common := ids[0][:2]
	out, code := alice("cancel", common)
	if code == 0 || !strings.Contains(out, "more than one task") || !strings.Contains(out, ids[0]) || !strings.Contains(out, ids[1]) {
		t.Fatalf("cancel %s: exit %d, want an error listing both:\n%s", common, code, out)
	}
	// Bob matches none of alice's Tasks, and learns nothing of them.
	for _, part := range []string{suffix, common} {
		out, code := bob("cancel", part)
		if code == 0 || !strings.Contains(out, "unknown task "+part) || strings.Contains(out, ids[0]) || strings.Contains(out, ids[1]) {
			t.Fatalf("bob cancel %s: exit %d\n%s", part, code, out)
		}
	}
}

// lemo approve and lemo deny take an approval id with its task part
// shortened as Task ids are (a unique beginning or end, as the console
// shows it); an ambiguous task part is an error listing the matches,
// another owner's Tasks are never matched, and a malformed id says what
// is accepted.
func TestShortApprovalIDs(t *testing.T) {
	o := serveOwners(t)
	a := o.alice
	ctx := context.Background()
	var ids, calls []string
	for range 2 {
		m, err := a.CreateTask(ctx, client.CreateTask{Request: "echo short", Model: "fake/shell"})
		if err != nil {
			t.Fatal(err)
		}
		waitTask(t, a, m.GetTaskId(), "awaiting approval", statusIs(api.TaskStatus_TASK_STATUS_AWAITING_APPROVAL))
		ids = append(ids, m.GetTaskId())
	}
	approvals, err := a.Approvals(ctx)
	if err != nil || len(approvals) != 2 {
		t.Fatalf("approvals: %v, %v", approvals, err)
	}
	for _, id := range ids {
		for _, ev := range approvals {
			if full := ev.GetApprovalRequested().GetApprovalId(); strings.HasPrefix(full, id+".") {
				calls = append(calls, strings.TrimPrefix(full, id+"."))
			}
		}
	}
	if len(calls) != 2 {
		t.Fatalf("approval ids %v for tasks %v", approvals, ids)
	}
	alice := func(args ...string) (string, int) { return o.as(t, aliceToken, args...) }
	bob := func(args ...string) (string, int) { return o.as(t, bobToken, args...) }
	suffix := strings.ToLower(ids[1][len(ids[1])-6:]) + "." + calls[1]
	common := ids[0][:2] + "." + calls[0]
	// Bob matches none of alice's Tasks, and learns nothing of them.
	for _, part := range []string{suffix, common} {
		out, code := bob("deny", part)
		if code == 0 || !strings.Contains(out, "unknown approval "+part) || strings.Contains(out, ids[0]) || strings.Contains(out, ids[1]) {
			t.Fatalf("bob deny %s: exit %d\n%s", part, code, out)
		}
	}
	// Both begin with the same characters: ambiguous, the matches listed.
	out, code := alice("approve", common)
	if code == 0 || !strings.Contains(out, "more than one task") || !strings.Contains(out, ids[0]) || !strings.Contains(out, ids[1]) {
		t.Fatalf("approve %s: exit %d, want an error listing both:\n%s", common, code, out)
	}
	if out, code := alice("approve", "nodot"); code != 2 || !strings.Contains(out, "<task id>.<call id>") {
		t.Fatalf("approve nodot: exit %d, want a usage error saying the form:\n%s", code, out)
	}
	// A unique suffix, lower case as typed, then a unique prefix.
	if out, code := alice("deny", "--reason", "not now", suffix); code != 0 || !strings.Contains(out, "denied "+ids[1]+"."+calls[1]) {
		t.Fatalf("deny %s: exit %d\n%s", suffix, code, out)
	}
	prefix := ids[0]
	for i := 1; i <= len(ids[0]); i++ {
		if ids[0][:i] != ids[1][:i] {
			prefix = ids[0][:i]
			break
		}
	}
	if out, code := alice("approve", prefix+"."+calls[0]); code != 0 || !strings.Contains(out, "approved "+ids[0]+"."+calls[0]) {
		t.Fatalf("approve %s: exit %d\n%s", prefix+"."+calls[0], code, out)
	}
	if left, err := a.Approvals(ctx); err != nil || len(left) != 0 {
		t.Fatalf("approvals left after both were decided: %v, %v", left, err)
	}
}

// lemo send follows the reply as lemo run does (--no-follow returns at
// once); lemo help run is run's help; -m is --model.
func TestSendFollowsAndShortFlags(t *testing.T) {
	data := filepath.Join(t.TempDir(), "data")
	serveRemote(t, data)
	out, code := cli(t, data, "run", "-m", "fake/echo", "first")
	if code != 0 || !strings.Contains(out, "echo: first") {
		t.Fatalf("lemo run -m: exit %d\n%s", code, out)
	}
	id := runTaskID(t, out)
	out, code = cli(t, data, "send", id, "second")
	if code != 0 || !strings.Contains(out, "> second") || !strings.Contains(out, "echo: second") || strings.Contains(out, "echo: first") {
		t.Fatalf("lemo send: exit %d, want the message and its reply only\n%s", code, out)
	}
	out, code = cli(t, data, "send", "--no-follow", id, "third")
	if code != 0 || !strings.Contains(out, "lemo attach "+id) || strings.Contains(out, "echo: third") {
		t.Fatalf("lemo send --no-follow: exit %d\n%s", code, out)
	}
	cmd := exec.Command(lemoBin, "help", "run")
	cmd.Env = cleanEnv()
	b, err := cmd.Output() // stdout only
	if err != nil || !strings.Contains(string(b), `Usage: lemo run "request"`) || !strings.Contains(string(b), "-m string") {
		t.Fatalf("lemo help run: %v\n%s", err, b)
	}
}

// The daemon's log at the default level holds Lemo's own lines: none of
// protoactor's informational lines, no error for a client's normal
// disconnect, no DeadLetter lines at start and stop.
func TestDaemonLogIsQuiet(t *testing.T) {
	data := filepath.Join(t.TempDir(), "data")
	d := startDaemon(t, data)
	for _, args := range [][]string{{"tasks"}, {"run", "-m", "fake/echo", "hi"}, {"models"}} {
		if out, code := cli(t, data, args...); code != 0 {
			t.Fatalf("lemo %v: exit %d\n%s", args, code, out)
		}
	}
	d.stop()
	logs := d.logs()
	for _, line := range strings.Split(logs, "\n") {
		if strings.Contains(line, `"lib":"protoactor`) || strings.Contains(line, "DeadLetter") {
			t.Fatalf("a library line at the default level: %s\nthe log:\n%s", line, logs)
		}
	}
	if !strings.Contains(logs, "lemo is serving") || !strings.Contains(logs, `"message":"stopped"`) {
		t.Fatalf("Lemo's own lines are missing:\n%s", logs)
	}
}

// A model with a small window cannot hold every tool's schema: the
// overflow says to use --tools, and --tools none runs the Task without
// any tool.
func TestSmallWindowToolsNone(t *testing.T) {
	data := filepath.Join(t.TempDir(), "data")
	serveRemote(t, data)
	out, code := cli(t, data, "run", "-m", "fake/small", "hello small")
	if code == 0 || !strings.Contains(out, "--tools none") {
		t.Fatalf("lemo run on a 4,096-token window with every tool: exit %d, want a failure that points to --tools none\n%s", code, out)
	}
	out, code = cli(t, data, "run", "-m", "fake/small", "--tools", "none", "hello small")
	if code != 0 || !strings.Contains(out, "echo: hello small") {
		t.Fatalf("lemo run --tools none: exit %d\n%s", code, out)
	}
	id := runTaskID(t, out)
	out, code = cli(t, data, "attach", "--json", id)
	if code != 0 || !strings.Contains(out, `"tools_restricted":true`) {
		t.Fatalf("the Task's creation does not record an empty tool set: exit %d\n%s", code, out)
	}
}

// A bad listen port is refused before the data folder is created.
func TestBadListenPortCreatesNothing(t *testing.T) {
	data := filepath.Join(t.TempDir(), "data")
	out, code := lemo(t, cleanEnv("LEMO_LISTEN=127.0.0.1:99999", "LEMO_FAKE_ENABLED=true"), "serve", "--data", data)
	if code != 2 || !strings.Contains(out, "listen") || !strings.Contains(out, "65535") {
		t.Fatalf("lemo serve with port 99999: exit %d\n%s", code, out)
	}
	if _, err := os.Stat(data); !os.IsNotExist(err) {
		t.Fatalf("the data folder was created: %v", err)
	}
}

// --json is for scripts: numbers are numbers, tool arguments and schemas
// are JSON values, an error is one JSON object on stderr with a stable
// code, and lemo version and lemo certs take --json too, a bad flag being
// a JSON usage error (docs/json.md).
func TestJSONForScripts(t *testing.T) {
	data := filepath.Join(t.TempDir(), "data")
	serveRemote(t, data)
	out, code := cli(t, data, "run", "--json", "-m", "fake/call", `demo.tick {"n":7}`)
	if code != 0 {
		t.Fatalf("lemo run --json: exit %d\n%s", code, out)
	}
	var sawCall bool
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		var u struct {
			Event *struct {
				Seq              json.Number `json:"seq"`
				ToolCallRecorded *struct {
					Arguments map[string]int `json:"arguments"`
				} `json:"tool_call_recorded"`
			} `json:"event"`
		}
		dec := json.NewDecoder(strings.NewReader(line))
		dec.UseNumber()
		if err := dec.Decode(&u); err != nil {
			t.Fatalf("line %q: %v", line, err)
		}
		if u.Event == nil {
			continue
		}
		if _, err := u.Event.Seq.Int64(); err != nil {
			t.Fatalf("seq is not a number: %q", line)
		}
		if c := u.Event.ToolCallRecorded; c != nil {
			sawCall = c.Arguments["n"] == 7
		}
	}
	if !sawCall {
		t.Fatalf("no tool call with its arguments as a JSON object:\n%s", out)
	}
	out, code = cli(t, data, "tools", "--json")
	var tl []struct {
		Name        string         `json:"name"`
		InputSchema map[string]any `json:"input_schema"`
	}
	mustJSON(t, out, &tl)
	if code != 0 || len(tl) == 0 || tl[0].InputSchema["type"] != "object" {
		t.Fatalf("lemo tools --json: schemas are not JSON objects: exit %d\n%s", code, out)
	}

	cmd := exec.Command(lemoBin, "cancel", "--json", "NOSUCHTASK")
	cmd.Env = cleanEnv("LEMO_DATA=" + data)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var e struct{ Code, Message string }
	if err == nil || stdout.Len() != 0 || json.Unmarshal(stderr.Bytes(), &e) != nil || e.Code != "not_found" || !strings.Contains(e.Message, "NOSUCHTASK") {
		t.Fatalf("lemo cancel --json on an unknown task: %v, stdout %q, stderr %q; want one JSON object with code not_found", err, stdout.String(), stderr.String())
	}

	// lemo certs too: what it made, and a bad flag as a JSON usage error.
	dir := filepath.Join(t.TempDir(), "certs")
	out, code = lemo(t, cleanEnv(), "certs", "--json", "--dir", dir, "--hosts", "127.0.0.1,lemo.example")
	var made struct {
		Dir  string `json:"dir"`
		Made []struct {
			Name, Cert, Key string
			Hosts           []string
		} `json:"made"`
	}
	mustJSON(t, out, &made)
	if code != 0 || made.Dir != dir || len(made.Made) != 3 || made.Made[0].Name != "ca" || made.Made[2].Name != "client" ||
		made.Made[1].Cert != filepath.Join(dir, "server.pem") || strings.Join(made.Made[1].Hosts, ",") != "127.0.0.1,lemo.example" {
		t.Fatalf("lemo certs --json: exit %d\n%s", code, out)
	}
	for _, args := range [][]string{{"certs", "--json", "--bogus"}, {"doctor", "--json", "--bogus"}, {"version", "--json", "--bogus"}} {
		cmd := exec.Command(lemoBin, args...)
		cmd.Env = cleanEnv()
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		var ee *exec.ExitError
		var e struct{ Code, Message string }
		if !errors.As(err, &ee) || ee.ExitCode() != 2 || stdout.Len() != 0 || json.Unmarshal(stderr.Bytes(), &e) != nil || e.Code != "usage" {
			t.Fatalf("lemo %v: %v, stdout %q, stderr %q; want exit 2 and one JSON object with code usage", args, err, stdout.String(), stderr.String())
		}
	}

	out, code = lemo(t, cleanEnv(), "version", "--json")
	var v struct {
		Version     string `json:"version"`
		APIProtocol int    `json:"api_protocol"`
	}
	mustJSON(t, out, &v)
	if code != 0 || v.Version == "" || v.APIProtocol < 1 {
		t.Fatalf("lemo version --json: exit %d\n%s", code, out)
	}
}

// A rate-limited model call is retried after the provider's Retry-After,
// and lemo run says so meanwhile instead of showing nothing.
func TestRateLimitRetryIsShown(t *testing.T) {
	f, err := fake.NewServer(fake.Options{Flavor: fake.FlavorOllama, Script: []fake.Scenario{
		{Match: "BUSY", Status: 429, Headers: map[string]string{"Retry-After": "1"}, Times: 1},
	}})
	if err != nil {
		t.Fatal(err)
	}
	// The notice is a live delta, never stored: the first chat request is
	// answered only once lemo run follows the Task (the daemon counts its
	// subscription), or the notice could go out before anyone listens.
	var metrics atomic.Value // the daemon's /metrics URL
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/api/chat" {
			for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline) && !subscribed(metrics.Load()); {
				time.Sleep(5 * time.Millisecond) // polling the daemon's count
			}
		}
		f.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	data := filepath.Join(t.TempDir(), "data")
	d := launchDaemonEnv(t, lemoBin, data, []string{"LEMO_OLLAMA_BASE_URL=" + srv.URL, "LEMO_HTTP_LISTEN=127.0.0.1:0"})
	d.waitServing()
	metrics.Store("http://" + httpAddr(t, d) + "/metrics")
	out, code := cli(t, data, "run", "-m", "ollama/qwen3:8b", "--tools", "none", "BUSY now")
	if code != 0 || !strings.Contains(out, "rate limited, retrying in 1s") || !strings.Contains(out, "[finished") {
		t.Fatalf("lemo run through a 429: exit %d, want the retry said and the Task finished:\n%s", code, out)
	}
}

// subscribed reports whether the daemon whose /metrics is at url (a string;
// nil before it is known) counts a subscription.
func subscribed(url any) bool {
	u, _ := url.(string)
	if u == "" {
		return false
	}
	resp, err := http.Get(u)
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	for _, line := range strings.Split(string(body), "\n") {
		if v, ok := strings.CutPrefix(line, "lemo_remote_subscriptions "); ok && v != "0" {
			return true
		}
	}
	return false
}
