package tests

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"lemo/client"
	"lemo/internal/testwait"
)

// httpAddr waits for the daemon to log where its health and metrics
// listener listens.
func httpAddr(t testing.TB, d *daemon) string {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		for _, line := range strings.Split(d.logs(), "\n") {
			if !strings.Contains(line, "health and metrics listening") {
				continue
			}
			var rec struct {
				Address string `json:"address"`
			}
			if err := json.Unmarshal([]byte(line), &rec); err != nil || rec.Address == "" {
				t.Fatalf("listening line without an address: %q (%v)", line, err)
			}
			return rec.Address
		}
		select {
		case <-d.done:
			t.Fatalf("lemo serve exited: %v\n%s", d.err, d.logs())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("no health and metrics listener within 30s:\n%s", d.logs())
		}
		waitABit()
	}
}

// httpGet returns the status and body of GET http://addr/path.
func httpGet(t testing.TB, addr, path string) (int, string) {
	t.Helper()
	resp, err := http.Get("http://" + addr + path)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	return resp.StatusCode, string(b)
}

// scrape reads /metrics into series → value ("lemo_tasks{status=\"running\"}").
func scrape(t testing.TB, addr string) map[string]float64 {
	t.Helper()
	code, body := httpGet(t, addr, "/metrics")
	if code != http.StatusOK {
		t.Fatalf("/metrics = %d\n%s", code, body)
	}
	out := make(map[string]float64)
	sc := bufio.NewScanner(strings.NewReader(body))
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if i < 0 || err != nil {
			t.Fatalf("not a sample: %q", line)
		}
		out[line[:i]] = v
	}
	return out
}

// eventually polls cond until it returns nil, or fails after timeout with
// its last error.
func eventually(t testing.TB, timeout time.Duration, cond func() error) {
	t.Helper()
	testwait.Until(t, timeout, "the condition", cond)
}

