package metrics

import (
	"io"
	"maps"
	"math"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// parse reads an exposition with the Prometheus library's own text parser.
func parse(t *testing.T, text string) map[string]*dto.MetricFamily {
	t.Helper()
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(strings.NewReader(text))
	if err != nil {
		t.Fatalf("the exposition does not parse: %v\n%s", err, text)
	}
	return fams
}

// sample finds the series of fam whose labels are exactly labels.
func sample(t *testing.T, fams map[string]*dto.MetricFamily, fam string, labels map[string]string) *dto.Metric {
	t.Helper()
	f := fams[fam]
	if f == nil {
		t.Fatalf("no family %s", fam)
	}
	for _, m := range f.GetMetric() {
		got := make(map[string]string)
		for _, l := range m.GetLabel() {
			got[l.GetName()] = l.GetValue()
		}
		if maps.Equal(got, labels) {
			return m
		}
	}
	t.Fatalf("family %s has no series %v", fam, labels)
	return nil
}

func TestExposition(t *testing.T) {
	r := NewRegistry()
	d := NewDaemon(r)
	d.CycleDone("ollama", "ollama/qwen3", "completed", 300*time.Millisecond)
	d.CycleDone("ollama", "ollama/qwen3", "rate_limit", time.Second)
	d.ToolDone("shell.run", "ok", 20*time.Millisecond)
	d.Supervised("task", "restart")
	d.Supervised("cycle", "stop")
	d.Supervised("tool", "stop")
	d.Supervised("tool", "stop")
	d.Commit(3, 5, 2*time.Millisecond)
	d.Ack(3 * time.Millisecond)
	r.NewGaugeFunc("lemo_tasks", "Tasks by status.", "status", func() map[string]float64 {
		return map[string]float64{"running": 2, "finished": 7}
	})
	r.NewGaugeFunc("lemo_store_free_bytes", "Free.", "", func() map[string]float64 {
		return map[string]float64{"": 78303649792}
	})
	r.NewCounterFunc("lemo_remote_connections_closed_total", "Closed.", "reason", func() map[string]float64 {
		return map[string]float64{"timed_out": 3, "refused": 0}
	})
	var b strings.Builder
	if err := r.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	fams := parse(t, b.String())

	types := map[string]dto.MetricType{
		"lemo_cycles_total": dto.MetricType_COUNTER, "lemo_cycle_duration_seconds": dto.MetricType_HISTOGRAM,
		"lemo_tool_calls_total": dto.MetricType_COUNTER, "lemo_tasks": dto.MetricType_GAUGE,
		"lemo_append_batch_size": dto.MetricType_HISTOGRAM, "lemo_events_appended_total": dto.MetricType_COUNTER,
		"lemo_append_ack_seconds":              dto.MetricType_HISTOGRAM,
		"lemo_remote_connections_closed_total": dto.MetricType_COUNTER,
		// The runtime and process collectors.
		"go_goroutines": dto.MetricType_GAUGE, "go_gc_duration_seconds": dto.MetricType_SUMMARY,
		"process_resident_memory_bytes": dto.MetricType_GAUGE, "process_open_fds": dto.MetricType_GAUGE,
	}
	for name, want := range types {
		f := fams[name]
		if f == nil || f.GetType() != want || f.GetHelp() == "" {
			t.Errorf("family %s = %v, want type %v with help", name, f, want)
		}
	}
	for name := range fams {
		if !strings.HasPrefix(name, "lemo_") && !strings.HasPrefix(name, "go_") && !strings.HasPrefix(name, "process_") {
			t.Errorf("family %s is not Lemo's, the runtime's or the process's", name)
		}
	}

	counter := func(fam string, labels map[string]string) float64 {
		return sample(t, fams, fam, labels).GetCounter().GetValue()
	}
	if n := counter("lemo_cycles_total", map[string]string{"provider": "ollama", "outcome": "completed"}); n != 1 {
		t.Errorf("completed cycles = %v, want 1", n)
	}
	if n := counter("lemo_provider_errors_total", map[string]string{"provider": "ollama", "class": "rate_limit"}); n != 1 {
		t.Errorf("rate-limit errors = %v, want 1", n)
	}
	for _, m := range fams["lemo_provider_errors_total"].GetMetric() {
		for _, l := range m.GetLabel() {
			if l.GetName() == "class" && l.GetValue() == "completed" {
				t.Error("a completed call counted as a provider error")
			}
		}
	}
	if n := counter("lemo_tool_calls_total", map[string]string{"tool": "shell.run", "outcome": "ok"}); n != 1 {
		t.Errorf("tool calls = %v, want 1", n)
	}
	if n := counter("lemo_actor_restarts_total", map[string]string{"directive": "restart"}); n != 1 {
		t.Errorf("restarts = %v, want 1", n)
	}
	if n := len(fams["lemo_actor_restarts_total"].GetMetric()); n != 1 {
		t.Errorf("lemo_actor_restarts_total has %d series, want 1: the stopped Cycle and Tools are not Task crashes", n)
	}
	for _, c := range []struct {
		level, directive string
		want             float64
	}{{"task", "restart", 1}, {"cycle", "stop", 1}, {"tool", "stop", 2}} {
		if n := counter("lemo_supervision_decisions_total", map[string]string{"level": c.level, "directive": c.directive}); n != c.want {
			t.Errorf("decisions{level=%s,directive=%s} = %v, want %v", c.level, c.directive, n, c.want)
		}
	}
	if n := counter("lemo_events_appended_total", map[string]string{}); n != 5 {
		t.Errorf("appended = %v, want 5", n)
	}

	// Histograms carry cumulative buckets at the configured bounds.
	h := sample(t, fams, "lemo_cycle_duration_seconds", map[string]string{"provider": "ollama"}).GetHistogram()
	if h.GetSampleCount() != 2 || h.GetSampleSum() != 1.3 || len(h.GetBucket()) != len(cycleBuckets)+1 {
		t.Fatalf("cycle histogram = %v, want 2 samples summing to 1.3 in %d buckets and +Inf", h, len(cycleBuckets))
	}
	for i, bk := range h.GetBucket() {
		want := uint64(0)
		if bk.GetUpperBound() >= 0.3 {
			want = 1
		}
		if bk.GetUpperBound() >= 1 {
			want = 2
		}
		bound := math.Inf(1)
		if i < len(cycleBuckets) {
			bound = cycleBuckets[i]
		}
		if bk.GetUpperBound() != bound || bk.GetCumulativeCount() != want {
			t.Errorf("bucket le=%v holds %d, want le=%v holding %d", bk.GetUpperBound(), bk.GetCumulativeCount(), bound, want)
		}
	}
	if bk := sample(t, fams, "lemo_append_batch_size", map[string]string{}).GetHistogram().GetBucket(); bk[2].GetUpperBound() != 4 || bk[2].GetCumulativeCount() != 1 || bk[1].GetCumulativeCount() != 0 {
		t.Errorf("batch-size buckets = %v, want a batch of 3 in le=4 and not in le=2", bk)
	}

	if v := sample(t, fams, "lemo_remote_connections_closed_total", map[string]string{"reason": "timed_out"}).GetCounter().GetValue(); v != 3 {
		t.Errorf("lemo_remote_connections_closed_total{reason=timed_out} = %v, want 3", v)
	}
	if v := sample(t, fams, "lemo_tasks", map[string]string{"status": "finished"}).GetGauge().GetValue(); v != 7 {
		t.Errorf("finished Tasks = %v, want 7", v)
	}
	if v := sample(t, fams, "lemo_store_free_bytes", map[string]string{}).GetGauge().GetValue(); v != 78303649792 {
		t.Errorf("free bytes = %v", v)
	}
}

// A gauge function that answers a label value for a gauge without a label
// fails the scrape of that family with a clear error instead of a wrong
// series.
func TestGaugeFuncLabelMismatch(t *testing.T) {
	r := NewRegistry()
	r.NewGaugeFunc("lemo_odd", "Odd.", "", func() map[string]float64 { return map[string]float64{"x": 1} })
	var b strings.Builder
	if err := r.WriteText(&b); err == nil || !strings.Contains(err.Error(), `label value "x"`) {
		t.Fatalf("WriteText error = %v, want one naming the label value", err)
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
	code, body := get("/metrics")
	if code != 200 {
		t.Fatalf("/metrics = %d\n%s", code, body)
	}
	if n := sample(t, parse(t, body), "lemo_tool_calls_total", map[string]string{"tool": "x", "outcome": "ok"}).GetCounter().GetValue(); n != 1 {
		t.Fatalf("/metrics: tool calls = %v, want 1\n%s", n, body)
	}
	if err := srv.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestMCPCalls(t *testing.T) {
	r := NewRegistry()
	d := NewDaemon(r)
	d.MCPCall("fs", "ok")
	d.MCPCall("fs", "unknown")
	d.MCPCall("fs", "timeout")
	d.MCPCall("web", "ok")
	d.MCPListFailed("web")
	d.MCPListFailed("web")
	var b strings.Builder
	if err := r.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	fams := parse(t, b.String())
	counter := func(fam string, labels map[string]string) float64 {
		return sample(t, fams, fam, labels).GetCounter().GetValue()
	}
	if n := counter("lemo_mcp_calls_total", map[string]string{"server": "fs", "outcome": "unknown"}); n != 1 {
		t.Errorf("fs unknown calls = %v, want 1", n)
	}
	if n := counter("lemo_mcp_failures_total", map[string]string{"server": "fs"}); n != 2 {
		t.Errorf("fs failures = %v, want 2", n)
	}
	if n := counter("lemo_mcp_list_failures_total", map[string]string{"server": "web"}); n != 2 {
		t.Errorf("web listing failures = %v, want 2", n)
	}
	if n := counter("lemo_mcp_calls_total", map[string]string{"server": "web", "outcome": "ok"}); n != 1 {
		t.Errorf("web calls = %v, want 1", n)
	}
}

// WithPprof serves the profiling endpoints beside the others; without it
// there are none.
func TestWithPprof(t *testing.T) {
	r := NewRegistry()
	ready := func() bool { return true }
	for _, withPprof := range []bool{false, true} {
		h := Handler(r, ready)
		if withPprof {
			h = WithPprof(h)
		}
		srv, err := ServeHandler("127.0.0.1:0", h)
		if err != nil {
			t.Fatal(err)
		}
		status := func(path string) int {
			resp, err := http.Get("http://" + srv.Addr() + path)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			_, _ = io.ReadAll(resp.Body)
			return resp.StatusCode
		}
		wantPprof := http.StatusNotFound
		if withPprof {
			wantPprof = http.StatusOK
		}
		if got := status("/debug/pprof/"); got != wantPprof {
			t.Errorf("pprof %v: /debug/pprof/ = %d, want %d", withPprof, got, wantPprof)
		}
		if got := status("/metrics"); got != http.StatusOK {
			t.Errorf("pprof %v: /metrics = %d, want 200", withPprof, got)
		}
		if err := srv.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// Spend counts tokens and dollars by provider, model and whether they are
// estimates.
func TestSpent(t *testing.T) {
	r := NewRegistry()
	d := NewDaemon(r)
	d.Spent("openrouter", "openrouter/openai/gpt-4o", 1000, 3_250_000, false)
	d.Spent("openrouter", "openrouter/openai/gpt-4o", 500, 1_000_000, false)
	d.Spent("openrouter", "openrouter/openai/gpt-4o", 4196, 0, true)
	var b strings.Builder
	if err := r.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	fams := parse(t, b.String())
	labels := func(est string) map[string]string {
		return map[string]string{"provider": "openrouter", "model": "openrouter/openai/gpt-4o", "estimated": est}
	}
	if n := sample(t, fams, "lemo_model_tokens_total", labels("false")).GetCounter().GetValue(); n != 1500 {
		t.Errorf("tokens = %v, want 1500", n)
	}
	if n := sample(t, fams, "lemo_model_tokens_total", labels("true")).GetCounter().GetValue(); n != 4196 {
		t.Errorf("estimated tokens = %v, want 4196", n)
	}
	if c := sample(t, fams, "lemo_model_cost_usd_total", labels("false")).GetCounter().GetValue(); c < 0.004249 || c > 0.004251 {
		t.Errorf("cost = %v, want 0.00425", c)
	}
}
