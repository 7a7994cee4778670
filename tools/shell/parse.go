package shell

import (
	"fmt"
	"strings"
)

// Limits of command analysis. A command beyond them is not analysed in
// full and fails closed (see Policy).
const (
	maxAnalyseBytes = 64 << 10
	maxDepth        = 16
	maxCommands     = 256
)

// word is one shell word after quote removal. Expansions ($x, $(...),
// `...`) contribute no text; dynamic records that the word's final value is
// only known at run time (an expansion, an unquoted glob, tilde or brace).
type word struct {
	lit     string
	dynamic bool
	plain   bool // no quoting, escaping or expansion at all
}

type redirect struct {
	op     string
	target word
}

// simpleCmd is one simple command: leading assignments, words, redirections.
type simpleCmd struct {
	words  []word
	redirs []redirect
}

// analysis is what the parser found in a command string.
type analysis struct {
	cmds     []*simpleCmd
	heredocs []string
	// reasons says why the analysis is incomplete; empty when complete.
	reasons []string
}

func (a *analysis) incomplete(format string, args ...any) {
	r := fmt.Sprintf(format, args...)
	for _, have := range a.reasons {
		if have == r {
			return
		}
	}
	a.reasons = append(a.reasons, r)
}

// analyse splits a command string into the simple commands a POSIX shell
// would run: across ; & && || | newlines, subshells, { } groups, control
// keywords, $(...), `...`, <(...) and expansions inside ${...} and $((...)).
// It does not execute or expand anything. Where it cannot follow the shell
// exactly it records a reason, so callers fail closed.
func analyse(src string) *analysis {
	a := &analysis{}
	if len(src) > maxAnalyseBytes {
		a.incomplete("the command is longer than %d bytes", maxAnalyseBytes)
		return a
	}
	p := &parser{s: src, a: a}
	p.list(0)
	if len(p.heredocs) > 0 {
		a.incomplete("a here-document has no body")
	}
	return a
}

type heredoc struct {
	delim  string
	strip  bool // <<- strips leading tabs
	expand bool // the delimiter is unquoted: the body is expanded
}

type parser struct {
	s        string
	i        int
	depth    int
	a        *analysis
	heredocs []heredoc // pending bodies, read at the next newline
	stop     bool      // a limit was hit: stop parsing
}

var reserved = map[string]bool{
	"if": true, "then": true, "else": true, "elif": true, "fi": true, "do": true, "done": true,
	"case": true, "esac": true, "while": true, "until": true, "for": true, "select": true,
	"function": true, "{": true, "}": true, "!": true, "in": true, "[[": false,
}

func (p *parser) peek(k int) byte {
	if p.i+k < len(p.s) {
		return p.s[p.i+k]
	}
	return 0
}

func (p *parser) halt(format string, args ...any) {
	p.a.incomplete(format, args...)
	p.stop = true
	p.i = len(p.s)
}

// list parses commands up to the end of input or, when term is ')', up to
// and including the matching ')'.
func (p *parser) list(term byte) {
	cur := &simpleCmd{}
	flush := func() {
		if len(cur.words) > 0 || len(cur.redirs) > 0 {
			if len(p.a.cmds) >= maxCommands {
				p.halt("more than %d commands", maxCommands)
				return
			}
			p.a.cmds = append(p.a.cmds, cur)
		}
		cur = &simpleCmd{}
	}
	for p.i < len(p.s) && !p.stop {
		c := p.s[p.i]
		switch {
		case c == ' ' || c == '\t':
			p.i++
		case c == '\\' && p.peek(1) == '\n':
			p.i += 2
		case c == '\n':
			p.i++
			flush()
			p.readHeredocs()
		case c == '#':
			// A comment: to the end of the line.
			for p.i < len(p.s) && p.s[p.i] != '\n' {
				p.i++
			}
		case c == ')':
			p.i++
			flush()
			if term == ')' {
				return
			}
		case c == '(':
			p.i++
			flush()
		case c == '&' && p.peek(1) == '>':
			p.redirect(cur)
		case c == ';' || c == '&' || c == '|':
			for p.i < len(p.s) && strings.IndexByte(";&|", p.s[p.i]) >= 0 {
				p.i++
			}
			flush()
		case c == '<' || c == '>':
			if p.peek(1) == '(' {
				// Process substitution <(...) / >(...): a nested list.
				p.i += 2
				p.nested()
				cur.words = append(cur.words, word{dynamic: true})
				continue
			}
			p.redirect(cur)
		default:
			start := p.i
			w := p.word()
			if p.i < len(p.s) && (p.s[p.i] == '<' || p.s[p.i] == '>') && isDigits(p.s[start:p.i]) {
				p.redirect(cur) // "2>file": the digits are the descriptor
				continue
			}
			if len(cur.words) == 0 && w.plain && reserved[w.lit] {
				continue // a keyword: the command starts after it
			}
			cur.words = append(cur.words, w)
		}
	}
	flush()
	if term == ')' && !p.stop {
		p.a.incomplete("a ( or $( is not closed")
	}
}

