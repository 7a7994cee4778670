package excerpt

import (
	"math/rand/v2"
	"strings"
	"testing"
	"unicode/utf8"
)

const (
	acute = "\u0301" // a combining mark, 2 bytes
	euro  = "€"      // 3 bytes
	smile = "😀"      // 4 bytes
)

type cutCase struct {
	name string
	s    string
	n    int
	want string
}

// checkCuts runs a table of cases against a cut of strings and of bytes.
func checkCuts(t *testing.T, name string, tests []cutCase, ofString func(string, int) string, ofBytes func([]byte, int) []byte) {
	t.Helper()
	for _, tt := range tests {
		if got := ofString(tt.s, tt.n); got != tt.want {
			t.Errorf("%s: %s(%q, %d) = %q, want %q", tt.name, name, tt.s, tt.n, got, tt.want)
		}
		if got := string(ofBytes([]byte(tt.s), tt.n)); got != tt.want {
			t.Errorf("%s: %s([]byte(%q), %d) = %q, want %q", tt.name, name, tt.s, tt.n, got, tt.want)
		}
	}
}

func TestHead(t *testing.T) {
	marks := strings.Repeat(acute, MaxMarks+2)
	tests := []cutCase{
		{"fits", "abc", 3, "abc"},
		{"more room", "abc", 10, "abc"},
		{"zero", "abc", 0, ""},
		{"negative", "abc", -1, ""},
		{"ascii", "abcdef", 4, "abcd"},
		{"inside a 2-byte rune", "aé", 2, "a"},
		{"after a 2-byte rune", "aéb", 3, "aé"},
		{"inside a 3-byte rune", "a" + euro + "b", 3, "a"},
		{"inside a 4-byte rune", "a" + smile, 4, "a"},
		{"4-byte rune whole", "a" + smile + "b", 5, "a" + smile},
		{"first rune too long", smile + "b", 2, ""},
		{"before a combining mark", "ae" + acute + "x", 2, "a"},
		{"inside a combining mark", "ae" + acute + "x", 3, "a"},
		{"after a combining mark", "ae" + acute + "x", 4, "ae" + acute},
		{"two marks, cut between them", "ae" + acute + acute + "x", 4, "a"},
		{"base at the start keeps progress", "e" + acute + "x", 1, "e"},
		{"a run longer than MaxMarks is cut between marks", "e" + marks, 1 + 2*(MaxMarks+1), "e" + strings.Repeat(acute, MaxMarks+1)},
		{"stray continuation bytes are kept", "a\x80\x80\x80\x80\x80b", 3, "a\x80\x80"},
		{"invalid lead byte", "a\xff\xffb", 2, "a\xff"},
		{"truncated sequence before the cut", "a\xe2\x82b", 3, "a\xe2\x82"},
		{"truncated sequence at the end", "ab\xe2\x82", 3, "ab\xe2"},
		{"cut inside a truncated sequence followed by a valid rune", "a\xe2\x82é", 2, "a\xe2"},
	}
	checkCuts(t, "Head", tests, Head[string], Head[[]byte])
}

func TestTail(t *testing.T) {
	tests := []cutCase{
		{"fits", "abc", 3, "abc"},
		{"zero", "abc", 0, ""},
		{"ascii", "abcdef", 4, "cdef"},
		{"inside a 2-byte rune", "éa", 2, "a"},
		{"at a 2-byte rune", "aéb", 3, "éb"},
		{"inside a 4-byte rune", smile + "ab", 4, "ab"},
		{"inside a 3-byte rune", "x" + euro + "ab", 3, "ab"},
		{"on a combining mark", "xe" + acute + "ab", 4, "ab"},
		{"inside a combining mark", "xe" + acute + "ab", 3, "ab"},
		{"at the base", "xe" + acute + "ab", 5, "e" + acute + "ab"},
		{"only marks left keeps them", "e" + acute + acute, 4, acute + acute},
		{"stray continuation bytes are kept", "a\x80\x80\x80\x80\x80b", 3, "\x80\x80b"},
		{"invalid lead byte", "a\xff\xffb", 2, "\xffb"},
		{"truncated sequence", "a\xe2\x82b", 2, "\x82b"},
	}
	checkCuts(t, "Tail", tests, Tail[string], Tail[[]byte])
}

