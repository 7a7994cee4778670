package delegate

import (
	"fmt"
	"strings"

	"lemo/tools/internal/proc"
)

// The agent's environment is built from an allow-list, not by removing what
// looks dangerous: the agent runs model-driven commands, so it gets what a
// coding agent needs to run (paths, locale, proxies, its own settings) and
// the provider settings the configuration names, nothing else.

// baseEnv are variables passed through when present.
var baseEnv = map[string]bool{
	"PATH": true, "HOME": true, "USER": true, "LOGNAME": true, "SHELL": true, "LANG": true, "LANGUAGE": true,
	"TZ": true, "TMPDIR": true, "TERM": true, "COLORTERM": true,
	"HTTP_PROXY": true, "HTTPS_PROXY": true, "NO_PROXY": true, "ALL_PROXY": true,
	"http_proxy": true, "https_proxy": true, "no_proxy": true, "all_proxy": true,
	"SSL_CERT_FILE": true, "SSL_CERT_DIR": true, "NODE_EXTRA_CA_CERTS": true,
}

// basePrefixes are prefixes of variables passed through when their names
// do not look secret: locale, XDG folders, and the agents' own settings.
var basePrefixes = []string{"LC_", "XDG_", "PI_", "OMP_", "BUN_"}

// moreSecretWords mark a variable as secret for an agent besides proc's
// (KEY, SECRET, TOKEN, PASSWORD, PASSWD, CREDENTIAL).
var moreSecretWords = []string{"AUTH", "COOKIE", "SESSION"}

// agentEnv returns the agent's environment: from environ the allow-listed
// variables whose names do not look secret, the variables named in pass
// (exact names; they may look secret: that is how a provider key is passed),
// then set ("NAME=value", overriding), then extra. LEMO_* variables are
// never passed. Later entries win over earlier ones with the same name.
func agentEnv(environ, pass, set, extra []string) []string {
	vals := make(map[string]string)
	var order []string
	put := func(name, value string) {
		if _, ok := vals[name]; !ok {
			order = append(order, name)
		}
		vals[name] = value
	}
	kept := proc.Env(environ, proc.EnvRules{Pass: proc.Names(pass), Allow: allowed, MoreSecretWords: moreSecretWords})
	for _, kv := range append(append(kept, set...), extra...) {
		// set and extra are not scrubbed, but never malformed or LEMO_*.
		name, value, ok := strings.Cut(kv, "=")
		if !ok || name == "" || proc.IsDaemonVar(name) {
			continue
		}
		put(name, value)
	}
	out := make([]string, 0, len(order))
	for _, n := range order {
		out = append(out, n+"="+vals[n])
	}
	return out
}

func allowed(name string) bool {
	if baseEnv[name] {
		return true
	}
	for _, p := range basePrefixes {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	return false
}

// lookupEnv returns the value of name in env ("" when absent).
func lookupEnv(env []string, name string) string {
	v := ""
	for _, kv := range env {
		if n, val, ok := strings.Cut(kv, "="); ok && n == name {
			v = val
		}
	}
	return v
}

// validEnvEntries checks "NAME=value" entries of the configuration.
func validEnvEntries(field string, entries []string) []error {
	var errs []error
	for _, kv := range entries {
		name, _, ok := strings.Cut(kv, "=")
		switch {
		case !ok || name == "":
			errs = append(errs, fmt.Errorf("delegate: Config.%s entry %q: want NAME=value", field, kv))
		case proc.IsDaemonVar(name):
			errs = append(errs, fmt.Errorf("delegate: Config.%s entry %q: LEMO_* variables are never passed to the agent", field, kv))
		}
	}
	return errs
}
