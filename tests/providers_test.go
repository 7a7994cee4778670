package tests

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protojson"

	"lemo/api"
	"lemo/client"
	"lemo/providers/fake"
)

// These tests point the real lemo serve at the HTTP fakes of each
// provider's wire protocol by base URL, exactly as a user points it at the
// real service, and pass the keys through the providers' usual variables.

// fakeKey is an obviously fake API key, different on every run, so that a
// leak is found by searching for it.
func fakeKey(t testing.TB, prefix string) string {
	t.Helper()
	b := make([]byte, 12)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return prefix + "fake-" + hex.EncodeToString(b)
}

// serveWithEnv starts lemo serve on data with the remote API on a free
// port and env added to the clean environment (not the demo settings:
// launchDaemon disables local Ollama through the environment, which a
// configuration file cannot undo).
func serveWithEnv(t testing.TB, data string, env ...string) *remoteDaemon {
	t.Helper()
	return serveEnvArgs(t, data, env)
}

// serveEnvArgs starts lemo serve on data with env added to the clean
// environment and args, waits until it serves and finds its address and
// token (the remote API listens where args say, else on a free port).
func serveEnvArgs(t testing.TB, data string, env []string, args ...string) *remoteDaemon {
	t.Helper()
	d := launchDaemonEnv(t, lemoBin, data, env, args...)
	d.waitServing()
	l, err := client.FindLocal(data)
	if err != nil || l.TokenErr != nil {
		t.Fatalf("FindLocal: %v, %v\n%s", err, l.TokenErr, d.logs())
	}
	return &remoteDaemon{daemon: d, addr: l.Address, token: l.Token}
}

// providerCase is one provider of the daemon under test and its fake.
type providerCase struct {
	name   string // registry name: the model ids' prefix
	flavor fake.Flavor
	// key is the API key ("" for local Ollama, which has none).
	key string
	srv *fake.Server
	// model is the one the Task uses (tools and reasoning); window is
	// its advertised window (0: unknown).
	model  string
	window uint64
	// unknown is a listed model whose window the provider cannot know.
	unknown string
	// authStatus is what the service answers a refused key with.
	authStatus int
}

// providerScript is what every fake answers: a tool call of tasks.list
// with reasoning and scripted usage, an auth failure, a truncated stream.
// A tool result is answered by the fake's keyword rule ("tool said: ...").
func providerScript(authStatus int) []fake.Scenario {
	auth := fake.Scenario{Match: "AUTHFAIL", Status: authStatus}
	if authStatus == 403 {
		auth.Message = "Authorization failed" // NVIDIA's problem+json detail
	}
	return []fake.Scenario{
		{Match: "PLEASE LIST", Reasoning: []string{"Checking ", "the tasks."},
			ToolCalls: []fake.Call{{Name: "tasks_list", Arguments: `{"limit":5}`}}, Usage: &fake.Usage{Prompt: 321, Completion: 17}},
		auth,
		{Match: "CUTSHORT", Text: []string{"partial"}, Truncate: true},
		{Match: "STALLNOW", Text: []string{"partial"}, Hold: true},
	}
}

// stallTimeout is the providers' idle timeout in TestProvidersEndToEnd:
// short, so that a stalled stream fails soon, yet long enough that a busy
// machine does not stall a live one.
const stallTimeout = 2 * time.Second

