package names

import (
	"strings"
	"testing"
)

func TestForms(t *testing.T) {
	tests := []struct {
		s            string
		owner, again bool // again: as a Task id
	}{
		{"alice", true, true},
		{"ci-bot_2", true, true},
		{"a.b@example", true, false},
		{"", false, false},
		{strings.Repeat("x", 64), true, true},
		{strings.Repeat("x", 65), false, false},
		{"a b", false, false},
		{"a/b", false, false},
		{"é", false, false},
		{"*", false, false},
	}
	for _, tt := range tests {
		if got := Owner(tt.s); got != tt.owner {
			t.Errorf("Owner(%q) = %v, want %v", tt.s, got, tt.owner)
		}
		if got := TaskID(tt.s); got != tt.again {
			t.Errorf("TaskID(%q) = %v, want %v", tt.s, got, tt.again)
		}
	}
}
