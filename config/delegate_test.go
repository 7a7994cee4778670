package config

import (
	"strings"
	"testing"
	"time"
)

func TestDelegateProblems(t *testing.T) {
	if ps := (&Delegate{}).Problems(); len(ps) != 0 {
		t.Fatalf("zero value: %v", ps)
	}
	d := Delegate{Kind: "codex", Approval: "maybe", Binary: "bin/pi", SetEnv: []string{"NOEQUALS", "LEMO_TOKEN=x", "OK=1"},
		PassEnv: []string{"lemo_data"}, ExitGrace: -time.Second, MaxLineBytes: 100}
	ps := d.Problems()
	var joined []string
	for _, p := range ps {
		joined = append(joined, p.Error())
	}
	all := strings.Join(joined, "\n")
	for _, want := range []string{"delegate.kind", "delegate.approval", "delegate.binary", "delegate.set_env: \"NOEQUALS\"", "delegate.set_env: \"LEMO_TOKEN=x\"",
		"delegate.pass_env", "delegate.exit_grace", "delegate.max_line_bytes"} {
		if !strings.Contains(all, want) {
			t.Errorf("no problem for %s in:\n%s", want, all)
		}
	}
	if len(ps) != 8 {
		t.Fatalf("got %d problems, want 8:\n%s", len(ps), all)
	}
}

func TestDelegateKeysFromYAMLAndEnv(t *testing.T) {
	c := Default()
	if errs := c.LoadYAML("lemo.yaml", []byte("delegate:\n  enabled: true\n  kind: omp\n  args: [--model, x/y]\n  run_timeout: 10m\n")); len(errs) > 0 {
		t.Fatal(errs)
	}
	if errs := c.ApplyEnv([]string{"LEMO_DELEGATE_PASS_ENV=A_KEY,B_TOKEN", "LEMO_DELEGATE_MAX_LINE_BYTES=1048576"}); len(errs) > 0 {
		t.Fatal(errs)
	}
	d := c.Delegate
	if !d.Enabled || d.Kind != "omp" || strings.Join(d.Args, " ") != "--model x/y" || d.RunTimeout != 10*time.Minute ||
		strings.Join(d.PassEnv, ",") != "A_KEY,B_TOKEN" || d.MaxLineBytes != 1<<20 {
		t.Fatalf("delegate = %+v", d)
	}
	if errs := c.LoadYAML("lemo.yaml", []byte("delegate:\n  binaryy: x\n")); len(errs) == 0 {
		t.Fatal("an unknown delegate key was accepted")
	}
}
