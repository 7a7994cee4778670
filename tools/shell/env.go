package shell

import "strings"

// secretWords mark a variable as secret when its name contains one of them
// (compared in upper case).
var secretWords = []string{"KEY", "SECRET", "TOKEN", "PASSWORD", "PASSWD", "CREDENTIAL"}

// scrubEnv returns the environment a child gets from environ: never a
// LEMO_* variable; then DropEnv removes, PassEnv keeps, and names that look
// secret are removed. Malformed entries are dropped.
func scrubEnv(environ, pass, drop []string) []string {
	out := make([]string, 0, len(environ))
	for _, e := range environ {
		name, _, ok := strings.Cut(e, "=")
		if !ok || name == "" {
			continue
		}
		up := strings.ToUpper(name)
		switch {
		case strings.HasPrefix(up, "LEMO_"):
			continue
		case matchAnyFold(drop, name):
			continue
		case matchAnyFold(pass, name):
		case looksSecret(up):
			continue
		}
		out = append(out, e)
	}
	return out
}

func looksSecret(upper string) bool {
	for _, w := range secretWords {
		if strings.Contains(upper, w) {
			return true
		}
	}
	return false
}

func matchAnyFold(patterns []string, name string) bool {
	for _, p := range patterns {
		if wildMatch(strings.ToUpper(p), strings.ToUpper(name)) {
			return true
		}
	}
	return false
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
