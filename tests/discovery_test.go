package tests

import (
	"path/filepath"
	"strings"
	"testing"

	"lemo/providers/fake/tiny"
)

// runEvent is what this test reads of lemo run --json's event lines.
type runEvent struct {
	Event struct {
		CycleFinished *struct {
			Outcome string `json:"outcome"`
			Input   struct {
				WindowTokens  int `json:"window_tokens"`
				CeilingTokens int `json:"ceiling_tokens"`
				Sections      []struct {
					Section string `json:"section"`
					Tokens  int    `json:"tokens"`
				} `json:"sections"`
			} `json:"input"`
		} `json:"cycle_finished"`
		AssistantMessage *struct {
			Text string `json:"text"`
		} `json:"assistant_message"`
		StatusChanged *struct {
			Status string `json:"status"`
		} `json:"status_changed"`
	} `json:"event"`
}

// A Task on the tiny model's 4,096-token window starts and answers with
// the default tool set (tools.initial); with every tool's schema
// (--tools naming them all) its first Cycle cannot fit, and the failure
// points to --tools. (Offered tools without get_weather, the tiny model's
// answer is empty by design of the kit: it writes a get_weather call that
// Ollama's parser drops. The Cycle completes and the answer is recorded.)
func TestTinyOllamaDefaultToolsFit(t *testing.T) {
	srv := tiny.Start(t, tiny.Options{})
	data := filepath.Join(t.TempDir(), "data")
	d := launchDaemonEnv(t, lemoBin, data, []string{"LEMO_OLLAMA_BASE_URL=" + srv.URL})
	d.waitServing()

	out, code := cli(t, data, "run", "--json", "-m", "ollama/tiny", "Hi")
	if code != 0 {
		t.Fatalf("lemo run with the default tools on a 4,096 window: exit %d\n%s\nserver log:\n%s", code, out, d.logs())
	}
	var cycles, answers int
	final := ""
	for _, line := range strings.Split(out, "\n") {
		if !strings.HasPrefix(line, `{"event"`) {
			continue
		}
		var ev runEvent
		mustJSON(t, line, &ev)
		if cf := ev.Event.CycleFinished; cf != nil {
			cycles++
			if cf.Outcome != "CYCLE_OUTCOME_COMPLETED" || cf.Input.WindowTokens != 4096 {
				t.Fatalf("Cycle: %s", line)
			}
			for _, s := range cf.Input.Sections {
				if s.Section == "tools" {
					t.Logf("tool section: %d estimated tokens (ceiling %d)", s.Tokens, cf.Input.CeilingTokens)
				}
				if s.Section == "tools" && (s.Tokens == 0 || s.Tokens > 1000) {
					t.Fatalf("the first Cycle's tool section is %d estimated tokens, want 1 to 1,000: %s", s.Tokens, line)
				}
			}
		}
		if am := ev.Event.AssistantMessage; am != nil {
			answers++
			t.Logf("answer: %q", am.Text)
		}
		if sc := ev.Event.StatusChanged; sc != nil {
			final = sc.Status
		}
	}
	if cycles == 0 || answers == 0 || final != "TASK_STATUS_FINISHED" {
		t.Fatalf("cycles %d, answers %d, final status %s; want an answered, finished Task:\n%s", cycles, answers, final, out)
	}

	// Every tool at once: the first Cycle overflows and says what to do.
	toolsOut, code := cli(t, data, "tools", "--json")
	if code != 0 {
		t.Fatalf("lemo tools: exit %d\n%s", code, toolsOut)
	}
	var infos []struct {
		Name string `json:"name"`
	}
	mustJSON(t, toolsOut, &infos)
	var all []string
	for _, i := range infos {
		if i.Name != "tools.search" && i.Name != "tools.load" {
			all = append(all, i.Name)
		}
	}
	out, code = cli(t, data, "run", "-m", "ollama/tiny", "--tools", strings.Join(all, ","), "Hi")
	if code == 0 || !strings.Contains(out, "overflow") || !strings.Contains(out, "--tools") {
		t.Fatalf("every tool's schema on a 4,096 window: exit %d, want an overflow that points to --tools:\n%s", code, out)
	}
}

// With the defaults a Task loads a tool with tools.load, and a daemon
// killed outright and started again keeps the loaded set: the next Cycle
// offers the tool and its call runs. Before the load the call fails,
// naming tools.load.
func TestDiscoveryLoadSurvivesDaemonKill(t *testing.T) {
	data := filepath.Join(t.TempDir(), "data")
	env := []string{"LEMO_FAKE_ENABLED=true", "LEMO_OLLAMA_DISABLED=true"}
	d := launchDaemonEnv(t, lemoBin, data, env)
	d.waitServing()

	out, code := cli(t, data, "run", "-m", "fake/call", "tasks.list {}")
	if code != 0 || !strings.Contains(out, `"tasks_list" is not loaded`) || !strings.Contains(out, "tools.load") {
		t.Fatalf("a call of a tool not loaded: exit %d, want a failure naming tools.load:\n%s", code, out)
	}
	id := ""
	for _, line := range strings.Split(out, "\n") {
		if rest, ok := strings.CutPrefix(line, "task "); ok {
			id, _, _ = strings.Cut(rest, " ")
			break
		}
	}
	if id == "" {
		t.Fatalf("no task id in:\n%s", out)
	}
	out, code = cli(t, data, "send", id, `tools.load {"names":["tasks.list"]}`)
	if code != 0 || !strings.Contains(out, "tools loaded for the next model calls: tasks.list") {
		t.Fatalf("tools.load: exit %d\n%s", code, out)
	}

	d.kill()
	d = launchDaemonEnv(t, lemoBin, data, env)
	d.waitServing()
	out, code = cli(t, data, "send", id, "tasks.list {}")
	if code != 0 || strings.Contains(out, "not loaded") || !strings.Contains(out, id) {
		t.Fatalf("tasks.list after the restart: exit %d, want it to run and list this Task:\n%s", code, out)
	}
}
