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
// (an invalid UTF-8 byte counts as a rune) plus MessageOverhead per message
// and, for a tool definition, its name, description and schema bytes / 3
// (schemas tokenize densely) plus ToolOverhead. The provider-reported prompt
// tokens are recorded beside this estimate after every Cycle
// (CycleFinished.usage), so its error is visible in history.
const (
	// MessageOverhead is added per conversation message (role markers).
	MessageOverhead = 4
	// ToolOverhead is added per tool definition.
	ToolOverhead = 8
)

// Estimate returns the estimated tokens of text.
func Estimate(text string) int {
	ascii, other := count(text)
	return (ascii+3)/4 + other
}

// count returns the ASCII bytes and the other runes of text.
func count[T string | []byte](text T) (ascii, other int) {
	n := len(text)
	for i := 0; i < n; {
		// Runs of ASCII are the common case: test 8 bytes at a time.
		j := i
		for j+8 <= n && (text[j]|text[j+1]|text[j+2]|text[j+3]|text[j+4]|text[j+5]|text[j+6]|text[j+7]) < utf8.RuneSelf {
			j += 8
		}
		for j < n && text[j] < utf8.RuneSelf {
			j++
		}
		ascii += j - i
		if j == n {
			break
		}
		_, size := utf8.DecodeRuneInString(string(text[j:min(j+utf8.UTFMax, n)]))
		other++
		i = j + size
	}
	return ascii, other
}

// EstimateBytes is Estimate for a byte slice.
func EstimateBytes(b []byte) int {
	ascii, other := count(b)
	return (ascii+3)/4 + other
}

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
