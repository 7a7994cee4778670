package ollama

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"

	"lemo/providers"
)

// BenchmarkLoopback100Deltas measures decoding and dispatch of 100 streamed
// deltas from a server on loopback that writes pre-rendered lines, flushing
// each one as Ollama does, so the figure is the client's own cost (the
// scriptable fake of BenchmarkStream100Deltas renders every line itself).
func BenchmarkLoopback100Deltas(b *testing.B) {
	var lines [][]byte
	for i := range 100 {
		lines = append(lines, []byte(`{"model":"m","created_at":"2026-01-01T00:00:00Z","message":{"role":"assistant","content":"token`+strconv.Itoa(i)+` "},"done":false}`+"\n"))
	}
	lines = append(lines, []byte(`{"model":"m","created_at":"2026-01-01T00:00:00Z","message":{"role":"assistant","content":""},"done":true,"done_reason":"stop","prompt_eval_count":1,"eval_count":100}`+"\n"))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/x-ndjson")
		f := w.(http.Flusher)
		for _, l := range lines {
			_, _ = w.Write(l)
			f.Flush()
		}
	}))
	defer srv.Close()
	p := newProvider(b, Config{BaseURL: srv.URL})
	m := &Model{p: p, info: providers.ModelInfo{Name: "m", Window: 4096}}
	req := &providers.Request{Messages: []providers.Message{{Role: providers.RoleUser, Content: "go"}}}
	b.ReportAllocs()
	for b.Loop() {
		n := 0
		if _, err := m.Stream(context.Background(), req, func(providers.Delta) { n++ }); err != nil || n != 100 {
			b.Fatalf("Stream() = %v, %d deltas", err, n)
		}
	}
}