func TestProvidersEndToEnd(t *testing.T) {
	cases := []*providerCase{
		// Ollama lists the window Lemo requests: num_ctx, the model's own
		// window capped by providers.ollama.num_ctx (32768 by default), so
		// no Ollama window is unknown.
		{name: "ollama", flavor: fake.FlavorOllama, model: "qwen3:8b", window: 32768, authStatus: 401},
		{name: "ollama-cloud", flavor: fake.FlavorOllama, key: fakeKey(t, "oll-"), model: "gpt-oss:120b-cloud", window: 32768, authStatus: 401},
		{name: "openrouter", flavor: fake.FlavorOpenRouter, key: fakeKey(t, "sk-or-v1-"), model: "anthropic/claude-sonnet-4.5", window: 200000, unknown: "mystery/null-context", authStatus: 401},
		{name: "nvidia", flavor: fake.FlavorNVIDIA, key: fakeKey(t, "nvapi-"), model: "deepseek-ai/deepseek-v3.1", window: 131072, unknown: "acme/unknown-chat", authStatus: 403},
		{name: "zen", flavor: fake.FlavorZen, key: fakeKey(t, "zen-"), model: "glm-5", window: 202800, unknown: "acme-unknown", authStatus: 401},
		{name: "openai", flavor: fake.FlavorOpenAI, key: fakeKey(t, "sk-"), model: "local-model", window: 32768, unknown: "other-model", authStatus: 401},
	}
	var env []string
	for _, c := range cases {
		// A stream that stops sending is given up after this long.
		vendor := strings.ToUpper(strings.ReplaceAll(c.name, "-", "_"))
		env = append(env, "LEMO_"+vendor+"_IDLE_TIMEOUT="+stallTimeout.String())
		c.srv = fake.StartServer(t, fake.Options{Flavor: c.flavor, APIKey: c.key, Script: providerScript(c.authStatus)})
		switch c.name {
		case "ollama":
			env = append(env, "LEMO_OLLAMA_BASE_URL="+c.srv.URL())
		case "ollama-cloud":
			env = append(env, "LEMO_OLLAMA_CLOUD_BASE_URL="+c.srv.URL(), "OLLAMA_API_KEY="+c.key)
		case "openrouter":
			env = append(env, "LEMO_OPENROUTER_BASE_URL="+c.srv.URL(), "OPENROUTER_API_KEY="+c.key)
		case "nvidia":
			env = append(env, "LEMO_NVIDIA_BASE_URL="+c.srv.URL(), "NVIDIA_API_KEY="+c.key)
		case "zen":
			env = append(env, "LEMO_ZEN_BASE_URL="+c.srv.URL(), "OPENCODE_API_KEY="+c.key)
		case "openai":
			env = append(env, "LEMO_OPENAI_BASE_URL="+c.srv.URL(), "LEMO_OPENAI_API_KEY="+c.key)
		}
	}
	// canary is stored (in the Tasks' requests) the way a leaked key
	// would be: finding it proves that searching the store finds such text.
	canary := fakeKey(t, "canary-")
	data := t.TempDir()
	d := serveWithEnv(t, data, append(env, "LEMO_HTTP_LISTEN=127.0.0.1:0")...)
	conn := d.connect(t, "")
	metricsAddr := httpAddr(t, d.daemon)

	t.Run("models", func(t *testing.T) {
		out, code := cli(t, data, "models", "--json")
		if code != 0 {
			t.Fatalf("lemo models --json exited %d:\n%s", code, out)
		}
		var l api.ModelList
		if err := protojson.Unmarshal([]byte(out), &l); err != nil {
			t.Fatalf("lemo models --json: %v\n%s", err, out)
		}
		if len(l.GetFailures()) > 0 {
			t.Fatalf("provider failures: %v", l.GetFailures())
		}
		byID := map[string]*api.ModelInfo{}
		for _, m := range l.GetModels() {
			byID[m.GetId()] = m
		}
		for _, c := range cases {
			m := byID[c.name+"/"+c.model]
			if m == nil {
				t.Errorf("%s: %s/%s not listed; got %v", c.name, c.name, c.model, l.GetModels())
				continue
			}
			wantReasoning := c.name != "openai" // a plain server says nothing about reasoning
			if m.GetWindow() != c.window || !m.GetTools() || m.GetReasoning() != wantReasoning {
				t.Errorf("%s: %v, want window %d, tools, reasoning %v", c.name, m, c.window, wantReasoning)
			}
			if u := byID[c.name+"/"+c.unknown]; c.unknown != "" && (u == nil || u.GetWindow() != 0) {
				t.Errorf("%s: %s/%s = %v, want listed with an unknown window", c.name, c.name, c.unknown, u)
			}
		}
	})

	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			model := c.name + "/" + c.model
			t.Run("tool round trip", func(t *testing.T) {
				meta, err := conn.CreateTask(context.Background(), client.CreateTask{
					Request: "PLEASE LIST my tasks " + canary, Model: model, Tools: []string{"tasks.list"}, ToolsRestricted: true})
				if err != nil {
					t.Fatalf("CreateTask: %v", err)
				}
				id := meta.GetTaskId()
				waitTask(t, conn, id, "finish", statusIs(api.TaskStatus_TASK_STATUS_FINISHED))
				evs, err := conn.ReadHistory(context.Background(), id, 1)
				if err != nil {
					t.Fatal(err)
				}
				var called, result, reasoning, usage bool
				for _, e := range evs {
					switch {
					case e.GetToolCallRecorded() != nil:
						called = called || e.GetToolCallRecorded().GetTool() == "tasks.list"
					case e.GetToolResult() != nil:
						// The real tool listed this very Task.
						result = result || strings.Contains(string(e.GetToolResult().GetRetainedOutput()), id)
					case e.GetAssistantMessage() != nil:
						reasoning = reasoning || e.GetAssistantMessage().GetReasoning() == "Checking the tasks."
					case e.GetCycleFinished() != nil:
						u := e.GetCycleFinished().GetUsage()
						usage = usage || (u.GetPromptTokens() == 321 && u.GetCompletionTokens() == 17)
					}
				}
				answer := finalAnswer(evs)
				if !called || !result || !reasoning || !usage || !strings.HasPrefix(answer, "tool said: ") || !strings.Contains(answer, id) {
					t.Fatalf("tool call %v, result in history %v, reasoning %v, usage %v, answer %q; history:\n%s",
						called, result, reasoning, usage, answer, describeEvents(evs))
				}
				// The fake saw the tool's result come back in the second
				// request: the answer echoes it.
				if n := len(c.srv.ChatRequests()); n < 2 {
					t.Fatalf("chat requests = %d, want >= 2", n)
				}
			})

			t.Run("auth failure names the provider", func(t *testing.T) {
				meta, err := conn.CreateTask(context.Background(), client.CreateTask{Request: "AUTHFAIL now", Model: model, ToolsRestricted: true})
				if err != nil {
					t.Fatalf("CreateTask: %v", err)
				}
				id := meta.GetTaskId()
				m := waitTask(t, conn, id, "fail or pause", func(m *api.TaskMeta) bool {
					return m.GetStatus() == api.TaskStatus_TASK_STATUS_FAILED || m.GetStatus() == api.TaskStatus_TASK_STATUS_PAUSED
				})
				evs, err := conn.ReadHistory(context.Background(), id, 1)
				if err != nil {
					t.Fatal(err)
				}
				f := lastFailure(evs)
				if f == nil || f.GetKind() != "auth" || !strings.Contains(f.GetMessage(), c.name) || !strings.Contains(f.GetMessage(), "auth") {
					t.Fatalf("status %v, failure %v; want an auth failure naming %s", m.GetStatus(), f, c.name)
				}
				if finalAnswer(evs) != "" {
					t.Fatalf("an auth failure recorded an answer %q", finalAnswer(evs))
				}
				// The failure is counted by provider and class.
				series := `lemo_provider_errors_total{class="auth",provider="` + c.name + `"}`
				if n := scrape(t, metricsAddr)[series]; n < 1 {
					t.Fatalf("%s = %v after an auth failure", series, n)
				}
			})

			// failedTransient runs request to a failure and returns its
			// history once the Task failed with a transient failure
			// naming the provider and want.
			failedTransient := func(t *testing.T, request, want string) []*api.Event {
				t.Helper()
				meta, err := conn.CreateTask(context.Background(), client.CreateTask{Request: request, Model: model, ToolsRestricted: true})
				if err != nil {
					t.Fatalf("CreateTask: %v", err)
				}
				id := meta.GetTaskId()
				waitTask(t, conn, id, "fail", statusIs(api.TaskStatus_TASK_STATUS_FAILED))
				evs, err := conn.ReadHistory(context.Background(), id, 1)
				if err != nil {
					t.Fatal(err)
				}
				f := lastFailure(evs)
				if f == nil || f.GetKind() != "transient" || !strings.Contains(f.GetMessage(), c.name) || !strings.Contains(f.GetMessage(), want) {
					t.Fatalf("failure = %v, want a transient failure naming %s and %q", f, c.name, want)
				}
				return evs
			}

			t.Run("truncated stream is an error", func(t *testing.T) {
				evs := failedTransient(t, "CUTSHORT please", "ended without")
				if a := finalAnswer(evs); a != "" {
					t.Fatalf("a truncated stream was recorded as the answer %q", a)
				}
			})

			t.Run("a stream that stops sending fails the Cycle", func(t *testing.T) {
				failedTransient(t, "STALLNOW please", "idle_timeout")
			})

			t.Run("key arrives as the provider sends it", func(t *testing.T) {
				reqs := c.srv.Requests()
				if len(reqs) == 0 {
					t.Fatal("the fake saw no request")
				}
				for _, r := range reqs {
					got := r.Header.Get("Authorization")
					want := "Bearer " + c.key
					if c.key == "" {
						want = ""
					}
					if got != want {
						t.Fatalf("%s %s: Authorization %q, want %q", r.Method, r.Path, got, want)
					}
				}
			})
		})
	}

	t.Run("keys never stored nor logged", func(t *testing.T) {
		d.stop()
		if fileContaining(t, data, canary) == "" {
			t.Fatal("the store's files do not contain the canary stored in a request: searching them for keys proves nothing")
		}
		logs := d.logs()
		for _, c := range cases {
			if c.key == "" {
				continue
			}
			if strings.Contains(logs, c.key) {
				t.Errorf("the daemon's log contains the %s key", c.name)
			}
			if f := fileContaining(t, data, c.key); f != "" {
				t.Errorf("%s contains the %s key", f, c.name)
			}
		}
	})
}

