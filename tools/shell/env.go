package shell

import (
	"strings"

	"lemo/tools/internal/proc"
)

// scrubEnv returns the environment a child gets from environ (proc.Env):
// never a LEMO_* variable; then DropEnv removes, PassEnv keeps, and names
// that look secret are removed. Malformed entries are dropped.
func scrubEnv(environ, pass, drop []string) []string {
	return proc.Env(environ, proc.EnvRules{Pass: matchAnyFold(pass), Drop: matchAnyFold(drop)})
}

// matchAnyFold returns a rule that reports the names matching one of the
// patterns (wildMatch, case-insensitive).
func matchAnyFold(patterns []string) func(name string) bool {
	up := make([]string, len(patterns))
	for i, p := range patterns {
		up[i] = strings.ToUpper(p)
	}
	return func(name string) bool {
		name = strings.ToUpper(name)
		for _, p := range up {
			if wildMatch(p, name) {
				return true
			}
		}
		return false
	}
}

// wildMatch reports whether s matches p, where "*" in p matches any run of
// bytes (including "/") and "?" any one byte; everything else is literal.
func wildMatch(p, s string) bool {
	star, match := -1, 0
	i, j := 0, 0
	for j < len(s) {
		switch {
		case i < len(p) && p[i] == '*':
			star, match = i, j
			i++
		case i < len(p) && (p[i] == '?' || p[i] == s[j]):
			i++
			j++
		case star >= 0:
			i = star + 1
			match++
			j = match
		default:
			return false
		}
	}
	for i < len(p) && p[i] == '*' {
		i++
	}
	return i == len(p)
}
