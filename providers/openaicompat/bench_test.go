package openaicompat

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
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

// benchRequest is a request late in a Task: 40 messages (20 tool calls
// and their results) and 8 tools whose schemas and descriptions come to
// about 16 KB, as the daemon's own tools do.
func benchRequest() *providers.Request {
	req := &providers.Request{System: strings.Repeat("You are a careful agent. ", 40)}
	req.Messages = append(req.Messages, providers.Message{Role: providers.RoleUser, Content: "List the services, again and again."})
	for i := 0; i < 20; i++ {
		id := fmt.Sprint("call-", i)
		req.Messages = append(req.Messages,
			providers.Message{Role: providers.RoleAssistant, ToolCalls: []providers.ToolCall{{ID: id, Name: "system", Arguments: json.RawMessage(`{"action":"list"}`)}}},
			providers.Message{Role: providers.RoleTool, ToolCallID: id, Content: `{"services":[]}`})
	}
	for i := 0; i < 8; i++ {
		props := make([]string, 12)
		for j := range props {
			props[j] = fmt.Sprintf(`"field_%d":{"type":"string","description":%q}`, j, strings.Repeat("what the field holds ", 5))
		}
		req.Tools = append(req.Tools, providers.ToolSpec{Name: fmt.Sprint("tool_", i), Description: strings.Repeat("What the tool does and when to use it. ", 12),
			Parameters: json.RawMessage(`{"type":"object","properties":{` + strings.Join(props, ",") + `},"required":["field_0"]}`)})
	}
	return req
}

// BenchmarkRequestBody encodes one request body: with the tool set's
// encoding kept from the previous call (as every call of a Task after its
// first), and encoded again each call (as before the cache).
func BenchmarkRequestBody(b *testing.B) {
	req := benchRequest()
	for _, kept := range []bool{true, false} {
		name := "tools-kept"
		if !kept {
			name = "tools-encoded-each-call"
		}
		b.Run(name, func(b *testing.B) {
			var cache providers.ToolCache
			b.ReportAllocs()
			size := 0
			for i := 0; i < b.N; i++ {
				if !kept {
					cache = providers.ToolCache{}
				}
				wire := buildRequest("m", req, false)
				body, err := requestBody(wire, req, &cache)
				releaseRequest(wire)
				if err != nil {
					b.Fatal(err)
				}
				size = int(body.Len())
			}
			b.ReportMetric(float64(size), "body-bytes")
		})
	}
}
