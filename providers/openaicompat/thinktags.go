package openaicompat

import (
	"strings"
	"unicode"
)

const (
	openTag  = "<think>"
	closeTag = "</think>"
)

// thinkSplitter moves a leading <think>...</think> block of the content
// into reasoning, for models that write their reasoning inline (DeepSeek R1
// distills on NVIDIA NIM, self-hosted servers without a reasoning parser).
// Only a block at the very start of the answer counts; tags may be split
// across chunks, so undecided bytes are held back (at most a tag's length).
type thinkSplitter struct {
	mode    int // 0 deciding, 1 inside the block, 2 plain text
	pending string
}

// split returns the reasoning and text parts of the next content fragment.
func (s *thinkSplitter) split(in string) (reasoning, text string) {
	s.pending += in
	if s.mode == 0 {
		trimmed := strings.TrimLeftFunc(s.pending, unicode.IsSpace)
		switch {
		case strings.HasPrefix(trimmed, openTag):
			s.mode, s.pending = 1, trimmed[len(openTag):]
		case len(trimmed) < len(openTag) && strings.HasPrefix(openTag, trimmed):
			return "", "" // still undecided
		default:
			s.mode = 2
		}
	}
	if s.mode == 1 {
		if i := strings.Index(s.pending, closeTag); i >= 0 {
			reasoning = s.pending[:i]
			rest := strings.TrimLeftFunc(s.pending[i+len(closeTag):], unicode.IsSpace)
			s.mode, s.pending = 2, rest
		} else {
			keep := partialSuffix(s.pending, closeTag)
			reasoning, s.pending = s.pending[:len(s.pending)-keep], s.pending[len(s.pending)-keep:]
			return reasoning, ""
		}
	}
	text, s.pending = s.pending, ""
	return reasoning, text
}

// flush returns what is held back at the end of the stream.
func (s *thinkSplitter) flush() (reasoning, text string) {
	p := s.pending
	s.pending = ""
	if s.mode == 1 {
		return p, ""
	}
	return "", p
}

// partialSuffix is the length of the longest suffix of s that is a proper
// prefix of tag.
func partialSuffix(s, tag string) int {
	for n := min(len(s), len(tag)-1); n > 0; n-- {
		if strings.HasSuffix(s, tag[:n]) {
			return n
		}
	}
	return 0
}
