package tests

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"lemo/providers/fake/tiny"
)

// lemo serve with memory.embeddings.model set to the tiny-ollama kit's
// tiny-embed (a real Ollama server; vectors of no linguistic quality, so
// this checks the plumbing, not recall's quality): a Task written while
// the daemon ran without embeddings is embedded after a restart with them
// (the metrics say so), and a question no word of which is in memory
// recalls through the vectors.
func TestServeSemanticRecallWithTinyOllama(t *testing.T) {
	srv := tiny.Start(t, tiny.Options{})
	data := filepath.Join(t.TempDir(), "data")
	env := []string{"LEMO_OLLAMA_BASE_URL=" + srv.URL}
	run := func(request string) string {
		t.Helper()
		out, code := cli(t, data, "run", "--json", "-m", "ollama/tiny", "--tools", "files.read", request)
		if code != 0 {
			t.Fatalf("lemo run %q: exit %d\n%s", request, code, out)
		}
		return out
	}

	d := launchDaemonEnv(t, lemoBin, data, env)
	d.waitServing()
	run("The loading dock at Felixstowe opens at six in the morning.")
	d.stop()

	// The tiny model's similarities mean nothing: a floor just above 0.
	embed := append(env, "LEMO_MEMORY_EMBEDDINGS_MODEL=ollama/tiny-embed", "LEMO_MEMORY_EMBEDDINGS_MIN_SIMILARITY=0.01")
	d = launchDaemonEnv(t, lemoBin, data, embed, "--http-listen", "127.0.0.1:0")
	addr := httpAddr(t, d)
	d.waitServing()
	eventually(t, 60*time.Second, func() error {
		m := scrape(t, addr)
		// The request is the Task's one record: the tiny model's answer
		// with tools offered is empty by design of the kit.
		if m["lemo_memory_embedding_vectors"] < 1 || m["lemo_memory_embedding_tasks_behind"] != 0 {
			return fmt.Errorf("vectors %v, Tasks behind %v; want the earlier Task's records embedded",
				m["lemo_memory_embedding_vectors"], m["lemo_memory_embedding_tasks_behind"])
		}
		return nil
	})

	out := run("Quokkas xylophone zebra?")
	var recalled int
	for _, line := range strings.Split(out, "\n") {
		if !strings.HasPrefix(line, `{"event"`) {
			continue
		}
		var ev struct {
			Event struct {
				CycleFinished *struct {
					Input struct {
						Recalled []struct {
							TaskID string `json:"task_id"`
						} `json:"recalled"`
					} `json:"input"`
				} `json:"cycle_finished"`
			} `json:"event"`
		}
		mustJSON(t, line, &ev)
		if cf := ev.Event.CycleFinished; cf != nil && recalled == 0 {
			recalled = len(cf.Input.Recalled)
		}
	}
	if recalled == 0 {
		t.Fatalf("the first Cycle recalled nothing through the vectors:\n%s\nserver log:\n%s", out, d.logs())
	}
	m := scrape(t, addr)
	if m["lemo_memory_embedding_failures_total"] != 0 || m["lemo_memory_recall_lexical_only_total"] != 0 {
		t.Fatalf("failures %v, lexical-only recalls %v; want the query embedded", m["lemo_memory_embedding_failures_total"], m["lemo_memory_recall_lexical_only_total"])
	}
	d.stop()
}
