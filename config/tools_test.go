package config

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

// tools.initial takes tool names and patterns from the file and the
// environment; anything else is refused with its key path.
func TestToolsInitial(t *testing.T) {
	if d := Default(); !slices.Equal(d.Tools.Initial, DefaultInitialTools()) || len(d.Validate()) != 0 {
		t.Fatalf("default tools.initial = %q, problems %v", d.Tools.Initial, d.Validate())
	}
	c := Default()
	if errs := c.ApplyEnv([]string{"LEMO_TOOLS_INITIAL=files.*, shell.run"}); len(errs) > 0 {
		t.Fatal(errs)
	}
	if !slices.Equal(c.Tools.Initial, []string{"files.*", "shell.run"}) {
		t.Fatalf("LEMO_TOOLS_INITIAL gave %q", c.Tools.Initial)
	}
	c = Default()
	if errs := c.LoadYAML("lemo.yaml", []byte("tools:\n  initial: [\"*\"]\n")); len(errs) > 0 || !slices.Equal(c.Tools.Initial, []string{"*"}) {
		t.Fatalf("tools.initial [*] from a file: %q, %v", c.Tools.Initial, errs)
	}
	c.Tools.Initial = []string{"files.read", "Files.Write", "shell run"}
	errs := c.Validate()
	joined := fmt.Sprint(Join(errs))
	if len(errs) != 2 || !strings.Contains(joined, "tools.initial[1]: \"Files.Write\": want a tool name") || !strings.Contains(joined, "tools.initial[2]") {
		t.Fatalf("bad tools.initial entries: %s", joined)
	}
	c.Tools.Initial = slices.Repeat([]string{"files.read"}, maxInitialTools+1)
	if joined := fmt.Sprint(Join(c.Validate())); !strings.Contains(joined, "tools.initial: 65 entries: at most 64") {
		t.Fatalf("too many entries: %s", joined)
	}
}
