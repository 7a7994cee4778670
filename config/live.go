package config

import (
	"fmt"
	"time"
)

// Live bounds the live results: the whole outputs of tool calls that a Task
// holds beside what the model sees (a long command's output), until it
// finishes, is cancelled, passivates or the daemon restarts.
type Live struct {
	CallMiB       int           `yaml:"call_mib" env:"LEMO_LIVE_CALL_MIB" help:"memory (MiB) one call's live result may hold; the rest is spilled to a private file under the data folder"`
	TaskMiB       int           `yaml:"task_mib" env:"LEMO_LIVE_TASK_MIB" help:"memory (MiB) one Task's live results may hold together"`
	TotalMiB      int           `yaml:"total_mib" env:"LEMO_LIVE_TOTAL_MIB" help:"memory (MiB) all live results may hold together; beyond it the oldest results of paused Tasks are evicted (they read as unavailable), then new output is spilled"`
	SpillMiB      int           `yaml:"spill_mib" env:"LEMO_LIVE_SPILL_MIB" help:"disk (MiB) one call's spill files may hold; output beyond it is dropped and the result says how much"`
	SpillTotalMiB int           `yaml:"spill_total_mib" env:"LEMO_LIVE_SPILL_TOTAL_MIB" help:"disk (MiB) all spill files may hold together"`
	PausedTimeout time.Duration `yaml:"paused_timeout" env:"LEMO_LIVE_PAUSED_TIMEOUT" help:"a paused Task holding live results leaves memory after this long, releasing them"`
}

// Problems reports every bad live key.
func (l Live) Problems() []error {
	var ps []error
	add := func(where, format string, args ...any) {
		ps = append(ps, Problem{Where: where, What: fmt.Sprintf(format, args...)})
	}
	for _, k := range []struct {
		where string
		v     int
	}{{"live.call_mib", l.CallMiB}, {"live.task_mib", l.TaskMiB}, {"live.total_mib", l.TotalMiB}, {"live.spill_mib", l.SpillMiB}, {"live.spill_total_mib", l.SpillTotalMiB}} {
		if k.v < 1 {
			add(k.where, "must be at least 1 (got %d)", k.v)
		}
	}
	if l.CallMiB > l.TaskMiB {
		add("live.call_mib", "%d must not exceed live.task_mib (%d)", l.CallMiB, l.TaskMiB)
	}
	if l.TaskMiB > l.TotalMiB {
		add("live.task_mib", "%d must not exceed live.total_mib (%d)", l.TaskMiB, l.TotalMiB)
	}
	if l.SpillMiB > l.SpillTotalMiB {
		add("live.spill_mib", "%d must not exceed live.spill_total_mib (%d)", l.SpillMiB, l.SpillTotalMiB)
	}
	if l.PausedTimeout <= 0 {
		add("live.paused_timeout", "must be a positive duration (got %s)", l.PausedTimeout)
	}
	return ps
}
