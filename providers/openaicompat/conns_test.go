package openaicompat

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"lemo/providers"
	"lemo/providers/fake"
)

// Many Tasks calling one server at once reuse their connections: a second
// round of concurrent calls opens none. With Go's default of 2 idle
// connections per host, 50 Tasks opened 583 connections for 1,000 calls.
func TestConcurrentCallsReuseConnections(t *testing.T) {
	const calls = 20
	f, err := fake.NewServer(fake.Options{Flavor: fake.FlavorOpenAI})
	if err != nil {
		t.Fatal(err)
	}
	// The handler holds each chat request until the round's every call
	// has arrived, so a round really has calls connections in use at once.
	var (
		mu      sync.Mutex
		arrived int
		all     = make(chan struct{})
	)
	var opened atomic.Int64
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v1/chat/completions" {
			mu.Lock()
			arrived++
			if arrived == calls {
				close(all)
			}
			round := all
			mu.Unlock()
			select {
			case <-round:
			case <-r.Context().Done():
				return
			}
		}
		f.ServeHTTP(w, r)
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			opened.Add(1)
		}
	}
	srv.Start()
	t.Cleanup(srv.Close)
	p := newPlain(t, fake.ProviderParams{BaseURL: srv.URL + "/v1"})
	m, err := p.Model(context.Background(), "local-model")
	if err != nil {
		t.Fatal(err)
	}
	round := func() {
		t.Helper()
		var wg sync.WaitGroup
		errs := make(chan error, calls)
		for range calls {
			wg.Add(1)
			go func() {
				defer wg.Done()
				req := &providers.Request{Messages: []providers.Message{{Role: providers.RoleUser, Content: "hello"}}}
				if _, err := m.Stream(context.Background(), req, func(providers.Delta) {}); err != nil {
					errs <- err
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
	}
	round()
	first := opened.Load()
	mu.Lock()
	arrived, all = 0, make(chan struct{})
	mu.Unlock()
	round()
	if got := opened.Load(); got != first {
		t.Fatalf("the second round of %d concurrent calls opened %d new connections (%d in the first); want none: the first round's connections are kept idle for reuse", calls, got-first, first)
	}
}

// A TLS server that offers HTTP/2 is spoken to in HTTP/2 (one connection
// for many concurrent streams), though the transport has its own dialer
// and timeouts, which otherwise turn HTTP/2 off.
func TestHTTP2WhereOffered(t *testing.T) {
	protos := make(chan int, 1)
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case protos <- r.ProtoMajor:
		default:
		}
	}))
	srv.EnableHTTP2 = true
	srv.StartTLS()
	t.Cleanup(srv.Close)
	c := HTTPClient(nil, 5*time.Second)
	tr := c.Transport.(*http.Transport)
	defer tr.CloseIdleConnections()
	// Trust the test server's certificate, as a real one is trusted by
	// the system's roots.
	tr.TLSClientConfig = srv.Client().Transport.(*http.Transport).TLSClientConfig.Clone()
	resp, err := c.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.ProtoMajor != 2 || <-protos != 2 {
		t.Fatalf("answered in %s, want HTTP/2", resp.Proto)
	}
}

// An answer's [DONE] may reach the client a moment before the end of the
// response (a real server flushes every event; the chunked body's end
// follows in another write): the stream reads to that end, so the next
// call reuses the connection instead of opening one.
func TestConnectionReusedAfterLateEnd(t *testing.T) {
	f, err := fake.NewServer(fake.Options{Flavor: fake.FlavorOpenAI})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/chat/completions" {
			f.ServeHTTP(w, r) // the model list
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, "data: {\"choices\":[{\"delta\":{\"content\":\"hi\"},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n")
		w.(http.Flusher).Flush()
		time.Sleep(20 * time.Millisecond) // the end of the body comes late
	}))
	t.Cleanup(srv.Close)
	p := newPlain(t, fake.ProviderParams{BaseURL: srv.URL + "/v1"})
	m, err := p.Model(context.Background(), "local-model")
	if err != nil {
		t.Fatal(err)
	}
	var reused []bool
	ctx := httptrace.WithClientTrace(context.Background(), &httptrace.ClientTrace{
		GotConn: func(i httptrace.GotConnInfo) { reused = append(reused, i.Reused) }})
	for range 3 {
		req := &providers.Request{Messages: []providers.Message{{Role: providers.RoleUser, Content: "hello"}}}
		if _, err := m.Stream(ctx, req, nil); err != nil {
			t.Fatal(err)
		}
	}
	if len(reused) != 3 || !reused[1] || !reused[2] {
		t.Fatalf("GotConn reused = %v, want the connection reused by calls 2 and 3", reused)
	}
}

// writeCounter counts the writes made on the connections it dials.
type writeCounter struct {
	net.Conn
	writes *atomic.Int64
}

func (c writeCounter) Write(b []byte) (int, error) {
	c.writes.Add(1)
	return c.Conn.Write(b)
}

// A chat request of 20 KiB, headers and body, leaves in one write (two,
// with a copy buffer allocated for the body's rest, on Go's default 4 KiB
// write buffer).
func TestRequestLeavesInOneWrite(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
	}))
	t.Cleanup(srv.Close)
	c := HTTPClient(nil, 5*time.Second)
	tr := c.Transport.(*http.Transport)
	t.Cleanup(tr.CloseIdleConnections)
	var writes atomic.Int64
	dial := tr.DialContext
	tr.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		conn, err := dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return writeCounter{Conn: conn, writes: &writes}, nil
	}
	body := providers.Body{[]byte(`{"messages":"`), make([]byte, 20<<10), []byte(`"}`)}
	for i := range body[1] {
		body[1][i] = 'a'
	}
	for round := range 3 {
		req, err := body.NewRequest(context.Background(), http.MethodPost, srv.URL)
		if err != nil {
			t.Fatal(err)
		}
		writes.Store(0)
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if got := writes.Load(); got != 1 {
			t.Fatalf("round %d: the request took %d writes, want 1", round, got)
		}
	}
}
