package fake

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"lemo/providers"
)

// Live names what RunLive needs beyond the provider under test.
type Live struct {
	// Model is the model to run the scenarios on.
	Model string
	// WrongKey, when set, is the same provider configured with a key the
	// service must refuse (nil for a local Ollama, which takes no key).
	WrongKey providers.Provider
}

// RunLive runs the conformance scenarios that make sense against a real
// service (opt-in live tests, build tag "live"): discovery, a streamed
// answer, reasoning where the model reasons, a tool round trip with Lemo's
// call ids, cancellation, an unknown model and a refused key mapped to
// their classes. Truncated streams and server errors cannot be provoked on
// a real service; the fakes cover them.
func RunLive(t *testing.T, p providers.Provider, l Live) {
	model := l.Model
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

	t.Run("reasoning", func(t *testing.T) {
		if !m.Info().Reasoning {
			t.Skip("model does not reason")
		}
		var deltas int
		resp, err := m.Stream(ctx, &providers.Request{Think: true, Messages: []providers.Message{{Role: providers.RoleUser, Content: "Is 91 a prime number? Think, then answer yes or no."}}},
			func(d providers.Delta) {
				if d.Kind == providers.DeltaReasoning {
					deltas++
				}
			})
		if err != nil || resp.Reasoning == "" || deltas == 0 {
			t.Fatalf("Stream() = %+v, %v (%d reasoning deltas); want reasoning", resp, err, deltas)
		}
	})

	t.Run("unknown model", func(t *testing.T) {
		um, err := p.Model(ctx, "lemo-no-such-model-"+time.Now().Format("150405"))
		if err == nil {
			_, err = um.Stream(ctx, &providers.Request{Messages: []providers.Message{{Role: providers.RoleUser, Content: "hi"}}}, nil)
		}
		if providers.ClassOf(err) != providers.ClassModelNotFound {
			t.Fatalf("an unknown model: %v (class %v), want model not found", err, providers.ClassOf(err))
		}
	})

	t.Run("wrong key", func(t *testing.T) {
		if l.WrongKey == nil {
			t.Skip("this service takes no key")
		}
		_, err := l.WrongKey.Models(ctx)
		if err == nil {
			var wm providers.Model
			if wm, err = l.WrongKey.Model(ctx, model); err == nil {
				_, err = wm.Stream(ctx, &providers.Request{Messages: []providers.Message{{Role: providers.RoleUser, Content: "hi"}}}, nil)
			}
		}
		if providers.ClassOf(err) != providers.ClassAuth {
			t.Fatalf("a refused key: %v (class %v), want auth", err, providers.ClassOf(err))
		}
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
