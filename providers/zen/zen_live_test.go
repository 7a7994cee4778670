//go:build live

package zen

import (
	"os"
	"testing"

	"lemo/providers/fake"
)

// TestLive runs against OpenCode Zen (LEMO_LIVE_ZEN_MODEL overrides the
// model).
func TestLive(t *testing.T) {
	key := os.Getenv(EnvAPIKey)
	if key == "" {
		t.Skip("set " + EnvAPIKey + " to run")
	}
	model := os.Getenv("LEMO_LIVE_ZEN_MODEL")
	if model == "" {
		model = "big-pickle"
	}
	p, err := New(Config{APIKey: key})
	if err != nil {
		t.Fatal(err)
	}
	wrong, err := New(Config{APIKey: "lemo-live-wrong-key"})
	if err != nil {
		t.Fatal(err)
	}
	fake.RunLive(t, p, fake.Live{Model: model, WrongKey: wrong})
}
