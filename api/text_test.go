package api

import (
	"strings"
	"testing"
)

func TestCheckText(t *testing.T) {
	cases := []struct {
		name      string
		s         string
		multiline bool
		want      string // "" accepted
	}{
		{"plain", "list the files", false, ""},
		{"unicode", "café ☕ 日本", false, ""},
		{"empty", "", false, ""},
		{"lines", "a\nb\r\n\tc", true, ""},
		{"new line in one line", "a\nb", false, "U+000A at byte 1: no control characters"},
		{"tab in one line", "a\tb", false, "U+0009"},
		{"NUL", "a\x00b", true, "U+0000 at byte 1: of the control characters only tab, line feed and carriage return"},
		{"escape", "\x1b[2J", true, "U+001B at byte 0"},
		{"DEL", "a\x7f", true, "U+007F"},
		{"C1", "a\u0085b", true, "U+0085"},
		{"invalid UTF-8", "caf\xe9", true, "not valid UTF-8 (byte 3 is 0xe9)"},
		{"truncated rune", "\xe2\x98", false, "not valid UTF-8"},
		{"replacement character itself", "\uFFFD", false, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := CheckText(tc.s, tc.multiline)
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("CheckText(%q) = %v, want nil", tc.s, err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("CheckText(%q) = %v, want %q", tc.s, err, tc.want)
			}
		})
	}
}

func TestCleanText(t *testing.T) {
	for in, want := range map[string]string{
		"fine\ttext\r\n": "fine\ttext\r\n",
		"a\x00b":         "a\uFFFDb",
		"caf\xe9!":       "caf\uFFFD!",
		"\x1b[2J\u0085":  "\uFFFD[2J\uFFFD",
	} {
		got := CleanText(in)
		if got != want || CheckText(got, true) != nil {
			t.Errorf("CleanText(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestSupervisionNote(t *testing.T) {
	cases := []struct {
		f    *Failure
		want string
	}{
		{&Failure{Kind: "transient"}, ""},
		{&Failure{Scope: FailureScope_FAILURE_SCOPE_TOOL, Decision: "stop"}, "stopped"},
		{&Failure{Scope: FailureScope_FAILURE_SCOPE_TASK, Decision: "restart", Crashes: 2, Budget: 3}, "restarted (crash 2 of 3 allowed)"},
		{&Failure{Scope: FailureScope_FAILURE_SCOPE_TASK, Decision: "restart", Crashes: 3, Budget: 3}, "restarted (crash 3 of 3 allowed)"},
		{&Failure{Scope: FailureScope_FAILURE_SCOPE_TASK, Decision: "stop", Crashes: 4, Budget: 3}, "stopped (crash 4, over the budget of 3)"},
		{&Failure{Decision: "escalate"}, "escalate"},
	}
	for _, c := range cases {
		if got := c.f.SupervisionNote(); got != c.want {
			t.Errorf("SupervisionNote(%v) = %q, want %q", c.f, got, c.want)
		}
	}
}
