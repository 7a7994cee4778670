package metrics

import (
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestExposition(t *testing.T) {
	r := NewRegistry()
	d := NewDaemon(r)
	d.CycleDone("ollama", "ollama/qwen3", "completed", 300*time.Millisecond)
	d.CycleDone("ollama", "ollama/qwen3", "rate_limit", time.Second)
	d.ToolDone("shell.run", "ok", 20*time.Millisecond)
	d.TaskCrashed("restart")
	d.Commit(3, 5, 2*time.Millisecond)
	r.NewGaugeFunc("lemo_tasks", "Tasks by status.", "status", func() map[string]float64 {
		return map[string]float64{"running": 2, "finished": 7}
	})
	r.NewGaugeFunc("lemo_store_free_bytes", "Free.", "", func() map[string]float64 {
		return map[string]float64{"": 78303649792}
	})
	r.NewCounterFunc("lemo_remote_connections_closed_total", "Closed.", "reason", func() map[string]float64 {
		return map[string]float64{"timed_out": 3}
	})
	var b strings.Builder
	r.WriteText(&b)
	out := b.String()
	for _, want := range []string{
		"# TYPE lemo_cycles_total counter\n",
		`lemo_cycles_total{provider="ollama",outcome="completed"} 1` + "\n",
		`lemo_provider_errors_total{provider="ollama",class="rate_limit"} 1` + "\n",
		`lemo_cycle_duration_seconds_bucket{provider="ollama",le="0.5"} 1` + "\n",
		`lemo_cycle_duration_seconds_bucket{provider="ollama",le="+Inf"} 2` + "\n",
		`lemo_cycle_duration_seconds_count{provider="ollama"} 2` + "\n",
		`lemo_tool_calls_total{tool="shell.run",outcome="ok"} 1` + "\n",
		`lemo_actor_restarts_total{directive="restart"} 1` + "\n",
		"lemo_events_appended_total 5\n",
		`lemo_append_batch_size_bucket{le="4"} 1` + "\n",
		`lemo_tasks{status="finished"} 7` + "\n",
		"lemo_store_free_bytes 78303649792\n",
		"# TYPE lemo_remote_connections_closed_total counter\n",
		`lemo_remote_connections_closed_total{reason="timed_out"} 3` + "\n",
		"# TYPE lemo_tasks gauge\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("exposition lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, `lemo_provider_errors_total{provider="ollama",class="completed"}`) {
		t.Error("a completed call counted as a provider error")
	}
}

func TestEndpoints(t *testing.T) {
	r := NewRegistry()
	NewDaemon(r).ToolDone("x", "ok", time.Millisecond)
	var ready atomic.Bool
	srv, err := Serve("127.0.0.1:0", r, ready.Load)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	get := func(path string) (int, string) {
		resp, err := http.Get("http://" + srv.Addr() + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, _ := get("/healthz"); code != 200 {
		t.Fatalf("/healthz = %d", code)
	}
	if code, _ := get("/readyz"); code != 503 {
		t.Fatalf("/readyz before ready = %d, want 503", code)
	}
	ready.Store(true)
	if code, _ := get("/readyz"); code != 200 {
		t.Fatalf("/readyz when ready = %d, want 200", code)
	}
	if code, body := get("/metrics"); code != 200 || !strings.Contains(body, `lemo_tool_calls_total{tool="x",outcome="ok"} 1`) {
		t.Fatalf("/metrics = %d\n%s", code, body)
	}
	if err := srv.Close(); err != nil {
		t.Fatal(err)
	}
}
