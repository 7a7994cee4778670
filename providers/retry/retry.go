package retry

import (
	"context"
	"errors"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"lemo/excerpt"
	"lemo/providers"
)

// Defaults applied by Policy.withDefaults to zero fields.
const (
	DefaultMaxAttempts   = 3
	DefaultMaxRetryAfter = 30 * time.Second
	DefaultBaseDelay     = 500 * time.Millisecond
	DefaultMaxDelay      = 8 * time.Second
	// MaxMessageBytes bounds the provider text kept in an *providers.Error.
	MaxMessageBytes = 500
)

// Policy says how often and how long to retry a failed call.
type Policy struct {
	// MaxAttempts is the total number of attempts, the first included
	// (0 means DefaultMaxAttempts; 1 disables retries).
	MaxAttempts int
	// MaxRetryAfter caps the wait a provider may ask for with Retry-After;
	// a longer Retry-After fails at once with the rate-limit error (0 means
	// DefaultMaxRetryAfter).
	MaxRetryAfter time.Duration
	// BaseDelay and MaxDelay bound the jittered exponential backoff used
	// when the provider did not say how long to wait (0 means the defaults).
	BaseDelay time.Duration
	MaxDelay  time.Duration
}

// Validate reports a negative field, naming it.
func (p Policy) Validate(prefix string) error {
	var errs []error
	if p.MaxAttempts < 0 {
		errs = append(errs, errors.New(prefix+"MaxAttempts: must be 0 (default 3) or a positive attempt count"))
	}
	if p.MaxRetryAfter < 0 {
		errs = append(errs, errors.New(prefix+"MaxRetryAfter: must be 0 (default 30s) or a positive duration"))
	}
	if p.BaseDelay < 0 {
		errs = append(errs, errors.New(prefix+"BaseDelay: must be 0 (default 500ms) or a positive duration"))
	}
	if p.MaxDelay < 0 {
		errs = append(errs, errors.New(prefix+"MaxDelay: must be 0 (default 8s) or a positive duration"))
	}
	return errors.Join(errs...)
}

// WithDefaults returns p with every zero field set to its default.
func (p Policy) WithDefaults() Policy {
	if p.MaxAttempts == 0 {
		p.MaxAttempts = DefaultMaxAttempts
	}
	if p.MaxRetryAfter == 0 {
		p.MaxRetryAfter = DefaultMaxRetryAfter
	}
	if p.BaseDelay == 0 {
		p.BaseDelay = DefaultBaseDelay
	}
	if p.MaxDelay == 0 {
		p.MaxDelay = DefaultMaxDelay
	}
	if p.MaxDelay < p.BaseDelay {
		p.MaxDelay = p.BaseDelay
	}
	return p
}

// Attempt runs one try of a call. It must report output through emit (text
// and reasoning deltas) and set OutputStarted on its *providers.Error when it
// had seen any other output (a tool call) before failing.
type Attempt func(ctx context.Context, emit func(providers.Delta)) (*providers.Response, error)

// Do runs attempt until it succeeds, fails with a class that is not
// retryable, fails after output was emitted, or the attempts are used up.
// Waits honour ctx; a cancelled wait returns providers.Cancelled(provider).
// Every error returned is an *providers.Error. Each retry is logged at warn
// level on log (the zero Logger logs nothing).
func (p Policy) Do(ctx context.Context, log zerolog.Logger, provider string, emit func(providers.Delta), attempt Attempt) (*providers.Response, error) {
	p = p.WithDefaults()
	if emit == nil {
		emit = func(providers.Delta) {}
	}
	for n := 1; ; n++ {
		emitted := false
		resp, err := attempt(ctx, func(d providers.Delta) {
			emitted = true
			emit(d)
		})
		if err == nil {
			return resp, nil
		}
		pe := AsError(provider, err)
		if emitted {
			pe.OutputStarted = true
		}
		if ctx.Err() != nil && pe.Class != providers.ClassCancelled {
			return nil, providers.Cancelled(provider, ctx.Err())
		}
		if !pe.Class.Retryable() || pe.OutputStarted || n >= p.MaxAttempts {
			return nil, pe
		}
		wait := p.delay(n)
		if pe.RetryAfter > 0 {
			if pe.RetryAfter > p.MaxRetryAfter {
				return nil, pe
			}
			wait = pe.RetryAfter
		}
		log.Warn().Str("provider", provider).Int("attempt", n).Stringer("class", pe.Class).Int("status", pe.Status).
			Dur("wait", wait).Str("error", pe.Error()).Msg("retrying model call")
		// Said to whoever watches the call, outside the attempt's output
		// (it does not count as output started).
		emit(providers.Delta{Kind: providers.DeltaNotice, Text: RetryNotice(pe.Class, wait)})
		if err := sleep(ctx, wait); err != nil {
			return nil, providers.Cancelled(provider, err)
		}
	}
}

