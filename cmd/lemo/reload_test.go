package main

import (
	"bytes"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"lemo/config"
)

func TestPlanReload(t *testing.T) {
	cases := []struct {
		name          string
		change        func(*config.Config)
		live, restart []string
	}{
		{"nothing", func(*config.Config) {}, nil, nil},
		{"live keys", func(c *config.Config) {
			c.Log.Level = "debug"
			c.Storage.MinFreeMiB = 64
			c.Tasks.MaxCycles = 9
			c.Tasks.MaxParallelTools = 2
			c.Tasks.MaxRequestBytes = 1000
		}, []string{"log.level", "tasks.max_cycles", "tasks.max_parallel_tools", "tasks.max_request_bytes", "storage.min_free_mib"}, nil},
		{"restart keys", func(c *config.Config) {
			c.Listen = "127.0.0.1:1"
			c.Data = "/elsewhere"
			c.Providers.OpenRouter.APIKey = "sk-secret"
			c.HTTP.Listen = "127.0.0.1:2"
		}, nil, []string{"data", "listen", "providers.openrouter.api_key", "http.listen"}},
		{"approvals", func(c *config.Config) {
			c.Approvals.Ask = []string{"shell.*"}
			c.Approvals.Timeout = time.Minute
		}, []string{"approvals.ask", "approvals.timeout"}, nil},
		{"owners' daily budget", func(c *config.Config) {
			c.Budgets.PerOwnerDay = config.OwnerDay{Tokens: 1000, Cost: "2"}
		}, []string{"budgets.per_owner_day.tokens", "budgets.per_owner_day.cost"}, nil},
		{"a Task's default budget needs a restart", func(c *config.Config) { c.Budgets.MaxTokens = 5 }, nil, []string{"budgets.max_tokens"}},
		{"log output needs a restart", func(c *config.Config) { c.Log.Output = "stdout" }, nil, []string{"log.output"}},
		{"both", func(c *config.Config) {
			c.Log.Level = "warn"
			c.Log.Format = "json"
		}, []string{"log.level"}, []string{"log.format"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cur, next := config.Default(), config.Default()
			c.change(next)
			run, live, restart := planReload(cur, next)
			if !slices.Equal(live, c.live) || !slices.Equal(restart, c.restart) {
				t.Fatalf("planReload: live %v, restart %v; want %v, %v", live, restart, c.live, c.restart)
			}
			// The live keys take their new values, the others keep the
			// running ones.
			if left := config.Changed(run, next); !slices.Equal(left, c.restart) {
				t.Fatalf("run differs from next in %v, want only the restart keys %v", left, c.restart)
			}
			if left := config.Changed(cur, run); !slices.Equal(left, c.live) {
				t.Fatalf("run differs from the running config in %v, want only the live keys %v", left, c.live)
			}
		})
	}
}

// A configuration with problems changes nothing and says why; a good one
// is applied and reports what needs a restart.
func TestReloader(t *testing.T) {
	defer zerolog.SetGlobalLevel(zerolog.GlobalLevel())
	var logs bytes.Buffer
	log := zerolog.New(&logs)
	cur := config.Default()
	var applied []*config.Config
	var next *config.Config
	var loadErr error
	r := &reloader{cur: cur, log: log, load: func() (*config.Config, error) { return next, loadErr },
		apply: func(c *config.Config) { applied = append(applied, c) }}

	loadErr = errors.New("invalid configuration (1 problem):\n  - tasks.max_cycles: must be at least 1 (got 0)")
	r.reload()
	if len(applied) != 0 || r.cur != cur {
		t.Fatalf("a bad configuration was applied: %v", applied)
	}
	if s := logs.String(); !strings.Contains(s, "tasks.max_cycles: must be at least 1") || !strings.Contains(s, "keeps its running configuration") {
		t.Fatalf("log lacks the problem:\n%s", s)
	}

	logs.Reset()
	loadErr = nil
	next = config.Default()
	next.Tasks.MaxCycles = 7
	next.Listen = "127.0.0.1:9"
	r.reload()
	if len(applied) != 1 || applied[0].Tasks.MaxCycles != 7 || applied[0].Listen != cur.Listen {
		t.Fatalf("applied %+v", applied)
	}
	s := logs.String()
	if !strings.Contains(s, `"applied":["tasks.max_cycles=7"]`) || !strings.Contains(s, `"keys":["listen"]`) || !strings.Contains(s, "only after a restart") {
		t.Fatalf("log:\n%s", s)
	}
}

func TestSetLogLevel(t *testing.T) {
	defer zerolog.SetGlobalLevel(zerolog.GlobalLevel())
	var b bytes.Buffer
	log := zerolog.New(&b).Level(zerolog.TraceLevel)
	if err := setLogLevel("warn"); err != nil {
		t.Fatal(err)
	}
	log.Info().Msg("hidden")
	if err := setLogLevel("debug"); err != nil {
		t.Fatal(err)
	}
	log.Debug().Msg("shown")
	if s := b.String(); strings.Contains(s, "hidden") || !strings.Contains(s, "shown") {
		t.Fatalf("log = %q", s)
	}
	if err := setLogLevel("loud"); err == nil {
		t.Fatal("setLogLevel(loud) accepted it")
	}
}
