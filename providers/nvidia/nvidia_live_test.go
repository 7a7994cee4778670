//go:build live

package nvidia

import (
	"os"
	"testing"

	"lemo/providers/fake"
)

// TestLive runs against NVIDIA NIM (LEMO_LIVE_NVIDIA_MODEL overrides the
// model).
func TestLive(t *testing.T) {
	key := os.Getenv(EnvAPIKey)
	if key == "" {
		t.Skip("set " + EnvAPIKey + " to run")
	}
	model := os.Getenv("LEMO_LIVE_NVIDIA_MODEL")
	if model == "" {
		model = "meta/llama-3.3-70b-instruct"
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
