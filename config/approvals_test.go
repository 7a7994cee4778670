package config

import (
	"slices"
	"strings"
	"testing"
	"time"
)

func TestApprovalsAndLogOutputValidation(t *testing.T) {
	cases := []struct {
		name   string
		change func(*Config)
		want   []string // the problems' field paths; none: valid
	}{
		{"defaults", func(*Config) {}, nil},
		{"rules", func(c *Config) {
			c.Approvals = Approvals{Allow: []string{"files.read"}, Ask: []string{"shell.*", "files.write"}, Deny: []string{"*"}, Timeout: time.Hour}
		}, nil},
		{"stdout", func(c *Config) { c.Log.Output = "stdout" }, nil},
		{"bad output", func(c *Config) { c.Log.Output = "journal" }, []string{"log.output"}},
		{"bad patterns, every one located", func(c *Config) {
			c.Approvals = Approvals{Allow: []string{"ok", "Files"}, Ask: []string{""}, Deny: []string{"shell run", "*", strings.Repeat("a", 65)}}
		}, []string{"approvals.allow[1]", "approvals.ask[0]", "approvals.deny[0]", "approvals.deny[2]"}},
		{"negative timeout", func(c *Config) { c.Approvals.Timeout = -time.Second }, []string{"approvals.timeout"}},
		{"too many", func(c *Config) { c.Approvals.Ask = make([]string, maxApprovalRules+1) }, []string{"approvals.ask"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := Default()
			tc.change(c)
			var got []string
			for _, e := range c.Validate() {
				p, ok := e.(Problem)
				if !ok {
					t.Fatalf("problem %v is a %T", e, e)
				}
				got = append(got, p.Where)
				if p.What == "" {
					t.Errorf("%s: no explanation", p.Where)
				}
			}
			if !slices.Equal(got, tc.want) {
				t.Fatalf("problems at %v, want %v:\n%v", got, tc.want, Join(c.Validate()))
			}
		})
	}
}

func TestApprovalsFromFileAndEnvironment(t *testing.T) {
	c := Default()
	errs := c.LoadYAML("lemo.yaml", []byte(`
log: {output: stdout}
approvals:
  ask: ["shell.*", files.write]
  deny: [delegate.run]
  timeout: 10m
`))
	errs = append(errs, c.ApplyEnv([]string{"LEMO_APPROVALS_ALLOW=files.read, tasks.*"})...)
	errs = append(errs, c.Validate()...)
	if len(errs) > 0 {
		t.Fatal(Join(errs))
	}
	if c.Log.Output != "stdout" || !slices.Equal(c.Approvals.Ask, []string{"shell.*", "files.write"}) || !slices.Equal(c.Approvals.Deny, []string{"delegate.run"}) ||
		!slices.Equal(c.Approvals.Allow, []string{"files.read", "tasks.*"}) || c.Approvals.Timeout != 10*time.Minute {
		t.Fatalf("config = %+v %+v", c.Log, c.Approvals)
	}
	errs = Default().LoadYAML("lemo.yaml", []byte("approvals:\n  rules: []\n"))
	if len(errs) != 1 || !strings.Contains(errs[0].Error(), "approvals.rules: unknown key; accepted here: allow, ask, deny, timeout") {
		t.Fatalf("unknown key: %v", errs)
	}
}
