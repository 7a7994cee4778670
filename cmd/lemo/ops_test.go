package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"strings"
	"testing"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/rs/zerolog"

	"lemo/actors/live"
	"lemo/memory"
	"lemo/persistence"
)

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// The gauges answer before the store opens (no store series) and read it
// once it is set; /readyz follows the ready flag.
func TestOpsGaugesAndReadiness(t *testing.T) {
	o := newOps()
	o.floor.Store(512 << 20)
	if err := o.serve("127.0.0.1:0", false, zerolog.Nop()); err != nil {
		t.Fatal(err)
	}
	defer o.close(zerolog.Nop())
	base := "http://" + o.srv.Addr()
	if code, _ := get(t, base+"/readyz"); code != http.StatusServiceUnavailable {
		t.Fatalf("/readyz before ready = %d, want 503", code)
	}
	_, body := get(t, base+"/metrics")
	got := samples(t, body)
	for k, want := range map[string]float64{`lemo_tasks{status="running"}`: 0, `lemo_tasks{status="awaiting_approval"}`: 0, "lemo_ready": 0, "lemo_clients": 0, "lemo_store_min_free_bytes": 536870912} {
		if v, ok := got[k]; !ok || v != want {
			t.Errorf("/metrics before the store opened: %s = %v (present %v), want %v:\n%s", k, v, ok, want, body)
		}
	}
	if _, ok := got["lemo_store_size_bytes"]; ok || strings.Contains(body, `status="unspecified"`) {
		t.Errorf("/metrics before the store opened:\n%s", body)
	}

	dd, err := persistence.OpenDataDir(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer dd.Close()
	st, err := persistence.Open(dd, persistence.Options{Log: zerolog.Nop(), MemTableSize: 4 << 20, BlockCacheSize: 4 << 20, OnCommit: o.daemon.Commit, OnAck: o.daemon.Ack})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	o.store.Store(st)
	lv, err := live.New(dd.Join("live"), live.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	o.live.Store(lv)
	o.ready.Store(true)
	if code, _ := get(t, base+"/readyz"); code != http.StatusOK {
		t.Fatalf("/readyz when ready = %d, want 200", code)
	}
	_, body = get(t, base+"/metrics")
	got = samples(t, body)
	for _, k := range []string{"lemo_store_size_bytes", "lemo_store_free_bytes"} {
		if v := got[k]; v < 1 || v != math.Trunc(v) {
			t.Errorf("/metrics: %s = %v, want a positive whole number of bytes:\n%s", k, v, body)
		}
	}
	for _, k := range []string{"lemo_store_disk_full", `lemo_live_bytes{where="memory"}`, `lemo_live_bytes{where="spill"}`, "lemo_live_results", "lemo_live_evicted"} {
		if v, ok := got[k]; !ok || v != 0 {
			t.Errorf("/metrics: %s = %v (present %v), want 0:\n%s", k, v, ok, body)
		}
	}
	if got["lemo_ready"] != 1 {
		t.Errorf("/metrics: lemo_ready = %v, want 1:\n%s", got["lemo_ready"], body)
	}
	// Semantic recall's metrics exist while it is on.
	embeddings := []string{"lemo_memory_embedding_vectors", "lemo_memory_embedding_tasks_behind", "lemo_memory_embedding_failures_total", "lemo_memory_recall_lexical_only_total"}
	for _, k := range embeddings {
		if _, ok := got[k]; ok {
			t.Errorf("/metrics: %s present without semantic recall", k)
		}
	}
	mem, err := memory.Open(context.Background(), st, memory.Options{Log: zerolog.Nop(), EmbedModel: "fake/e",
		Embedder: memory.EmbedderFunc(func(context.Context, []string) ([][]float32, error) { return nil, errors.New("down") })})
	if err != nil {
		t.Fatal(err)
	}
	defer mem.Close()
	o.mem.Store(mem)
	_, body = get(t, base+"/metrics")
	got = samples(t, body)
	for _, k := range embeddings {
		if v, ok := got[k]; !ok || v != 0 {
			t.Errorf("/metrics: %s = %v (present %v), want 0:\n%s", k, v, ok, body)
		}
	}
}

// samples reads the gauges and counters of an exposition, parsed by the
// Prometheus text parser, into series → value (`lemo_tasks{status="running"}`).
func samples(t *testing.T, body string) map[string]float64 {
	t.Helper()
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(strings.NewReader(body))
	if err != nil {
		t.Fatalf("/metrics does not parse: %v\n%s", err, body)
	}
	out := make(map[string]float64)
	for name, f := range fams {
		for _, m := range f.GetMetric() {
			key := name
			if len(m.GetLabel()) > 0 {
				var ls []string
				for _, l := range m.GetLabel() {
					ls = append(ls, fmt.Sprintf("%s=%q", l.GetName(), l.GetValue()))
				}
				key += "{" + strings.Join(ls, ",") + "}"
			}
			switch {
			case m.GetGauge() != nil:
				out[key] = m.GetGauge().GetValue()
			case m.GetCounter() != nil:
				out[key] = m.GetCounter().GetValue()
			}
		}
	}
	return out
}
