package memory_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"lemo/memory"
	"lemo/providers/fake"
	"lemo/providers/fake/tiny"
	"lemo/providers/ollama"
)

// Semantic recall's plumbing against a real Ollama server with the tiny
// embedding model (384 dimensions, vectors of no linguistic quality: this
// checks the plumbing, not recall's quality). The daemon's records get
// vectors from /api/embed; records written while the daemon ran without
// embeddings are embedded after the next start (the durable watermark:
// only those); a question that shares no word with memory recalls through
// the vectors fused with the (empty) lexical results.
func TestSemanticRecallWithTinyOllama(t *testing.T) {
	srv := tiny.Start(t, tiny.Options{})
	prov, err := ollama.New(ollama.Config{BaseURL: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	var embedded atomic.Int64
	emb := memory.EmbedderFunc(func(ctx context.Context, texts []string) ([][]float32, error) {
		vecs, err := prov.Embed(ctx, "tiny-embed", texts)
		if err == nil {
			embedded.Add(int64(len(texts)))
		}
		return vecs, err
	})
	// The tiny model's similarities mean nothing: a floor just above 0
	// lets its nearest records through.
	on := memory.Options{Embedder: emb, EmbedModel: "ollama/tiny-embed", EmbedBatch: 4, MinSimilarity: 0.01}
	d := &daemon{t: t, dir: t.TempDir(), model: fake.NewScriptedModel("m", 32768, plan), memOpt: on}
	d.start()
	t.Cleanup(d.stop)
	status := func() memory.EmbeddingStatus {
		s, ok := d.mem.EmbeddingStatus()
		if !ok {
			t.Fatal("semantic recall is off")
		}
		return s
	}
	waitFor := func(what string, cond func(memory.EmbeddingStatus) bool) memory.EmbeddingStatus {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for {
			s := status()
			if cond(s) {
				return s
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: status %+v", what, s)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}

	d.run("alice", "Remember this for later, please.")
	first := waitFor("the first Task's records embedded", func(s memory.EmbeddingStatus) bool { return s.Vectors >= 3 && s.Behind == 0 })

	// A Task while the daemon runs without embeddings.
	d.stop()
	d.memOpt = memory.Options{}
	d.start()
	d.run("alice", "The loading dock at Felixstowe opens at six in the morning.")
	d.stop()
	d.memOpt = on
	embeddedBefore := embedded.Load()
	d.start()
	caught := waitFor("caught up after the restart", func(s memory.EmbeddingStatus) bool { return s.Vectors > first.Vectors && s.Behind == 0 })
	if got, want := int(embedded.Load()-embeddedBefore), caught.Vectors-first.Vectors; got != want {
		t.Fatalf("the catch-up embedded %d texts for %d new vectors: the watermark should keep the embedded ones", got, want)
	}

	q := "Quokkas xylophone zebra?" // no word of it is in memory
	hits, err := d.mem.Search(context.Background(), memory.Query{Owner: "alice", Text: q})
	if err != nil || len(hits) != 0 {
		t.Fatalf("the lexical index found %+v, %v; the question must share no word with memory", hits, err)
	}
	_, evs := d.run("alice", q)
	rc := recalled(d.lastRequest(q))
	sums := summaries(evs)
	if rc == "" || len(sums) == 0 || len(sums[0].GetRecalled()) == 0 {
		t.Fatalf("nothing recalled through the vectors: %q", rc)
	}
	if s := status(); s.LexicalOnly != 0 || s.Failures != 0 {
		t.Fatalf("status %+v: the query should have been embedded", s)
	}
	t.Logf("recalled through the vectors: %d items; %s", len(sums[0].GetRecalled()), strings.SplitN(rc, "\n", 2)[0])
}