func TestShort(t *testing.T) {
	tests := []struct {
		s    string
		max  int
		want string
	}{
		{"abc", 3, "abc"},
		{"abcdef", 5, "ab" + Ellipsis},
		{"aé" + euro + "bc", 7, "aé" + Ellipsis},
		{"abcdef", 2, "ab"},
		{"ae" + acute + "xyz", 6, "a" + Ellipsis},
	}
	for _, tt := range tests {
		if got := Short(tt.s, tt.max); got != tt.want {
			t.Errorf("Short(%q, %d) = %q, want %q", tt.s, tt.max, got, tt.want)
		}
	}
}

func TestClip(t *testing.T) {
	tests := []struct {
		s    string
		max  int
		want string
	}{
		{"abc", 3, "abc"},
		{strings.Repeat("é", 40), 40, "ééééé" + "\n[… 70 of 80 bytes omitted]"},
		{strings.Repeat("é", 40), 10, "ééééé"},
	}
	for _, tt := range tests {
		got := Clip(tt.s, tt.max)
		if got != tt.want || len(got) > tt.max {
			t.Errorf("Clip(%q, %d) = %q, want %q", tt.s, tt.max, got, tt.want)
		}
	}
}

func TestEnds(t *testing.T) {
	tests := []struct {
		s          string
		head, tail int
		want       string
	}{
		{"abcdef", 3, 3, "abcdef"},
		{"abcdefgh", 2, 3, "ab" + Omitted(3, 8) + "fgh"},
		{"aéééb", 2, 2, "a" + Omitted(6, 8) + "b"},
		{"ae" + acute + "xy" + "e" + acute + "z", 3, 3, "a" + Omitted(8, 10) + "z"},
		{"ab\x80\x80\x80cd", 3, 3, "ab\x80" + Omitted(1, 7) + "\x80cd"},
	}
	for _, tt := range tests {
		if got := Ends(tt.s, tt.head, tt.tail); got != tt.want {
			t.Errorf("Ends(%q, %d, %d) = %q, want %q", tt.s, tt.head, tt.tail, got, tt.want)
		}
	}
}

func TestFit(t *testing.T) {
	s := strings.Repeat("a", 100) + strings.Repeat("é", 100) + strings.Repeat("z", 100)
	label := len(Omitted(len(s), len(s)))
	got := Fit(s, 80)
	if len(got) > 80 || !utf8.ValidString(got) || !strings.HasPrefix(got, "aaaa") || !strings.HasSuffix(got, "zzzz") ||
		!strings.Contains(got, " bytes omitted") {
		t.Errorf("Fit(%d bytes, 80) = %q (%d bytes)", len(s), got, len(got))
	}
	if got := Fit(s, label+1); got != Head(s, label+1) {
		t.Errorf("Fit with no room beside the label = %q, want the head alone", got)
	}
	if got := Fit("short", 80); got != "short" {
		t.Errorf("Fit(short) = %q", got)
	}
}

// TestProperties checks on random text (valid, invalid, with marks) that
// every cut stays within its budget, is a prefix or suffix, keeps valid text
// valid and loses at most a few bytes beyond a cluster.
func TestProperties(t *testing.T) {
	pieces := []string{"a", "é", euro, smile, acute, "\x80", "\xff", "\xe2\x82", "\n", "e" + acute}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 20000 {
		var b strings.Builder
		for range rng.IntN(24) {
			b.WriteString(pieces[rng.IntN(len(pieces))])
		}
		s := b.String()
		n := rng.IntN(len(s) + 2)
		h, tl := Head(s, n), Tail(s, n)
		if len(h) > n || !strings.HasPrefix(s, h) || len(tl) > n || !strings.HasSuffix(s, tl) {
			t.Fatalf("Head/Tail(%q, %d) = %q / %q: not a prefix/suffix within the budget", s, n, h, tl)
		}
		if n > 0 && len(s) > 0 && (h == "" && utf8.RuneLen([]rune(s)[0]) <= n) {
			t.Fatalf("Head(%q, %d) is empty though the first rune fits", s, n)
		}
		if utf8.ValidString(s) && (!utf8.ValidString(h) || !utf8.ValidString(tl)) {
			t.Fatalf("Head/Tail(%q, %d) = %q / %q: invalid UTF-8 from valid text", s, n, h, tl)
		}
		if m := rng.IntN(len(s) + 2); len(Fit(s, m)) > m || len(Clip(s, m)) > m {
			t.Fatalf("Fit(%q, %d) = %q: over the budget", s, m, Fit(s, m))
		}
		if utf8.ValidString(s) && !utf8.ValidString(Ends(s, n/2, n/2)) {
			t.Fatalf("Ends(%q, %d, %d) is not valid UTF-8", s, n/2, n/2)
		}
	}
}
