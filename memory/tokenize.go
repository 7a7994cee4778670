package memory

import (
	"strings"
	"sync"
	"sync/atomic"
	"unicode"
	"unicode/utf8"

	"github.com/kljensen/snowball/english"
)

// Tokenization rules (the same for indexed text and queries):
//   - a token is a run of letters and digits, lower-cased; everything else
//     separates tokens;
//   - a Han, Hiragana, Katakana or Hangul character is a token of its own
//     (CJK text has no spaces; single characters are the usual unit);
//   - ASCII tokens shorter than 2 bytes and tokens longer than maxTermBytes
//     (hashes, base64) are dropped, as are common English stop words;
//   - a word of ASCII letters is reduced to its stem by the Snowball
//     English stemmer (Porter2), and an agent noun to its verb's
//     (agentStem): "owns", "owner" and "owned" → "own", "queries" →
//     "queri"; words with digits or other letters are kept;
//   - in JSON mode (tool outputs, which are JSON text) a backslash escape
//     is a separator, and \uXXXX is decoded, so "a\nb" yields "a" and "b".
const (
	maxTermBytes = 48
	// maxDocTokens bounds the tokens indexed per document (the first ones).
	maxDocTokens = 20000
)

var stopWords = func() map[string]bool {
	m := make(map[string]bool)
	for _, w := range []string{
		"a", "about", "after", "again", "all", "also", "am", "an", "and", "any", "are", "as", "at",
		"be", "been", "before", "being", "both", "but", "by", "can", "could", "did", "do", "does", "doing",
		"done", "each", "for", "from", "had", "has", "have", "having", "he", "her", "here", "him", "his",
		"how", "i", "if", "in", "into", "is", "it", "its", "just", "me", "more", "most", "my", "no", "nor",
		"not", "now", "of", "off", "on", "once", "only", "or", "other", "our", "out", "over", "own",
		"please", "same", "she", "should", "so", "some", "such", "than", "that", "the", "their", "them",
		"then", "there", "these", "they", "this", "those", "through", "to", "too", "under", "until", "up",
		"very", "was", "we", "were", "what", "when", "where", "which", "while", "who", "whom", "why",
		"will", "with", "would", "you", "your", "yours",
	} {
		m[w] = true
	}
	return m
}()

func isCJK(r rune) bool {
	return unicode.Is(unicode.Han, r) || unicode.Is(unicode.Hiragana, r) ||
		unicode.Is(unicode.Katakana, r) || unicode.Is(unicode.Hangul, r)
}

// tokenizer splits text into terms; it reuses its buffer between calls.
type tokenizer struct {
	buf []byte
}

// each calls fn with every term of text, in order, until fn returns false.
// The term is only valid during the call.
func (tk *tokenizer) each(text string, json bool, fn func(term []byte) bool) {
	buf := tk.buf[:0]
	flush := func() bool {
		if len(buf) == 0 {
			return true
		}
		t := normalize(buf)
		buf = buf[:0]
		if t == nil {
			return true
		}
		return fn(t)
	}
	for i := 0; i < len(text); {
		c := text[i]
		if c < utf8.RuneSelf {
			switch {
			case 'a' <= c && c <= 'z', '0' <= c && c <= '9':
				buf = append(buf, c)
			case 'A' <= c && c <= 'Z':
				buf = append(buf, c+'a'-'A')
			case c == '\\' && json && i+1 < len(text):
				if text[i+1] == 'u' && i+6 <= len(text) {
					if r, ok := hex4(text[i+2 : i+6]); ok {
						i += 6
						if !tk.addRune(&buf, r, flush) {
							tk.buf = buf
							return
						}
						continue
					}
				}
				if !flush() {
					tk.buf = buf
					return
				}
				i += 2
				continue
			default:
				if !flush() {
					tk.buf = buf
					return
				}
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(text[i:])
		i += size
		if !tk.addRune(&buf, r, flush) {
			tk.buf = buf
			return
		}
	}
	flush()
	tk.buf = buf
}

// addRune adds a non-ASCII (or decoded) rune to the current term; it
// returns false when fn asked to stop.
func (tk *tokenizer) addRune(buf *[]byte, r rune, flush func() bool) bool {
	switch {
	case r < utf8.RuneSelf:
		c := byte(r)
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if ('a' <= c && c <= 'z') || ('0' <= c && c <= '9') {
			*buf = append(*buf, c)
			return true
		}
		return flush()
	case isCJK(r):
		if !flush() {
			return false
		}
		*buf = utf8.AppendRune(*buf, r)
		return flush()
	case unicode.IsLetter(r) || unicode.IsDigit(r) || unicode.Is(unicode.Mn, r):
		*buf = utf8.AppendRune(*buf, unicode.ToLower(r))
		return true
	default:
		return flush()
	}
}

func hex4(s string) (rune, bool) {
	var r rune
	for i := 0; i < 4; i++ {
		c := s[i]
		switch {
		case '0' <= c && c <= '9':
			r = r<<4 | rune(c-'0')
		case 'a' <= c && c <= 'f':
			r = r<<4 | rune(c-'a'+10)
		case 'A' <= c && c <= 'F':
			r = r<<4 | rune(c-'A'+10)
		default:
			return 0, false
		}
	}
	return r, true
}

// normalize applies the length, stop-word and plural rules to a lower-cased
// token; nil drops it.
func normalize(t []byte) []byte {
	if len(t) > maxTermBytes {
		return nil
	}
	if len(t) < 2 && t[0] < utf8.RuneSelf {
		return nil
	}
	if stopWords[string(t)] {
		return nil
	}
	return stem(t)
}

// stem returns the Snowball English stem of an ASCII word of letters
// (t itself for any other token). Stems are cached: the stemmer allocates,
// and a corpus uses a bounded vocabulary.
func stem(t []byte) []byte {
	for _, c := range t {
		if c < 'a' || c > 'z' {
			return t
		}
	}
	if len(t) <= 2 {
		return t
	}
	if s, ok := stemCache.Load(string(t)); ok {
		return append(t[:0], s.(string)...)
	}
	s := agentStem(english.Stem(string(t), true))
	if stemCacheSize.Load() < maxStemCache {
		stemCacheSize.Add(1)
		stemCache.Store(string(t), s)
	}
	return append(t[:0], s...)
}

// maxStemCache bounds the cached stems (about 10 MB at most).
const maxStemCache = 1 << 17

var (
	stemCache     sync.Map // word -> stem
	stemCacheSize atomic.Int64
)

// Terms returns the distinct terms of text in first-seen order (the query
// side of the tokenization rules).
func Terms(text string) []string {
	var tk tokenizer
	seen := make(map[string]bool)
	var out []string
	tk.each(text, false, func(t []byte) bool {
		if !seen[string(t)] {
			s := string(t)
			seen[s] = true
			out = append(out, s)
		}
		return true
	})
	return out
}

// agentStem folds an agent noun into its verb's stem: Snowball leaves a
// short word's "-er" where its R2 region does not reach ("owner" stays
// "owner" while "owns" and "owned" are "own"), so a question about an
// owner would not meet the record that says who owns something. A stem of
// at least 5 letters ending in "er" loses it ("owner" → "own", "server"
// → "serv" as "serves", "holder" → "hold"). It works on stems, so every
// form that shares a stem still shares the folded one.
func agentStem(s string) string {
	if len(s) >= 5 && strings.HasSuffix(s, "er") {
		return s[:len(s)-2]
	}
	return s
}
