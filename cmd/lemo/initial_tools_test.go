package main

import (
	"slices"
	"strings"
	"testing"

	"github.com/rs/zerolog"
	"google.golang.org/protobuf/types/known/timestamppb"

	"lemo/actors/services"
	"lemo/actors/taskstate"
	"lemo/api"
	"lemo/config"
	"lemo/prompt"
	"lemo/providers"
	"lemo/tools"
)

// maxInitialToolTokens is the target of tool discovery: with the default
// configuration the first Cycle's tool section is at most this many
// estimated tokens.
const maxInitialToolTokens = 1000

// daemonTools returns the tools lemo serve registers with cfg.
func daemonTools(t *testing.T, cfg *config.Config) *tools.Registry {
	t.Helper()
	reg, err := buildTools(cfg, zerolog.Nop(), services.New(services.Options{}), toolProcs{})
	if err != nil {
		t.Fatal(err)
	}
	for _, x := range memoryTools(nil, nil, nil) {
		if err := reg.Register(x); err != nil {
			t.Fatal(err)
		}
	}
	return reg
}

// firstToolSection is the tools section of a new Task's first Cycle
// input, as prompt.Build estimates it, with the tools of taskTools, on the
// tiny model's 4,096-token window.
func firstToolSection(t *testing.T, reg *tools.Registry, taskTools []string) int {
	t.Helper()
	return toolSection(t, reg, taskTools, 4096)
}

// toolSection is the tools section of a new Task's first Cycle on a
// model with window tokens.
func toolSection(t *testing.T, reg *tools.Registry, taskTools []string, window int) int {
	t.Helper()
	regs, err := reg.Select(taskTools, true)
	if err != nil {
		t.Fatal(err)
	}
	specs := make([]providers.ToolSpec, len(regs))
	for i, r := range regs {
		specs[i] = r.Spec()
	}
	ts := timestamppb.Now()
	history := []*api.Event{}
	for i, b := range taskstate.Create(taskstate.CreateInput{Owner: "o", Model: "ollama/tiny", Request: "hi", Tools: taskTools, Discovery: true}) {
		history = append(history, api.NewEvent("T", uint64(i+1), ts, b))
	}
	_, sum, err := prompt.Build(prompt.Input{History: history, Tools: specs, Window: window})
	if err != nil {
		t.Fatalf("the first Cycle on a %d-token window does not fit with %q: %v", window, taskTools, err)
	}
	for _, s := range sum.GetSections() {
		if s.GetSection() == prompt.SectionTools {
			return int(s.GetTokens())
		}
	}
	t.Fatal("no tools section")
	return 0
}

// With the defaults a Task's first Cycle offers tools.initial, whose
// schemas take at most 1,000 estimated tokens (every tool's take about
// 5,400 with the default daemon's 19 tools), and always the discovery
// tools.
func TestDefaultInitialToolsFitTheBudget(t *testing.T) {
	cfg := config.Default()
	reg := daemonTools(t, cfg)
	var names []string
	for _, r := range reg.List() {
		names = append(names, r.Tool.Name())
	}
	initial := taskstate.InitialTools(cfg.Tools.Initial, names, tools.MatchPattern)
	for _, want := range append(cfg.Tools.Initial, taskstate.SearchTool, taskstate.LoadTool) {
		if !slices.Contains(initial, want) {
			t.Fatalf("the initial set %q lacks %s", initial, want)
		}
	}
	got := firstToolSection(t, reg, initial)
	// Every tool (tools.initial: ["*"]), measured the same way; their
	// section does not fit the tiny model's window, so on the fallback
	// window. The README quotes this figure.
	all := toolSection(t, reg, names, prompt.FallbackWindow)
	t.Logf("first Cycle's tool section: %d estimated tokens with tools.initial %q; %d with all %d tools", got, initial, all, len(names))
	if got > maxInitialToolTokens {
		t.Fatalf("the default initial tools' section is %d estimated tokens, over the target of %d", got, maxInitialToolTokens)
	}
	if ceiling := prompt.Ceiling(4096, false); all <= ceiling {
		t.Errorf("every tool's section is %d estimated tokens, within the first-Cycle ceiling of the 4,096-token window (%d): the README's reason for tools.initial no longer holds", all, ceiling)
	}
}

// A tools.initial naming a tool the daemon does not offer is refused at
// startup with the closest names; under the default list a disabled tool
// is only logged.
func TestCheckInitialTools(t *testing.T) {
	cfg := config.Default()
	reg := daemonTools(t, cfg)
	if err := checkInitialTools(cfg, reg, zerolog.Nop()); err != nil {
		t.Fatalf("defaults: %v", err)
	}
	cfg.Tools.Initial = []string{"files.*", "files.raed", "shell.run"}
	err := checkInitialTools(cfg, reg, zerolog.Nop())
	if err == nil || !strings.Contains(err.Error(), "tools.initial[1]") || !strings.Contains(err.Error(), "did you mean files.read") {
		t.Fatalf("a typo: %v", err)
	}
	noShell := config.Default()
	noShell.Tools.Shell.Enabled = false
	if err := checkInitialTools(noShell, daemonTools(t, noShell), zerolog.Nop()); err != nil {
		t.Fatalf("defaults with the shell disabled: %v", err)
	}
	// A tool of an MCP server that has not listed its tools yet (it was
	// not up at start) is offered once it does: not a reason to refuse.
	late := config.Default()
	late.Tools.Initial = []string{"files.*", "mcp.late.echo"}
	lreg := daemonTools(t, late)
	if err := checkInitialTools(late, lreg, zerolog.Nop()); err == nil {
		t.Fatal("a tool of no server and not registered was accepted")
	}
	lreg.SetPending(func() []tools.Pending {
		return []tools.Pending{{Source: "mcp server late", Prefix: "mcp.late.", State: "listing failed: refused; retrying in 8s"}}
	})
	if err := checkInitialTools(late, lreg, zerolog.Nop()); err != nil {
		t.Fatalf("a tool of a server whose listing is retried: %v", err)
	}
}
