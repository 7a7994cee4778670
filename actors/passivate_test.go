package actors

import (
	"testing"
	"time"
)

func TestPassivateAfter(t *testing.T) {
	const idle, paused = time.Minute, 30 * time.Minute
	for _, c := range []struct {
		name string
		s    idleState
		want time.Duration
		ok   bool
	}{
		{"holds nothing", idleState{}, idle, true},
		{"paused with live results", idleState{LiveResults: 2}, paused, true},
		{"working", idleState{Working: true}, 0, false},
		{"working with live results", idleState{Working: true, LiveResults: 1}, 0, false},
		{"an append in flight", idleState{Busy: true}, 0, false},
		{"a Cycle still stopping", idleState{Cycle: true}, 0, false},
		{"a call still running (paused)", idleState{Calls: 1, LiveResults: 1}, 0, false},
		{"an approval deadline armed", idleState{ApprovalWait: 1}, 0, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, ok := passivateAfter(c.s, idle, paused)
			if got != c.want || ok != c.ok {
				t.Fatalf("passivateAfter(%+v) = %v, %v; want %v, %v", c.s, got, ok, c.want, c.ok)
			}
		})
	}
}
