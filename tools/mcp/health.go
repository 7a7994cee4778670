package mcp

import "time"

// RestartPolicy says when a server that died is started again.
type RestartPolicy struct {
	// Backoff is the wait before the first restart after a death; it
	// doubles with each further death within Window, up to MaxBackoff.
	Backoff, MaxBackoff time.Duration
	// Window is how long a death counts; FailAfter deaths (failed starts
	// included) within it mark the server failed until the oldest of
	// them leaves the window.
	Window    time.Duration
	FailAfter int
}

// DefaultRestartPolicy: 500ms doubling to 30s; failed after 5 deaths
// within 2 minutes.
var DefaultRestartPolicy = RestartPolicy{Backoff: 500 * time.Millisecond, MaxBackoff: 30 * time.Second, Window: 2 * time.Minute, FailAfter: 5}

// recent keeps the deaths within the policy's window before now.
func (p RestartPolicy) recent(deaths []time.Time, now time.Time) []time.Time {
	out := deaths[:0:0]
	for _, d := range deaths {
		if now.Sub(d) < p.Window {
			out = append(out, d)
		}
	}
	return out
}

// Next decides, from the times a server died (oldest first), whether it
// may be started at now: failed when FailAfter deaths fall within the
// window; else the wait before the start (0: at once).
func (p RestartPolicy) Next(deaths []time.Time, now time.Time) (wait time.Duration, failed bool) {
	r := p.recent(deaths, now)
	n := len(r)
	if n == 0 {
		return 0, false
	}
	if p.FailAfter > 0 && n >= p.FailAfter {
		return 0, true
	}
	b := p.Backoff
	for i := 1; i < n && b < p.MaxBackoff; i++ {
		b *= 2
	}
	b = min(b, p.MaxBackoff)
	if until := r[n-1].Add(b).Sub(now); until > 0 {
		return until, false
	}
	return 0, false
}
