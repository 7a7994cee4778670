package config

import (
	"flag"
	"os"
	"strings"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite golden files")

func TestDefaultIsValid(t *testing.T) {
	if errs := Default().Validate(); len(errs) > 0 {
		t.Fatalf("Default().Validate() = %v", errs)
	}
}

func TestLoadYAML(t *testing.T) {
	c := Default()
	errs := c.LoadYAML("lemo.yaml", []byte(`
data: /var/lib/lemo
log: {level: debug}
tasks:
  max_cycles: 7
  tool_grace: 3s
providers:
  openrouter:
    api_key: sk-test
    models: [a, b]
`))
	if len(errs) > 0 {
		t.Fatalf("LoadYAML: %v", errs)
	}
	if c.Data != "/var/lib/lemo" || c.Log.Level != "debug" || c.Log.Format != "auto" || c.Tasks.MaxCycles != 7 ||
		c.Tasks.ToolGrace != 3*time.Second || c.Providers.OpenRouter.APIKey != "sk-test" || len(c.Providers.OpenRouter.Models) != 2 {
		t.Fatalf("config after load = %+v", c)
	}
	if c.Tasks.MaxParallelTools != 4 {
		t.Fatalf("unset key lost its default: %d", c.Tasks.MaxParallelTools)
	}
}

func TestLoadYAMLReportsEveryUnknownKey(t *testing.T) {
	errs := Default().LoadYAML("lemo.yaml", []byte(`
dta: x
tasks:
  max_cycle: 3
providers:
  olama: {}
  ollama:
    bse_url: http://x
`))
	if len(errs) != 4 {
		t.Fatalf("got %d problems, want 4: %v", len(errs), errs)
	}
	joined := Join(errs).Error()
	for _, want := range []string{
		"lemo.yaml:2: dta: unknown key; accepted here: data, log",
		"lemo.yaml:4: tasks.max_cycle: unknown key",
		"lemo.yaml:6: providers.olama: unknown key",
		"lemo.yaml:8: providers.ollama.bse_url: unknown key; accepted here: disabled, base_url",
	} {
		if !strings.Contains(joined, want) {
			t.Errorf("problems lack %q:\n%s", want, joined)
		}
	}
}

func TestLoadYAMLBadValues(t *testing.T) {
	cases := map[string]string{
		"bad yaml":       "data: [",
		"wrong type":     "tasks:\n  max_cycles: many\n",
		"bad duration":   "tasks:\n  tool_grace: soon\n",
		"scalar section": "tasks: 3\n",
	}
	for name, doc := range cases {
		t.Run(name, func(t *testing.T) {
			if errs := Default().LoadYAML("f", []byte(doc)); len(errs) == 0 {
				t.Fatalf("LoadYAML(%q) accepted it", doc)
			}
		})
	}
}

func TestApplyEnv(t *testing.T) {
	c := Default()
	errs := c.ApplyEnv([]string{
		"LEMO_DATA=/d", "LEMO_TASKS_MAX_CYCLES=9", "LEMO_OPENROUTER_BASE_URL=http://fake:1",
		"OPENROUTER_API_KEY=k", "OLLAMA_HOST=10.0.0.5", "LEMO_SHELL_ALLOW=ls, git status", "LEMO_TOKEN=client-side", "PATH=/bin",
	})
	if len(errs) > 0 {
		t.Fatalf("ApplyEnv: %v", errs)
	}
	if c.Data != "/d" || c.Tasks.MaxCycles != 9 || c.Providers.OpenRouter.BaseURL != "http://fake:1" || c.Providers.OpenRouter.APIKey != "k" ||
		c.Providers.Ollama.BaseURL != "http://10.0.0.5:11434" || strings.Join(c.Tools.Shell.Allow, "|") != "ls|git status" {
		t.Fatalf("config = %+v", c)
	}
	errs = Default().ApplyEnv([]string{"LEMO_TASKS_MAXCYCLES=1", "LEMO_TASKS_THINK=maybe", "LEMO_TASKS_TOOL_GRACE=1"})
	if len(errs) != 3 {
		t.Fatalf("got %d problems, want 3: %v", len(errs), errs)
	}
}

func TestValidateReportsEverything(t *testing.T) {
	c := Default()
	c.Log.Level = "loud"
	c.Listen = "0.0.0.0:7465"
	c.Tasks.MaxCycles = 0
	c.Tasks.ToolGrace = 0
	c.Tasks.ReadHold = time.Minute
	c.Providers.Zen.BaseURL = "ftp://x"
	c.Tools.Shell.Approval = "maybe"
	c.Tools.Namespaces = "sometimes"
	c.Models.Default = "noslash"
	errs := c.Validate()
	joined := Join(errs).Error()
	for _, want := range []string{"log.level", "listen", "tasks.max_cycles", "tasks.tool_grace", "tasks.read_hold", "providers.zen.base_url", "tools.shell.approval", "tools.namespaces", "models.default"} {
		if !strings.Contains(joined, want+": ") {
			t.Errorf("problems lack %s:\n%s", want, joined)
		}
	}
	if len(errs) != 9 {
		t.Errorf("got %d problems, want 9:\n%s", len(errs), joined)
	}
}

// The README's configuration table is generated from the declarations.
func TestReadmeTable(t *testing.T) {
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Skipf("no README: %v", err)
	}
	const begin, end = "<!-- config-table:begin -->\n", "<!-- config-table:end -->"
	s := string(readme)
	i, j := strings.Index(s, begin), strings.Index(s, end)
	if i < 0 || j < i {
		t.Fatalf("README lacks the %q ... %q markers", begin, end)
	}
	want := Table()
	if got := s[i+len(begin) : j]; got != want {
		if *update {
			s = s[:i+len(begin)] + want + s[j:]
			if err := os.WriteFile("../README.md", []byte(s), 0o644); err != nil {
				t.Fatal(err)
			}
			return
		}
		t.Fatalf("README configuration table is stale; run go test ./config -update\n got:\n%s\nwant:\n%s", got, want)
	}
}

