package config

import (
	"slices"
	"strings"
	"testing"
)

func TestHTTPProblems(t *testing.T) {
	cases := []struct {
		listen string
		remote bool
		want   string // "" when valid
	}{
		{"", false, ""},
		{"127.0.0.1:7466", false, ""},
		{"localhost:0", false, ""},
		{"[::1]:9000", false, ""},
		{"0.0.0.0:7466", false, "not a loopback address"},
		{"0.0.0.0:7466", true, ""},
		{"7466", false, "want host:port"},
		{"127.0.0.1:http", false, "bad port"},
		{"127.0.0.1:70000", false, "bad port"},
	}
	for _, c := range cases {
		c2 := Default()
		c2.HTTP = HTTP{Listen: c.listen, AllowRemote: c.remote}
		errs := c2.Validate()
		got := Join(errs)
		switch {
		case c.want == "" && got != nil:
			t.Errorf("http.listen %q (allow_remote %v): %v, want valid", c.listen, c.remote, got)
		case c.want != "" && (got == nil || !strings.Contains(got.Error(), "http.listen: ") || !strings.Contains(got.Error(), c.want)):
			t.Errorf("http.listen %q (allow_remote %v): %v, want a problem with %q", c.listen, c.remote, got, c.want)
		}
	}
}

func TestHTTPKeysFromEnvAndFlags(t *testing.T) {
	c := Default()
	if errs := c.ApplyEnv([]string{"LEMO_HTTP_LISTEN=127.0.0.1:1", "LEMO_HTTP_ALLOW_REMOTE=true"}); len(errs) > 0 {
		t.Fatal(errs)
	}
	if c.HTTP.Listen != "127.0.0.1:1" || !c.HTTP.AllowRemote {
		t.Fatalf("HTTP = %+v", c.HTTP)
	}
	var flag string
	for _, k := range Keys() {
		if k.Path == "http.listen" {
			flag = k.Flag
		}
	}
	if flag != "http-listen" {
		t.Fatalf("http.listen flag = %q, want http-listen", flag)
	}
}

func TestChanged(t *testing.T) {
	a, b := Default(), Default()
	if got := Changed(a, b); len(got) != 0 {
		t.Fatalf("Changed(default, default) = %v", got)
	}
	b.Log.Level = "debug"
	b.Tasks.MaxCycles = 7
	b.Providers.OpenRouter.APIKey = "secret"
	b.Tools.Shell.Allow = []string{"ls"}
	a.Tools.Shell.Deny = []string{} // empty and nil are the same value
	want := []string{"log.level", "tasks.max_cycles", "providers.openrouter.api_key", "tools.shell.allow"}
	if got := Changed(a, b); !slices.Equal(got, want) {
		t.Fatalf("Changed = %v, want %v", got, want)
	}
}
