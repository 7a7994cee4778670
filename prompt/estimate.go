package prompt

import (
	"unicode/utf8"

	"lemo/providers"
)

// Estimation rule, chosen to be cheap, deterministic and conservative for
// the text agents see (prose, code, JSON):
//
//	tokens(text) = ceil(ASCII bytes / 4) + number of non-ASCII runes
//
// plus MessageOverhead per message and, for a tool definition, its name,
// description and schema bytes / 3 (schemas tokenize densely) plus
// ToolOverhead.
const (
	// MessageOverhead is added per conversation message (role markers).
	MessageOverhead = 4
	// ToolOverhead is added per tool definition.
	ToolOverhead = 8
)

// Estimate returns the estimated tokens of text.
func Estimate(text string) int {
	ascii, other := 0, 0
	for i := 0; i < len(text); {
		c := text[i]
		if c < utf8.RuneSelf {
			ascii++
			i++
			continue
		}
		_, size := utf8.DecodeRuneInString(text[i:])
		i += size
		other++
	}
	return (ascii+3)/4 + other
}

// EstimateBytes is Estimate for a byte slice.
func EstimateBytes(b []byte) int { return Estimate(string(b)) }

// EstimateMessage returns the estimated tokens of one message.
func EstimateMessage(m *providers.Message) int {
	n := MessageOverhead + Estimate(m.Content) + Estimate(m.Reasoning)
	for _, c := range m.ToolCalls {
		n += Estimate(c.Name) + EstimateBytes(c.Arguments) + 2
	}
	return n
}

// EstimateTool returns the estimated tokens of one tool definition.
func EstimateTool(t *providers.ToolSpec) int {
	return ToolOverhead + Estimate(t.Name) + Estimate(t.Description) + (len(t.Parameters)+2)/3
}
