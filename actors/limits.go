package actors

// Limits are the Options that may change while the daemon runs: a
// configuration reload (SIGHUP) applies them with SetLimits. The tree reads
// them atomically: a Task uses the values current at each of its steps, and
// a request is checked against those current when it arrives.
type Limits struct {
	// MaxCycles: see Options.MaxCycles.
	MaxCycles int
	// MaxParallelTools: see Options.MaxParallelTools.
	MaxParallelTools int
	// MaxRequestBytes: see Options.MaxRequestBytes.
	MaxRequestBytes int
}

// limitsOf returns the limits of options that took their defaults.
func limitsOf(o Options) *Limits {
	return &Limits{MaxCycles: o.MaxCycles, MaxParallelTools: o.MaxParallelTools, MaxRequestBytes: o.MaxRequestBytes}
}

// SetLimits replaces the limits; a zero field takes its default, as in
// Options. It is safe to call at any time.
func (d *Daemon) SetLimits(l Limits) {
	o := Options{MaxCycles: l.MaxCycles, MaxParallelTools: l.MaxParallelTools, MaxRequestBytes: l.MaxRequestBytes}
	o.defaults()
	d.env.limits.Store(limitsOf(o))
}

// Limits returns the limits in force.
func (d *Daemon) Limits() Limits { return *d.env.limits.Load() }