// While a Task runs, a scrape shows it and the counters of its Cycles,
// tool calls and appends move between two scrapes; the attached client
// and the store are measured; SIGTERM pauses the running Task durably and
// exits 0.
func TestMetricsDuringARunningTask(t *testing.T) {
	data := filepath.Join(t.TempDir(), "data")
	cfg := writeConfig(t, "tasks:\n  max_cycles: 1000000\n")
	d := serveRemote(t, data, "--config", cfg, "--http-listen", "127.0.0.1:0")
	addr := httpAddr(t, d.daemon)
	if code, _ := httpGet(t, addr, "/healthz"); code != http.StatusOK {
		t.Fatalf("/healthz = %d", code)
	}
	if code, _ := httpGet(t, addr, "/readyz"); code != http.StatusOK {
		t.Fatalf("/readyz of a serving daemon = %d", code)
	}
	c := d.connect(t, "")
	ctx := context.Background()
	m, err := c.CreateTask(ctx, client.CreateTask{Request: "loop", Model: "fake/loop"})
	if err != nil {
		t.Fatal(err)
	}
	moving := []string{
		`lemo_cycles_total{outcome="completed",provider="fake"}`,
		`lemo_cycle_duration_seconds_count{provider="fake"}`,
		`lemo_tool_calls_total{outcome="ok",tool="demo.tick"}`,
		`lemo_tool_call_duration_seconds_count{tool="demo.tick"}`,
		`lemo_events_appended_total`,
		`lemo_append_latency_seconds_count`,
		`lemo_append_batch_size_count`,
	}
	var first map[string]float64
	eventually(t, 30*time.Second, func() error {
		first = scrape(t, addr)
		if first[`lemo_tasks{status="running"}`] != 1 {
			return fmt.Errorf("lemo_tasks running = %v, want 1", first[`lemo_tasks{status="running"}`])
		}
		for _, k := range moving {
			if first[k] < 1 {
				return fmt.Errorf("%s = %v, want at least 1", k, first[k])
			}
		}
		return nil
	})
	var second map[string]float64
	eventually(t, 30*time.Second, func() error {
		second = scrape(t, addr)
		for _, k := range moving {
			if second[k] <= first[k] {
				return fmt.Errorf("%s did not move: %v then %v", k, first[k], second[k])
			}
		}
		return nil
	})
	t.Logf("between two scrapes: cycles %v → %v, events appended %v → %v",
		first[moving[0]], second[moving[0]], first[`lemo_events_appended_total`], second[`lemo_events_appended_total`])
	for k, want := range map[string]float64{`lemo_ready`: 1, `lemo_store_min_free_bytes`: 512 << 20, `lemo_tasks{status="running"}`: 1, `lemo_tasks{status="failed"}`: 0} {
		if second[k] != want {
			t.Errorf("%s = %v, want %v", k, second[k], want)
		}
	}
	for _, k := range []string{`lemo_clients`, `lemo_store_size_bytes`, `lemo_store_free_bytes`, `lemo_append_latency_seconds_bucket{le="+Inf"}`} {
		if second[k] < 1 {
			t.Errorf("%s = %v, want at least 1", k, second[k])
		}
	}
	// The test's connection is a session; a CLI command attaching adds one.
	att := startCLI(t, data, "attach", "--no-deltas", m.GetTaskId())
	eventually(t, 30*time.Second, func() error {
		if n := scrape(t, addr)["lemo_clients"]; n < 2 {
			return fmt.Errorf("lemo_clients = %v with the test and lemo attach connected, want 2", n)
		}
		return nil
	})
	att.signal(syscall.SIGINT)
	att.wait(t, 30*time.Second)

	d.stopWith(syscall.SIGTERM)
	out, code := lemo(t, cleanEnv("LEMO_FAKE_ENABLED=true", "LEMO_OLLAMA_DISABLED=true"), "doctor", "--data", data)
	if !strings.Contains(out, "opens read-only: 1 Tasks (1 paused)") {
		t.Fatalf("after SIGTERM the looping Task is not paused (doctor exit %d):\n%s", code, out)
	}
}

// /readyz answers 503 from the moment the listener opens until recovery is
// done: a store left with many running Tasks (kill -9) is still being
// recovered while a scrape shows them running, and the first 200 comes
// only when every one of them is paused.
func TestReadyzFalseUntilRecoveryIsDone(t *testing.T) {
	const tasks = 300
	data := filepath.Join(t.TempDir(), "data")
	first := serveRemote(t, data)
	c := first.connect(t, "")
	ctx := context.Background()
	for i := 0; i < tasks; i++ {
		// A slow stream keeps each Task running with a Cycle in flight.
		if _, err := c.CreateTask(ctx, client.CreateTask{Request: "deltas=100000 rate=1", Model: "fake/stream"}); err != nil {
			t.Fatal(err)
		}
	}
	_ = c.Close()
	first.kill()

	start := time.Now()
	d := launchDaemon(t, lemoBin, data, "--http-listen", "127.0.0.1:0")
	addr := httpAddr(t, d)
	opened := time.Since(start)
	unready, recovering := 0, 0
	var readyAt time.Duration
	for readyAt == 0 {
		code, body := httpGet(t, addr, "/readyz")
		switch code {
		case http.StatusServiceUnavailable:
			unready++
			if s := scrape(t, addr); s[`lemo_tasks{status="running"}`] == tasks {
				recovering++
			}
		case http.StatusOK:
			readyAt = time.Since(start)
		default:
			t.Fatalf("/readyz = %d %s", code, body)
		}
		if time.Since(start) > time.Minute {
			t.Fatalf("not ready within a minute:\n%s", d.logs())
		}
	}
	s := scrape(t, addr)
	if s[`lemo_tasks{status="running"}`] != 0 || s[`lemo_tasks{status="paused"}`] != tasks || s["lemo_ready"] != 1 {
		t.Fatalf("when first ready: running %v, paused %v, lemo_ready %v; want 0, %d, 1",
			s[`lemo_tasks{status="running"}`], s[`lemo_tasks{status="paused"}`], s["lemo_ready"], tasks)
	}
	t.Logf("listener open after %v, ready after %v; %d answers 503, %d of them while the scrape showed %d Tasks still running",
		opened.Round(time.Millisecond), readyAt.Round(time.Millisecond), unready, recovering, tasks)
	if unready == 0 || recovering == 0 {
		t.Fatalf("/readyz was never seen unready during recovery (%d answers 503, %d during recovery)", unready, recovering)
	}
	select {
	case <-d.ready:
	case <-time.After(30 * time.Second):
		t.Fatalf("no serving line:\n%s", d.logs())
	}
	recovered := false
	for _, line := range strings.Split(d.logs(), "\n") {
		recovered = recovered || (strings.Contains(line, "recovered tasks") && strings.Contains(line, fmt.Sprintf(`"tasks":%d`, tasks)))
	}
	if !recovered {
		t.Fatalf("the log does not report %d recovered Tasks:\n%s", tasks, d.logs())
	}
	d.stopWith(syscall.SIGTERM)
}

