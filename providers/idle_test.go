package providers

import (
	"errors"
	"io"
	"testing"
	"time"
)

// stalled is a body that returns its data once, then blocks until closed,
// like a connection whose server stopped sending.
type stalled struct {
	data   []byte
	closed chan struct{}
}

func (s *stalled) Read(p []byte) (int, error) {
	if len(s.data) > 0 {
		n := copy(p, s.data)
		s.data = s.data[n:]
		return n, nil
	}
	<-s.closed
	return 0, errors.New("read on closed body")
}

func (s *stalled) Close() error {
	select {
	case <-s.closed:
	default:
		close(s.closed)
	}
	return nil
}

func TestIdleBodyEndsAStalledRead(t *testing.T) {
	raw := &stalled{data: []byte("first"), closed: make(chan struct{})}
	b := WatchIdle(raw, 20*time.Millisecond)
	defer b.Close()
	got, err := io.ReadAll(b)
	if string(got) != "first" {
		t.Fatalf("read %q before the stall, want %q", got, "first")
	}
	if !errors.Is(err, ErrStreamIdle) {
		t.Fatalf("ReadAll() error = %v, want ErrStreamIdle", err)
	}
}

func TestIdleBodyPassesAnOrdinaryEnd(t *testing.T) {
	b := WatchIdle(io.NopCloser(&onceReader{s: "all of it"}), time.Hour)
	got, err := io.ReadAll(b)
	if err != nil || string(got) != "all of it" {
		t.Fatalf("ReadAll() = %q, %v; want the body and no error", got, err)
	}
	if err := b.Close(); err != nil {
		t.Fatalf("Close() = %v", err)
	}
}

type onceReader struct{ s string }

func (r *onceReader) Read(p []byte) (int, error) {
	if r.s == "" {
		return 0, io.EOF
	}
	n := copy(p, r.s)
	r.s = r.s[n:]
	return n, nil
}
