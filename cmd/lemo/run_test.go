package main

import (
	"bytes"
	"slices"
	"strings"
	"testing"
)

// While the daemon is down, lemo run says so once, then at each doubling
// of the attempts, and once when the stream is back.
func TestInterruptionsAreCounted(t *testing.T) {
	var b bytes.Buffer
	n := &interruptions{w: &b}
	for range 9 {
		n.notice("subscribe: the lemo daemon is not running")
	}
	n.delivered()
	n.delivered()
	got := strings.Split(strings.TrimSpace(b.String()), "\n")
	want := []string{
		"lemo: stream interrupted (subscribe: the lemo daemon is not running); resuming",
		"lemo: still resuming after 2 attempts (subscribe: the lemo daemon is not running)",
		"lemo: still resuming after 4 attempts (subscribe: the lemo daemon is not running)",
		"lemo: still resuming after 8 attempts (subscribe: the lemo daemon is not running)",
		"lemo: stream resumed after 9 attempt(s)",
	}
	if !slices.Equal(got, want) {
		t.Fatalf("lines:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestParseTools(t *testing.T) {
	for _, tc := range []struct {
		in         string
		list       []string
		restricted bool
	}{
		{"", nil, false},
		{"none", nil, true},
		{" none ", nil, true},
		{"files.read, shell.run", []string{"files.read", "shell.run"}, true},
		{"files.read,,", []string{"files.read"}, true},
	} {
		list, restricted := parseTools(tc.in)
		if !slices.Equal(list, tc.list) || restricted != tc.restricted {
			t.Errorf("parseTools(%q) = %q, %v; want %q, %v", tc.in, list, restricted, tc.list, tc.restricted)
		}
	}
}
