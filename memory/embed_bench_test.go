package memory

import (
	"context"
	"fmt"
	"hash/fnv"
	"math/rand"
	"strings"
	"testing"
	"time"

	"lemo/persistence"
)

// benchEmbedder embeds a text as the sum of a fixed random vector per word
// (a random projection of its bag of words): deterministic, fast, and with
// the geometry of real embeddings' use (texts sharing words are near).
type benchEmbedder struct {
	dims  int
	table [][]float32
	spent time.Duration // in Embed
}

func newBenchEmbedder(dims int) *benchEmbedder {
	r := rand.New(rand.NewSource(5))
	e := &benchEmbedder{dims: dims, table: make([][]float32, 4096)}
	for i := range e.table {
		v := make([]float32, dims)
		for j := range v {
			v[j] = float32(r.NormFloat64())
		}
		e.table[i] = v
	}
	return e
}

func (e *benchEmbedder) Embed(_ context.Context, texts []string) ([][]float32, error) {
	start := time.Now()
	defer func() { e.spent += time.Since(start) }()
	out := make([][]float32, len(texts))
	for i, t := range texts {
		v := make([]float32, e.dims)
		for _, w := range strings.Fields(t) {
			h := fnv.New32a()
			_, _ = h.Write([]byte(w))
			row := e.table[h.Sum32()%4096]
			for j := range v {
				v[j] += row[j]
			}
		}
		v[0] += 1e-3 // never a zero vector
		out[i] = v
	}
	return out, nil
}

// embedCorpus gives every record of the 100,000-record corpus a vector of
// dims dimensions through the embedder's own path (embedTask: read the
// Task's events, embed in batches, commit vectors, codes and watermark),
// once per process and dims; it returns the memory with semantic recall
// on and the records committed per second (the model's time aside).
func embedCorpus(b *testing.B, dims int) (*benchCorpus, float64) {
	c := corpusOf(b, 100_000)
	corporaMu.Lock()
	defer corporaMu.Unlock()
	if c.embedDims == dims && c.mem.emb != nil {
		return c, c.embedRate
	}
	c.mem.opt.EmbedBatch, c.mem.opt.EmbedTimeout, c.mem.opt.MinSimilarity = 64, time.Minute, 0.05
	model := newBenchEmbedder(dims)
	c.mem.emb = &embedState{emb: model, model: fmt.Sprintf("bench/%d", dims), vecs: newVecIndex(),
		dirty: make(map[string]dirtyTask), facts: make(map[string]dirtyFact), kick: make(chan struct{}, 1), done: make(chan struct{}), codes: make(chan struct{})}
	close(c.mem.emb.done) // no background embedder: embedTask runs here
	// Vectors of these dimensions a previous run left in a kept corpus
	// (LEMO_MEMORY_BENCH_DIR) are used; others are dropped.
	var have []byte
	_ = c.st.View(func(v *persistence.Snapshot) error {
		have, _ = v.GetCopy(persistence.EmbedModelKey())
		return nil
	})
	if string(have) != c.mem.emb.model {
		if err := c.mem.dropVectors(); err != nil {
			b.Fatal(err)
		}
		if err := c.st.UpdateIndex([]persistence.KV{{Key: persistence.EmbedModelKey(), Value: []byte(c.mem.emb.model)}}); err != nil {
			b.Fatal(err)
		}
	}
	// Loaded here, as the embedder does at start.
	if err := c.mem.loadVectors(func() { close(c.mem.emb.codes) }); err != nil {
		b.Fatal(err)
	}
	var tasks []string
	err := c.st.View(func(v *persistence.Snapshot) error {
		pre := persistence.WatermarkPrefix()
		return v.Scan(pre, persistence.ScanOptions{KeysOnly: true}, func(k, _ []byte) error {
			tasks = append(tasks, string(k[len(pre):]))
			return nil
		})
	})
	if err != nil {
		b.Fatal(err)
	}
	loaded := c.mem.emb.vecs.len()
	start := time.Now()
	for _, task := range tasks {
		if _, err := c.mem.embedTask(context.Background(), "o", task); err != nil {
			b.Fatal(err)
		}
	}
	n := c.mem.emb.vecs.len() - loaded
	took := time.Since(start) - model.spent
	c.embedDims = dims
	if n > 0 {
		c.embedRate = float64(n) / took.Seconds()
		b.Logf("%d records embedded (%d dimensions): the memory's side (reading the records, committing vectors and codes) at %.0f records/s; the bench model took %s",
			n, dims, c.embedRate, model.spent.Round(time.Millisecond))
	} else {
		b.Logf("%d vectors of %d dimensions loaded from the kept corpus", loaded, dims)
	}
	return c, c.embedRate
}

func benchRecallEmbeddings(b *testing.B, dims int) {
	c, rate := embedCorpus(b, dims)
	measureRecalls(b, c, false)
	b.ReportMetric(rate, "embedded-records/s")
}

// BenchmarkRecall100KEmbeddings384 is BenchmarkRecall100K with semantic
// recall on: every record has a vector of 384 dimensions (the query is
// embedded by the bench model, which takes microseconds; a real model's
// call is added to this).
func BenchmarkRecall100KEmbeddings384(b *testing.B) { benchRecallEmbeddings(b, 384) }

// BenchmarkRecall100KEmbeddings1024: the same with 1,024 dimensions.
func BenchmarkRecall100KEmbeddings1024(b *testing.B) { benchRecallEmbeddings(b, 1024) }

// BenchmarkVectorSearch100K1024 is the vector search alone (sign codes,
// then the exact cosine of the shortlist) over 100,000 records of 1,024
// dimensions, and the brute-force cosine over the same vectors read from
// the store, for comparison.
func BenchmarkVectorSearch100K1024(b *testing.B) {
	c, _ := embedCorpus(b, 1024)
	qs := queries(c.gen, 64, false)
	vecs, _ := c.mem.emb.emb.Embed(context.Background(), qs)
	for i := range vecs {
		vecs[i] = unit(vecs[i])
	}
	for _, mode := range []string{"codes", "brute-force"} {
		b.Run(mode, func(b *testing.B) {
			lat := make(latencies, 0, b.N)
			for i := 0; i < b.N; i++ {
				q := vecs[i%len(vecs)]
				t := time.Now()
				err := c.st.View(func(v *persistence.Snapshot) error {
					if mode == "codes" {
						_, _, err := c.mem.emb.vecs.search(v, "o", q, vectorCandidates, 0, 0, "")
						return err
					}
					best := make([]float64, 0, vectorCandidates)
					return v.Scan(persistence.VectorPrefix("o"), persistence.ScanOptions{}, func(_, val []byte) error {
						vec, err := decodeVector(val, 1024)
						if err != nil {
							return err
						}
						if s := dot(q, vec); len(best) < cap(best) {
							best = append(best, s)
						}
						return nil
					})
				})
				lat = append(lat, time.Since(t))
				if err != nil {
					b.Fatal(err)
				}
			}
			lat.report(b)
		})
	}
}
