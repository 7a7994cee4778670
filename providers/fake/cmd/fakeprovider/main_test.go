package main

import (
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// syncBuffer is written by run and read by the test.
type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func TestRunServesScript(t *testing.T) {
	script := filepath.Join(t.TempDir(), "s.json")
	if err := os.WriteFile(script, []byte(`{"scenarios":[{"match":"ping","text":["pong"]}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var out syncBuffer
	done := make(chan error, 1)
	go func() { done <- run(ctx, []string{"-flavor", "zen", "-script", script}, &out) }()
	deadline := time.Now().Add(5 * time.Second)
	for !strings.Contains(out.String(), "\n") {
		if time.Now().After(deadline) {
			t.Fatal("no FAKE_URL line within 5s")
		}
		time.Sleep(5 * time.Millisecond)
	}
	url := strings.TrimSpace(strings.TrimPrefix(out.String(), "FAKE_URL="))
	if !strings.HasSuffix(url, "/zen/v1") {
		t.Fatalf("url = %q, want the zen prefix", url)
	}
	resp, err := http.Post(url+"/chat/completions", "application/json", strings.NewReader(`{"model":"big-pickle","messages":[{"role":"user","content":"ping"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(body), `"pong"`) {
		t.Fatalf("body = %s, want pong", body)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("run() = %v", err)
	}
	http.DefaultClient.CloseIdleConnections()
}

func TestRunRejectsBadFlavor(t *testing.T) {
	if err := run(context.Background(), []string{"-flavor", "nope"}, io.Discard); err == nil {
		t.Fatal("run(-flavor nope) = nil error")
	}
}
