package proc

import (
	"slices"
	"strings"
	"testing"
)

func TestEnv(t *testing.T) {
	environ := []string{"PATH=/bin", "HOME=/h", "=x", "novalue", "B=2=3", "KEYBOARD=us", "MY_API_KEY=k", "github_token=g",
		"DB_PASSWORD=p", "PGPASSWD=p", "GOOGLE_APPLICATION_CREDENTIALS=c", "AWS_SECRET_ACCESS_KEY=s", "SSH_AUTH_SOCK=/s",
		"LEMO_ADDR=a", "lemo_lower=l", "Lemo_Token=t", "PASSME_TOKEN=keep", "DROPME=d", "PATH=/usr/bin"}
	for _, c := range []struct {
		name  string
		rules EnvRules
		want  string
	}{
		{"defaults", EnvRules{}, "PATH=/bin HOME=/h B=2=3 SSH_AUTH_SOCK=/s DROPME=d PATH=/usr/bin"},
		{"pass and drop", EnvRules{
			Pass: Names([]string{"PASSME_TOKEN", "LEMO_ADDR", "DROPME"}),
			Drop: func(n string) bool { return strings.HasPrefix(n, "DROP") || n == "HOME" },
		}, "PATH=/bin B=2=3 SSH_AUTH_SOCK=/s PASSME_TOKEN=keep PATH=/usr/bin"},
		{"allow-list", EnvRules{
			Allow:           func(n string) bool { return n == "PATH" || strings.HasSuffix(n, "_SOCK") || n == "MY_API_KEY" },
			Pass:            Names([]string{"HOME"}),
			MoreSecretWords: []string{"auth"},
		}, "PATH=/bin HOME=/h PATH=/usr/bin"},
		{"pass beats the allow-list and the secret words", EnvRules{
			Allow: func(string) bool { return false },
			Pass:  Names([]string{"MY_API_KEY", "github_token", "GITHUB_TOKEN"}),
		}, "MY_API_KEY=k github_token=g"},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := strings.Join(Env(environ, c.rules), " "); got != c.want {
				t.Errorf("Env =\n %s\nwant\n %s", got, c.want)
			}
		})
	}
	if got := Env(nil, EnvRules{}); got == nil || len(got) != 0 {
		t.Errorf("Env(nil) = %#v, want an empty environment (not nil: nil means the daemon's own to os/exec)", got)
	}
}

func TestLooksSecret(t *testing.T) {
	for name, want := range map[string]bool{"api_key": true, "Secret": true, "X_TOKEN_Y": true, "passwd": true, "MYPASSWORD": true,
		"credentials": true, "PATH": false, "HOME": false, "SSH_AUTH_SOCK": false, "KEYBOARD": true} {
		if got := LooksSecret(name); got != want {
			t.Errorf("LooksSecret(%q) = %v, want %v", name, got, want)
		}
	}
	if !LooksSecret("SSH_AUTH_SOCK", "AUTH") || !LooksSecret("http_cookie", "COOKIE") || LooksSecret("PATH", "AUTH") {
		t.Error("LooksSecret ignores the further words")
	}
	for _, n := range []string{"LEMO_X", "lemo_", "Lemo_a"} {
		if !IsDaemonVar(n) {
			t.Errorf("IsDaemonVar(%q) = false", n)
		}
	}
	if IsDaemonVar("LEMON") || IsDaemonVar("X_LEMO_Y") {
		t.Error("IsDaemonVar matches beyond the LEMO_ prefix")
	}
}

// FuzzEnv checks Env's promises on any environment and lists: what passes
// is a subsequence of the input of well-formed entries; no daemon
// variable and nothing dropped passes whatever Pass says; without Pass
// only allowed names that do not look secret pass; every entry Pass
// admits and Drop does not passes.
func FuzzEnv(f *testing.F) {
	f.Add("PATH=/bin\nMY_API_KEY=k\nLEMO_X=1\n=x\nnovalue", "MY_API_KEY", "PATH", "P", "AUTH")
	f.Add("lemo_a=1\nLeMo_B=2\nA=b=c", "lemo_a", "", "", "")
	f.Add("x=1\nX=2\ntoken=3", "token", "x", "", "tok")
	f.Fuzz(func(t *testing.T, environ, pass, drop, allowPrefix, word string) {
		in := strings.Split(environ, "\n")
		rules := EnvRules{
			Pass:            Names(strings.Split(pass, ",")),
			Drop:            Names(strings.Split(drop, ",")),
			Allow:           func(n string) bool { return strings.HasPrefix(n, allowPrefix) },
			MoreSecretWords: []string{word},
		}
		if word == "" {
			rules.MoreSecretWords = nil
		}
		out := Env(in, rules)
		i := 0
		for _, e := range out {
			for i < len(in) && in[i] != e {
				i++
			}
			if i == len(in) {
				t.Fatalf("Env output %q is not a subsequence of the input %q", out, in)
			}
			i++
			name, _, ok := strings.Cut(e, "=")
			switch {
			case !ok || name == "":
				t.Fatalf("malformed entry %q passed", e)
			case IsDaemonVar(name):
				t.Fatalf("daemon variable %q passed", e)
			case rules.Drop(name):
				t.Fatalf("dropped variable %q passed", e)
			case !rules.Pass(name) && (!rules.Allow(name) || LooksSecret(name, rules.MoreSecretWords...)):
				t.Fatalf("variable %q passed without Pass, not allowed or looking secret", e)
			}
		}
		for _, e := range in {
			name, _, ok := strings.Cut(e, "=")
			if ok && name != "" && !IsDaemonVar(name) && rules.Pass(name) && !rules.Drop(name) && !slices.Contains(out, e) {
				t.Fatalf("passed variable %q is missing from %q", e, out)
			}
		}
	})
}
