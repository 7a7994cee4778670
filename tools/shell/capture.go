package shell

import (
	"bytes"
	"fmt"
	"strings"
	"sync"
	"unicode/utf8"
)

// liveBudget is the live-output memory a run's stdout and stderr share.
type liveBudget struct {
	mu   sync.Mutex
	left int
}

func (b *liveBudget) take(n int) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	n = min(n, b.left)
	b.left -= n
	return n
}

// capture records one output stream: its byte count, its first and last
// bytes (what the model is shown) and the whole stream up to the shared
// live budget.
type capture struct {
	mu      sync.Mutex
	total   int64
	head    []byte
	headMax int
	tail    []byte // the last tailMax bytes (up to twice that between trims)
	tailMax int
	live    [][]byte // the live copy in chunks: no regrowing of one huge buffer
	liveLen int
	dropped int64
	budget  *liveBudget
}

func newCapture(headMax, tailMax int, budget *liveBudget) *capture {
	return &capture{headMax: headMax, tailMax: max(tailMax, lastLineMax), budget: budget}
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
	n := c.budget.take(len(p))
	c.dropped += int64(len(p) - n)
	for keep := p[:n]; len(keep) > 0; {
		if len(c.live) == 0 || len(c.live[len(c.live)-1]) == cap(c.live[len(c.live)-1]) {
			c.live = append(c.live, make([]byte, 0, liveChunk))
		}
		last := &c.live[len(c.live)-1]
		k := min(len(keep), cap(*last)-len(*last))
		*last = append(*last, keep[:k]...)
		keep = keep[k:]
	}
	c.liveLen += n
	return len(p), nil
}

// liveChunk is the size of the chunks holding the live copy.
const liveChunk = 256 << 10

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
	if len(t) > lastLineMax {
		t = t[len(t)-lastLineMax:]
		for len(t) > 0 && !utf8.RuneStart(t[0]) {
			t = t[1:]
		}
	}
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
	t := c.tail[len(c.tail)-c.tailMax:]
	for i := 0; i < utf8.UTFMax && len(t) > 0 && !utf8.RuneStart(t[0]); i++ {
		t = t[1:]
	}
	omitted := c.total - int64(len(h)) - int64(len(t))
	return string(h) + fmt.Sprintf("\n… [%d bytes omitted; %d bytes in all] …\n", omitted, c.total) + string(t), true
}

// whole returns the live copy and how many bytes did not fit in it.
func (c *capture) whole() (string, int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var b strings.Builder
	b.Grow(c.liveLen)
	for _, chunk := range c.live {
		b.Write(chunk)
	}
	return b.String(), c.dropped
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
