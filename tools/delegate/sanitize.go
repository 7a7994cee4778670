package delegate

import (
	"strings"
	"unicode/utf8"

	"lemo/excerpt"
)

// Clean makes text from the agent safe to show and to store: invalid UTF-8
// becomes U+FFFD; terminal escape sequences (CSI, OSC and other ESC
// sequences) are removed; control characters other than newline and tab,
// C1 controls, and bidirectional overrides and isolates (which can make
// text read differently from what it is) are removed; "\r\n" becomes "\n"
// and a lone "\r" a newline. It does not bound the length (see Bound).
func Clean(s string) string {
	if isPlain(s) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); {
		c := s[i]
		if c == 0x1b { // ESC: skip the whole sequence
			i = skipEscape(s, i)
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		i += size
		switch {
		case r == utf8.RuneError && size == 1:
			b.WriteRune(utf8.RuneError)
		case r == '\n' || r == '\t':
			b.WriteRune(r)
		case r == '\r':
			if i < len(s) && s[i] == '\n' {
				continue // the "\n" follows
			}
			b.WriteByte('\n')
		case r < 0x20 || r == 0x7f || (r >= 0x80 && r <= 0x9f):
			// other controls (C0, DEL, C1) are dropped
		case isBidiControl(r):
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// isPlain reports whether s needs no cleaning (printable ASCII, newline,
// tab): the common case costs one pass.
func isPlain(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if (c < 0x20 && c != '\n' && c != '\t') || c >= 0x7f {
			return false
		}
	}
	return true
}

func isBidiControl(r rune) bool {
	return (r >= 0x202a && r <= 0x202e) || (r >= 0x2066 && r <= 0x2069) || r == 0x200e || r == 0x200f || r == 0x061c
}

// skipEscape returns the index after the escape sequence that starts at
// s[i] (an ESC byte).
func skipEscape(s string, i int) int {
	i++ // ESC
	if i >= len(s) {
		return i
	}
	switch s[i] {
	case '[': // CSI: parameters and intermediates, then a final byte 0x40-0x7e
		i++
		for i < len(s) {
			c := s[i]
			switch {
			case c >= 0x40 && c <= 0x7e: // final byte
				return i + 1
			case c >= 0x20 && c <= 0x3f: // parameter or intermediate byte
				i++
			default: // a malformed sequence ends before this byte
				return i
			}
		}
		return i
	case ']', 'P', 'X', '^', '_': // OSC, DCS, SOS, PM, APC: until BEL or ST
		i++
		for i < len(s) {
			if s[i] == 0x07 {
				return i + 1
			}
			if s[i] == 0x1b && i+1 < len(s) && s[i+1] == '\\' {
				return i + 2
			}
			i++
		}
		return i
	default: // a two-byte sequence (ESC c, ESC 7, ...), possibly with intermediates
		for i < len(s) && s[i] >= 0x20 && s[i] <= 0x2f {
			i++
		}
		if i < len(s) {
			i++
		}
		return i
	}
}

// Bound cleans s and keeps at most max bytes of it: the head and the tail
// around a marker that states how many bytes were left out. It reports
// whether anything was left out. Cuts fall on character boundaries. Of a
// text much longer than max only the raw head and tail are cleaned.
func Bound(s string, max int) (string, bool) {
	if len(s) > 4*max+64 {
		h, t := Clean(excerpt.Head(s, 2*max)), Clean(excerpt.Tail(s, 2*max))
		room := max - len(excerpt.Omitted(len(s), len(s)))
		if room < 2 {
			return excerpt.Head(h, max), true
		}
		h = excerpt.Head(h, room/2)
		t = excerpt.Tail(t, room-len(h))
		return h + excerpt.Omitted(len(s)-len(h)-len(t), len(s)) + t, true
	}
	s = Clean(s)
	if len(s) <= max {
		return s, false
	}
	return excerpt.Fit(s, max), true
}

// Short cleans s and keeps its first max bytes, marking a cut with "…".
func Short(s string, max int) string {
	if len(s) > 4*max+64 {
		s = excerpt.Head(s, 2*max)
	}
	return excerpt.Short(Clean(s), max)
}
