// Package tiny starts the shared tiny-ollama kit for tests: a real Ollama
// server (v0.17.4) with a tiny deterministic model, so the Ollama provider
// and the OpenAI-compatible core are checked against the real wire format,
// not only against our own fakes.
//
// Lifecycle:
//  1. make test builds the kit once (../shared/tools/tiny-ollama/build.sh,
//     cached in the user's cache folder).
//  2. Start runs its start.sh on a free loopback port with a state folder of
//     the test's own, and stops the server (and its runners) at cleanup.
//  3. Server.URL is the native API's base URL (URL+"/v1" the
//     OpenAI-compatible one); Server.Requests returns the request bodies a
//     recording proxy in front of the server saw, when started with
//     Record, and Request.Ended/ClientGone tell how each ended.
//  4. CheckCancel is the cancel check every provider over the kit runs.
//
// Outside CI a test skips, saying why, when the kit or its binary is
// missing; with CI=true it fails instead, so CI never passes without
// running against the real server.
//
// Example:
//
//	srv := tiny.Start(t, tiny.Options{Record: true})
//	p, _ := ollama.New(ollama.Config{BaseURL: srv.URL})
package tiny

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"sync"
	"testing"
	"time"

	"lemo/providers"
)

// Options tune a server.
type Options struct {
	// Record puts a recording reverse proxy in front of the server; URL
	// then points at the proxy.
	Record bool
}

// Request is one request the recording proxy forwarded.
type Request struct {
	Method, Path string
	Body         []byte
	// Ended is closed when the proxy has finished the request.
	Ended <-chan struct{}

	end *requestEnd
}

type requestEnd struct {
	done       chan struct{}
	clientGone bool // written before done is closed
}

// ClientGone reports whether the request ended because its client closed
// the connection (for a streaming answer: the client cancelled it) rather
// than because the server finished the answer. Valid once Ended is closed.
func (r Request) ClientGone() bool {
	<-r.Ended
	return r.end.clientGone
}

// Server is a running tiny-ollama server.
type Server struct {
	// URL is the base URL of the native API (the proxy's when recording).
	URL string
	// Direct is the server's own base URL.
	Direct string

	state    string
	mu       sync.Mutex
	requests []Request
}

// Log returns the server's log (server and runners) so far, for failure
// messages.
func (s *Server) Log() string {
	b, err := os.ReadFile(filepath.Join(s.state, "serve.log"))
	if err != nil {
		return "(no serve.log: " + err.Error() + ")"
	}
	return string(b)
}

// Requests returns the requests the proxy saw so far.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.requests...)
}

// DefaultMarch is the CPU level the kit's Ollama is built for on x86-64
// unless TINY_OLLAMA_MARCH says otherwise; the Makefile's tiny-ollama target
// builds it so. The kit's own default, -march=native, does not link on a
// CPU with AMX (Ollama 0.17.4's ggml leaves the AMX buffer type out of its
// cgo build but still calls it).
const DefaultMarch = "x86-64-v3"

// Kit returns the kit's folder: $TINY_OLLAMA_KIT, else shared/tools/tiny-ollama
// beside the repository's checkout.
func Kit() (string, error) {
	if k := os.Getenv("TINY_OLLAMA_KIT"); k != "" {
		return k, nil
	}
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return filepath.Join(filepath.Dir(dir), "shared", "tools", "tiny-ollama"), nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no go.mod above the working folder")
		}
		dir = parent
	}
}

func unavailable(t testing.TB, why string) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatalf("tiny-ollama: %s; under CI=true these tests must run (make test builds the kit)", why)
	}
	t.Skipf("tiny-ollama: %s; run make test (it builds the kit) to run against a real Ollama", why)
}

