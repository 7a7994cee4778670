package openaicompat

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"

	"lemo/providers"
)

// BenchmarkLoopback100Deltas measures decoding and dispatch of 100 streamed
// deltas from a server on loopback that writes pre-rendered SSE events,
// flushing each one, so the figure is the client's own cost (the scriptable
// fake of BenchmarkStream100Deltas renders every event itself).
func BenchmarkLoopback100Deltas(b *testing.B) {
	var events [][]byte
	for i := range 100 {
		events = append(events, []byte(`data: {"id":"gen-1","object":"chat.completion.chunk","created":1750000000,"model":"m","choices":[{"index":0,"delta":{"content":"token`+strconv.Itoa(i)+` "},"finish_reason":null}]}`+"\n\n"))
	}
	events = append(events, []byte("data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\ndata: {\"choices\":[],\"usage\":{\"prompt_tokens\":1,\"completion_tokens\":100}}\n\ndata: [DONE]\n\n"))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/models" {
			_, _ = w.Write([]byte(`{"object":"list","data":[{"id":"m","object":"model"}]}`))
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		f := w.(http.Flusher)
		for _, e := range events {
			_, _ = w.Write(e)
			f.Flush()
		}
	}))
	defer srv.Close()
	p, err := New(Options{Name: "x", BaseURL: srv.URL})
	if err != nil {
		b.Fatal(err)
	}
	m, err := p.Model(context.Background(), "m")
	if err != nil {
		b.Fatal(err)
	}
	req := &providers.Request{Messages: []providers.Message{{Role: providers.RoleUser, Content: "go"}}}
	b.ReportAllocs()
	for b.Loop() {
		n := 0
		if _, err := m.Stream(context.Background(), req, func(providers.Delta) { n++ }); err != nil || n != 100 {
			b.Fatalf("Stream() = %v, %d deltas", err, n)
		}
	}
}
