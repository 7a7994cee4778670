package memory_test

import (
	"context"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// A wink embeddings file of five words in two dimensions: its words list
// is by frequency; each vector ends with its l2 norm and word index.
const tinyGlove = `{"precision":8,"l2NormIndex":2,"wordIndex":3,"size":5,"dimensions":2,
"words":["the","cat","dog","lorry","rare"],
"vectors":{"the":[1,0,1,0],"cat":[0,1,1,1],"dog":[0,2,2,2],"lorry":[3,4,5,3],"rare":[1,1,1.41,4]},
"unkVector":[0,0,-1]}`

func writeTinyGlove(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "glove.json")
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestSIFEmbedder(t *testing.T) {
	g, err := loadGlove(writeTinyGlove(t, tinyGlove), func(w string, r int) bool { return w != "rare" })
	if err != nil {
		t.Fatal(err)
	}
	if g.dims != 2 || g.size != 5 || len(g.vecs) != 4 || g.rank["lorry"] != 3 {
		t.Fatalf("loaded dims %d size %d, %d vectors, lorry rank %d; want 2, 5, 4 (rare not wanted), 3", g.dims, g.size, len(g.vecs), g.rank["lorry"])
	}
	if _, ok := g.vecs["rare"]; ok {
		t.Fatal("a word want refused was loaded")
	}
	s := newSIFEmbedder(g)
	h := 1 + 1.0/2 + 1.0/3 + 1.0/4 + 1.0/5
	for r := range 5 {
		p := 1 / (float64(r+1) * h)
		if got, want := s.weight(r), 1e-3/(1e-3+p); math.Abs(got-want) > 1e-12 {
			t.Errorf("weight(rank %d) = %g, want %g", r, got, want)
		}
	}
	if s.weight(0) >= s.weight(4) {
		t.Error("a frequent word does not weigh less than a rare one")
	}

	// "The CAT, the cat" and a word nobody knows and one not loaded: the
	// weighted average of the, the, cat, cat; two words skipped, one of
	// them known but not loaded.
	v, err := s.Embed(context.Background(), []string{"The CAT, the cat zzz rare", "zzz qqq", "lorry"})
	if err != nil {
		t.Fatal(err)
	}
	wThe, wCat := s.weight(0), s.weight(1)
	want := []float64{2 * wThe, 2 * wCat} // the: (1,0); cat: (0,1)
	n := math.Hypot(want[0], want[1])
	for i := range want {
		if math.Abs(float64(v[0][i])-want[i]/n) > 1e-6 {
			t.Fatalf("embedding %v, want %v", v[0], []float64{want[0] / n, want[1] / n})
		}
	}
	if got := s.skipped.Load(); got != 4 {
		t.Errorf("%d words skipped, want 4 (zzz twice, qqq, rare)", got)
	}
	if got := s.unloaded.Load(); got != 1 {
		t.Errorf("%d known words not loaded, want 1 (rare)", got)
	}
	if v[1][0] != 0 || v[1][1] != 0 {
		t.Errorf("a text without a known word embeds as %v, want zero", v[1])
	}
	if math.Abs(float64(v[2][0])-0.6) > 1e-6 || math.Abs(float64(v[2][1])-0.8) > 1e-6 {
		t.Errorf("lorry embeds as %v, want its vector (3,4) at length 1", v[2])
	}

	// Removing the first principal component: the principal eigenvector
	// of the Gram matrix of the corpus's averages (in closed form for 2×2:
	// λ = (a+c)/2 + √(((a−c)/2)² + b²), vector (b, λ−a)); what is left of
	// a text is orthogonal to it.
	corpus := []string{"cat the", "dog the the", "zzz"}
	avgs := [][2]float64{{wThe / 2, wCat / 2}, {2 * wThe / 3, 2 * s.weight(2) / 3}}
	var a, b, c float64
	for _, x := range avgs {
		a, b, c = a+x[0]*x[0], b+x[0]*x[1], c+x[1]*x[1]
	}
	l := (a+c)/2 + math.Sqrt((a-c)*(a-c)/4+b*b)
	pc := []float64{b, l - a}
	pn := math.Hypot(pc[0], pc[1])
	if err := s.removeFirstComponent(corpus); err != nil {
		t.Fatal(err)
	}
	if math.Abs(s.pc[0]-pc[0]/pn) > 1e-9 || math.Abs(s.pc[1]-pc[1]/pn) > 1e-9 {
		t.Fatalf("pc %v, want %v", s.pc, []float64{pc[0] / pn, pc[1] / pn})
	}
	v, _ = s.Embed(context.Background(), []string{"lorry"})
	if d := float64(v[0][0])*s.pc[0] + float64(v[0][1])*s.pc[1]; math.Abs(d) > 1e-6 {
		t.Errorf("lorry after the removal %v has %g along pc %v, want 0", v[0], d, s.pc)
	}
	if err := s.removeFirstComponent([]string{"zzz"}); err == nil {
		t.Error("a corpus without a known word gave a principal component")
	}
}

func TestGloveWords(t *testing.T) {
	got := gloveWords(`{"content":"# Hosts\nbil-app-02  ledger-API\t\"nginx\""}`)
	want := []string{"content", "hosts", "bil", "app", "02", "ledger", "api", "nginx"}
	if !slices.Equal(got, want) {
		t.Errorf("gloveWords = %q, want %q", got, want)
	}
}

func TestLoadGloveRejects(t *testing.T) {
	for _, tc := range []struct{ name, body, want string }{
		{"vectors before words", `{"dimensions":2,"vectors":{"a":[1,2,3,0]},"words":["a"]}`, "must come before vectors"},
		{"no vectors", `{"dimensions":2,"words":["a"]}`, "no vectors"},
		{"short vector", `{"dimensions":3,"words":["a"],"vectors":{"a":[1,2]}}`, "at least 3"},
		{"not an object", `[1]`, "where { was expected"},
	} {
		_, err := loadGlove(writeTinyGlove(t, tc.body), func(string, int) bool { return true })
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err %v, want one saying %q", tc.name, err, tc.want)
		}
	}
}
