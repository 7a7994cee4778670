package fake

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"lemo/providers"
)

// RunLive runs the conformance scenarios that make sense against a real
// service (opt-in live tests, build tag "live"): discovery, a streamed
// answer, a tool round trip with Lemo's call ids, and cancellation.
func RunLive(t *testing.T, p providers.Provider, model string) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	ms, err := p.Models(ctx)
	if err != nil || len(ms) == 0 {
		t.Fatalf("Models() = %d models, %v", len(ms), err)
	}
	m, err := p.Model(ctx, model)
	if err != nil {
		t.Fatalf("Model(%q) = %v", model, err)
	}
	t.Logf("model %+v", m.Info())

	t.Run("stream", func(t *testing.T) {
		var deltas int
		resp, err := m.Stream(ctx, &providers.Request{Messages: []providers.Message{{Role: providers.RoleUser, Content: "Reply with the single word: pong"}}},
			func(providers.Delta) { deltas++ })
		if err != nil || resp.Text == "" || deltas == 0 {
			t.Fatalf("Stream() = %+v, %v (%d deltas)", resp, err, deltas)
		}
		t.Logf("text %q usage %+v finish %q", resp.Text, resp.Usage, resp.FinishReason)
	})

	t.Run("tool round trip", func(t *testing.T) {
		if !m.Info().Tools {
			t.Skip("model has no tools")
		}
		req := &providers.Request{
			System:   "Use the get_weather tool to answer weather questions.",
			Messages: []providers.Message{{Role: providers.RoleUser, Content: "What is the weather in Oslo? Use the tool."}},
			Tools: []providers.ToolSpec{{Name: "get_weather", Description: "Current weather for a city",
				Parameters: json.RawMessage(`{"type":"object","required":["city"],"properties":{"city":{"type":"string"}}}`)}},
		}
		resp, err := m.Stream(ctx, req, nil)
		if err != nil || len(resp.ToolCalls) == 0 {
			t.Fatalf("Stream() = %+v, %v; want a tool call", resp, err)
		}
		tc := resp.ToolCalls[0]
		req.Messages = append(req.Messages,
			providers.Message{Role: providers.RoleAssistant, Content: resp.Text, Reasoning: resp.Reasoning, ProviderMetadata: resp.ProviderMetadata,
				ToolCalls: []providers.ToolCall{{ID: "lemo_call_1", Name: tc.Name, Arguments: tc.Arguments}}},
			providers.Message{Role: providers.RoleTool, ToolCallID: "lemo_call_1", ToolName: tc.Name, Content: `{"temperature_c":21,"sky":"clear"}`})
		final, err := m.Stream(ctx, req, nil)
		if err != nil || !strings.Contains(final.Text, "21") {
			t.Fatalf("final Stream() = %+v, %v; want the tool's 21", final, err)
		}
	})

	t.Run("cancel", func(t *testing.T) {
		cctx, cancel := context.WithCancel(ctx)
		began := time.Now()
		_, err := m.Stream(cctx, &providers.Request{Messages: []providers.Message{{Role: providers.RoleUser, Content: "Count from 1 to 500, one number per line."}}},
			func(providers.Delta) { cancel() })
		cancel()
		if providers.ClassOf(err) != providers.ClassCancelled {
			t.Fatalf("Stream() = %v, want cancelled", err)
		}
		t.Logf("cancelled after %v", time.Since(began))
	})
}
