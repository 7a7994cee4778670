package main

import (
	"testing"
	"time"
)

// tasks.read_hold 0 never holds; the daemon's option reads 0 as its
// default, so it gets a negative one.
func TestHoldFor(t *testing.T) {
	for in, want := range map[time.Duration]time.Duration{
		0:                      -1,
		100 * time.Millisecond: 100 * time.Millisecond,
		10 * time.Second:       10 * time.Second,
	} {
		if got := holdFor(in); got != want {
			t.Errorf("holdFor(%s) = %s, want %s", in, got, want)
		}
	}
}
