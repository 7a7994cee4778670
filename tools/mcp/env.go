package mcp

import (
	"strings"

	"lemo/tools/internal/proc"
)

// baseEnv are the variables of the daemon's environment every stdio server
// gets when present and not secret-looking: what finding and running a
// program needs (npx needs PATH to find node), nothing of Lemo's.
var baseEnv = map[string]bool{
	"PATH": true, "HOME": true, "USER": true, "LOGNAME": true, "LANG": true, "LANGUAGE": true, "TZ": true, "TMPDIR": true,
}

// serverEnv is a stdio server's environment: from environ the base
// variables (and LC_*) whose names do not look secret, then each entry of
// listed: "NAME" passes the daemon's NAME (a secret-looking one too: that is
// how a key is named), "NAME=value" sets it; then extra (the tags). LEMO_*
// variables never pass. Later entries win.
func serverEnv(environ, listed, extra []string) []string {
	var pass []string
	var set []string
	for _, e := range listed {
		if strings.Contains(e, "=") {
			set = append(set, e)
		} else {
			pass = append(pass, e)
		}
	}
	passed := proc.Names(pass)
	kept := proc.Env(environ, proc.EnvRules{
		Pass:  passed,
		Allow: func(name string) bool { return baseEnv[name] || strings.HasPrefix(name, "LC_") },
	})
	vals := make(map[string]string)
	var order []string
	for _, kv := range append(append(kept, set...), extra...) {
		name, value, ok := strings.Cut(kv, "=")
		if !ok || name == "" {
			continue
		}
		if proc.IsDaemonVar(name) && !isTag(kv, extra) {
			continue
		}
		if _, seen := vals[name]; !seen {
			order = append(order, name)
		}
		vals[name] = value
	}
	out := make([]string, 0, len(order))
	for _, n := range order {
		out = append(out, n+"="+vals[n])
	}
	return out
}

func isTag(kv string, extra []string) bool {
	for _, e := range extra {
		if e == kv {
			return true
		}
	}
	return false
}
