package delegate

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"lemo/tools/internal/proc"
	"lemo/tools/isolation"
)

// Agent kinds.
const (
	// KindPi is pi (npm @mariozechner/pi-coding-agent, runs on Node).
	KindPi = "pi"
	// KindOmp is omp (npm @oh-my-pi/pi-coding-agent, runs on Bun); its
	// first frame ("ready") carries a protocol version.
	KindOmp = "omp"
)

// Approval modes: what the agent's own tool calls need.
const (
	// ApprovalAsk bridges the agent's tool approvals to Lemo approvals: pi
	// loads Lemo's extension, omp runs with --approval-mode always-ask.
	ApprovalAsk = "ask"
	// ApprovalOff lets the agent run its tools without asking.
	ApprovalOff = "off"
)

// Config configures the delegate tools. A zero field takes its default; a
// negative one is an error.
type Config struct {
	// Kind is KindPi (default) or KindOmp.
	Kind string
	// Binary is the agent's executable: an absolute path, or a name looked
	// up on PATH. Default: the kind's name.
	Binary string
	// Args are extra arguments after Lemo's own (for example "--model",
	// "provider/model"). Arguments that choose the mode, the session or
	// the approval mode are Lemo's and are refused here.
	Args []string
	// Dir is Lemo's private delegate folder (required; cmd/lemo uses
	// <data>/delegate). New history goes into Dir/<kind>/, flat; Lemo's
	// records of which Task created which session into Dir/records/; the
	// pi extension into Dir/extension/. Each is created with mode 0700.
	Dir string

	// Environ is the environment agents start from ("NAME=value"; cmd/lemo
	// passes os.Environ()). Only allow-listed variables whose names do not
	// look secret are kept (PATH, HOME, locale, proxies, PI_*, OMP_*, ...);
	// LEMO_* variables never are.
	Environ []string
	// PassEnv names further variables to pass even though their names
	// look secret: the provider settings the agent needs (for example
	// OPENROUTER_API_KEY). Exact names.
	PassEnv []string
	// SetEnv sets variables for the agent ("NAME=value"), after the rest.
	SetEnv []string
	// RunTag ("NAME=value": the data folder's, isolation.RunTag) is set in
	// every agent's environment, with the call it runs for
	// (isolation.CallEntry), so that a daemon's next start finds and stops
	// what this one left running. "" sets neither.
	RunTag string
	// Namespaces, when set, starts every agent in PID and mount namespaces
	// of its own (isolation.Detect): it sees no process but its own, and
	// nothing it started outlives it. nil: not.
	Namespaces *isolation.Namespaces

	// Approval is ApprovalAsk (default) or ApprovalOff.
	Approval string

	// StartTimeout bounds the wait for the agent's first answer (it takes
	// 5-15 s to start). Default 90s.
	StartTimeout time.Duration
	// CommandTimeout bounds the wait for the agent's answer to steer,
	// follow-up and abort; past it the outcome is unknown. Default 30s.
	CommandTimeout time.Duration
	// RunTimeout bounds a run whose input names no timeout; MaxRunTimeout
	// is the longest an input may ask for. Defaults 30m and 2h.
	RunTimeout    time.Duration
	MaxRunTimeout time.Duration
	// ExitGrace is how long the agent has to exit after its stdin closed;
	// KillGrace how long after SIGTERM before SIGKILL. Defaults 5s each.
	ExitGrace time.Duration
	KillGrace time.Duration
	// MaxLineBytes bounds one record of the agent's output; a longer one is
	// skipped and counted as a protocol error. Default 32 MiB.
	MaxLineBytes int
	// AnswerBytes bounds the final answer kept in the result (head and
	// tail). Default 16 KiB.
	AnswerBytes int
	// StateInterval is how often live state is emitted while events come
	// in. Default 250ms.
	StateInterval time.Duration

	// Log receives the tools' logs.
	Log zerolog.Logger
}