// SIGHUP re-reads the configuration: the free-space floor and the task
// limits apply at once, keys that need a restart are named, and a file with
// problems is reported while the daemon keeps its running configuration.
func TestSIGHUPReloadsTheConfiguration(t *testing.T) {
	data := filepath.Join(t.TempDir(), "data")
	cfg := writeConfig(t, "log:\n  level: info\n")
	rewrite := func(yaml string) {
		t.Helper()
		if err := os.WriteFile(cfg, []byte(yaml), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	d := serveRemote(t, data, "--config", cfg, "--http-listen", "127.0.0.1:0")
	addr := httpAddr(t, d.daemon)
	reloads := 0
	hup := func(want ...string) {
		t.Helper()
		reloads++
		n := reloads
		_ = d.cmd.Process.Signal(syscall.SIGHUP)
		eventually(t, 30*time.Second, func() error {
			logs := d.logs()
			if got := strings.Count(logs, "SIGHUP: configuration reloaded") + strings.Count(logs, "SIGHUP: the configuration was not reloaded"); got < n {
				return fmt.Errorf("%d reloads logged, want %d", got, n)
			}
			for _, w := range want {
				if !strings.Contains(logs, w) {
					return fmt.Errorf("log lacks %q", w)
				}
			}
			return nil
		})
	}
	if out, code := cli(t, data, "run", "--model", "fake/echo", "before"); code != 0 {
		t.Fatalf("lemo run: exit %d\n%s", code, out)
	}

	// A floor of 100 TiB refuses new work at once; a small request limit
	// refuses long messages.
	rewrite("log:\n  level: info\nstorage:\n  min_free_mib: 104857600\ntasks:\n  max_request_bytes: 64\n")
	hup(`"applied":["tasks.max_request_bytes=64","storage.min_free_mib=104857600"]`)
	if out, code := cli(t, data, "run", "--model", "fake/echo", "below the floor"); code == 0 || !strings.Contains(out, "free space") {
		t.Fatalf("lemo run below the reloaded floor: exit %d\n%s", code, out)
	}
	if v := scrape(t, addr)["lemo_store_min_free_bytes"]; v != 104857600<<20 {
		t.Fatalf("lemo_store_min_free_bytes = %v after the reload", v)
	}

	// Back to a small floor; the log level and a key that needs a
	// restart change too.
	rewrite("log:\n  level: debug\nauth:\n  owner: ops\nstorage:\n  min_free_mib: 1\ntasks:\n  max_request_bytes: 64\n  idle_timeout: 5m\n")
	hup(`"applied":["log.level=debug","storage.min_free_mib=1"]`, `"keys":["auth.owner","tasks.idle_timeout"]`, "only after a restart")
	if out, code := cli(t, data, "run", "--model", "fake/echo", strings.Repeat("x", 65)); code == 0 || !strings.Contains(out, "exceeds the limit of 64 bytes") {
		t.Fatalf("lemo run over the reloaded request limit: exit %d\n%s", code, out)
	}
	if out, code := cli(t, data, "run", "--model", "fake/echo", "after"); code != 0 || !strings.Contains(out, "echo: after") {
		t.Fatalf("lemo run after the floor came down: exit %d\n%s", code, out)
	}

	// Files with problems change nothing and say what is wrong.
	rewrite("tasks: [\n")
	hup("not valid YAML", "keeps its running configuration")
	rewrite("storage:\n  min_free_mib: 104857600\ntasks:\n  max_cycle: 3\n")
	hup("tasks.max_cycle: unknown key")
	if out, code := cli(t, data, "run", "--model", "fake/echo", "still serving"); code != 0 || !strings.Contains(out, "echo: still serving") {
		t.Fatalf("lemo run after bad reloads: exit %d\n%s", code, out)
	}
	if !d.alive() {
		t.Fatal("the daemon exited")
	}
	d.stopWith(syscall.SIGTERM)
}

// lemo doctor against a running daemon asks it over the remote API without
// touching the locked store; against a stopped one it opens the store
// read-only; a token file others can read is a problem with its fix.
func TestDoctor(t *testing.T) {
	data := filepath.Join(t.TempDir(), "data")
	d := serveRemote(t, data)
	if out, code := cli(t, data, "run", "--model", "fake/echo", "hello"); code != 0 {
		t.Fatalf("lemo run: exit %d\n%s", code, out)
	}
	env := cleanEnv("LEMO_FAKE_ENABLED=true", "LEMO_OLLAMA_DISABLED=true", "LEMO_STORAGE_MIN_FREE_MIB=1")
	out, code := lemo(t, env, "doctor", "--data", data)
	for _, want := range []string{"ok    daemon", "running: pid", "held by the running daemon", "files are readable", "ok    remote API", "answers with the data folder's token", "ok    provider fake", "no problems found"} {
		if !strings.Contains(out, want) {
			t.Errorf("doctor with a running daemon lacks %q (exit %d):\n%s", want, code, out)
		}
	}
	if code != 0 {
		t.Fatalf("doctor with a running daemon: exit %d\n%s", code, out)
	}
	d.stop()

	out, code = lemo(t, env, "doctor", "--data", data, "--json")
	var results []struct{ Check, Status, Detail, Fix string }
	mustJSON(t, out, &results)
	found := false
	for _, r := range results {
		if r.Check == "store" && r.Status == "ok" && strings.Contains(r.Detail, "opens read-only: 1 Tasks (1 finished)") {
			found = true
		}
	}
	if code != 0 || !found {
		t.Fatalf("doctor --json with the daemon stopped: exit %d\n%s", code, out)
	}

	// After a kill -9 the store cannot be opened read-only until lemo
	// serve recovers it: a warning, not a failure.
	d = serveRemote(t, data)
	d.kill()
	out, code = lemo(t, env, "doctor", "--data", data)
	if code != 0 || !strings.Contains(out, "warn  store") || !strings.Contains(out, "was not closed cleanly") || !strings.Contains(out, "fix: start lemo serve") {
		t.Fatalf("doctor after a kill -9: exit %d\n%s", code, out)
	}

	token := filepath.Join(data, "token")
	if err := os.Chmod(token, 0o644); err != nil {
		t.Fatal(err)
	}
	out, code = lemo(t, env, "doctor", "--data", data)
	if code != 1 || !strings.Contains(out, "FAIL  token file") || !strings.Contains(out, "fix: chmod 600 "+token) {
		t.Fatalf("doctor with a readable token: exit %d\n%s", code, out)
	}
}
