package tests

import (
	"fmt"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A daemon that can run no Task says so at startup, with what to do (the
// demo models, lemo models, Ollama or a key), and lemo run without a model
// points to the same; with the demo models on it names them usable.
func TestStartupSaysWhichProvidersAreUsable(t *testing.T) {
	// A port nothing listens on: Ollama "is not running".
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := l.Addr().String()
	l.Close()

	data := filepath.Join(t.TempDir(), "data")
	d := launchDaemonEnv(t, lemoBin, data, []string{"LEMO_OLLAMA_BASE_URL=http://" + closed})
	d.waitServing()
	eventually(t, 30*time.Second, func() error {
		logs := d.logs()
		for _, want := range []string{"provider not usable", "no model provider is usable", "LEMO_FAKE_ENABLED=true", "lemo models"} {
			if !strings.Contains(logs, want) {
				return fmt.Errorf("the log lacks %q:\n%s", want, logs)
			}
		}
		return nil
	})
	out, code := lemo(t, cleanEnv("LEMO_DATA="+data), "run", "hello")
	if code == 0 || !strings.Contains(out, "LEMO_FAKE_ENABLED=true") || !strings.Contains(out, "lemo models") {
		t.Fatalf("lemo run without a model: exit %d, want an error pointing to the demo models and lemo models:\n%s", code, out)
	}
	d.stop()

	demo := startDaemon(t, filepath.Join(t.TempDir(), "data"))
	eventually(t, 30*time.Second, func() error {
		logs := demo.logs()
		if !strings.Contains(logs, `"provider":"fake"`) || !strings.Contains(logs, "provider usable") {
			return fmt.Errorf("the log does not name fake usable:\n%s", logs)
		}
		if strings.Contains(logs, "no model provider is usable") {
			return fmt.Errorf("the log says none is usable:\n%s", logs)
		}
		return nil
	})
}
