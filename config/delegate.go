package config

import (
	"fmt"
	"path/filepath"
	"strings"
	"time"
)

// Delegate configures the delegate tools (delegate.run and
// delegate.sessions): an external coding agent, pi or omp, driven over its
// RPC mode. A zero value takes the delegate package's default, which the
// help text names.
type Delegate struct {
	Enabled  bool     `yaml:"enabled" env:"LEMO_DELEGATE_ENABLED" help:"offer the delegate tools: drive an external coding agent (pi or omp) over its RPC mode"`
	Kind     string   `yaml:"kind" env:"LEMO_DELEGATE_KIND" help:"the agent: pi (npm @mariozechner/pi-coding-agent) or omp (npm @oh-my-pi/pi-coding-agent); empty: pi"`
	Binary   string   `yaml:"binary" env:"LEMO_DELEGATE_BINARY" help:"the agent's executable, an absolute path or a name on PATH; empty: the kind's name"`
	Args     []string `yaml:"args" env:"LEMO_DELEGATE_ARGS" help:"extra agent arguments such as --model provider/model (comma-separated in the environment)"`
	PassEnv  []string `yaml:"pass_env" env:"LEMO_DELEGATE_PASS_ENV" help:"variables passed to the agent although their names look secret: the provider keys it needs"`
	SetEnv   []string `yaml:"set_env" env:"LEMO_DELEGATE_SET_ENV" help:"NAME=value variables set for the agent"`
	Approval string   `yaml:"approval" env:"LEMO_DELEGATE_APPROVAL" help:"ask: the agent's tool calls need a person's approval; off: they run unasked; empty: ask"`
	// Timeouts and limits; 0 takes the default in the help text.
	StartTimeout   time.Duration `yaml:"start_timeout" env:"LEMO_DELEGATE_START_TIMEOUT" help:"wait for the agent's first answer after it starts; 0: 90s"`
	CommandTimeout time.Duration `yaml:"command_timeout" env:"LEMO_DELEGATE_COMMAND_TIMEOUT" help:"wait for the agent to acknowledge a steer, follow-up or abort; later the outcome is unknown; 0: 30s"`
	RunTimeout     time.Duration `yaml:"run_timeout" env:"LEMO_DELEGATE_RUN_TIMEOUT" help:"longest run of the agent when the call names no timeout; 0: 30m"`
	MaxRunTimeout  time.Duration `yaml:"max_run_timeout" env:"LEMO_DELEGATE_MAX_RUN_TIMEOUT" help:"longest run a call may ask for; 0: 2h"`
	ExitGrace      time.Duration `yaml:"exit_grace" env:"LEMO_DELEGATE_EXIT_GRACE" help:"time the agent has to exit after its stdin closes, before SIGTERM; 0: 5s"`
	KillGrace      time.Duration `yaml:"kill_grace" env:"LEMO_DELEGATE_KILL_GRACE" help:"time after SIGTERM before SIGKILL; 0: 5s"`
	MaxLineBytes   int           `yaml:"max_line_bytes" env:"LEMO_DELEGATE_MAX_LINE_BYTES" help:"longest output record accepted from the agent; 0: 32 MiB"`
}

// Problems checks the delegate keys and returns every problem, located by
// key ("delegate.kind"). The delegate package checks its configuration
// again when the tools are built.
func (d *Delegate) Problems() []error {
	var ps []error
	add := func(where, format string, args ...any) {
		ps = append(ps, Problem{Where: "delegate." + where, What: fmt.Sprintf(format, args...)})
	}
	if !oneOf(d.Kind, "", "pi", "omp") {
		add("kind", "%q: want pi or omp", d.Kind)
	}
	if !oneOf(d.Approval, "", "ask", "off") {
		add("approval", "%q: want ask or off", d.Approval)
	}
	if strings.Contains(d.Binary, "/") && !filepath.IsAbs(d.Binary) {
		add("binary", "%q: want an absolute path or a name on PATH", d.Binary)
	}
	for _, kv := range d.SetEnv {
		name, _, ok := strings.Cut(kv, "=")
		switch {
		case !ok || name == "":
			add("set_env", "%q: want NAME=value", kv)
		case strings.HasPrefix(strings.ToUpper(name), "LEMO_"):
			add("set_env", "%q: LEMO_* variables are never passed to the agent", kv)
		}
	}
	for _, n := range d.PassEnv {
		if strings.HasPrefix(strings.ToUpper(n), "LEMO_") {
			add("pass_env", "%q: LEMO_* variables are never passed to the agent", n)
		}
	}
	durations := map[string]time.Duration{
		"start_timeout": d.StartTimeout, "command_timeout": d.CommandTimeout, "run_timeout": d.RunTimeout,
		"max_run_timeout": d.MaxRunTimeout, "exit_grace": d.ExitGrace, "kill_grace": d.KillGrace,
	}
	for _, k := range sortedKeys(durations) {
		if durations[k] < 0 {
			add(k, "must not be negative (0 takes the default)")
		}
	}
	if d.MaxLineBytes != 0 && d.MaxLineBytes < 64<<10 {
		add("max_line_bytes", "%d: want at least 65536 (0 takes the default)", d.MaxLineBytes)
	}
	return ps
}
