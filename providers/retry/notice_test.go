package retry

import (
	"context"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"lemo/providers"
)

// A retried call tells whoever watches it why it waits and how long,
// outside the call's output: a notice does not stop later retries.
func TestDoEmitsARetryNotice(t *testing.T) {
	limited := &providers.Error{Provider: "p", Class: providers.ClassRateLimit, RetryAfter: 10 * time.Millisecond}
	n := 0
	var got []providers.Delta
	_, err := Policy{MaxAttempts: 3}.Do(context.Background(), zerolog.Nop(), "p", func(d providers.Delta) { got = append(got, d) },
		func(ctx context.Context, emit func(providers.Delta)) (*providers.Response, error) {
			n++
			if n < 3 {
				return nil, limited
			}
			return &providers.Response{}, nil
		})
	if err != nil || n != 3 {
		t.Fatalf("Do = %v after %d attempts, want success after 3", err, n)
	}
	if len(got) != 2 || got[0].Kind != providers.DeltaNotice || got[0].Text != "rate limited, retrying in 10ms" {
		t.Fatalf("deltas = %+v, want two notices", got)
	}
}

func TestRetryNotice(t *testing.T) {
	for _, tc := range []struct {
		class providers.Class
		wait  time.Duration
		want  string
	}{
		{providers.ClassRateLimit, 2 * time.Second, "rate limited, retrying in 2s"},
		{providers.ClassRateLimit, 1400 * time.Millisecond, "rate limited, retrying in 1s"},
		{providers.ClassTransient, 730 * time.Millisecond, "the model call failed (" + providers.ClassTransient.String() + "), retrying in 700ms"},
	} {
		if got := RetryNotice(tc.class, tc.wait); got != tc.want {
			t.Errorf("RetryNotice(%v, %v) = %q, want %q", tc.class, tc.wait, got, tc.want)
		}
	}
}
