package providers

import (
	"errors"
	"fmt"
	"io"
	"sync/atomic"
	"time"
)

// DefaultIdleTimeout is how long a stream may send nothing before it is
// given up. Servers that think silently still send keep-alive comments
// (OpenRouter) or tokens; two minutes of no byte at all is a dead stream.
const DefaultIdleTimeout = 2 * time.Minute

// ErrStreamIdle is wrapped by the error of a stream that sent nothing for
// its idle timeout. Providers classify it as transient: retried only when
// no output had streamed yet.
var ErrStreamIdle = errors.New("providers: the stream sent nothing for the idle timeout")

// IdleBody is a response body that closes itself when no byte has arrived
// for its timeout, so that a read blocked on a stalled stream returns. It
// is how a provider bounds the gaps of a stream whose total length is
// unbounded (a context deadline would bound the whole answer instead).
type IdleBody struct {
	body  io.ReadCloser
	d     time.Duration
	timer *time.Timer
	fired atomic.Bool
}

// WatchIdle returns body watched for gaps longer than d (d > 0). The
// caller reads and closes the returned IdleBody instead of body.
func WatchIdle(body io.ReadCloser, d time.Duration) *IdleBody {
	b := &IdleBody{body: body, d: d}
	b.timer = time.AfterFunc(d, func() {
		b.fired.Store(true)
		_ = body.Close()
	})
	return b
}

// Read reads from the body and restarts the idle clock on every byte. A
// read that fails because the clock ran out returns an error wrapping
// ErrStreamIdle.
func (b *IdleBody) Read(p []byte) (int, error) {
	n, err := b.body.Read(p)
	if err != nil && b.fired.Load() {
		return n, fmt.Errorf("%w (nothing received for %v)", ErrStreamIdle, b.d)
	}
	if n > 0 {
		b.timer.Reset(b.d)
	}
	return n, err
}

// Drain reads and discards what is left of the body, up to max bytes,
// giving up after d without a byte. A body read to its end lets the
// transport keep the connection for the next request; one closed before
// (the end of a chunked response may follow the last event by a moment)
// loses it.
func (b *IdleBody) Drain(max int64, d time.Duration) {
	b.d = d
	b.timer.Reset(d)
	_, _ = io.CopyN(io.Discard, b, max)
}

// Close stops the clock and closes the body.
func (b *IdleBody) Close() error {
	b.timer.Stop()
	return b.body.Close()
}

// IdleMessage explains a stream given up after d of silence, naming the
// setting that changes it.
func IdleMessage(d time.Duration) string {
	return fmt.Sprintf("the stream sent nothing for %v and was given up (the provider's idle_timeout setting)", d)
}
