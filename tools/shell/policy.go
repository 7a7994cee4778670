package shell

import (
	"fmt"
	"slices"
	"strings"
	"unicode"

	"lemo/excerpt"
)

// Decision is what the policy says about a command.
type Decision string

// Decisions, from the most to the least restrictive.
const (
	Deny  Decision = "deny"
	Ask   Decision = "ask"
	Allow Decision = "allow"
)

// Policy decides which commands run without asking, which need a person's
// approval, and which are refused.
//
// A rule is a list of words separated by spaces; a word may use "*" (any
// run of characters) and "?" (one character). Rules are matched against the
// simple commands of a command line after quote removal, as bash's grammar
// (mvdan.cc/sh's parser) finds them: in pipelines and lists, subshells,
// groups, control structures and functions, and inside $(...), `...`,
// <(...), ${...}, arithmetic and here-documents.
//
//   - Deny and Ask rules match a run of words anywhere in a simple command
//     ("rm -rf" matches "sudo rm -rf /" and "xargs rm -rf"), and the first
//     word also matches by base name ("rm" matches "/bin/rm"). They are also
//     matched against a rough split of the whole text that ignores quoting,
//     comments and here-documents, so a denied command inside a string
//     (sh -c 'rm -rf /', echo rm | sh) or hidden from the parser is still
//     found. This errs towards denying: "echo rm" matches a deny rule "rm".
//   - Allow rules match at the start of a simple command (after
//     assignments), exactly: "go test" allows "go test ./..." but not
//     "/tmp/go test" or "sudo go test". A command line is allowed only when
//     every simple command in it is allowed, none has a command name only
//     known at run time ($CMD, $(...), globs), none redirects output to a
//     file other than /dev/null, and none assigns PATH, IFS, LD_* or
//     similar variables. A lone "*" rule allows any command.
//
// Deny always wins, then Ask, then Allow; when nothing matches, Default
// applies (Ask when empty). A command line the parser cannot follow
// completely (it does not parse, $'...' quoting, more than 256 commands, a
// command name known only at run time, text run as a command by eval or
// sh -c, `...` holding quotes or backslashes, a command substitution inside
// arithmetic, a comment ending in a backslash) is denied if any part
// matches a deny rule and otherwise asks (or is denied when Default is
// Deny): it fails closed. Deny rules guard against
// mistakes and simple chaining; they are not a sandbox against a determined
// adversary (for example base64-encoded text piped into a shell).
type Policy struct {
	Deny    []string
	Ask     []string
	Allow   []string
	Default Decision
}

func (p Policy) validate() []error {
	var errs []error
	switch p.Default {
	case "", Allow, Ask, Deny:
	default:
		errs = append(errs, fmt.Errorf("shell: Config.Policy.Default = %q: want allow, ask or deny", p.Default))
	}
	for name, list := range map[string][]string{"Deny": p.Deny, "Ask": p.Ask, "Allow": p.Allow} {
		for i, r := range list {
			switch {
			case strings.TrimSpace(r) == "":
				errs = append(errs, fmt.Errorf("shell: Config.Policy.%s[%d] is empty", name, i))
			case strings.ContainsAny(r, "\x00\n"):
				errs = append(errs, fmt.Errorf("shell: Config.Policy.%s[%d] = %q: want words on one line", name, i, r))
			case len(strings.Fields(r)) > 32:
				errs = append(errs, fmt.Errorf("shell: Config.Policy.%s[%d] = %q: at most 32 words", name, i, r))
			}
		}
	}
	return errs
}

// Verdict is the policy's answer for one command line.
type Verdict struct {
	Decision Decision
	// Rule is the rule that decided, "" when none did.
	Rule string
	// Reason explains the decision to a person (and to the model on deny).
	Reason string
}

type rule struct {
	text  string
	words []string
}

type rules struct {
	deny, ask, allow []rule
	def              Decision
}

func compileRules(p Policy) *rules {
	comp := func(list []string) []rule {
		var out []rule
		for _, r := range list {
			out = append(out, rule{text: r, words: strings.Fields(r)})
		}
		return out
	}
	def := p.Default
	if def == "" {
		def = Ask
	}
	return &rules{deny: comp(p.Deny), ask: comp(p.Ask), allow: comp(p.Allow), def: def}
}

