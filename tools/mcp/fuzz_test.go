package mcp

import (
	"bytes"
	"io"
	"regexp"
	"testing"
)

var mappedName = regexp.MustCompile(`^[a-z0-9_-]*$`)

// Any name a server lists maps to a valid Lemo name part, and Plan offers
// only names the registry accepts, never two that meet for the model.
func FuzzMapToolName(f *testing.F) {
	for _, s := range []string{"echo", "getUser", "a.b", "ÄÖ", "x y", ""} {
		f.Add(s, "other")
	}
	f.Fuzz(func(t *testing.T, a, b string) {
		if m := MapToolName(a); !mappedName.MatchString(m) {
			t.Fatalf("MapToolName(%q) = %q", a, m)
		}
		offered, refused := Plan("srv", []string{a, b}, nil)
		if len(offered)+len(refused) != 2 && a != b {
			t.Fatalf("Plan lost a tool: %v %v", offered, refused)
		}
		seen := map[string]bool{}
		for _, full := range offered {
			if len(full) > 64 || seen[full] {
				t.Fatalf("Plan offered %q twice or too long: %v", full, offered)
			}
			seen[full] = true
		}
	})
}

// lineLimit passes every stream whose lines fit and stops any other
// before reading more than a line's bound past the last newline.
func FuzzLineLimit(f *testing.F) {
	f.Add([]byte("a\nbb\n"), 2)
	f.Add(bytes.Repeat([]byte("x"), 100), 10)
	f.Fuzz(func(t *testing.T, data []byte, max int) {
		if max < 1 || max > 1<<16 {
			return
		}
		fits := true
		for _, l := range bytes.Split(data, []byte("\n")) {
			fits = fits && len(l) <= max
		}
		l := &lineLimit{r: io.NopCloser(bytes.NewReader(data)), max: max}
		got, err := io.ReadAll(l)
		switch {
		case fits && (err != nil || !bytes.Equal(got, data)):
			t.Fatalf("lines within %d: read %q, %v", max, got, err)
		case !fits && err != errTooLarge:
			t.Fatalf("a line over %d: %v", max, err)
		}
	})
}
