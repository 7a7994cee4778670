package retry

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"lemo/providers"
)

func TestDoRetriesOnlyBeforeOutput(t *testing.T) {
	fast := Policy{MaxAttempts: 3, BaseDelay: time.Millisecond, MaxDelay: time.Millisecond}
	transient := &providers.Error{Provider: "p", Class: providers.ClassTransient}
	cases := []struct {
		name     string
		attempts []func(emit func(providers.Delta)) error // nil entry: success
		wantN    int
		wantErr  providers.Class
	}{
		{"transient then success", []func(func(providers.Delta)) error{
			func(func(providers.Delta)) error { return transient }, nil}, 2, 0},
		{"gives up after MaxAttempts", []func(func(providers.Delta)) error{
			func(func(providers.Delta)) error { return transient },
			func(func(providers.Delta)) error { return transient },
			func(func(providers.Delta)) error { return transient }, nil}, 3, providers.ClassTransient},
		{"not after a delta", []func(func(providers.Delta)) error{
			func(emit func(providers.Delta)) error {
				emit(providers.Delta{Kind: providers.DeltaText, Text: "x"})
				return transient
			}, nil}, 1, providers.ClassTransient},
		{"not after a tool call", []func(func(providers.Delta)) error{
			func(func(providers.Delta)) error {
				return &providers.Error{Provider: "p", Class: providers.ClassTransient, OutputStarted: true}
			}, nil}, 1, providers.ClassTransient},
		{"not for auth", []func(func(providers.Delta)) error{
			func(func(providers.Delta)) error { return &providers.Error{Provider: "p", Class: providers.ClassAuth} }, nil}, 1, providers.ClassAuth},
		{"rate limit within cap", []func(func(providers.Delta)) error{
			func(func(providers.Delta)) error {
				return &providers.Error{Provider: "p", Class: providers.ClassRateLimit, RetryAfter: time.Millisecond}
			}, nil}, 2, 0},
		{"rate limit beyond cap", []func(func(providers.Delta)) error{
			func(func(providers.Delta)) error {
				return &providers.Error{Provider: "p", Class: providers.ClassRateLimit, RetryAfter: time.Hour}
			}, nil}, 1, providers.ClassRateLimit},
		{"plain error is transient", []func(func(providers.Delta)) error{
			func(func(providers.Delta)) error { return errors.New("reset") }, nil}, 2, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			n := 0
			var emitted int
			_, err := fast.Do(context.Background(), zerolog.Nop(), "p", func(providers.Delta) { emitted++ }, func(_ context.Context, emit func(providers.Delta)) (*providers.Response, error) {
				f := c.attempts[n]
				n++
				if f == nil {
					return &providers.Response{}, nil
				}
				return nil, f(emit)
			})
			if n != c.wantN {
				t.Fatalf("attempts = %d, want %d", n, c.wantN)
			}
			if c.wantErr == 0 && err != nil || c.wantErr != 0 && providers.ClassOf(err) != c.wantErr {
				t.Fatalf("Do() = %v, want class %v", err, c.wantErr)
			}
			var pe *providers.Error
			if err != nil && !errors.As(err, &pe) {
				t.Fatalf("Do() = %T, want *providers.Error", err)
			}
		})
	}
}

func TestDoCancelledDuringWait(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	p := Policy{MaxAttempts: 3, BaseDelay: time.Hour, MaxDelay: time.Hour}
	done := make(chan error, 1)
	go func() {
		_, err := p.Do(ctx, zerolog.Nop(), "p", nil, func(context.Context, func(providers.Delta)) (*providers.Response, error) {
			return nil, &providers.Error{Provider: "p", Class: providers.ClassTransient}
		})
		done <- err
	}()
	cancel()
	select {
	case err := <-done:
		if providers.ClassOf(err) != providers.ClassCancelled {
			t.Fatalf("Do() = %v, want cancelled", err)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("Do() did not return after cancel")
	}
}

func TestDelayJitteredAndCapped(t *testing.T) {
	p := Policy{BaseDelay: 100 * time.Millisecond, MaxDelay: 400 * time.Millisecond}.WithDefaults()
	for n := 1; n <= 6; n++ {
		want := min(100*time.Millisecond<<(n-1), 400*time.Millisecond)
		for range 50 {
			if d := p.delay(n); d < want/2 || d > want {
				t.Fatalf("delay(%d) = %v, want in [%v, %v]", n, d, want/2, want)
			}
		}
	}
}

func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	for v, want := range map[string]time.Duration{
		"":                              0,
		"7":                             7 * time.Second,
		"1.5":                           1500 * time.Millisecond,
		"-3":                            0,
		"soon":                          0,
		"Thu, 01 Jan 2026 12:01:00 GMT": time.Minute,
		"Thu, 01 Jan 2026 11:00:00 GMT": 0,
	} {
		h := http.Header{}
		if v != "" {
			h.Set("Retry-After", v)
		}
		if got := ParseRetryAfter(h, now); got != want {
			t.Errorf("ParseRetryAfter(%q) = %v, want %v", v, got, want)
		}
	}
}