// RetryNotice is what a person watching a call reads while it waits to be
// retried: "rate limited, retrying in 2s".
func RetryNotice(c providers.Class, wait time.Duration) string {
	why := "the model call failed (" + c.String() + ")"
	if c == providers.ClassRateLimit {
		why = "rate limited"
	}
	switch {
	case wait >= time.Second:
		wait = wait.Round(time.Second)
	case wait >= 100*time.Millisecond:
		wait = wait.Round(100 * time.Millisecond)
	default:
		wait = wait.Round(time.Millisecond)
	}
	return why + ", retrying in " + wait.String()
}

// delay is the full-jitter exponential backoff before attempt n+1.
func (p Policy) delay(n int) time.Duration {
	d := p.BaseDelay
	for i := 1; i < n && d < p.MaxDelay; i++ {
		d *= 2
	}
	d = min(d, p.MaxDelay)
	// Half fixed, half random: never zero, never in lock-step.
	return d/2 + rand.N(d/2+1)
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// AsError returns err as an *providers.Error of provider: the one in its
// chain, a cancelled error for context errors, else a transient one.
func AsError(provider string, err error) *providers.Error {
	var pe *providers.Error
	if errors.As(err, &pe) {
		return pe
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return providers.Cancelled(provider, err)
	}
	return &providers.Error{Provider: provider, Class: providers.ClassTransient, Err: err}
}

// ParseRetryAfter reads a Retry-After header given in seconds or as an
// HTTP-date relative to now; 0 when absent, malformed or in the past.
func ParseRetryAfter(h http.Header, now time.Time) time.Duration {
	v := strings.TrimSpace(h.Get("Retry-After"))
	if v == "" {
		return 0
	}
	if secs, err := strconv.ParseFloat(v, 64); err == nil {
		if secs <= 0 || secs > 1e6 {
			return 0
		}
		return time.Duration(secs * float64(time.Second))
	}
	if t, err := http.ParseTime(v); err == nil {
		if d := t.Sub(now); d > 0 {
			return d
		}
	}
	return 0
}

// ClassForStatus maps an HTTP status and the provider's message to a
// class. Message patterns refine the status: a 400 that says the context
// is too long is ClassContextOverflow, a 429 about a usage limit is
// ClassQuota.
func ClassForStatus(status int, msg string) providers.Class {
	m := strings.ToLower(msg)
	switch {
	case isOverflow(m):
		return providers.ClassContextOverflow
	case status == http.StatusUnauthorized || status == http.StatusForbidden:
		return providers.ClassAuth
	case status == http.StatusPaymentRequired:
		return providers.ClassQuota
	case status == http.StatusTooManyRequests:
		if isQuota(m) {
			return providers.ClassQuota
		}
		return providers.ClassRateLimit
	case status == http.StatusNotFound:
		return providers.ClassModelNotFound
	case status == http.StatusRequestEntityTooLarge:
		return providers.ClassContextOverflow
	case status == http.StatusRequestTimeout || status == 499 || status >= 500:
		if status == http.StatusInternalServerError && strings.Contains(m, "failed to decode json body") {
			return providers.ClassBadRequest // NVIDIA answers a malformed body with a 500
		}
		return providers.ClassTransient
	case status >= 400:
		if isModelNotFound(m) {
			return providers.ClassModelNotFound
		}
		return providers.ClassBadRequest
	}
	return providers.ClassTransient
}

func isOverflow(m string) bool {
	for _, s := range []string{"maximum context length", "context_length_exceeded", "exceeds the context length",
		"context length exceeded", "prompt is too long", "too many tokens", "context window"} {
		if strings.Contains(m, s) {
			return true
		}
	}
	return false
}

func isQuota(m string) bool {
	for _, s := range []string{"usage limit", "quota", "credits", "insufficient", "upgrade"} {
		if strings.Contains(m, s) {
			return true
		}
	}
	return false
}

func isModelNotFound(m string) bool {
	for _, s := range []string{"not a valid model", "model_not_found", "model not found", "does not exist"} {
		if strings.Contains(m, s) {
			return true
		}
	}
	return strings.HasPrefix(m, "model ") && strings.Contains(m, "not found")
}

// CleanMessage makes provider text safe to keep in an error: every
// occurrence of secret is replaced, markup is dropped from an HTML body
// (proxies answer 502s with HTML pages), control characters become spaces,
// runs of spaces collapse, and the result is cut at MaxMessageBytes on a
// rune boundary.
func CleanMessage(msg, secret string) string {
	if secret != "" {
		msg = strings.ReplaceAll(msg, secret, "[redacted]")
	}
	if strings.HasPrefix(strings.TrimSpace(msg), "<") {
		msg = stripTags(msg)
	}
	msg = strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return ' '
		}
		return r
	}, strings.TrimSpace(msg))
	msg = strings.Join(strings.Fields(msg), " ")
	if len(msg) <= MaxMessageBytes {
		return msg
	}
	return excerpt.Head(msg, MaxMessageBytes) + excerpt.Ellipsis
}

// stripTags removes <...> sequences.
func stripTags(s string) string {
	var b strings.Builder
	in := false
	for _, r := range s {
		switch {
		case r == '<':
			in = true
		case r == '>' && in:
			in = false
			b.WriteByte(' ')
		case !in:
			b.WriteRune(r)
		}
	}
	return b.String()
}