// nested parses a $(...), <(...) or (...) body up to its ')'.
func (p *parser) nested() {
	if p.depth >= maxDepth {
		p.halt("substitutions nested more than %d deep", maxDepth)
		return
	}
	p.depth++
	p.list(')')
	p.depth--
}

// sub parses src (a backquoted body or a ${...} / $((...)) body) with a
// fresh parser that shares the analysis.
func (p *parser) sub(src string, asList bool) {
	if p.depth >= maxDepth {
		p.halt("substitutions nested more than %d deep", maxDepth)
		return
	}
	q := &parser{s: src, depth: p.depth + 1, a: p.a}
	if asList {
		q.list(0)
		if len(q.heredocs) > 0 {
			p.a.incomplete("a here-document has no body")
		}
	} else {
		q.expansions()
	}
	if q.stop {
		p.stop = true
		p.i = len(p.s)
	}
}

func isDigits(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

func isNameByte(c byte, first bool) bool {
	return c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (!first && c >= '0' && c <= '9')
}

// word reads one word at p.i.
func (p *parser) word() word {
	var b strings.Builder
	w := word{plain: true}
	globOpen := false
	for p.i < len(p.s) && !p.stop {
		c := p.s[p.i]
		switch c {
		case ' ', '\t', '\n', ';', '&', '|', '(', ')', '<', '>':
			w.lit = b.String()
			return w
		case '\\':
			w.plain = false
			if p.i+1 >= len(p.s) {
				p.i++
				continue
			}
			if p.s[p.i+1] != '\n' {
				b.WriteByte(p.s[p.i+1])
			}
			p.i += 2
		case '\'':
			w.plain = false
			end := strings.IndexByte(p.s[p.i+1:], '\'')
			if end < 0 {
				p.a.incomplete("a ' quote is not closed")
				b.WriteString(p.s[p.i+1:])
				p.i = len(p.s)
				continue
			}
			b.WriteString(p.s[p.i+1 : p.i+1+end])
			p.i += end + 2
		case '"':
			w.plain = false
			p.i++
			p.dquote(&b, &w)
		case '$':
			p.dollar(&b, &w)
		case '`':
			w.plain = false
			p.backquote(&w)
		case '*', '?':
			w.dynamic = true
			b.WriteByte(c)
			p.i++
		case '[':
			globOpen = true
			b.WriteByte(c)
			p.i++
		case ']':
			if globOpen {
				w.dynamic = true
			}
			b.WriteByte(c)
			p.i++
		case '~':
			if b.Len() == 0 {
				w.dynamic = true
			}
			b.WriteByte(c)
			p.i++
		case '{':
			// Brace expansion ({a,b}, {1..3}) in shells that have it.
			if end := strings.IndexByte(p.s[p.i:], '}'); end > 0 {
				body := p.s[p.i : p.i+end]
				if strings.Contains(body, ",") || strings.Contains(body, "..") {
					w.dynamic = true
				}
			}
			b.WriteByte(c)
			p.i++
		default:
			b.WriteByte(c)
			p.i++
		}
	}
	w.lit = b.String()
	return w
}

// dquote reads the rest of a "..." string.
func (p *parser) dquote(b *strings.Builder, w *word) {
	for p.i < len(p.s) && !p.stop {
		c := p.s[p.i]
		switch c {
		case '"':
			p.i++
			return
		case '\\':
			if n := p.peek(1); n != 0 && strings.IndexByte("$`\"\\\n", n) >= 0 {
				if n != '\n' {
					b.WriteByte(n)
				}
				p.i += 2
				continue
			}
			b.WriteByte(c)
			p.i++
		case '$':
			p.dollar(b, w)
		case '`':
			p.backquote(w)
		default:
			b.WriteByte(c)
			p.i++
		}
	}
	if !p.stop {
		p.a.incomplete(`a " quote is not closed`)
	}
}

// dollar reads an expansion starting at '$'.
func (p *parser) dollar(b *strings.Builder, w *word) {
	n := p.peek(1)
	switch {
	case n == '(' && p.peek(2) == '(':
		// $((arithmetic)): scan its body for substitutions.
		w.plain, w.dynamic = false, true
		p.i += 3
		body, ok := p.balanced('(', ')', 2)
		if !ok {
			p.a.incomplete("a $(( is not closed")
		}
		p.sub(body, false)
	case n == '(':
		w.plain, w.dynamic = false, true
		p.i += 2
		p.nested()
	case n == '{':
		w.plain, w.dynamic = false, true
		p.i += 2
		body, ok := p.balanced('{', '}', 1)
		if !ok {
			p.a.incomplete("a ${ is not closed")
		}
		p.sub(body, false)
	case n == '\'' || n == '"':
		// $'...' and $"..." mean different things in different shells.
		w.plain, w.dynamic = false, true
		p.a.incomplete("$' or $\" quoting")
		p.i++
	case isNameByte(n, true):
		w.plain, w.dynamic = false, true
		p.i++
		for p.i < len(p.s) && isNameByte(p.s[p.i], false) {
			p.i++
		}
	case n != 0 && strings.IndexByte("0123456789@*#?-$!", n) >= 0:
		w.plain, w.dynamic = false, true
		p.i += 2
	default:
		b.WriteByte('$')
		p.i++
	}
}

// balanced returns the text up to the close that balances the opens
// already consumed (need closes in a row end it: 2 for "))"), skipping
// quoted text, and moves past it.
func (p *parser) balanced(open, close byte, need int) (string, bool) {
	start := p.i
	depth := 0
	for p.i < len(p.s) {
		c := p.s[p.i]
		switch {
		case c == '\\':
			p.i += 2
			continue
		case c == '\'':
			if end := strings.IndexByte(p.s[p.i+1:], '\''); end >= 0 {
				p.i += end + 2
				continue
			}
			p.i = len(p.s)
			return p.s[start:], false
		case c == open:
			depth++
		case c == close && depth > 0:
			depth--
		case c == close:
			if need == 1 || p.peek(1) == close {
				body := p.s[start:p.i]
				p.i += need
				return body, true
			}
		}
		p.i++
	}
	return p.s[start:], false
}

// backquote reads `...` and parses its body as commands.
func (p *parser) backquote(w *word) {
	w.plain, w.dynamic = false, true
	p.i++
	var b strings.Builder
	for p.i < len(p.s) && p.s[p.i] != '`' {
		if p.s[p.i] == '\\' && strings.IndexByte("`\\$", p.peek(1)) >= 0 && p.peek(1) != 0 {
			b.WriteByte(p.s[p.i+1])
			p.i += 2
			continue
		}
		b.WriteByte(p.s[p.i])
		p.i++
	}
	if p.i >= len(p.s) {
		p.a.incomplete("a ` quote is not closed")
	} else {
		p.i++
	}
	p.sub(b.String(), true)
}

// expansions scans the body of ${...} or $((...)) for substitutions.
func (p *parser) expansions() {
	var b strings.Builder
	w := word{}
	for p.i < len(p.s) && !p.stop {
		switch p.s[p.i] {
		case '$':
			p.dollar(&b, &w)
		case '`':
			p.backquote(&w)
		case '\\':
			p.i += 2
		case '\'':
			if end := strings.IndexByte(p.s[p.i+1:], '\''); end >= 0 {
				p.i += end + 2
			} else {
				p.i = len(p.s)
			}
		default:
			p.i++
		}
	}
}

// redirect reads a redirection operator at p.i and its target.
func (p *parser) redirect(cur *simpleCmd) {
	ops := []string{"&>>", "&>", "<<<", "<<-", "<<", "<>", "<&", ">>", ">|", ">&", "<", ">"}
	var op string
	for _, o := range ops {
		if strings.HasPrefix(p.s[p.i:], o) {
			op = o
			break
		}
	}
	p.i += len(op)
	for p.i < len(p.s) && (p.s[p.i] == ' ' || p.s[p.i] == '\t') {
		p.i++
	}
	if p.i >= len(p.s) || strings.IndexByte("\n;&|()<>", p.s[p.i]) >= 0 {
		p.a.incomplete("a %s redirection has no target", op)
		return
	}
	target := p.word()
	cur.redirs = append(cur.redirs, redirect{op: op, target: target})
	if op == "<<" || op == "<<-" {
		p.heredocs = append(p.heredocs, heredoc{delim: target.lit, strip: op == "<<-", expand: target.plain})
	}
}

// readHeredocs consumes the bodies of pending here-documents, which start
// on the line after their operator.
func (p *parser) readHeredocs() {
	for _, h := range p.heredocs {
		var body strings.Builder
		found := false
		for p.i < len(p.s) {
			end := strings.IndexByte(p.s[p.i:], '\n')
			line := p.s[p.i:]
			if end >= 0 {
				line = p.s[p.i : p.i+end]
				p.i += end + 1
			} else {
				p.i = len(p.s)
			}
			cmp := line
			if h.strip {
				cmp = strings.TrimLeft(line, "\t")
			}
			if cmp == h.delim {
				found = true
				break
			}
			body.WriteString(line)
			body.WriteByte('\n')
		}
		p.a.heredocs = append(p.a.heredocs, body.String())
		if h.expand {
			// $(...) and `...` in an unquoted here-document run.
			p.sub(body.String(), false)
		}
		if !found {
			p.a.incomplete("a here-document is not closed by %q", h.delim)
		}
	}
	p.heredocs = nil
}
