package shell

import (
	"errors"
	"fmt"
	"path"
	"strings"
	"time"

	"lemo/tools/isolation"
)

// Config configures the shell tool. A zero field takes its default; a
// negative one is an error.
type Config struct {
	// Shell runs each command as `Shell -c command`. Default "/bin/sh".
	Shell string
	// DefaultTimeout bounds a run whose input names no timeout. Default 2m.
	DefaultTimeout time.Duration
	// MaxTimeout is the longest timeout an input may ask for. Default 10m.
	MaxTimeout time.Duration
	// KillGrace is how long the process group has to exit after SIGTERM
	// before SIGKILL; it also bounds the wait for output still held open by
	// a process that left the group. Default 2s.
	KillGrace time.Duration
	// StateInterval is how often a running command's state (bytes so far,
	// last line) is emitted. Default 250ms.
	StateInterval time.Duration

	// ModelHeadBytes and ModelTailBytes bound what the model is shown of
	// each of stdout and stderr: the first ModelHeadBytes and the last
	// ModelTailBytes, with a marker stating what was omitted. Defaults
	// 8 KiB each, so at most 32 KiB of output in all.
	ModelHeadBytes int
	ModelTailBytes int
	// RetainBytes bounds the part of a result persisted in history.
	// Default 8 KiB; at least 1 KiB.
	RetainBytes int

	// Environ is the environment children start from, as "NAME=value"
	// entries (cmd/lemo passes os.Environ()); nil starts from nothing. It
	// is scrubbed: every LEMO_* variable, and every variable whose name
	// contains KEY, SECRET, TOKEN, PASSWORD, PASSWD or CREDENTIAL (any
	// case), is removed.
	Environ []string
	// PassEnv names variables passed even though their names look secret
	// ("*" matches any run of characters; case-insensitive). LEMO_*
	// variables are never passed.
	PassEnv []string
	// DropEnv names further variables to remove (same syntax); it wins
	// over PassEnv.
	DropEnv []string

	// RunTag ("NAME=value": the data folder's, isolation.RunTag) is set in
	// every command's environment, with the call it runs for
	// (isolation.CallEntry), so that a daemon's next start finds and stops
	// what this one left running. "" sets neither.
	RunTag string
	// Namespaces, when set, starts every command in PID and mount
	// namespaces of its own (isolation.Detect): it sees no process but its
	// own, and nothing it started outlives the run. nil: not.
	Namespaces *isolation.Namespaces

	// Policy decides which commands need a person's approval.
	Policy Policy
	// ApprovalTimeout bounds the wait for a person's decision; 0 waits
	// without a deadline.
	ApprovalTimeout time.Duration
}

// DefaultConfig returns the defaults with every zero field resolved. Its
// policy asks for approval of every command.
func DefaultConfig() Config {
	c := Config{}
	c.fill()
	return c
}

func (c *Config) fill() {
	if c.Shell == "" {
		c.Shell = "/bin/sh"
	}
	dur := func(v *time.Duration, d time.Duration) {
		if *v == 0 {
			*v = d
		}
	}
	dur(&c.DefaultTimeout, 2*time.Minute)
	dur(&c.MaxTimeout, 10*time.Minute)
	dur(&c.KillGrace, 2*time.Second)
	dur(&c.StateInterval, 250*time.Millisecond)
	num := func(v *int, d int) {
		if *v == 0 {
			*v = d
		}
	}
	num(&c.ModelHeadBytes, 8<<10)
	num(&c.ModelTailBytes, 8<<10)
	num(&c.RetainBytes, 8<<10)
	if c.Policy.Default == "" {
		c.Policy.Default = Ask
	}
	if c.DefaultTimeout > c.MaxTimeout {
		c.DefaultTimeout = c.MaxTimeout
	}
}

// validate reports every problem at once, each with its field name.
func (c *Config) validate() error {
	var errs []error
	neg := func(name string, bad bool, v any) {
		if bad {
			errs = append(errs, fmt.Errorf("shell: Config.%s = %v: must not be negative (0 means the default)", name, v))
		}
	}
	neg("DefaultTimeout", c.DefaultTimeout < 0, c.DefaultTimeout)
	neg("MaxTimeout", c.MaxTimeout < 0, c.MaxTimeout)
	neg("KillGrace", c.KillGrace < 0, c.KillGrace)
	neg("StateInterval", c.StateInterval < 0, c.StateInterval)
	neg("ModelHeadBytes", c.ModelHeadBytes < 0, c.ModelHeadBytes)
	neg("ModelTailBytes", c.ModelTailBytes < 0, c.ModelTailBytes)
	neg("RetainBytes", c.RetainBytes < 0, c.RetainBytes)
	neg("ApprovalTimeout", c.ApprovalTimeout < 0, c.ApprovalTimeout)
	if c.Shell != "" && !path.IsAbs(c.Shell) {
		errs = append(errs, fmt.Errorf("shell: Config.Shell = %q: want an absolute path", c.Shell))
	}
	if c.RetainBytes > 0 && c.RetainBytes < 1024 {
		errs = append(errs, fmt.Errorf("shell: Config.RetainBytes = %d: want at least 1024", c.RetainBytes))
	}
	if c.StateInterval > 0 && c.StateInterval < 10*time.Millisecond {
		errs = append(errs, fmt.Errorf("shell: Config.StateInterval = %v: want at least 10ms", c.StateInterval))
	}
	if !isolation.ValidRunTag(c.RunTag) {
		errs = append(errs, fmt.Errorf("shell: Config.RunTag = %q: want NAME=value", c.RunTag))
	}
	for i, e := range c.Environ {
		if k, _, ok := strings.Cut(e, "="); !ok || k == "" || strings.IndexByte(e, 0) >= 0 {
			errs = append(errs, fmt.Errorf("shell: Config.Environ[%d] = %q: want NAME=value", i, e))
		}
	}
	for name, list := range map[string][]string{"PassEnv": c.PassEnv, "DropEnv": c.DropEnv} {
		for i, p := range list {
			if p == "" || strings.ContainsAny(p, "= \x00") {
				errs = append(errs, fmt.Errorf("shell: Config.%s[%d] = %q: want a variable name or a pattern with *", name, i, p))
			}
		}
	}
	errs = append(errs, c.Policy.validate()...)
	return errors.Join(errs...)
}
