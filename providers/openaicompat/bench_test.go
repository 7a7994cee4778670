package openaicompat

import (
	"bytes"
	"context"
	"strconv"
	"testing"

	"lemo/providers"
	"lemo/providers/fake"
)

// BenchmarkStream100Deltas measures decoding and dispatch of 100 streamed
// text deltas from a fake server on loopback, HTTP included.
func BenchmarkStream100Deltas(b *testing.B) {
	text := make([]string, 100)
	for i := range text {
		text[i] = "token" + strconv.Itoa(i) + " "
	}
	s := fake.StartServer(b, fake.Options{Flavor: fake.FlavorOpenAI, Script: []fake.Scenario{{Text: text}}})
	p := newPlain(b, fake.ProviderParams{BaseURL: s.URL()})
	m, err := p.Model(context.Background(), "local-model")
	if err != nil {
		b.Fatal(err)
	}
	req := &providers.Request{Messages: []providers.Message{{Role: providers.RoleUser, Content: "go"}}}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		n := 0
		if _, err := m.Stream(context.Background(), req, func(providers.Delta) { n++ }); err != nil {
			b.Fatal(err)
		}
		if n != 100 {
			b.Fatalf("deltas = %d, want 100", n)
		}
	}
}

// BenchmarkDecode100Deltas measures the decoder alone on an in-memory
// stream of 100 text deltas plus finish, usage and [DONE].
func BenchmarkDecode100Deltas(b *testing.B) {
	var body []byte
	for i := range 100 {
		body = append(body, `data: {"id":"gen-1","object":"chat.completion.chunk","created":1750000000,"model":"m","choices":[{"index":0,"delta":{"content":"token`+strconv.Itoa(i)+` "},"finish_reason":null}]}`+"\n\n"...)
	}
	body = append(body, "data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\ndata: {\"choices\":[],\"usage\":{\"prompt_tokens\":1,\"completion_tokens\":100}}\n\ndata: [DONE]\n\n"...)
	p := &Provider{opts: Options{Name: "x", MaxLineBytes: DefaultMaxLineBytes}}
	b.ReportAllocs()
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		n := 0
		st := &state{p: p, emit: func(providers.Delta) { n++ }}
		if _, err := st.sse(context.Background(), bytes.NewReader(body)); err != nil || n != 100 {
			b.Fatalf("sse = %v, %d deltas", err, n)
		}
	}
}
