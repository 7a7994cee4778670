package shell

import (
	"fmt"
	"path"
	"strings"

	"mvdan.cc/sh/v3/syntax"
)

// Limits of command analysis. A command beyond them is not analysed in
// full and fails closed (see Policy).
const (
	maxAnalyseBytes = 64 << 10
	maxCommands     = 256
)

// word is one shell word after quote removal. Expansions ($x, $(...),
// `...`) contribute no text; dynamic records that the word's final value is
// only known at run time (an expansion, an unquoted glob, tilde or brace).
type word struct {
	lit     string
	dynamic bool
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
	cmds []*simpleCmd
	// reasons says why the analysis is incomplete; empty when complete.
	reasons []string
	full    bool // maxCommands reached: the walk stops
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

// opaqueShells run their -c argument as a command line.
var opaqueShells = map[string]bool{"sh": true, "bash": true, "dash": true, "zsh": true, "ksh": true, "mksh": true, "ash": true, "busybox": true}

// analyse lists the simple commands a shell would run for src, with
// mvdan.cc/sh's bash parser (a superset of POSIX sh): across pipelines,
// lists, subshells, groups, control structures, functions, and inside
// command and process substitutions, parameter expansions, arithmetic and
// here-documents. It does not execute or expand anything. Where the text
// does not parse, hides a command line in an argument (eval, sh -c) or
// uses $'...' quoting it records a reason, so callers fail closed.
func analyse(src string) *analysis {
	a := &analysis{}
	if len(src) > maxAnalyseBytes {
		a.incomplete("the command is longer than %d bytes", maxAnalyseBytes)
		return a
	}
	f, err := syntax.NewParser(syntax.Variant(syntax.LangBash), syntax.KeepComments(true)).Parse(strings.NewReader(src), "")
	if err != nil {
		a.incomplete("the shell parser stops at %v", err)
		return a
	}
	syntax.Walk(f, func(n syntax.Node) bool {
		// bash ends a comment at the newline even after a backslash; the
		// parser joins the lines.
		if c, ok := n.(*syntax.Comment); ok {
			at := int(c.Hash.Offset())
			if end := strings.IndexByte(src[at:], '\n'); end > 0 && src[at+end-1] == '\\' {
				a.incomplete("a comment ends in a backslash")
			}
		}
		return true
	})
	syntax.Walk(f, func(n syntax.Node) bool {
		if a.full {
			return false
		}
		switch n := n.(type) {
		case *syntax.Stmt:
			a.stmt(n)
		case *syntax.CmdSubst:
			// Inside `...` bash reads quotes and backslashes differently
			// (and nests by escaping): only a plain body is followed.
			if n.Backquotes && n.Left.IsValid() && n.Right.IsValid() && n.Right.Offset() > n.Left.Offset() && int(n.Right.Offset()) <= len(src) {
				if body := src[n.Left.Offset()+1 : n.Right.Offset()]; strings.ContainsAny(body, "'\"\\$`") {
					a.incomplete("a `...` substitution holds quotes, backslashes or expansions, which are not analysed")
				}
			}
		case *syntax.ArithmExp, *syntax.ArithmCmd:
			// bash may read "$((" or "((" as a subshell instead (when what
			// follows is not arithmetic to it), and then runs a command
			// substitution's output as a command.
			syntax.Walk(n, func(m syntax.Node) bool {
				if _, ok := m.(*syntax.CmdSubst); ok {
					a.incomplete("a command substitution inside arithmetic is not analysed")
					return false
				}
				return true
			})
		case *syntax.ForClause:
			// The loop variable is assigned: "for PATH in ..." is an
			// assignment like any other.
			if it, ok := n.Loop.(*syntax.WordIter); ok && it.Name != nil {
				a.add(&simpleCmd{words: []word{{lit: it.Name.Value + "=", dynamic: true}}})
			}
		}
		return true
	})
	return a
}

// add records a simple command, up to maxCommands.
func (a *analysis) add(c *simpleCmd) {
	if a.full {
		return
	}
	if len(a.cmds) == maxCommands {
		a.incomplete("more than %d commands", maxCommands)
		a.full = true
		return
	}
	a.cmds = append(a.cmds, c)
	if name, ok := commandName(c); ok && !name.dynamic {
		base := path.Base(name.lit)
		if base == "eval" {
			a.incomplete("%q runs its arguments as a command line, which is not analysed", show(c))
		}
		if opaqueShells[base] {
			for _, w := range c.words[1:] {
				if strings.HasPrefix(w.lit, "-") && !strings.HasPrefix(w.lit, "--") && strings.Contains(w.lit, "c") {
					a.incomplete("%q runs its argument as a command line, which is not analysed", show(c))
					break
				}
			}
		}
	}
}

// stmt records the simple command of a statement, or, for a compound
// command, its redirections (so that "{ ...; } > file" is seen writing).
func (a *analysis) stmt(s *syntax.Stmt) {
	c := &simpleCmd{}
	for _, r := range s.Redirs {
		rd := redirect{op: r.Op.String()}
		if r.Word != nil {
			rd.target = a.word(r.Word)
		}
		c.redirs = append(c.redirs, rd)
	}
	switch x := s.Cmd.(type) {
	case nil:
	case *syntax.CallExpr:
		for _, as := range x.Assigns {
			c.words = append(c.words, a.assign(as))
		}
		for _, w := range x.Args {
			c.words = append(c.words, a.word(w))
		}
	case *syntax.DeclClause:
		c.words = append(c.words, word{lit: x.Variant.Value})
		for _, as := range x.Args {
			if as.Naked && as.Value == nil && as.Name == nil {
				continue
			}
			c.words = append(c.words, a.assign(as))
		}
	case *syntax.LetClause:
		c.words = append(c.words, word{lit: "let"}, word{dynamic: true})
	case *syntax.TestClause:
		c.words = append(c.words, word{lit: "[["}, word{dynamic: true})
	case *syntax.ArithmCmd:
		c.words = append(c.words, word{lit: "(("}, word{dynamic: true})
	case *syntax.TimeClause:
		// After a pipe bash runs "time" as a program (the keyword only
		// starts a pipeline): cover it like one. The timed command is
		// walked on its own.
		c.words = append(c.words, word{lit: "time"})
	case *syntax.CoprocClause:
		c.words = append(c.words, word{lit: "coproc"})
	default:
		// A compound command: its own statements are walked.
	}
	if len(c.words) > 0 || len(c.redirs) > 0 {
		a.add(c)
	}
}

// assign renders NAME=value (or NAME+=value, NAME[i]=value, NAME=(...)) as
// the word "NAME=value".
func (a *analysis) assign(as *syntax.Assign) word {
	if as.Name == nil {
		// A declare argument that is not an assignment ("declare -x").
		if as.Value != nil {
			return a.word(as.Value)
		}
		return word{dynamic: true}
	}
	w := word{lit: as.Name.Value + "="}
	if as.Naked {
		return word{lit: as.Name.Value}
	}
	if as.Index != nil || as.Array != nil {
		w.dynamic = true
	}
	if as.Value != nil {
		v := a.word(as.Value)
		w.lit += v.lit
		w.dynamic = w.dynamic || v.dynamic
	}
	return w
}

// word removes quotes from w. Expansions contribute no text and make the
// word dynamic; the commands inside them are walked separately.
func (a *analysis) word(w *syntax.Word) word {
	var out word
	var b strings.Builder
	for i, part := range w.Parts {
		switch p := part.(type) {
		case *syntax.Lit:
			v := p.Value
			if globbed(v) || (i == 0 && strings.HasPrefix(v, "~")) {
				out.dynamic = true
			}
			b.WriteString(unescape(v, false))
		case *syntax.SglQuoted:
			if p.Dollar {
				a.incomplete("$'...' quoting is not analysed")
				out.dynamic = true
			}
			b.WriteString(p.Value)
		case *syntax.DblQuoted:
			for _, q := range p.Parts {
				if l, ok := q.(*syntax.Lit); ok {
					b.WriteString(unescape(l.Value, true))
				} else {
					out.dynamic = true
				}
			}
		default: // parameter, command, arithmetic and process expansions, extended globs
			out.dynamic = true
		}
	}
	out.lit = b.String()
	return out
}

// globbed reports whether an unquoted literal holds a pattern (*, ?, [...])
// or a brace expansion ({a,b}, {1..3}).
func globbed(v string) bool {
	if strings.ContainsAny(v, "*?") {
		return true
	}
	if i := strings.IndexByte(v, '['); i >= 0 && strings.IndexByte(v[i:], ']') > 0 {
		return true
	}
	if i := strings.IndexByte(v, '{'); i >= 0 {
		if j := strings.IndexByte(v[i:], '}'); j > 0 {
			body := v[i : i+j]
			return strings.Contains(body, ",") || strings.Contains(body, "..")
		}
	}
	return false
}

// unescape removes backslashes as the shell does: before any character
// outside quotes, before $ ` " \ inside double quotes.
func unescape(v string, quoted bool) string {
	if !strings.Contains(v, `\`) {
		return v
	}
	var b strings.Builder
	for i := 0; i < len(v); i++ {
		if v[i] == '\\' && i+1 < len(v) && (!quoted || strings.IndexByte("$`\"\\\n", v[i+1]) >= 0) {
			i++
		}
		b.WriteByte(v[i])
	}
	return b.String()
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
