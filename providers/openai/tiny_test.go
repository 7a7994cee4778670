package openai

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"lemo/providers"
	"lemo/providers/fake/tiny"
	"lemo/providers/retry"
)

// tinyOllama starts the shared tiny-ollama kit (a real Ollama 0.17.4 with a
// deterministic 5M-parameter model) and returns its base URL.
func tinyOllama(t *testing.T) string {
	t.Helper()
	return tiny.Start(t, tiny.Options{}).URL
}

// TestTinyOllamaV1 runs the OpenAI-compatible core against a real server:
// Ollama's /v1 SSE endpoints.
func TestTinyOllamaV1(t *testing.T) {
	base := tinyOllama(t)
	p, err := New(Config{Name: "tiny", BaseURL: base + "/v1", CacheTTL: -1,
		Retry: retry.Policy{MaxAttempts: 1}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	user := func(s string) providers.Message { return providers.Message{Role: providers.RoleUser, Content: s} }
	m, err := p.Model(ctx, "tiny:latest")
	if err != nil {
		t.Fatal(err)
	}

	t.Run("stream", func(t *testing.T) {
		var deltas []string
		resp, err := m.Stream(ctx, &providers.Request{Messages: []providers.Message{user("Hi")}}, func(d providers.Delta) { deltas = append(deltas, d.Text) })
		if err != nil || resp.Text != "Hello from tiny!" || len(deltas) != 4 || resp.Usage.CompletionTokens != 5 || resp.FinishReason != "stop" {
			t.Fatalf("Stream() = %+v, %v, deltas %q", resp, err, deltas)
		}
	})

	t.Run("tool round trip", func(t *testing.T) {
		req := &providers.Request{System: "You can call tools.", Messages: []providers.Message{user("Weather in Paris?")},
			Tools: []providers.ToolSpec{{Name: "get_weather", Description: "weather",
				Parameters: json.RawMessage(`{"type":"object","required":["city"],"properties":{"city":{"type":"string"}}}`)}}}
		resp, err := m.Stream(ctx, req, nil)
		if err != nil || len(resp.ToolCalls) != 1 || string(resp.ToolCalls[0].Arguments) != `{"city":"Paris"}` || resp.FinishReason != "tool_calls" {
			t.Fatalf("Stream() = %+v, %v", resp, err)
		}
		req.Messages = append(req.Messages,
			providers.Message{Role: providers.RoleAssistant, ToolCalls: []providers.ToolCall{{ID: "lemo-1", Name: "get_weather", Arguments: resp.ToolCalls[0].Arguments}}},
			providers.Message{Role: providers.RoleTool, ToolCallID: "lemo-1", ToolName: "get_weather", Content: "sunny"})
		final, err := m.Stream(ctx, req, nil)
		if err != nil || final.Text != "Sunny in Paris!" {
			t.Fatalf("final = %+v, %v", final, err)
		}
	})

	t.Run("stream without finish or DONE", func(t *testing.T) {
		_, err := m.Stream(ctx, &providers.Request{Messages: []providers.Message{user("repeat")}}, nil)
		if !errors.Is(err, providers.ErrTruncated) || providers.ClassOf(err) != providers.ClassTransient {
			t.Fatalf("Stream(repeat) = %v, want a transient ErrTruncated error", err)
		}
	})

	t.Run("cancel", func(t *testing.T) {
		tiny.CheckCancel(t, m)
	})

	t.Run("unknown model", func(t *testing.T) {
		if _, err := p.Model(ctx, "nope"); providers.ClassOf(err) != providers.ClassModelNotFound {
			t.Fatalf("Model(nope) = %v", err)
		}
	})

	t.Run("embed", func(t *testing.T) { tiny.CheckEmbed(t, p) })
}
