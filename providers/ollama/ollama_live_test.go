//go:build live

package ollama

import (
	"os"
	"testing"

	"lemo/providers/fake"
)

// TestLive runs against a real Ollama: OLLAMA_API_KEY selects Ollama Cloud,
// else OLLAMA_HOST a local server. LEMO_LIVE_OLLAMA_MODEL names the model.
func TestLive(t *testing.T) {
	key, host, model := os.Getenv(EnvAPIKey), os.Getenv(EnvHost), os.Getenv("LEMO_LIVE_OLLAMA_MODEL")
	if key == "" && host == "" {
		t.Skip("set OLLAMA_API_KEY (Cloud) or OLLAMA_HOST (local) to run")
	}
	cfg := Config{APIKey: key}
	if key != "" {
		cfg.BaseURL = CloudBaseURL
		if model == "" {
			model = "gpt-oss:20b"
		}
	} else {
		u, err := ParseHost(host)
		if err != nil {
			t.Fatal(err)
		}
		cfg.BaseURL = u
		if model == "" {
			t.Skip("set LEMO_LIVE_OLLAMA_MODEL to a pulled model")
		}
	}
	t.Setenv("OLLAMA_AUTH", "")
	p, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	l := fake.Live{Model: model}
	if key != "" { // Ollama Cloud refuses a wrong key; a local server takes none
		wrong := cfg
		wrong.APIKey = "lemo-live-wrong-key"
		if l.WrongKey, err = New(wrong); err != nil {
			t.Fatal(err)
		}
	}
	fake.RunLive(t, p, l)
}
