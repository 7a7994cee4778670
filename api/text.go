package api

import (
	"fmt"
	"unicode/utf8"
)

// CheckText returns why s cannot be text of the API (a request, a message,
// a reason, a path, a name), or nil. Text is UTF-8 (protobuf refuses to
// carry anything else) without control characters: C0 (U+0000 to U+001F),
// DEL (U+007F) and C1 (U+0080 to U+009F) mean nothing in what a person
// writes and can disturb the terminals that show it. Multi-line text may
// hold tab, line feed and carriage return; a single line none of them.
// The daemon and the client apply the same rule.
func CheckText(s string, multiline bool) error {
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n == 1:
			return fmt.Errorf("is not valid UTF-8 (byte %d is 0x%02x): only UTF-8 text is accepted", i, s[i])
		case multiline && (r == '\t' || r == '\n' || r == '\r'):
		case r < 0x20 || (r >= 0x7f && r <= 0x9f):
			accepted := "no control characters are accepted in it"
			if multiline {
				accepted = "of the control characters only tab, line feed and carriage return are accepted"
			}
			return fmt.Errorf("holds the control character %U at byte %d: %s", r, i, accepted)
		}
		i += n
	}
	return nil
}

// CleanText returns s as multi-line text CheckText accepts: bytes that are
// not UTF-8 and control characters other than tab, line feed and carriage
// return become U+FFFD. It is for text a program produced (an error
// message) that must reach the other side rather than be refused.
func CleanText(s string) string {
	if CheckText(s, true) == nil {
		return s
	}
	out := make([]rune, 0, len(s))
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n == 1:
			r = utf8.RuneError
		case r == '\t' || r == '\n' || r == '\r':
		case r < 0x20 || (r >= 0x7f && r <= 0x9f):
			r = utf8.RuneError
		}
		out = append(out, r)
		i += n
	}
	return string(out)
}