// The example production configuration shipped in release archives stays
// valid.
func TestDeployExampleIsValid(t *testing.T) {
	c := Default()
	errs := c.LoadFile("../deploy/lemo.yaml")
	errs = append(errs, c.Validate()...)
	if len(errs) > 0 {
		t.Fatal(Join(errs))
	}
	if c.Data != "/var/lib/lemo" || c.Log.Format != "json" {
		t.Fatalf("example config = %+v", c)
	}
}

func TestValidateLive(t *testing.T) {
	c := Default()
	c.Live.CallMiB = 0
	c.Live.TaskMiB = 512 // above total_mib 256
	c.Live.SpillMiB = 4096
	c.Live.PausedTimeout = 0
	joined := Join(c.Validate()).Error()
	for _, want := range []string{"live.call_mib: must be at least 1", "live.task_mib: 512 must not exceed live.total_mib", "live.spill_mib: 4096 must not exceed live.spill_total_mib", "live.paused_timeout: must be a positive duration"} {
		if !strings.Contains(joined, want) {
			t.Errorf("problems lack %q:\n%s", want, joined)
		}
	}
	if errs := Default().Validate(); len(errs) != 0 {
		t.Errorf("the defaults: %v", Join(errs))
	}
}

// http.pprof is served on http.listen: without a listener it is refused.
func TestPprofNeedsListen(t *testing.T) {
	c := Default()
	c.HTTP.Pprof = true
	if err := Join(c.Validate()); err == nil || !strings.Contains(err.Error(), "http.pprof: ") {
		t.Fatalf("Validate() = %v, want a problem at http.pprof", err)
	}
	c.HTTP.Listen = "127.0.0.1:7466"
	if err := Join(c.Validate()); err != nil {
		t.Fatalf("Validate() with http.listen = %v, want none", err)
	}
}
