package excerpt

import (
	"fmt"
	"unicode"
	"unicode/utf8"
)

// MaxMarks is the longest run of combining marks a cut keeps together with
// their base character (Unicode's stream-safe text format allows 30).
const MaxMarks = 30

// Ellipsis marks where Short cut its text.
const Ellipsis = "…"

// Head returns the longest prefix of s of at most n bytes that does not end
// inside a character.
func Head[T ~string | ~[]byte](s T, n int) T {
	if n >= len(s) {
		return s
	}
	if n <= 0 {
		return s[:0]
	}
	cut := runeCut(s, n)
	if cut == len(s) {
		return s
	}
	if r, _ := decode(s[cut:]); !isMark(r) {
		return s[:cut]
	}
	// The cut falls before a combining mark: leave out the marks before it
	// and their base too, unless the head would then be empty or the run is
	// longer than MaxMarks.
	c := cut
	for steps := 0; c > 0 && steps <= MaxMarks; steps++ {
		p := prevRuneStart(s, c)
		r, _ := decode(s[p:])
		c = p
		if !isMark(r) {
			if c == 0 {
				return s[:cut]
			}
			return s[:c]
		}
	}
	return s[:cut]
}

// Tail returns the longest suffix of s of at most n bytes that does not
// start inside a character or on a combining mark.
func Tail[T ~string | ~[]byte](s T, n int) T {
	if n >= len(s) {
		return s
	}
	if n <= 0 {
		return s[len(s):]
	}
	i := len(s) - n
	// Step over the rest of a valid sequence that starts before i.
	if p := lastRuneStart(s, i); p != i {
		if r, size := decode(s[p:]); r != utf8.RuneError || size > 1 {
			if p+size > i {
				i = p + size
			}
		}
	}
	// Step over marks whose base is cut off, unless nothing would be left.
	j := i
	for marks := 0; j < len(s) && marks < MaxMarks; marks++ {
		r, size := decode(s[j:])
		if !isMark(r) {
			break
		}
		j += size
	}
	if j < len(s) {
		i = j
	}
	return s[i:]
}

// Short returns s whole when it has at most max bytes, else its head ending
// in Ellipsis, all within max bytes.
func Short(s string, max int) string {
	return headLabelled(s, max, func(int) string { return Ellipsis })
}

// Clip returns s whole when it has at most max bytes, else its head and a
// label that says how many bytes were left out, all within max bytes.
func Clip(s string, max int) string {
	return headLabelled(s, max, func(omitted int) string {
		return fmt.Sprintf("\n[… %d of %d bytes omitted]", omitted, len(s))
	})
}

// headLabelled keeps the head of s and the label of the bytes it leaves out
// within max bytes; a budget too small for the label keeps only the head.
func headLabelled(s string, max int, label func(omitted int) string) string {
	if len(s) <= max {
		return s
	}
	room := max - len(label(len(s)))
	if room < 1 {
		return Head(s, max)
	}
	h := Head(s, room)
	return h + label(len(s)-len(h))
}

// Omitted is the label that stands where omitted of total bytes were left
// out of a text.
func Omitted(omitted, total int) string {
	return fmt.Sprintf("\n[… %d of %d bytes omitted …]\n", omitted, total)
}

// Ends returns s whole when it has at most head+tail bytes, else its first
// head and last tail bytes (cut on character boundaries) around the Omitted
// label.
func Ends(s string, head, tail int) string {
	if len(s) <= head+tail {
		return s
	}
	h := Head(s, head)
	t := Tail(s[len(h):], tail)
	return h + Omitted(len(s)-len(h)-len(t), len(s)) + t
}

// Fit returns s whole when it has at most max bytes, else its head and its
// tail around the Omitted label, all within max bytes. A budget too small for
// the label keeps only the head.
func Fit(s string, max int) string {
	if len(s) <= max {
		return s
	}
	room := max - len(Omitted(len(s), len(s)))
	if room < 2 {
		return Head(s, max)
	}
	return Ends(s, room/2, room-room/2)
}

// runeCut is the largest c <= n such that s[:c] does not end inside a valid
// UTF-8 sequence; it backs off at most utf8.UTFMax-1 bytes.
func runeCut[T ~string | ~[]byte](s T, n int) int {
	p := lastRuneStart(s, n)
	if p == n {
		return n
	}
	if r, size := decode(s[p:]); (r != utf8.RuneError || size > 1) && p+size > n {
		return p
	}
	return n
}

// lastRuneStart is the index of the last byte at or before i (and at most
// utf8.UTFMax-1 before it) that can start a rune, or i when there is none.
func lastRuneStart[T ~string | ~[]byte](s T, i int) int {
	if i < len(s) && utf8.RuneStart(s[i]) {
		return i
	}
	for k := i - 1; k >= 0 && k > i-utf8.UTFMax; k-- {
		if utf8.RuneStart(s[k]) {
			return k
		}
	}
	return i
}

// prevRuneStart is the start of the character that ends at c (c-1 for a
// stray byte).
func prevRuneStart[T ~string | ~[]byte](s T, c int) int {
	p := lastRuneStart(s, c-1)
	if _, size := decode(s[p:]); p+size == c {
		return p
	}
	return c - 1
}

func decode[T ~string | ~[]byte](s T) (rune, int) {
	switch v := any(s).(type) {
	case string:
		return utf8.DecodeRuneInString(v)
	case []byte:
		return utf8.DecodeRune(v)
	}
	return utf8.DecodeRuneInString(string(s))
}

func isMark(r rune) bool { return r >= 0x300 && unicode.Is(unicode.M, r) }
