package main

import (
	"fmt"
	"slices"
	"strings"

	"github.com/rs/zerolog"

	"lemo/actors"
	"lemo/config"
	"lemo/persistence"
)

// liveKeys are the configuration keys a SIGHUP applies to the running
// daemon. Every other key keeps its running value until a restart.
var liveKeys = []string{
	"approvals.allow",
	"approvals.ask",
	"approvals.deny",
	"approvals.timeout",
	"budgets.per_owner_day.cost",
	"budgets.per_owner_day.tokens",
	"log.level",
	"storage.min_free_mib",
	"tasks.max_cycles",
	"tasks.max_parallel_tools",
	"tasks.max_request_bytes",
}

// planReload compares the running configuration with one just read. It
// returns the configuration to run with from now on (the running one, with
// the live keys taken from next), the live keys that changed and the other
// keys that changed, which need a restart.
func planReload(cur, next *config.Config) (run *config.Config, live, restart []string) {
	for _, k := range config.Changed(cur, next) {
		if slices.Contains(liveKeys, k) {
			live = append(live, k)
		} else {
			restart = append(restart, k)
		}
	}
	r := *cur
	r.Log.Level = next.Log.Level
	r.Storage.MinFreeMiB = next.Storage.MinFreeMiB
	r.Tasks.MaxCycles = next.Tasks.MaxCycles
	r.Tasks.MaxParallelTools = next.Tasks.MaxParallelTools
	r.Tasks.MaxRequestBytes = next.Tasks.MaxRequestBytes
	r.Approvals = next.Approvals
	r.Budgets.PerOwnerDay = next.Budgets.PerOwnerDay
	return &r, live, restart
}

// liveValue renders a live key's value for the log (none of them is a
// secret).
func liveValue(c *config.Config, key string) string {
	switch key {
	case "log.level":
		return c.Log.Level
	case "storage.min_free_mib":
		return fmt.Sprint(c.Storage.MinFreeMiB)
	case "tasks.max_cycles":
		return fmt.Sprint(c.Tasks.MaxCycles)
	case "tasks.max_parallel_tools":
		return fmt.Sprint(c.Tasks.MaxParallelTools)
	case "tasks.max_request_bytes":
		return fmt.Sprint(c.Tasks.MaxRequestBytes)
	case "approvals.allow":
		return strings.Join(c.Approvals.Allow, ",")
	case "approvals.ask":
		return strings.Join(c.Approvals.Ask, ",")
	case "approvals.deny":
		return strings.Join(c.Approvals.Deny, ",")
	case "approvals.timeout":
		return c.Approvals.Timeout.String()
	case "budgets.per_owner_day.tokens":
		return fmt.Sprint(c.Budgets.PerOwnerDay.Tokens)
	case "budgets.per_owner_day.cost":
		return c.Budgets.PerOwnerDay.Cost
	}
	return "?"
}

// setLogLevel sets the level of every logger of the process. The daemon's
// logger is built at trace level and filtered by zerolog's global level, an
// atomic, so that a reload changes the level of every component's copy of
// it at once.
func setLogLevel(level string) error {
	l, err := zerolog.ParseLevel(strings.ToLower(level))
	if err != nil {
		return err
	}
	zerolog.SetGlobalLevel(l)
	return nil
}

// reloader re-reads the configuration on SIGHUP, through the same path as
// the start (defaults, file, environment, flags, validation).
type reloader struct {
	cur   *config.Config
	load  func() (*config.Config, error)
	apply func(*config.Config)
	log   zerolog.Logger
}

// newReloader applies live keys to the store, the actor tree and the
// metrics.
func newReloader(cur *config.Config, load func() (*config.Config, error), store *persistence.Store, d *actors.Daemon, o *ops, log zerolog.Logger) *reloader {
	return &reloader{cur: cur, load: load, log: log, apply: func(c *config.Config) {
		if err := setLogLevel(c.Log.Level); err != nil {
			log.Error().Err(err).Msg("log.level") // Validate accepted it: not expected
		}
		floor := int64(c.Storage.MinFreeMiB) << 20
		store.SetMinFreeBytes(floor)
		o.floor.Store(floor)
		d.SetLimits(actors.Limits{MaxCycles: c.Tasks.MaxCycles, MaxParallelTools: c.Tasks.MaxParallelTools, MaxRequestBytes: c.Tasks.MaxRequestBytes})
		d.SetApproval(approvalPolicy(c), c.Approvals.Timeout)
		d.SetOwnerDayBudget(ownerDayBudget(c))
	}}
}

// reload reads the configuration again and applies what can change live.
// A configuration with problems changes nothing: its problems are logged
// and the daemon keeps running with the configuration it has.
func (r *reloader) reload() {
	next, err := r.load()
	if err != nil {
		r.log.Error().Str("problems", err.Error()).Msg("SIGHUP: the configuration was not reloaded; the daemon keeps its running configuration")
		return
	}
	run, live, restart := planReload(r.cur, next)
	r.apply(run)
	r.cur = run
	applied := []string{}
	for _, k := range live {
		applied = append(applied, k+"="+liveValue(run, k))
	}
	r.log.Info().Strs("applied", applied).Strs("live_keys", liveKeys).Msg("SIGHUP: configuration reloaded")
	if len(restart) > 0 {
		r.log.Warn().Strs("keys", restart).Msg("SIGHUP: these changed keys take effect only after a restart; they keep their running values")
	}
}
