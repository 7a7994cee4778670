package delegate

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"lemo/providers/fake"
)

// TestRealOmp drives the real omp agent (npm @oh-my-pi/pi-coding-agent,
// on Bun) when DELEGATE_TEST_OMP names its binary and DELEGATE_TEST_BUN
// the folder of the bun executable; it is opt-in (omp and Bun take 750 MB,
// see notes/omp-rpc.md §1 for the install). It covers what differs from
// pi: the ready frame, built-in select approvals, and --resume.
func TestRealOmp(t *testing.T) {
	bin, bunDir := os.Getenv("DELEGATE_TEST_OMP"), os.Getenv("DELEGATE_TEST_BUN")
	if bin == "" || bunDir == "" {
		t.Skip("set DELEGATE_TEST_OMP (the omp binary) and DELEGATE_TEST_BUN (the folder of bun) to test against the real omp")
	}
	_, url := startPiProvider(t, []fake.Scenario{
		{Match: "please run the tool", ToolCalls: []fake.Call{{Name: "bash", Arguments: `{"command":"echo omp-tool-ran"}`}}},
		{AfterTool: true, Text: []string{"the tool ", "ran"}},
		{Match: "continue please", Text: []string{"resumed ", "omp"}},
	})
	home := t.TempDir()
	agentDir := filepath.Join(home, ".omp", "agent")
	if err := os.MkdirAll(agentDir, 0o700); err != nil {
		t.Fatal(err)
	}
	models := "providers:\n  fake:\n    baseUrl: " + url + "\n    apiKey: fake-key\n    api: openai-completions\n" +
		"    compat: { supportsDeveloperRole: false, supportsReasoningEffort: false }\n    models:\n" +
		"      - { id: local-model, name: Local Model, reasoning: false, input: [text], contextWindow: 32000, maxTokens: 4096, cost: { input: 0, output: 0, cacheRead: 0, cacheWrite: 0 } }\n"
	config := "startup: { checkUpdate: false }\nmarketplace: { autoUpdate: \"off\" }\ndisabledProviders: [ollama, llama.cpp, lm-studio]\n"
	os.WriteFile(filepath.Join(agentDir, "models.yml"), []byte(models), 0o600)
	os.WriteFile(filepath.Join(agentDir, "config.yml"), []byte(config), 0o600)
	os.MkdirAll(filepath.Join(home, "tmp"), 0o700)
	r := newRig(t, func(c *Config) {
		c.Kind, c.Binary = KindOmp, bin
		c.Args = []string{"--model", "fake/local-model", "--tools", "read,bash,edit,write", "--no-lsp"}
		c.Environ = []string{"PATH=" + bunDir + ":/usr/local/bin:/usr/bin:/bin", "HOME=" + home, "TMPDIR=" + filepath.Join(home, "tmp"), "LANG=C.UTF-8"}
		c.SetEnv = append(c.SetEnv, "BUN_RUNTIME_TRANSPILER_CACHE_PATH=0")
		c.StartTimeout, c.CommandTimeout, c.ExitGrace, c.KillGrace = 120*time.Second, 60*time.Second, 5*time.Second, 2*time.Second
	})
	ap := approveAll()
	first := r.must(map[string]any{"prompt": "please run the tool"}, runOpts{approvals: ap})
	if first.Status != StatusFinished || first.FinalAnswer != "the tool ran" || first.Summary.Approvals.Approved != 1 ||
		len(first.Summary.Tools) != 1 || !strings.Contains(first.Summary.Tools[0].Output, "omp-tool-ran") {
		t.Fatalf("first run = %+v", first)
	}
	if first.Exit == nil || first.Exit.Code != 0 || first.Exit.Term {
		t.Fatalf("omp did not exit on stdin EOF: %+v", first.Exit)
	}
	if reasons := ap.reasons(); len(reasons) != 1 || !strings.Contains(reasons[0], "bash") {
		t.Fatalf("approvals asked: %q", reasons)
	}
	second := r.must(map[string]any{"prompt": "continue please", "resume": first.SessionID}, runOpts{})
	if second.Status != StatusFinished || !second.Resumed || second.SessionID != first.SessionID || second.FinalAnswer != "resumed omp" {
		t.Fatalf("resumed run = %+v", second)
	}
}
