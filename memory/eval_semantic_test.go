package memory_test

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"lemo/memory"
)

// evalSentenceModel is the real sentence-embedding model of the
// evaluation's semantic run: the Universal Sentence Encoder Lite as the
// npm packages of testdata/embed ship it, served over Ollama's
// /api/embed by testdata/embed/server.js (make embed-deps installs it).
const evalSentenceModel = "use-lite"

// startEmbedServer starts testdata/embed/server.js on a free loopback
// port and returns its base URL; the server stops with the test. The
// packages are in EMBED_TEST_NPM (a node_modules folder, as make test
// sets it); without them the test skips, under CI=true it fails.
func startEmbedServer(t *testing.T) string {
	t.Helper()
	mods := os.Getenv("EMBED_TEST_NPM")
	if mods == "" {
		if os.Getenv("CI") == "true" {
			t.Fatal("EMBED_TEST_NPM is not set: make test installs the sentence-embedding model (make embed-deps)")
		}
		t.Skip("the sentence-embedding model is not installed (make embed-deps; make test sets EMBED_TEST_NPM)")
	}
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatalf("EMBED_TEST_NPM is set but node is not on PATH: %v", err)
	}
	script, err := filepath.Abs(filepath.Join("testdata", "embed", "server.js"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(node, script, "0")
	cmd.Env = append(os.Environ(), "NODE_PATH="+mods)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
	})
	port := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if p, ok := strings.CutPrefix(sc.Text(), "listening "); ok {
				port <- p
			}
		}
		close(port)
	}()
	select {
	case p, ok := <-port:
		if _, err := strconv.Atoi(p); !ok || err != nil {
			t.Fatalf("the embedding server stopped before it listened (%q)", p)
		}
		return "http://127.0.0.1:" + p
	case <-time.After(2 * time.Minute):
		t.Fatal("the embedding server did not listen within 2 minutes")
	}
	return ""
}

// TestRecallEvaluationSemantic runs the evaluation with semantic recall
// through a real sentence-embedding model at the daemon's defaults
// (memory.embeddings.min_similarity and min_margin), and holds it to the
// figures it reached (docs/memory.md).
func TestRecallEvaluationSemantic(t *testing.T) {
	if testing.Short() {
		t.Skip("the recall evaluation feeds 257 Tasks through a daemon")
	}
	base := startEmbedServer(t)
	tasks := parseEvalTasks(t, "testdata/recall/tasks.txt")
	qs := parseEvalQuestions(t, "testdata/recall/questions.txt")
	var opt memory.Options
	opt.Embedder, opt.EmbedModel = ollamaEmbedder(t, base, evalSentenceModel)
	run := runRecallEval(t, tasks, qs, opt)
	if run.embedding == nil || run.embedding.Vectors == 0 || run.embedding.Failures != 0 || run.embedding.LexicalOnly != 0 {
		t.Fatalf("semantic recall did not run for every question: %+v", run.embedding)
	}
	lemo := evalTable(qs, run.recalled)
	table := formatEvalTable(lemo, evalTable(qs, bm25Baseline(run.texts, qs)))
	t.Log("\n" + table)
	holdEvalFloors(t, lemo, table, []evalFloor{
		{"recall@5", 0.93},
		{"recall@5 paraphrase", 0.82},
		{"complete@5 multi-hop", 0.75},
		{"MRR", 0.87},
		{"nothing relevant answered with nothing", 0.90},
	})
}

// evalFloor is a figure the evaluation reached, below which it fails.
type evalFloor struct {
	name string
	want float64
}

// holdEvalFloors fails t for every figure below its floor, and for any
// stale record ranked above its replacement.
func holdEvalFloors(t *testing.T, lemo []*evalRow, table string, floors []evalFloor) {
	t.Helper()
	all, para, multi := lemo[0], lemo[2], lemo[3]
	got := map[string]float64{
		"recall@5":                               all.hit5 / float64(all.answerable()),
		"recall@5 paraphrase":                    para.hit5 / float64(para.answerable()),
		"complete@5 multi-hop":                   multi.complete5 / float64(multi.nMulti),
		"MRR":                                    all.rr / float64(all.answerable()),
		"nothing relevant answered with nothing": all.none / float64(all.nNone),
	}
	for _, f := range floors {
		g, ok := got[f.name]
		if !ok {
			panic(fmt.Sprintf("no figure %q", f.name))
		}
		if g < f.want {
			t.Errorf("%s = %.2f, below the %.2f reached before\n%s", f.name, g, f.want, table)
		}
	}
	if all.staleAbove > 0 {
		t.Errorf("stale above replacement in %d questions, none before\n%s", int(all.staleAbove), table)
	}
}