// check decides about a command line.
func (r *rules) check(command string) Verdict {
	if strings.IndexByte(command, 0) >= 0 {
		return Verdict{Decision: Deny, Reason: "the command contains a NUL byte"}
	}
	if strings.TrimSpace(command) == "" {
		return Verdict{Decision: Deny, Reason: "the command is empty"}
	}
	a := analyse(command)
	crude := crudeSplits(command)
	if rl, part, ok := r.matchAnywhere(r.deny, a, crude); ok {
		return Verdict{Decision: Deny, Rule: rl.text, Reason: fmt.Sprintf("deny rule %q matches %q", rl.text, part)}
	}
	if rl, part, ok := r.matchAnywhere(r.ask, a, crude); ok {
		return Verdict{Decision: Ask, Rule: rl.text, Reason: fmt.Sprintf("ask rule %q matches %q", rl.text, part)}
	}
	unclear := append([]string{}, a.reasons...)
	for _, c := range a.cmds {
		if name, ok := commandName(c); ok && name.dynamic {
			unclear = append(unclear, fmt.Sprintf("the command name in %q is only known at run time", show(c)))
			break
		}
	}
	if len(unclear) > 0 && (len(r.deny) > 0 || len(r.ask) > 0 || r.def == Deny) {
		d := Ask
		if r.def == Deny {
			d = Deny
		}
		return Verdict{Decision: d, Reason: "the command cannot be fully checked against the policy: " + strings.Join(unclear, "; ")}
	}
	var used []string
	allowed := len(a.cmds) > 0 && (len(unclear) == 0 || r.allowsAny())
	uncovered := "the command"
	if len(unclear) > 0 {
		uncovered = "the command, which cannot be fully analysed (" + strings.Join(unclear, "; ") + ")"
	}
	for _, c := range a.cmds {
		if !allowed {
			break
		}
		rl, why := r.allowRule(c)
		if rl == nil {
			allowed = false
			uncovered = why
			break
		}
		if !slices.Contains(used, rl.text) {
			used = append(used, rl.text)
		}
	}
	if allowed {
		return Verdict{Decision: Allow, Rule: used[0], Reason: fmt.Sprintf("allowed by rule %s", quoteList(used))}
	}
	return Verdict{Decision: r.def, Reason: fmt.Sprintf("no allow rule covers %s (default: %s)", uncovered, r.def)}
}

func (r *rules) allowsAny() bool {
	for _, rl := range r.allow {
		if len(rl.words) == 1 && rl.words[0] == "*" {
			return true
		}
	}
	return false
}

// riskyAssignments change how later commands are found or run.
var riskyAssignments = []string{"PATH", "IFS", "ENV", "BASH_ENV", "CDPATH", "SHELLOPTS", "BASHOPTS", "PS4", "PROMPT_COMMAND", "LD_*", "DYLD_*", "GIT_*"}

// allowRule returns the allow rule covering c, or nil and why not.
func (r *rules) allowRule(c *simpleCmd) (*rule, string) {
	for _, rd := range c.redirs {
		if strings.Contains(rd.op, ">") && !harmlessTarget(rd) {
			return nil, fmt.Sprintf("%q (it writes to a file)", show(c))
		}
	}
	words := c.words
	for len(words) > 0 && isAssignment(words[0]) {
		name, _, _ := strings.Cut(words[0].lit, "=")
		for _, risky := range riskyAssignments {
			if wildMatch(risky, name) {
				return nil, fmt.Sprintf("%q (it sets %s)", show(c), name)
			}
		}
		words = words[1:]
	}
	if len(words) == 0 {
		return &rule{text: "(assignment or redirection only)"}, ""
	}
	for i := range r.allow {
		rl := &r.allow[i]
		if len(rl.words) == 1 && rl.words[0] == "*" {
			return rl, ""
		}
		if len(words) < len(rl.words) {
			continue
		}
		ok := true
		for k, pw := range rl.words {
			if words[k].dynamic || !wildMatch(pw, words[k].lit) {
				ok = false
				break
			}
		}
		if ok {
			return rl, ""
		}
	}
	return nil, fmt.Sprintf("%q", show(c))
}

