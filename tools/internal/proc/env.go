package proc

import "strings"

// secretWords mark a variable as secret when its name contains one of them
// (compared in upper case).
var secretWords = []string{"KEY", "SECRET", "TOKEN", "PASSWORD", "PASSWD", "CREDENTIAL"}

// EnvRules are a tool's rules for its children's environment, applied by
// Env besides the fixed ones. The zero value keeps every well-formed
// variable that is not the daemon's and does not look secret.
type EnvRules struct {
	// Drop removes the variables it reports; it wins over Pass.
	Drop func(name string) bool
	// Pass admits the variables it reports even though their names look
	// secret or Allow refuses them.
	Pass func(name string) bool
	// Allow, when set, is an allow-list: other variables are removed
	// unless Pass admits them.
	Allow func(name string) bool
	// MoreSecretWords are further words that make a name look secret
	// (compared in upper case).
	MoreSecretWords []string
}

// Env returns the environment a child gets from environ ("NAME=value"
// entries), in their order: malformed entries and LEMO_* variables are
// dropped whatever the rules say; then rules.Drop removes, rules.Pass
// keeps, rules.Allow (when set) must admit, and names that look secret
// (LooksSecret) are removed. Duplicate names are kept as they are.
func Env(environ []string, rules EnvRules) []string {
	out := make([]string, 0, len(environ))
	for _, e := range environ {
		name, _, ok := strings.Cut(e, "=")
		if !ok || name == "" || IsDaemonVar(name) {
			continue
		}
		switch {
		case rules.Drop != nil && rules.Drop(name):
			continue
		case rules.Pass != nil && rules.Pass(name):
		case rules.Allow != nil && !rules.Allow(name):
			continue
		case LooksSecret(name, rules.MoreSecretWords...):
			continue
		}
		out = append(out, e)
	}
	return out
}

// IsDaemonVar reports whether name is one of the daemon's own variables
// (LEMO_*, any case), which no child ever gets.
func IsDaemonVar(name string) bool { return strings.HasPrefix(strings.ToUpper(name), "LEMO_") }

// LooksSecret reports whether name contains KEY, SECRET, TOKEN, PASSWORD,
// PASSWD, CREDENTIAL or one of more (any case).
func LooksSecret(name string, more ...string) bool {
	up := strings.ToUpper(name)
	for _, words := range [][]string{secretWords, more} {
		for _, w := range words {
			if strings.Contains(up, strings.ToUpper(w)) {
				return true
			}
		}
	}
	return false
}

// Names returns a rule that reports exactly the given names (case
// sensitive), for EnvRules.Pass or Drop.
func Names(names []string) func(name string) bool {
	set := make(map[string]bool, len(names))
	for _, n := range names {
		set[n] = true
	}
	return func(name string) bool { return set[name] }
}
