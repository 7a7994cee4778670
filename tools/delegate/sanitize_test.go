package delegate

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestClean(t *testing.T) {
	cases := []struct{ in, want string }{
		{"plain text\nwith\ttab", "plain text\nwith\ttab"},
		{"red \x1b[31mALERT\x1b[0m done", "red ALERT done"},
		{"title \x1b]0;owned\x07 after", "title  after"},
		{"osc st \x1b]8;;http://x\x1b\\link\x1b]8;;\x1b\\", "osc st link"},
		{"keypad \x1b= and \x1b(B charset", "keypad  and  charset"},
		{"bell\x07 nul\x00 del\x7f", "bell nul del"},
		{"c1 \u0085\u009b end", "c1  end"},
		{"bidi \u202eevil\u202c \u2066x\u2069", "bidi evil x"},
		{"crlf\r\nline\rcr", "crlf\nline\ncr"},
		{"bad \xff\xfe utf8", "bad \ufffd\ufffd utf8"},
		{"trailing esc \x1b", "trailing esc "},
		{"unterminated csi \x1b[12;", "unterminated csi "},
		{"csi then control \x1b[1\x01x", "csi then control x"},
		{"héllo wörld ✓", "héllo wörld ✓"},
	}
	for _, c := range cases {
		if got := Clean(c.in); got != c.want {
			t.Errorf("Clean(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

func TestBound(t *testing.T) {
	if s, cut := Bound("short", 100); s != "short" || cut {
		t.Fatalf("Bound(short) = %q %v", s, cut)
	}
	long := strings.Repeat("é", 10000) + "THE END"
	s, cut := Bound(long, 1000)
	if !cut || len(s) > 1000 || !utf8.ValidString(s) || !strings.HasSuffix(s, "THE END") || !strings.Contains(s, "bytes omitted") {
		t.Fatalf("Bound(long) = %d bytes, cut %v: %q…", len(s), cut, s[:40])
	}
	if s, _ := Bound(long, 10); len(s) > 10 || !utf8.ValidString(s) {
		t.Fatalf("Bound(long, 10) = %q", s)
	}
	if s := Short("abcdef", 5); s != "ab…" {
		t.Fatalf("Short = %q", s)
	}
	if s := tailExcerpt("0123456789", 6); s != "…789" {
		t.Fatalf("tailExcerpt = %q", s)
	}
}
