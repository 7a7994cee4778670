package memory

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"math"
	"math/rand"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"lemo/internal/testwait"
	"lemo/persistence"
)

func TestFuse(t *testing.T) {
	tests := []struct {
		name       string
		lexical    map[uint64]float64
		similarity map[uint64]float64
		floor      float64
		want       map[uint64]float64
	}{
		{"both empty", nil, nil, 0.5, map[uint64]float64{}},
		{"lexical only: its size kept", map[uint64]float64{1: 0.9, 2: 0.21}, nil, 0.5, map[uint64]float64{1: 0.9, 2: 0.21}},
		{"vector only: half its share above the floor", nil, map[uint64]float64{3: 0.75, 4: 1, 5: 0.5}, 0.5, map[uint64]float64{3: 0.25, 4: 0.5, 5: 0}},
		{"both: the larger", map[uint64]float64{1: 0.3, 2: 0.8}, map[uint64]float64{1: 0.9, 2: 0.9}, 0.5, map[uint64]float64{1: 0.4, 2: 0.8}},
		{"a strong lexical match leads any vector", map[uint64]float64{1: 0.6}, map[uint64]float64{2: 1}, 0.5, map[uint64]float64{1: 0.6, 2: 0.5}},
		{"floor 1: a cosine at the floor counts whole", nil, map[uint64]float64{1: 1}, 1, map[uint64]float64{1: 0.5}},
		{"below the floor counts nothing", map[uint64]float64{1: 0.1}, map[uint64]float64{1: 0.2}, 0.5, map[uint64]float64{1: 0.1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := fuse(tt.lexical, tt.similarity, tt.floor)
			if len(got) != len(tt.want) {
				t.Fatalf("fuse = %v, want %v", got, tt.want)
			}
			for h, w := range tt.want {
				if math.Abs(got[h]-w) > 1e-12 {
					t.Fatalf("fuse[%d] = %v, want %v (all: %v)", h, got[h], w, got)
				}
			}
		})
	}
}