func TestClassForStatus(t *testing.T) {
	for _, c := range []struct {
		status int
		msg    string
		want   providers.Class
	}{
		{400, "bad", providers.ClassBadRequest},
		{400, "This model's maximum context length is 8192 tokens", providers.ClassContextOverflow},
		{400, "x is not a valid model ID", providers.ClassModelNotFound},
		{401, "", providers.ClassAuth},
		{403, "", providers.ClassAuth},
		{402, "", providers.ClassQuota},
		{404, "", providers.ClassModelNotFound},
		{408, "", providers.ClassTransient},
		{413, "", providers.ClassContextOverflow},
		{429, "slow down", providers.ClassRateLimit},
		{429, "you've reached your hourly usage limit", providers.ClassQuota},
		{499, "request canceled", providers.ClassTransient},
		{500, "failed to decode json body: x", providers.ClassBadRequest},
		{503, "", providers.ClassTransient},
	} {
		if got := ClassForStatus(c.status, c.msg); got != c.want {
			t.Errorf("ClassForStatus(%d, %q) = %v, want %v", c.status, c.msg, got, c.want)
		}
	}
}

func TestCleanMessage(t *testing.T) {
	got := CleanMessage("key sk-123 bad\nline "+strings.Repeat("é", 600), "sk-123")
	if strings.Contains(got, "sk-123") || strings.Contains(got, "\n") || len(got) > MaxMessageBytes+len("…") {
		t.Fatalf("CleanMessage = %q (%d bytes)", got[:40], len(got))
	}
	if !strings.HasSuffix(got, "…") {
		t.Fatal("cut message has no ellipsis")
	}
}

func TestCleanMessageHTML(t *testing.T) {
	for in, want := range map[string]string{
		"<html>": "",
		"<html>\n<body>Bad Gateway</body>\n</html>": "Bad Gateway",
		"x <b> y": "x <b> y",
	} {
		if got := CleanMessage(in, ""); got != want {
			t.Errorf("CleanMessage(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestValidate(t *testing.T) {
	err := Policy{MaxAttempts: -1, MaxRetryAfter: -1, BaseDelay: -1, MaxDelay: -1}.Validate("x: Config.Retry.")
	for _, f := range []string{"MaxAttempts", "MaxRetryAfter", "BaseDelay", "MaxDelay"} {
		if err == nil || !strings.Contains(err.Error(), "x: Config.Retry."+f) {
			t.Errorf("Validate() = %v, want it to name %s", err, f)
		}
	}
}

func TestDoLogsRetriesWithoutSecrets(t *testing.T) {
	var buf strings.Builder
	log := zerolog.New(&buf)
	n := 0
	_, err := Policy{MaxAttempts: 2, BaseDelay: time.Millisecond}.Do(context.Background(), log, "p", nil,
		func(context.Context, func(providers.Delta)) (*providers.Response, error) {
			n++
			if n == 1 {
				return nil, &providers.Error{Provider: "p", Class: providers.ClassTransient, Status: 503, Message: "busy"}
			}
			return &providers.Response{}, nil
		})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(buf.String(), `"message":"retrying model call"`) || !strings.Contains(buf.String(), `"status":503`) {
		t.Fatalf("log = %s, want one retry line with the status", buf.String())
	}
}
