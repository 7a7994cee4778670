package config

import (
	"strings"
	"testing"
)

// A value of the wrong type is reported with its key path and what is
// accepted; values of the right type beside it still apply.
func TestLoadYAMLTypeErrorsNameTheKey(t *testing.T) {
	c := Default()
	errs := c.LoadYAML("lemo.yaml", []byte("tasks:\n  max_cycles: many\n  tool_grace: soon\n  max_parallel_tools: 3\nlog:\n  level: debug\n"))
	joined := Join(errs).Error()
	for _, want := range []string{
		`lemo.yaml:2: tasks.max_cycles: want a whole number, got "many"`,
		`lemo.yaml:3: tasks.tool_grace: want a duration such as 30s or 5m, got "soon"`,
	} {
		if !strings.Contains(joined, want) {
			t.Errorf("problems lack %q:\n%s", want, joined)
		}
	}
	if len(errs) != 2 {
		t.Errorf("got %d problems, want 2 (no duplicate without the path):\n%s", len(errs), joined)
	}
	if c.Log.Level != "debug" {
		t.Errorf("log.level = %q: the valid keys did not apply", c.Log.Level)
	}
}

func TestApplyEnvSuggests(t *testing.T) {
	for _, tc := range []struct{ name, want string }{
		{"LEMO_FAKE_ENABLE", "did you mean LEMO_FAKE_ENABLED?"},
		{"LEMO_TOKN", "did you mean LEMO_TOKEN?"},
		{"LEMO_COMPLETELY_UNRELATED_THING", "see the configuration table"},
	} {
		errs := Default().ApplyEnv([]string{tc.name + "=1"})
		if len(errs) != 1 || !strings.Contains(errs[0].Error(), tc.want) {
			t.Errorf("ApplyEnv(%s) = %v, want one problem saying %q", tc.name, errs, tc.want)
		}
	}
}

// The client commands' variables are not the daemon's, and not errors in
// its environment either (a shell may set both).
func TestApplyEnvAcceptsClientVariables(t *testing.T) {
	for _, name := range []string{"LEMO_ADDR", "LEMO_TOKEN", "LEMO_CLIENT_LISTEN", "LEMO_CLIENT_ADVERTISE"} {
		if errs := Default().ApplyEnv([]string{name + "=127.0.0.1:7470"}); len(errs) != 0 {
			t.Errorf("ApplyEnv(%s) = %v, want it accepted", name, errs)
		}
	}
	if errs := Default().ApplyEnv([]string{"LEMO_CLIENT_LISTN=x"}); len(errs) != 1 || !strings.Contains(errs[0].Error(), "did you mean LEMO_CLIENT_LISTEN?") {
		t.Errorf("a misspelt client variable: %v", errs)
	}
}

func TestValidateListenPort(t *testing.T) {
	for _, tc := range []struct {
		listen string
		ok     bool
	}{
		{"127.0.0.1:99999", false},
		{"127.0.0.1:port", false},
		{"127.0.0.1:0", true},
		{"127.0.0.1:65535", true},
	} {
		c := Default()
		c.Listen = tc.listen
		errs := c.Validate()
		if (len(errs) == 0) != tc.ok {
			t.Errorf("Validate with listen %q = %v, want ok %v", tc.listen, errs, tc.ok)
		}
		if !tc.ok && !strings.Contains(Join(errs).Error(), "want a number from 0 to 65535") {
			t.Errorf("listen %q: %v", tc.listen, errs)
		}
	}
}

// With TLS a daemon may listen beyond the loopback, but not on every
// interface at once: clients address it by the address they dial.
func TestValidateListenUnspecified(t *testing.T) {
	for _, tc := range []struct {
		listen string
		ok     bool
	}{
		{"0.0.0.0:7465", false},
		{"[::]:7465", false},
		{":7465", false},
		{"192.0.2.10:7465", true},
		{"lemo.example:7465", true},
	} {
		c := Default()
		c.Listen, c.TLS.Cert, c.TLS.Key = tc.listen, "/c.pem", "/k.pem"
		errs := c.Validate()
		if (len(errs) == 0) != tc.ok {
			t.Errorf("listen %q with TLS: %v, want ok %v", tc.listen, errs, tc.ok)
		}
		if !tc.ok && !strings.Contains(Join(errs).Error(), "listen on that one") {
			t.Errorf("listen %q: %v", tc.listen, errs)
		}
	}
}
