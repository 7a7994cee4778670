//go:build live

package openrouter

import (
	"os"
	"strings"
	"testing"

	"lemo/providers/fake"
)

// TestLive runs against OpenRouter with a free model only
// (LEMO_LIVE_OPENROUTER_MODEL, which must end in ":free").
func TestLive(t *testing.T) {
	key := os.Getenv(EnvAPIKey)
	if key == "" {
		t.Skip("set " + EnvAPIKey + " to run")
	}
	model := os.Getenv("LEMO_LIVE_OPENROUTER_MODEL")
	if model == "" {
		model = "meta-llama/llama-3.3-70b-instruct:free"
	}
	if !strings.HasSuffix(model, ":free") {
		t.Fatalf("live tests use free models only; %q does not end in :free", model)
	}
	p, err := New(Config{APIKey: key, Title: "Lemo live test"})
	if err != nil {
		t.Fatal(err)
	}
	wrong, err := New(Config{APIKey: "lemo-live-wrong-key", Title: "Lemo live test"})
	if err != nil {
		t.Fatal(err)
	}
	fake.RunLive(t, p, fake.Live{Model: model, WrongKey: wrong})
}