// Start starts a server for the test and stops it at cleanup.
func Start(t testing.TB, o Options) *Server {
	t.Helper()
	if testing.Short() {
		unavailable(t, "skipped with -short")
	}
	kit, err := Kit()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(kit, "start.sh")); err != nil {
		unavailable(t, "kit not found at "+kit)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	state := t.TempDir()
	cmd := exec.Command(filepath.Join(kit, "start.sh"), strconv.Itoa(port), state)
	cmd.Env = append(os.Environ(), "TINY_OLLAMA_NO_BUILD=1")
	if os.Getenv("TINY_OLLAMA_MARCH") == "" && runtime.GOARCH == "amd64" {
		cmd.Env = append(cmd.Env, "TINY_OLLAMA_MARCH="+DefaultMarch)
	}
	if out, err := cmd.CombinedOutput(); err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) && ee.ExitCode() == 3 {
			unavailable(t, "its binary is not built (run "+filepath.Join(kit, "build.sh")+")")
		}
		t.Fatalf("tiny-ollama start.sh: %v\n%s", err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command(filepath.Join(kit, "stop.sh"), state).CombinedOutput(); err != nil {
			t.Errorf("tiny-ollama stop.sh: %v\n%s", err, out)
		}
	})
	s := &Server{Direct: fmt.Sprintf("http://127.0.0.1:%d", port), state: state}
	s.URL = s.Direct
	if o.Record {
		target, _ := url.Parse(s.Direct)
		proxy := httputil.NewSingleHostReverseProxy(target)
		proxy.FlushInterval = -1 // stream every chunk at once
		ps := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			body, _ := io.ReadAll(r.Body)
			r.Body = io.NopCloser(bytes.NewReader(body))
			end := &requestEnd{done: make(chan struct{})}
			s.mu.Lock()
			s.requests = append(s.requests, Request{Method: r.Method, Path: r.URL.Path, Body: body, Ended: end.done, end: end})
			s.mu.Unlock()
			// Deferred: the proxy panics with http.ErrAbortHandler when a
			// streamed copy fails. The server cancels a request's context
			// when its client goes away, and only after the handler returns
			// otherwise.
			defer func() {
				end.clientGone = r.Context().Err() != nil
				close(end.done)
			}()
			proxy.ServeHTTP(w, r)
		}))
		t.Cleanup(ps.Close)
		s.URL = ps.URL
	}
	return s
}

// CheckCancel streams the kit's endless answer ("sing forever") from m and
// cancels it at the first delta. The answer ends only through the cancel,
// so Stream must return a cancelled error, and promptly after the cancel
// however long the answer took to start.
func CheckCancel(t testing.TB, m providers.Model) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var cancelled time.Time
	req := &providers.Request{Messages: []providers.Message{{Role: providers.RoleUser, Content: "sing forever"}}}
	_, err := m.Stream(ctx, req, func(providers.Delta) {
		if cancelled.IsZero() {
			cancelled = time.Now()
			cancel()
		}
	})
	if providers.ClassOf(err) != providers.ClassCancelled || cancelled.IsZero() || time.Since(cancelled) > 10*time.Second {
		t.Fatalf("Stream() = %v %v after the cancel, want cancelled promptly", err, time.Since(cancelled))
	}
}

// CheckEmbed embeds with the kit's tiny-embed through e: one 384-dimension
// vector per text, in order (equal texts get equal vectors, different ones
// different), and an unknown model is an error.
func CheckEmbed(t testing.TB, e providers.Embedder) {
	t.Helper()
	ctx := context.Background()
	vecs, err := e.Embed(ctx, "tiny-embed", []string{"hello world", "forever", "hello world"})
	if err != nil {
		t.Fatal(err)
	}
	if len(vecs) != 3 || len(vecs[0]) != 384 || len(vecs[1]) != 384 {
		t.Fatalf("Embed = %d vectors of %d dimensions, want 3 of 384", len(vecs), len(vecs[0]))
	}
	same, other := 0.0, 0.0
	for i := range vecs[0] {
		same += float64(vecs[0][i] * vecs[2][i])
		other += float64(vecs[0][i] * vecs[1][i])
	}
	if same < 0.999 || other > 0.999 {
		t.Fatalf("cosine of equal texts %v, of different ones %v", same, other)
	}
	if _, err := e.Embed(ctx, "nope", []string{"x"}); err == nil {
		t.Fatal("Embed with an unknown model succeeded")
	}
}
