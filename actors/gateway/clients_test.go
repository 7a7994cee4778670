package gateway

import (
	"testing"
	"time"
)

// Sessions counts the attached sessions, and a client that goes away is
// counted no more.
func TestSessionsCountsAttachedClients(t *testing.T) {
	h := newHarness(t, Limits{}, nil)
	if n := h.g.Sessions(); n != 0 {
		t.Fatalf("Sessions() = %d before any client, want 0", n)
	}
	a := h.connect(alice)
	h.connect(bob)
	if n := h.g.Sessions(); n != 2 {
		t.Fatalf("Sessions() = %d with two clients, want 2", n)
	}
	a.stop()
	deadline := time.Now().Add(10 * time.Second)
	for h.g.Sessions() != 1 {
		if time.Now().After(deadline) {
			t.Fatalf("Sessions() = %d after one client left, want 1", h.g.Sessions())
		}
		time.Sleep(time.Millisecond)
	}
}
