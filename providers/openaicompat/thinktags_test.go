package openaicompat

import (
	"strings"
	"testing"
	"unicode"
)

func TestThinkSplitter(t *testing.T) {
	cases := []struct {
		name                string
		chunks              []string
		reasoning, text     string
		reasoningDuringText bool
	}{
		{"whole", []string{"<think>plan</think>answer"}, "plan", "answer", false},
		{"split tags", []string{"\n<thi", "nk>pl", "an</th", "ink>\n\nans", "wer"}, "plan", "answer", false},
		{"no block", []string{"plain ", "<think>not reasoning</think>"}, "", "plain <think>not reasoning</think>", false},
		{"short plain", []string{"<", "b>x"}, "", "<b>x", false},
		{"unclosed", []string{"<think>still thinking"}, "still thinking", "", false},
		{"tag lookalike inside", []string{"<think>a </thin b</think>c"}, "a </thin b", "c", false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var s thinkSplitter
			var r, x strings.Builder
			for _, ch := range c.chunks {
				a, b := s.split(ch)
				r.WriteString(a)
				x.WriteString(b)
			}
			a, b := s.flush()
			r.WriteString(a)
			x.WriteString(b)
			if r.String() != c.reasoning || x.String() != c.text {
				t.Fatalf("reasoning, text = %q, %q; want %q, %q", r.String(), x.String(), c.reasoning, c.text)
			}
		})
	}
}

func FuzzThinkSplitter(f *testing.F) {
	f.Add("<think>a</think>b", 3)
	f.Add(" <thin", 1)
	f.Fuzz(func(t *testing.T, in string, cut int) {
		var s thinkSplitter
		var r, x strings.Builder
		rest := in
		for len(rest) > 0 {
			n := min(len(rest), max(1, cut%7+1))
			a, b := s.split(rest[:n])
			r.WriteString(a)
			x.WriteString(b)
			rest = rest[n:]
		}
		a, b := s.flush()
		r.WriteString(a)
		x.WriteString(b)
		if r.Len()+x.Len() > len(in) {
			t.Fatalf("output %d bytes > input %d", r.Len()+x.Len(), len(in))
		}
		if !strings.HasPrefix(strings.TrimLeftFunc(in, unicode.IsSpace), openTag) && (r.Len() != 0 || x.String() != in) {
			t.Fatalf("input without a leading block changed: reasoning %q, text %q", r.String(), x.String())
		}
	})
}