func harmlessTarget(rd redirect) bool {
	if rd.target.dynamic {
		return false
	}
	t := rd.target.lit
	if rd.op == ">&" && (isDigits(t) || t == "-") {
		return true
	}
	return t == "/dev/null" || t == "/dev/stdout" || t == "/dev/stderr"
}

func isAssignment(w word) bool {
	name, _, ok := strings.Cut(w.lit, "=")
	if !ok || name == "" || !isNameByte(name[0], true) {
		return false
	}
	for i := 1; i < len(name); i++ {
		if !isNameByte(name[i], false) {
			return false
		}
	}
	return true
}

// commandName returns the word that names the command (after assignments).
func commandName(c *simpleCmd) (word, bool) {
	for _, w := range c.words {
		if !isAssignment(w) {
			return w, true
		}
	}
	return word{}, false
}

// matchAnywhere finds a rule matching a run of words anywhere in a parsed
// simple command or in a rough split of the whole text.
func (r *rules) matchAnywhere(list []rule, a *analysis, crude [][]string) (*rule, string, bool) {
	for i := range list {
		rl := &list[i]
		for _, c := range a.cmds {
			lits := make([]string, len(c.words))
			for k, w := range c.words {
				lits[k] = w.lit
			}
			if matchRun(rl.words, lits) {
				return rl, show(c), true
			}
		}
		for _, toks := range crude {
			if k := indexRun(rl.words, toks); k >= 0 {
				return rl, strings.Join(toks[k:min(len(toks), k+len(rl.words)+3)], " "), true
			}
		}
	}
	return nil, "", false
}

func matchRun(pattern, words []string) bool { return indexRun(pattern, words) >= 0 }

// indexRun returns where pattern matches a run of words, or -1. The first
// pattern word also matches a word's base name.
func indexRun(pattern, words []string) int {
	for i := 0; i+len(pattern) <= len(words); i++ {
		ok := true
		for k, pw := range pattern {
			w := words[i+k]
			if wildMatch(pw, w) {
				continue
			}
			if k == 0 && !strings.Contains(pw, "/") {
				if j := strings.LastIndexByte(w, '/'); j >= 0 && wildMatch(pw, w[j+1:]) {
					continue
				}
			}
			ok = false
			break
		}
		if ok {
			return i
		}
	}
	return -1
}

// crudeSplits splits the raw text into words ignoring quoting (quote
// characters and backslashes are deleted, line continuations joined) at
// blanks and shell operators; the second split also breaks at { } , = so
// that brace expansions and alias definitions are seen.
func crudeSplits(s string) [][]string {
	s = strings.ReplaceAll(s, "\\\r\n", "")
	s = strings.ReplaceAll(s, "\\\n", "")
	// $IFS and ${IFS} expand to blanks.
	s = strings.ReplaceAll(strings.ReplaceAll(s, "${IFS}", " "), "$IFS", " ")
	s = strings.Map(func(r rune) rune {
		if r == '\'' || r == '"' || r == '\\' {
			return -1
		}
		return r
	}, s)
	split := func(extra string) []string {
		return strings.FieldsFunc(s, func(r rune) bool {
			return unicode.IsSpace(r) || strings.ContainsRune(";&|()<>`$", r) || strings.ContainsRune(extra, r)
		})
	}
	return [][]string{split(""), split("{},=")}
}

func show(c *simpleCmd) string {
	var parts []string
	for _, w := range c.words {
		if w.dynamic && w.lit == "" {
			parts = append(parts, "…")
			continue
		}
		parts = append(parts, w.lit)
	}
	return excerpt.Short(strings.Join(parts, " "), 200)
}

func quoteList(list []string) string {
	q := make([]string, len(list))
	for i, s := range list {
		q[i] = fmt.Sprintf("%q", s)
	}
	return strings.Join(q, ", ")
}