func (c *Config) fill() {
	if c.Kind == "" {
		c.Kind = KindPi
	}
	if c.Binary == "" {
		c.Binary = c.Kind
	}
	if c.Approval == "" {
		c.Approval = ApprovalAsk
	}
	dur := func(v *time.Duration, d time.Duration) {
		if *v == 0 {
			*v = d
		}
	}
	dur(&c.StartTimeout, 90*time.Second)
	dur(&c.CommandTimeout, 30*time.Second)
	dur(&c.RunTimeout, 30*time.Minute)
	dur(&c.MaxRunTimeout, 2*time.Hour)
	dur(&c.ExitGrace, 5*time.Second)
	dur(&c.KillGrace, 5*time.Second)
	dur(&c.StateInterval, 250*time.Millisecond)
	if c.MaxLineBytes == 0 {
		c.MaxLineBytes = 32 << 20
	}
	if c.AnswerBytes == 0 {
		c.AnswerBytes = 16 << 10
	}
	if c.RunTimeout > c.MaxRunTimeout {
		c.RunTimeout = c.MaxRunTimeout
	}
}

// reservedArgs are Lemo's to set.
var reservedArgs = []string{"--mode", "--session", "--session-dir", "--no-session", "--resume", "-r", "--continue", "-c",
	"--fork", "--approval-mode", "--extension", "-e", "--print", "-p", "--export"}

// validate reports every problem at once, each with its field name.
func (c *Config) validate() error {
	var errs []error
	add := func(format string, args ...any) { errs = append(errs, fmt.Errorf("delegate: "+format, args...)) }
	if c.Kind != KindPi && c.Kind != KindOmp {
		add("Config.Kind = %q: want %q or %q", c.Kind, KindPi, KindOmp)
	}
	if c.Approval != ApprovalAsk && c.Approval != ApprovalOff {
		add("Config.Approval = %q: want %q or %q", c.Approval, ApprovalAsk, ApprovalOff)
	}
	if strings.Contains(c.Binary, "/") && !filepath.IsAbs(c.Binary) {
		add("Config.Binary = %q: want an absolute path or a name on PATH", c.Binary)
	}
	if c.Dir == "" || !filepath.IsAbs(c.Dir) {
		add("Config.Dir = %q: want an absolute folder", c.Dir)
	}
	for _, a := range c.Args {
		name, _, _ := strings.Cut(a, "=")
		for _, r := range reservedArgs {
			if name == r {
				add("Config.Args holds %q: Lemo sets the mode, sessions, extensions and approval mode itself", a)
			}
		}
	}
	errs = append(errs, validEnvEntries("SetEnv", c.SetEnv)...)
	if !isolation.ValidRunTag(c.RunTag) {
		errs = append(errs, fmt.Errorf("delegate: Config.RunTag %q: want NAME=value", c.RunTag))
	}
	for _, p := range c.PassEnv {
		if proc.IsDaemonVar(p) {
			add("Config.PassEnv holds %q: LEMO_* variables are never passed to the agent", p)
		}
	}
	neg := func(name string, bad bool, v any) {
		if bad {
			add("Config.%s = %v: must not be negative (0 means the default)", name, v)
		}
	}
	neg("StartTimeout", c.StartTimeout < 0, c.StartTimeout)
	neg("CommandTimeout", c.CommandTimeout < 0, c.CommandTimeout)
	neg("RunTimeout", c.RunTimeout < 0, c.RunTimeout)
	neg("MaxRunTimeout", c.MaxRunTimeout < 0, c.MaxRunTimeout)
	neg("ExitGrace", c.ExitGrace < 0, c.ExitGrace)
	neg("KillGrace", c.KillGrace < 0, c.KillGrace)
	neg("StateInterval", c.StateInterval < 0, c.StateInterval)
	if c.MaxLineBytes < 0 || (c.MaxLineBytes > 0 && c.MaxLineBytes < 64<<10) {
		add("Config.MaxLineBytes = %d: want at least 64 KiB (0 means 32 MiB)", c.MaxLineBytes)
	}
	if c.AnswerBytes < 0 || (c.AnswerBytes > 0 && c.AnswerBytes < 256) {
		add("Config.AnswerBytes = %d: want at least 256 (0 means 16 KiB)", c.AnswerBytes)
	}
	return errors.Join(errs...)
}
