package prompt

import (
	"encoding/json"
	"strconv"
	"strings"
	"unicode/utf8"
)

// MinExcerptTokens is the least an excerpt keeps of a record, head and
// tail together. A record of at most this size (plus its label) is never
// excerpted; an input that does not fit with every excerpt at this size
// overflows.
const MinExcerptTokens = 128

// Handle returns the tasks.read_block call that returns event seq of task
// whole: the retrieval handle excerpt labels name.
func Handle(task string, seq uint64) string { return string(appendHandle(nil, task, seq)) }

// Excerpt returns text cut to about keep estimated tokens, the first two
// thirds from its head and the rest from its tail, with label on a line of
// its own between them. Cuts fall on rune boundaries, at a line break when
// one is near. Text that already fits is returned unchanged.
func Excerpt(text string, keep int, label string) string {
	if Estimate(text) <= keep {
		return text
	}
	h, t := splitKeep(text, keep)
	return text[:h] + "\n" + label + "\n" + text[t:]
}

// splitKeep returns the end of the head and the start of the tail of an
// excerpt of text keeping about keep tokens.
func splitKeep(text string, keep int) (head, tail int) {
	headTokens := keep * 2 / 3
	head = headCut(text, headTokens)
	if i := strings.LastIndexByte(text[:head], '\n'); i > 0 && head-i < 160 {
		head = i
	}
	tail = tailCut(text[head:], keep-headTokens) + head
	if i := strings.IndexByte(text[tail:], '\n'); i >= 0 && i < 160 && tail+i+1 < len(text) {
		tail += i + 1
	}
	return head, tail
}

// omittedTokens estimates the tokens of text[head:tail] from the whole
// text's estimate (about: the estimate is not exactly additive).
func omittedTokens(text string, tokens, head, tail int) int {
	return max(tokens-Estimate(text[:head])-Estimate(text[tail:]), 0)
}

// headCut returns the length of the longest prefix of s whose estimate is
// at most tokens.
func headCut(s string, tokens int) int {
	ascii, other := 0, 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if (ascii+4)/4+other > tokens {
				return i
			}
			ascii++
			i++
			continue
		}
		if (ascii+3)/4+other+1 > tokens {
			return i
		}
		_, size := utf8.DecodeRuneInString(s[i:])
		other++
		i += size
	}
	return len(s)
}

// tailCut returns the start of the longest suffix of s whose estimate is
// at most tokens.
func tailCut(s string, tokens int) int {
	ascii, other := 0, 0
	for i := len(s); i > 0; {
		c := s[i-1]
		if c < utf8.RuneSelf {
			if (ascii+4)/4+other > tokens {
				return i
			}
			ascii++
			i--
			continue
		}
		if (ascii+3)/4+other+1 > tokens {
			return i
		}
		_, size := utf8.DecodeLastRuneInString(s[:i])
		other++
		i -= size
	}
	return 0
}

// excerptPiece is a tool result or a tool call's arguments that may be
// excerpted.
type excerptPiece struct {
	msg  int // index in the conversation
	call int // index of the call in the message; -1 for a result
	text string
	// tokens is the estimate of text; label the tokens an excerpt adds
	// besides what it keeps (an upper bound).
	tokens int
	label  int
	seq    uint64
	callID string
	meta   msgMeta
}

func (p *excerptPiece) part() string {
	if p.call < 0 {
		return "result"
	}
	return "arguments"
}

// labelText says what an excerpt left out and where the whole record is.
// (Built with appends: Build labels hundreds of pieces.)
func (p *excerptPiece) labelText(task string, omittedBytes, omittedTokens int) string {
	b := make([]byte, 0, 200)
	b = append(b, "[… excerpt: "...)
	b = strconv.AppendInt(b, int64(omittedBytes), 10)
	b = append(b, " of "...)
	b = strconv.AppendInt(b, int64(len(p.text)), 10)
	b = append(b, " bytes (about "...)
	b = strconv.AppendInt(b, int64(omittedTokens), 10)
	if p.call >= 0 {
		b = append(b, " tokens) of these arguments left out here"...)
	} else {
		b = append(b, " tokens) of this tool result left out here"...)
	}
	m := p.meta
	switch {
	case p.seq == 0:
		b = append(b, "; no record holds the rest]"...)
	case p.call >= 0 || !m.live || (m.retained && m.retainedBytes >= m.outputBytes):
		b = append(b, "; the whole record: "...)
		b = appendHandle(b, task, p.seq)
		b = append(b, ']')
	case m.retained:
		b = append(b, "; "...)
		b = appendHandle(b, task, p.seq)
		b = append(b, " returns the "...)
		b = strconv.AppendInt(b, int64(m.retainedBytes), 10)
		b = append(b, " of "...)
		b = strconv.AppendInt(b, int64(m.outputBytes), 10)
		b = append(b, " bytes the tool retained]"...)
	default:
		b = append(b, "; the tool did not retain this output, so the rest cannot be read again]"...)
	}
	return string(b)
}

func appendHandle(b []byte, task string, seq uint64) []byte {
	b = append(b, `tasks.read_block {"task":`...)
	b = strconv.AppendQuote(b, task)
	b = append(b, `,"seq":`...)
	b = strconv.AppendUint(b, seq, 10)
	return append(b, '}')
}

// apply returns the piece excerpted to keep tokens.
func (p *excerptPiece) apply(task string, keep int) string {
	h, t := splitKeep(p.text, keep)
	label := p.labelText(task, t-h, omittedTokens(p.text, p.tokens, h, t))
	if p.call < 0 {
		return p.text[:h] + "\n" + label + "\n" + p.text[t:]
	}
	// Arguments stay a JSON object.
	b, _ := json.Marshal(struct {
		Excerpt string `json:"lemo_excerpt"`
		Head    string `json:"head"`
		Tail    string `json:"tail"`
	}{label, p.text[:h], p.text[t:]})
	return string(b)
}
