package shell

import (
	"bytes"
	"fmt"
	"io"
	"strings"
	"sync"
	"unicode/utf8"

	"lemo/excerpt"
)

// capture records one output stream: its byte count and its first and
// last bytes (what the model is shown), and passes the whole stream to
// live, the call's live output (nil: none), which bounds what it keeps.
type capture struct {
	mu      sync.Mutex
	total   int64
	head    []byte
	headMax int
	tail    []byte // the last tailMax bytes (up to twice that between trims)
	tailMax int
	live    io.Writer
}

func newCapture(headMax, tailMax int, live io.Writer) *capture {
	return &capture{headMax: headMax, tailMax: max(tailMax, lastLineMax), live: live}
}

func (c *capture) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.total += int64(len(p))
	if n := c.headMax - len(c.head); n > 0 {
		c.head = append(c.head, p[:min(n, len(p))]...)
	}
	c.tail = append(c.tail, p...)
	if len(c.tail) > 2*c.tailMax {
		c.tail = append(c.tail[:0], c.tail[len(c.tail)-c.tailMax:]...)
	}
	if c.live != nil {
		_, _ = c.live.Write(p) // it never fails: what it cannot keep, it counts
	}
	return len(p), nil
}

// lastLineMax bounds the last line reported in state updates.
const lastLineMax = 200

func (c *capture) bytes() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.total
}

// lastLine returns the last non-empty line written so far (its end when
// long), as valid UTF-8.
func (c *capture) lastLine() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := bytes.TrimRight(c.tail, "\r\n")
	if i := bytes.LastIndexByte(t, '\n'); i >= 0 {
		t = t[i+1:]
	}
	t = excerpt.Tail(t, lastLineMax)
	return strings.ToValidUTF8(string(t), "\uFFFD")
}

// view returns what the model is shown: the whole stream when it fits in
// headMax+tailMax bytes, else head and tail around a marker stating how many
// bytes were omitted. excerpted reports the latter.
func (c *capture) view() (s string, excerpted bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	rest := c.total - int64(len(c.head))
	if rest <= int64(len(c.tail)) && rest <= int64(c.tailMax) {
		return string(c.head) + string(c.tail[int64(len(c.tail))-rest:]), false
	}
	h := trimPartialRune(c.head)
	t := excerpt.Tail(c.tail, c.tailMax)
	omitted := c.total - int64(len(h)) - int64(len(t))
	return string(h) + fmt.Sprintf("\n… [%d bytes omitted; %d bytes in all] …\n", omitted, c.total) + string(t), true
}

// trimPartialRune drops a UTF-8 sequence cut short at the end of b.
func trimPartialRune(b []byte) []byte {
	for k := len(b) - 1; k >= 0 && k >= len(b)-utf8.UTFMax; k-- {
		if utf8.RuneStart(b[k]) {
			if !utf8.FullRune(b[k:]) {
				return b[:k]
			}
			return b
		}
	}
	return b
}
