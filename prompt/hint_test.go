package prompt

import (
	"strings"
	"testing"

	"lemo/api"
)

// An overflow to which the tools' schemas contribute says to use --tools.
func TestOverflowToolsHint(t *testing.T) {
	for _, tc := range []struct {
		name  string
		tools uint64
		want  bool
	}{
		{"tools take part", 3876, true},
		{"no tools offered", 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := &OverflowError{Needed: 3965, Available: 1433, Sections: []*api.SectionSize{
				{Section: "instructions", Tokens: 84}, {Section: "tools", Tokens: tc.tools}, {Section: "conversation", Tokens: 5},
			}}
			msg := e.Error()
			if got := strings.Contains(msg, "--tools none"); got != tc.want {
				t.Fatalf("Error() = %q; mentions --tools none: %v, want %v", msg, got, tc.want)
			}
			if got := strings.Contains(msg, "tools.initial"); got != tc.want {
				t.Fatalf("Error() = %q; mentions tools.initial: %v, want %v", msg, got, tc.want)
			}
			if !strings.HasPrefix(msg, "the model's input needs at least 3965 tokens") {
				t.Fatalf("Error() = %q lost its first sentence", msg)
			}
		})
	}
}
