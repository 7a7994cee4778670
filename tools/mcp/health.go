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

// callEnd is how a call that reached its server ended.
type callEnd int

const (
	// endDone: it was answered, or failed with its connection.
	endDone callEnd = iota
	// endCancelled: the caller cancelled it; the server was sent MCP's
	// cancellation.
	endCancelled
	// endTimedOut: its timeout passed; the server was sent MCP's
	// cancellation.
	endTimedOut
)

// connAction is what becomes of a connection when one of its calls ends.
type connAction int

const (
	// keepConn: nothing changes.
	keepConn connAction = iota
	// retireConn: the connection takes no new calls (the next one starts
	// the server again) and is stopped when its last call ends.
	retireConn
	// stopConn: stopped now, as the daemon's decision (not a death).
	stopConn
	// killConn: the server hung; stopped now and counted as a death (the
	// restart policy's backoff and failure apply); the calls still in
	// flight on it fail as outcome unknown.
	killConn
)

// afterCall decides what becomes of a connection when one of its calls
// ends as end, with inFlight calls still on it. Only a stdio server's
// process is Lemo's to stop: an HTTP server's session is kept (its other
// calls are requests of their own). A server that did not answer within
// the timeout is hung: it is stopped, with the calls in flight on it, so
// that the process tree working on the call is gone. A cancelled call may
// still run on a server that ignored the cancellation: the server is
// stopped once no other call is in flight on it, and takes no new calls
// until then, so that the work lives at most as long as the longest call
// in flight (itself bounded by the timeout).
func afterCall(end callEnd, stdio, gone, retired bool, inFlight int) connAction {
	switch {
	case !stdio || gone:
		return keepConn
	case end == endTimedOut:
		return killConn
	case end == endCancelled && inFlight > 0:
		return retireConn
	case end == endCancelled, retired && inFlight == 0:
		return stopConn
	}
	return keepConn
}

// listRetry decides when the tools of a server that has never listed them
// are tried again in the background, from the times its listing failed
// (oldest first): after the restart policy's backoff while the policy
// would still start it (eager); once the failures would mark it failed,
// the policy's longest backoff after the last failure. It never gives up:
// a server that comes up late is found within MaxBackoff, and it is tried
// at most once per MaxBackoff while it stays down.
func (p RestartPolicy) listRetry(fails []time.Time, now time.Time) (wait time.Duration, eager bool) {
	wait, failed := p.Next(fails, now)
	if !failed {
		return wait, true
	}
	r := p.recent(fails, now)
	return max(r[len(r)-1].Add(p.MaxBackoff).Sub(now), 0), false
}

// pendingState says, for lemo tools, why a server's tools are missing:
// its listing failed (why), and is tried again in wait (0: under way).
func pendingState(why string, wait time.Duration) string {
	in := "now"
	if wait > 0 {
		in = "in " + wait.Round(time.Second).String()
		if wait < time.Second {
			in = "in under a second"
		}
	}
	return "listing failed: " + sanitize(why, 200) + "; retrying " + in
}
