// Package testwait polls a condition in tests: every package's tests wait
// for what other goroutines or processes do the same way, with a deadline
// and no sleep standing in for synchronisation.
package testwait

import (
	"errors"
	"testing"
	"time"
)

// maxPause bounds the pause between two polls; it starts at a millisecond
// and doubles, so a condition that holds soon is seen soon and one that
// takes long costs few polls.
const maxPause = 20 * time.Millisecond

// Until polls f until it returns nil; once d has passed it fails t with
// what it waited for and f's last error.
func Until(t testing.TB, d time.Duration, what string, f func() error) {
	t.Helper()
	deadline := time.Now().Add(d)
	pause := time.Millisecond
	for {
		err := f()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s: %v", d, what, err)
		}
		time.Sleep(pause)
		pause = min(2*pause, maxPause)
	}
}

// errNotYet is UntilTrue's last error.
var errNotYet = errors.New("not yet")

// UntilTrue is Until for a condition that says only whether it holds.
func UntilTrue(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	Until(t, d, what, func() error {
		if cond() {
			return nil
		}
		return errNotYet
	})
}