// The vector index finds what a brute-force cosine over the same vectors
// finds, skips the excluded Task and honours the similarity floor.
func TestVectorIndexSearch(t *testing.T) {
	e := newEnv(t, Options{})
	rng := rand.New(rand.NewSource(1))
	const dims, n = 96, 2000
	vecs := make([][]float32, n)
	x := newVecIndex()
	var kvs []persistence.KV
	for i := range vecs {
		v := make([]float32, dims)
		for j := range v {
			v[j] = float32(rng.NormFloat64())
		}
		vecs[i] = unit(v)
		task := "T1"
		if i%2 == 1 {
			task = "T2"
		}
		ref := persistence.EventRef(task, uint64(i+1))
		meta := vecMeta{kind: KindAssistantMessage, hash: uint64(i)}
		kvs = append(kvs, persistence.KV{Key: persistence.VectorKey("o", ref), Value: encodeVector(vecs[i])})
		if err := x.add("o", string(ref), dims, meta, signCode(vecs[i])); err != nil {
			t.Fatal(err)
		}
	}
	if err := e.st.UpdateIndex(kvs); err != nil {
		t.Fatal(err)
	}
	// A query near record 10 (of T1).
	q := make([]float32, dims)
	for j := range q {
		q[j] = vecs[10][j] + 0.3*float32(rng.NormFloat64())/float32(math.Sqrt(dims))
	}
	q = unit(q)
	err := e.st.View(func(v *persistence.Snapshot) error {
		hits, _, err := x.search(v, "o", q, 5, -1, 0, "")
		if err != nil {
			return err
		}
		if len(hits) != 5 || hits[0].meta.hash != 10 {
			t.Fatalf("search = %+v, want record 10 first of 5", hits)
		}
		best := -2.0
		for i := range vecs {
			best = max(best, dot(q, vecs[i]))
		}
		if math.Abs(hits[0].similarity-best) > 1e-6 {
			t.Fatalf("similarity %v, brute force %v", hits[0].similarity, best)
		}
		hits, _, err = x.search(v, "o", q, 5, -1, 0, "T1")
		if err != nil {
			return err
		}
		for _, h := range hits {
			if strings.HasPrefix(h.ref, "T1/") {
				t.Fatalf("excluded Task's record found: %q", h.ref)
			}
		}
		if hits, _, err = x.search(v, "o", q, 5, 0.99, 0, ""); err != nil || len(hits) != 0 {
			t.Fatalf("with floor 0.99: %+v %v", hits, err)
		}
		// The margin: over random vectors the query's mean similarity is
		// about 0, so a margin of 0.5 keeps record 10 (about 0.95) and
		// 0.99 keeps nothing; the floor applied is the mean plus it.
		// A search returns what passes the eased floor (sharedWordEase
		// below the strict one).
		hits, floors, err := x.search(v, "o", q, 5, -1, 0.5, "")
		if err != nil || len(hits) == 0 || hits[0].meta.hash != 10 || math.Abs(floors.strict-0.5) > 0.05 ||
			math.Abs(floors.strict-floors.eased-sharedWordEase) > 1e-9 {
			t.Fatalf("with margin 0.5: %d hits, floors %+v, %v; want record 10 first, floors about 0.5 and %v lower", len(hits), floors, err, sharedWordEase)
		}
		for _, h := range hits {
			if h.similarity < floors.eased {
				t.Fatalf("hit %q at %v below the eased floor %v", h.ref, h.similarity, floors.eased)
			}
		}
		hits, floors, err = x.search(v, "o", q, 5, -1, 0.99, "")
		if err != nil {
			return err
		}
		for _, h := range hits {
			if floors.admits(h.similarity, false) {
				t.Fatalf("with margin 0.99: %q at %v passes the strict floor %v", h.ref, h.similarity, floors.strict)
			}
		}
		_, _, err = x.search(v, "o", q[:10], 5, 0, 0, "")
		if !errors.Is(err, ErrEmbeddingDims) {
			t.Fatalf("query of other dimensions: %v, want ErrEmbeddingDims", err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// The asking Task's facts are its records: a vector search that leaves
// the Task out leaves them out too, as the lexical one does.
func TestVectorSearchLeavesOutTheTasksFacts(t *testing.T) {
	e := newEnv(t, Options{})
	x := newVecIndex()
	q := unit([]float32{1, 0.5, 0.25, 0.125})
	var kvs []persistence.KV
	for i, ref := range []string{string(persistence.FactRef("T1", "f1")), string(persistence.EventRef("T2", 1))} {
		kvs = append(kvs, persistence.KV{Key: persistence.VectorKey("o", []byte(ref)), Value: encodeVector(q)})
		if err := x.add("o", ref, len(q), vecMeta{kind: KindFact, hash: uint64(i)}, signCode(q)); err != nil {
			t.Fatal(err)
		}
	}
	if err := e.st.UpdateIndex(kvs); err != nil {
		t.Fatal(err)
	}
	err := e.st.View(func(v *persistence.Snapshot) error {
		hits, _, err := x.search(v, "o", q, 5, -1, 0, "T1")
		if err != nil {
			return err
		}
		if len(hits) != 1 || hits[0].ref != string(persistence.EventRef("T2", 1)) {
			t.Fatalf("search leaving T1 out = %+v, want T2's record alone", hits)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestVecFloors(t *testing.T) {
	tests := []struct {
		name           string
		minSim, margin float64
		sum            float64
		n              int
		sim            float64
		shares, want   bool
		strict, eased  float64
	}{
		{"above the strict floor, no shared word", 0.5, 0.4, 0.3 * 100, 100, 0.72, false, true, 0.7, 0.6},
		{"between the floors, no shared word", 0.5, 0.4, 0.3 * 100, 100, 0.65, false, false, 0.7, 0.6},
		{"between the floors, a shared word", 0.5, 0.4, 0.3 * 100, 100, 0.65, true, true, 0.7, 0.6},
		{"below the eased floor, a shared word", 0.5, 0.4, 0.3 * 100, 100, 0.55, true, false, 0.7, 0.6},
		{"the eased floor stops at min_similarity", 0.5, 0.4, 0.15 * 100, 100, 0.45, true, false, 0.55, 0.5},
		{"margin off: one floor", 0.5, 0, 0.3 * 100, 100, 0.55, false, true, 0.5, 0.5},
		{"too few records: min_similarity", 0.5, 0.4, 0.3 * 10, 10, 0.5, false, true, 0.5, 0.5},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := floorsFor(tt.minSim, tt.margin, tt.sum, tt.n)
			if math.Abs(f.strict-tt.strict) > 1e-9 || math.Abs(f.eased-tt.eased) > 1e-9 {
				t.Fatalf("floorsFor = %+v, want strict %v eased %v", f, tt.strict, tt.eased)
			}
			if got := f.admits(tt.sim, tt.shares); got != tt.want {
				t.Fatalf("admits(%v, %v) = %v, want %v", tt.sim, tt.shares, got, tt.want)
			}
		})
	}
}

func TestSimilarityFloor(t *testing.T) {
	tests := []struct {
		name                string
		minSim, margin, sum float64
		n                   int
		want                float64
	}{
		{"no margin: the floor", 0.5, 0, 40, 100, 0.5},
		{"too few records for a mean: the floor", 0.5, 0.4, 0.3 * 63, 63, 0.5},
		{"mean plus margin above the floor", 0.5, 0.4, 0.3 * 64, 64, 0.7},
		{"mean plus margin below the floor: the floor", 0.5, 0.4, 0.05 * 100, 100, 0.5},
		{"a negative mean: the floor", 0.3, 0.4, -0.2 * 100, 100, 0.3},
		{"generic query near everything", 0.3, 0.4, 0.45 * 1000, 1000, 0.85},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := similarityFloor(tt.minSim, tt.margin, tt.sum, tt.n); math.Abs(got-tt.want) > 1e-12 {
				t.Fatalf("similarityFloor(%v, %v, %v, %d) = %v, want %v", tt.minSim, tt.margin, tt.sum, tt.n, got, tt.want)
			}
		})
	}
}

// The baseline a search estimates from the sign codes follows the exact
// mean similarity, also over vectors that share a direction (as a real
// model's do: most of them point the same way).
func TestSimilarityBaselineEstimate(t *testing.T) {
	e := newEnv(t, Options{})
	rng := rand.New(rand.NewSource(2))
	const dims, n = 256, 1500
	common := make([]float32, dims)
	for j := range common {
		common[j] = float32(rng.NormFloat64())
	}
	noisy := func(base []float32, spread float64) []float32 {
		v := make([]float32, dims)
		for j := range v {
			v[j] = float32(float64(base[j]) + spread*rng.NormFloat64())
		}
		return unit(v)
	}
	x := newVecIndex()
	vecs := make([][]float32, n)
	var kvs []persistence.KV
	for i := range vecs {
		vecs[i] = noisy(common, 1.2)
		ref := persistence.EventRef("T1", uint64(i+1))
		kvs = append(kvs, persistence.KV{Key: persistence.VectorKey("o", ref), Value: encodeVector(vecs[i])})
		if err := x.add("o", string(ref), dims, vecMeta{kind: KindAssistantMessage, hash: uint64(i)}, signCode(vecs[i])); err != nil {
			t.Fatal(err)
		}
	}
	for len(kvs) > 0 { // in transactions of 500
		k := min(len(kvs), 500)
		if err := e.st.UpdateIndex(kvs[:k]); err != nil {
			t.Fatal(err)
		}
		kvs = kvs[k:]
	}
	for _, spread := range []float64{0.5, 1.5, 4} {
		q := noisy(common, spread)
		var exact float64
		for _, v := range vecs {
			exact += dot(q, v)
		}
		exact /= n
		err := e.st.View(func(v *persistence.Snapshot) error {
			_, floors, err := x.search(v, "o", q, 5, -1, 0.2, "")
			if err != nil {
				return err
			}
			if est := floors.strict - 0.2; math.Abs(est-exact) > 0.08 {
				t.Errorf("query spread %v: estimated baseline %.3f, exact mean %.3f", spread, est, exact)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
}

// synonyms is the fake embedding model's knowledge: words that mean the
// same thing get the same dimension.
var synonyms = map[string]string{"lorri": "truck", "lorry": "truck", "lorries": "truck", "trucks": "truck", "canteen": "cafeteria"}

// fakeEmbedder embeds a text as the normalised bag of its (synonym-folded)
// terms hashed into 64 dimensions; fail makes it fail.
type fakeEmbedder struct {
	calls, texts atomic.Int64
	fail         atomic.Bool
	asked        sync.Map // every text it was asked to embed
}

func (f *fakeEmbedder) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	f.calls.Add(1)
	for _, t := range texts {
		f.asked.Store(t, true)
	}
	if f.fail.Load() {
		return nil, errors.New("fake: embeddings unavailable")
	}
	f.texts.Add(int64(len(texts)))
	out := make([][]float32, len(texts))
	for i, text := range texts {
		v := make([]float32, 64)
		for _, w := range strings.Fields(strings.ToLower(text)) {
			w = strings.Trim(w, ".,?!\"")
			if s, ok := synonyms[w]; ok {
				w = s
			}
			if len(w) < 4 {
				continue
			}
			h := fnv.New32a()
			h.Write([]byte(w))
			v[h.Sum32()%64]++
		}
		out[i] = v
	}
	return out, nil
}

// eventually polls cond until it holds or 10 s pass.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	testwait.UntilTrue(t, 10*time.Second, what, cond)
}

// Semantic recall: records get vectors in the background; after a restart
// the embedder resumes from its durable watermark (embedding only what is
// new); recall fuses what the vectors find with the lexical results (a
// paraphrase no word of which the evidence holds); a failing provider
// leaves recall lexical, counted and logged, and the records are embedded
// once it recovers.
func TestSemanticRecallCatchesUpAndFuses(t *testing.T) {
	fe := &fakeEmbedder{}
	var skew atomic.Int64 // the clock's advance
	clock := func() time.Time { return time.Now().Add(time.Duration(skew.Load())) }
	// The fake model's similarities are low (bags of few words).
	e := newEnv(t, Options{Embedder: fe, EmbedModel: "fake/bag", EmbedBatch: 2, MinSimilarity: 0.15, Now: clock})
	a := e.task("o", t0)
	e.add("o", a, t0.Add(time.Minute), user("How many trucks leave the north depot daily?"),
		assistant("Eleven trucks leave the north depot every day, the first at 05:10."))
	status := func() EmbeddingStatus { s, _ := e.mem.EmbeddingStatus(); return s }
	eventually(t, "two records embedded", func() bool { return status().Vectors == 2 && status().Behind == 0 })
	e.restart()
	e.loaded()
	eventually(t, "the vectors loaded again", func() bool { return status().Vectors == 2 })
	before := fe.texts.Load()
	// Written while the memory ran without its embedder: found by the
	// catch-up of the next start.
	e.close()
	e.opt.Embedder = nil
	e.open()
	b := e.task("o", t0.Add(time.Hour))
	e.add("o", b, t0.Add(time.Hour), assistant("The canteen closes at 14:00 on Fridays."))
	e.close()
	e.opt.Embedder = fe
	e.open()
	eventually(t, "caught up after the restart", func() bool { return status().Vectors == 3 && status().Behind == 0 })
	if got := fe.texts.Load() - before; got != 1 {
		t.Fatalf("the catch-up embedded %d texts, want 1 (the durable watermark keeps the rest)", got)
	}

	c := e.task("o", t0.Add(2*time.Hour))
	q := "How many lorries go out from the northern yard?"
	ev := e.recall("o", c, history(c, user(q)))
	if !strings.Contains(strings.Join(describe(ev), "\n"), "assistant_message: Eleven trucks") {
		t.Fatalf("recalled %q, want the answer about trucks", describe(ev))
	}
	// The lexical index alone does not find the answer: no word is shared.
	if lex := e.search(Query{Owner: "o", Text: q, ExcludeTask: c, Kinds: []Kind{KindAssistantMessage}}); len(lex) != 0 {
		t.Fatalf("the lexical index found %+v; the test needs a paraphrase", lex)
	}

	// The provider fails: recall is lexical, and says so.
	fe.fail.Store(true)
	d := e.task("o", t0.Add(3*time.Hour))
	e.add("o", d, t0.Add(3*time.Hour), assistant("The canteen opens at 07:30."))
	ev = e.recall("o", d, history(d, user("When does the cafeteria close on Fridays?")))
	if len(ev) != 0 {
		t.Fatalf("with the provider failing recalled %q, want the lexical result (nothing)", describe(ev))
	}
	eventually(t, "the failures counted", func() bool { s := status(); return s.LexicalOnly >= 1 && s.Failures >= 2 && s.Behind == 1 })
	if s := status(); !strings.Contains(s.LastError, "embeddings unavailable") {
		t.Fatalf("last error %q", s.LastError)
	}
	// Within the backoff recall does not wait for the provider again.
	lexical := status().LexicalOnly
	e.recall("o", d, history(d, user("When does the cafeteria open?")))
	asked := false
	fe.asked.Range(func(k, _ any) bool { asked = asked || strings.Contains(k.(string), "cafeteria open"); return true })
	if asked || status().LexicalOnly != lexical+1 {
		t.Fatalf("a recall within the backoff called the provider (%v) or was not counted", asked)
	}
	fe.fail.Store(false)
	skew.Store(int64(2 * time.Second)) // past the query's backoff
	select {
	case e.mem.emb.kick <- struct{}{}:
	default:
	}
	eventually(t, "embedded after the provider recovered", func() bool { s := status(); return s.Vectors == 4 && s.Behind == 0 })
	ev = e.recall("o", d, history(d, user("When does the cafeteria close on Fridays?")))
	if len(ev) == 0 || !strings.Contains(ev[0].Text, "14:00") {
		t.Fatalf("recalled %q, want the canteen's closing time", describe(ev))
	}
}

// When the vectors find nothing near enough, recall is the lexical recall,
// in the same order with the same scores.
func TestSemanticRecallWithNothingNearIsLexical(t *testing.T) {
	fill := func(e *env) string {
		a := e.task("o", t0)
		e.add("o", a, t0.Add(time.Minute), user("Which port does the billing gateway use?"),
			assistant("The billing gateway listens on port 8443 on host bg-01."))
		b := e.task("o", t0.Add(time.Hour))
		e.add("o", b, t0.Add(time.Hour), assistant("The billing gateway moved to port 9443 after the upgrade."),
			assistant("Gateway logs rotate daily."))
		return e.task("o", t0.Add(2*time.Hour))
	}
	lex := newEnv(t, Options{})
	q := fill(lex)
	want := lex.recall("o", q, history(q, user("What port is the billing gateway on?")))
	if len(want) < 2 {
		t.Fatalf("lexical recall %q: the test needs more", describe(want))
	}
	fe := &fakeEmbedder{}
	sem := newEnv(t, Options{Embedder: fe, EmbedModel: "fake/bag", MinSimilarity: 0.9999})
	q = fill(sem)
	eventually(t, "records embedded", func() bool { s, _ := sem.mem.EmbeddingStatus(); return s.Vectors == 4 && s.Behind == 0 })
	got := sem.recall("o", q, history(q, user("What port is the billing gateway on?")))
	if len(got) != len(want) {
		t.Fatalf("with vectors finding nothing: %q, want %q", describe(got), describe(want))
	}
	for i := range got {
		if got[i].Text != want[i].Text || got[i].Score != want[i].Score {
			t.Fatalf("item %d: %q (%v), want %q (%v)", i, got[i].Text, got[i].Score, want[i].Text, want[i].Score)
		}
	}
}

func TestDotBytes(t *testing.T) {
	for _, n := range []int{0, 1, 2, 3, 7, 384} {
		a, b := make([]float32, n), make([]float32, n)
		for i := range a {
			a[i], b[i] = float32(i)+0.5, float32(n-i)*0.25
		}
		if got, want := dotBytes(a, encodeVector(b)), dot(a, b); math.Abs(got-want) > 1e-3*math.Max(1, math.Abs(want)) {
			t.Fatalf("n=%d: dotBytes = %v, dot = %v", n, got, want)
		}
	}
}

// The embedder reads a long Task in windows and embeds in batches of at
// most EmbedBatch texts, each committed with the watermark it reaches.
func TestEmbedderBatchesALongTask(t *testing.T) {
	var maxTexts atomic.Int64
	fe := &fakeEmbedder{}
	emb := EmbedderFunc(func(ctx context.Context, texts []string) ([][]float32, error) {
		if n := int64(len(texts)); n > maxTexts.Load() {
			maxTexts.Store(n)
		}
		return fe.Embed(ctx, texts)
	})
	e := newEnv(t, Options{Embedder: emb, EmbedModel: "fake/bag", EmbedBatch: 16})
	a := e.task("o", t0)
	for i := 0; i < 300; i++ {
		e.add("o", a, t0.Add(time.Duration(i)*time.Minute), assistant(fmt.Sprintf("Shift note %d: dock %d swept.", i, i)))
	}
	eventually(t, "300 records embedded", func() bool { s, _ := e.mem.EmbeddingStatus(); return s.Vectors == 300 && s.Behind == 0 })
	if n := maxTexts.Load(); n > 16 {
		t.Fatalf("a call embedded %d texts, over the batch of 16", n)
	}
	var wm uint64
	_ = e.st.View(func(v *persistence.Snapshot) error {
		return v.Get(persistence.EmbedWatermarkKey(a), func(b []byte) error { wm = persistence.ParseWatermark(b); return nil })
	})
	if wm != 301 {
		t.Fatalf("embedding watermark %d, want 301", wm)
	}
}

func TestEmbedBackoff(t *testing.T) {
	for _, c := range []struct {
		n    int
		want time.Duration
	}{{1, time.Second}, {2, 2 * time.Second}, {4, 8 * time.Second}, {9, 256 * time.Second}, {10, maxEmbedBackoff}, {50, maxEmbedBackoff}} {
		if got := embedBackoff(c.n); got != c.want {
			t.Errorf("embedBackoff(%d) = %v, want %v", c.n, got, c.want)
		}
	}
}

// A Task's mark keeps the latest append's seq: a scan's mark (0: what the
// index holds) never hides an append that has not committed yet.
func TestMarkDirtyKeepsTheLatestSeq(t *testing.T) {
	for _, c := range []struct {
		marks []uint64
		want  uint64
	}{{[]uint64{3}, 3}, {[]uint64{3, 0}, 3}, {[]uint64{0, 5}, 5}, {[]uint64{5, 3}, 5}, {[]uint64{0, 0}, 0}} {
		e := &embedState{dirty: make(map[string]dirtyTask), kick: make(chan struct{}, 1)}
		for _, s := range c.marks {
			e.markDirty("o", "T", s, t0)
		}
		if got := e.dirty["T"].seq; got != c.want {
			t.Errorf("marks %v: seq %d, want %d", c.marks, got, c.want)
		}
	}
}

// Another embedding model makes the stored vectors meaningless: they are
// dropped and every record is embedded again.
func TestChangedEmbeddingModelEmbedsAgain(t *testing.T) {
	fe := &fakeEmbedder{}
	e := newEnv(t, Options{Embedder: fe, EmbedModel: "fake/a"})
	a := e.task("o", t0)
	e.add("o", a, t0, user("alpha bravo charlie"), assistant("delta echo foxtrot"))
	status := func() EmbeddingStatus { s, _ := e.mem.EmbeddingStatus(); return s }
	eventually(t, "embedded with model a", func() bool { return status().Vectors == 2 && status().Behind == 0 })
	e.close()
	e.opt.EmbedModel = "fake/b"
	before := fe.texts.Load()
	e.open()
	eventually(t, "embedded again with model b", func() bool { return status().Vectors == 2 && status().Behind == 0 && fe.texts.Load()-before == 2 })
	var model []byte
	_ = e.st.View(func(v *persistence.Snapshot) error {
		model, _ = v.GetCopy(persistence.EmbedModelKey())
		return nil
	})
	if string(model) != "fake/b" {
		t.Fatalf("stored model %q, want fake/b", model)
	}
}

// Facts get vectors too (a fact recorded while the memory ran without its
// embedder is found at the next start); a fact is recalled through its
// vector, and a fact superseded explicitly is not.
func TestSemanticRecallOfFacts(t *testing.T) {
	fe := &fakeEmbedder{}
	e := newEnv(t, Options{})
	a := e.task("o", t0)
	old, err := e.mem.RecordFact(context.Background(), "o", a, "c1", FactInput{Content: "The canteen closes at 13:00 on Fridays."})
	if err != nil {
		t.Fatal(err)
	}
	e.close()
	e.opt.Embedder, e.opt.EmbedModel, e.opt.MinSimilarity = fe, "fake/bag", 0.15
	e.open()
	status := func() EmbeddingStatus { s, _ := e.mem.EmbeddingStatus(); return s }
	eventually(t, "the fact found at start embedded", func() bool { return status().Vectors == 1 && status().Behind == 0 })
	q := e.task("o", t0.Add(time.Hour))
	ev := e.recall("o", q, history(q, user("When does the cafeteria shut?")))
	if len(ev) != 1 || ev[0].Kind != "fact" || !strings.Contains(ev[0].Text, "13:00") {
		t.Fatalf("recalled %q, want the fact through its vector", describe(ev))
	}
	if _, err := e.mem.RecordFact(context.Background(), "o", a, "c2", FactInput{Content: "The canteen closes at 14:00 on Fridays now.", Supersedes: old}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the new fact embedded", func() bool { return status().Vectors == 2 && status().Behind == 0 })
	q = e.task("o", t0.Add(2*time.Hour))
	ev = e.recall("o", q, history(q, user("When does the cafeteria shut?")))
	if len(ev) != 1 || !strings.Contains(ev[0].Text, "14:00") {
		t.Fatalf("recalled %q, want only the fact that supersedes the old one", describe(ev))
	}
}