// lastFailure is the last Failure event of a history.
func lastFailure(evs []*api.Event) *api.Failure {
	var f *api.Failure
	for _, e := range evs {
		if x := e.GetFailure(); x != nil {
			f = x
		}
	}
	return f
}

func describeEvents(evs []*api.Event) string {
	var b strings.Builder
	for _, e := range evs {
		b.WriteString("  " + api.Kind(e) + " " + protojson.Format(e) + "\n")
	}
	return b.String()
}

// fileContaining returns the first file under dir that contains s, or "".
func fileContaining(t testing.TB, dir, s string) string {
	t.Helper()
	found := ""
	err := filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err != nil || fi.IsDir() || found != "" {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if bytes.Contains(b, []byte(s)) {
			found = p
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return found
}

// closedPort returns a loopback address nothing listens on.
func closedPort(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	if err := ln.Close(); err != nil {
		t.Fatal(err)
	}
	return addr
}

// TestProvidersUnreachable: with nothing reachable, lemo models and a new
// Task say which providers were tried and how to configure one.
func TestProvidersUnreachable(t *testing.T) {
	data := t.TempDir()
	serveWithEnv(t, data, "LEMO_OLLAMA_BASE_URL=http://"+closedPort(t))

	out, code := cli(t, data, "models")
	if code == 0 {
		t.Fatalf("lemo models exited 0 with nothing reachable:\n%s", out)
	}
	for _, want := range []string{"provider ollama:", "tried: ollama", "LEMO_OLLAMA_BASE_URL", "OLLAMA_HOST", "OPENROUTER_API_KEY", "lemo doctor"} {
		if !strings.Contains(out, want) {
			t.Errorf("lemo models output lacks %q:\n%s", want, out)
		}
	}

	out, code = cli(t, data, "run", "hello", "--model", "ollama/qwen3:8b")
	if code == 0 {
		t.Fatalf("lemo run exited 0 with ollama unreachable:\n%s", out)
	}
	for _, want := range []string{"ollama", "connection refused", "OLLAMA_HOST", "providers.ollama.base_url", "lemo doctor"} {
		if !strings.Contains(out, want) {
			t.Errorf("lemo run output lacks %q:\n%s", want, out)
		}
	}

	out, code = cli(t, data, "run", "hello", "--model", "openrouter/openai/gpt-4o")
	if code == 0 || !strings.Contains(out, "OPENROUTER_API_KEY") || !strings.Contains(out, "configured providers: ollama") {
		t.Fatalf("lemo run with an unconfigured provider exited %d, want a hint naming OPENROUTER_API_KEY:\n%s", code, out)
	}
}
