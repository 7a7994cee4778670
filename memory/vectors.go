package memory

import (
	"container/heap"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/bits"
	"sort"
	"sync"

	"lemo/persistence"
)

// The vector store of semantic recall. Each embedded record (a passage of
// a long one) has two records in Badger beside the lexical index:
//
//	i/<owner>/q/<ref>  its sign code (one bit per dimension: the sign of
//	                   the component) and what a hit needs (kind, time,
//	                   content hash, size, source)
//	i/<owner>/v/<ref>  the unit vector itself (float32, little-endian)
//
// The codes of every owner are kept in memory (1,024 dimensions are 128
// bytes a record: 12.8 MB for 100,000 records); the vectors stay in
// Badger. A search ranks the owner's records by the Hamming distance of
// their codes to the query's (an estimate of the angle between them,
// exact in expectation for random directions), reads the vectors of the
// best vecShortlist times k of them, and ranks those by their exact
// cosine similarity. Over 100,000 records that is a pass of popcounts and
// a few hundred reads, not 100,000 dot products (see docs/performance.md).
const (
	// MaxEmbeddingDims bounds a vector's dimensions.
	MaxEmbeddingDims = 8192
	// vecShortlist: how many times k codes are reranked exactly.
	vecShortlist = 4
	vecVersion   = 1
)

// ErrEmbeddingDims: a vector does not have the dimensions of the others.
var ErrEmbeddingDims = errors.New("memory: embedding dimensions differ")

// unit returns v scaled to length 1 (nil for a zero or non-finite vector).
func unit(v []float32) []float32 {
	var s float64
	for _, x := range v {
		s += float64(x) * float64(x)
	}
	if s == 0 || math.IsNaN(s) || math.IsInf(s, 0) {
		return nil
	}
	inv := 1 / math.Sqrt(s)
	out := make([]float32, len(v))
	for i, x := range v {
		out[i] = float32(float64(x) * inv)
	}
	return out
}

// signCode returns the sign bits of v, 64 to a word.
func signCode(v []float32) []uint64 {
	code := make([]uint64, (len(v)+63)/64)
	for i, x := range v {
		if x > 0 {
			code[i/64] |= 1 << uint(i%64)
		}
	}
	return code
}

func hamming(a, b []uint64) int {
	n := 0
	for i := range a {
		n += bits.OnesCount64(a[i] ^ b[i])
	}
	return n
}

// dotBytes is the dot product of a and the vector encoded in b (as
// encodeVector does), read without decoding b into a slice.
func dotBytes(a []float32, b []byte) float64 {
	var s0, s1 float32
	i := 0
	for ; i+2 <= len(a) && 4*i+8 <= len(b); i += 2 {
		s0 += a[i] * math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
		s1 += a[i+1] * math.Float32frombits(binary.LittleEndian.Uint32(b[4*i+4:]))
	}
	for ; i < len(a) && 4*i+4 <= len(b); i++ {
		s0 += a[i] * math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return float64(s0 + s1)
}

func encodeVector(v []float32) []byte {
	b := make([]byte, 0, 4*len(v))
	for _, x := range v {
		b = binary.LittleEndian.AppendUint32(b, math.Float32bits(x))
	}
	return b
}

// vecMeta is what a vector hit needs besides its ref.
type vecMeta struct {
	kind      Kind
	untrusted bool
	time      int64
	hash      uint64
	textBytes uint32
	source    string
}

// encodeCode: version, dims, kind, flags, time, hash, text bytes, source,
// then the code words.
func encodeCode(dims int, m *vecMeta, code []uint64) []byte {
	b := make([]byte, 0, 40+len(m.source)+8*len(code))
	b = append(b, vecVersion)
	b = binary.AppendUvarint(b, uint64(dims))
	b = append(b, byte(m.kind), flags(m.untrusted))
	b = binary.AppendVarint(b, m.time)
	b = binary.BigEndian.AppendUint64(b, m.hash)
	b = binary.AppendUvarint(b, uint64(m.textBytes))
	b = appendString(b, m.source)
	for _, w := range code {
		b = binary.LittleEndian.AppendUint64(b, w)
	}
	return b
}

func decodeCode(b []byte) (dims int, m vecMeta, code []uint64, err error) {
	r := reader{b: b}
	if r.byte() != vecVersion {
		return 0, m, nil, fmt.Errorf("%w: embedding code: unknown version", errCorrupt)
	}
	dims = int(r.uvarint())
	m.kind = Kind(r.byte())
	m.untrusted = r.byte()&1 != 0
	m.time = r.varint()
	m.hash = r.uint64()
	m.textBytes = uint32(r.uvarint())
	m.source = r.string()
	words := (dims + 63) / 64
	if r.err || dims <= 0 || dims > MaxEmbeddingDims || len(r.b) != 8*words {
		return 0, m, nil, fmt.Errorf("%w: embedding code", errCorrupt)
	}
	code = make([]uint64, words)
	for i := range code {
		code[i] = binary.LittleEndian.Uint64(r.b[8*i:])
	}
	return dims, m, code, nil
}

// vecOwner is one owner's codes in memory: parallel slices, appended to
// only (a search copies the headers under the lock and reads without it).
type vecOwner struct {
	codes []uint64 // words per record, record after record
	refs  []string
	metas []vecMeta
	// task numbers each record's Task (taskNo; a fact's is the Task that
	// recorded it; -1 for a ref that names none), so a search leaves the
	// asking Task's records out with a comparison.
	task   []int32
	taskNo map[string]int32
	have   map[string]bool // refs, so a record embedded again is kept once
}

// vecIndex is the codes of every owner.
type vecIndex struct {
	mu     sync.RWMutex
	dims   int
	owners map[string]*vecOwner
	n      int
	// angle[d] is the cosine a Hamming distance of d estimates:
	// cos(π·d/dims) (set with dims).
	angle []float64
}

func newVecIndex() *vecIndex { return &vecIndex{owners: make(map[string]*vecOwner)} }

// add records a committed vector's code.
func (x *vecIndex) add(owner, ref string, dims int, m vecMeta, code []uint64) error {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.dims == 0 {
		x.dims = dims
		x.angle = make([]float64, dims+1)
		for d := range x.angle {
			x.angle[d] = math.Cos(math.Pi * float64(d) / float64(dims))
		}
	}
	if dims != x.dims {
		return fmt.Errorf("%w: %d, the index holds %d", ErrEmbeddingDims, dims, x.dims)
	}
	o := x.owners[owner]
	if o == nil {
		o = &vecOwner{have: make(map[string]bool), taskNo: make(map[string]int32)}
		x.owners[owner] = o
	}
	if o.have[ref] {
		return nil // the same vector (a retried batch): the store overwrote it
	}
	no := int32(-1)
	if task, _, _, _, _, ok := parseDocRef(ref); ok {
		n, seen := o.taskNo[task]
		if !seen {
			n = int32(len(o.taskNo))
			o.taskNo[task] = n
		}
		no = n
	}
	o.have[ref] = true
	o.codes = append(o.codes, code...)
	o.refs = append(o.refs, ref)
	o.metas = append(o.metas, m)
	o.task = append(o.task, no)
	x.n++
	return nil
}

func (x *vecIndex) len() int {
	x.mu.RLock()
	defer x.mu.RUnlock()
	return x.n
}

// vecHit is a record the vector search found.
type vecHit struct {
	ref        string
	meta       vecMeta
	similarity float64
}

type hamItem struct {
	d int
	i int
}

// hamHeap is a max-heap on distance (the worst of the best on top).
type hamHeap []hamItem

func (h hamHeap) Len() int { return len(h) }
func (h hamHeap) Less(i, j int) bool {
	if h[i].d != h[j].d {
		return h[i].d > h[j].d
	}
	return h[i].i < h[j].i
}
func (h hamHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *hamHeap) Push(x any)   { *h = append(*h, x.(hamItem)) }
func (h *hamHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// similarityFloor is the least cosine similarity a record found by its
// vector needs for a query: the configured floor minSim, or the query's
// baseline (its mean estimated similarity to the owner's records,
// baseSum over n) plus margin when that is higher and the owner has
// enough records for a mean to mean something (minBaselineRecords).
//
// A fixed floor cannot tell a question that has no answer in memory from
// one worded differently from its answer: with a real sentence model
// (docs/memory.md) the best record of a question with nothing relevant
// reaches a cosine of 0.63, and the best of half the paraphrased ones
// stays below 0.65. How far the best record stands above the query's
// own mean tells them apart (every question with nothing relevant is
// within 0.45 of its mean, most paraphrased ones above): some queries
// are near everything (generic wording), some near nothing.
func similarityFloor(minSim, margin, baseSum float64, n int) float64 {
	if margin <= 0 || n < minBaselineRecords {
		return minSim
	}
	return max(minSim, baseSum/float64(n)+margin)
}

// minBaselineRecords: the fewest records whose mean similarity to a
// query is taken as its baseline.
const minBaselineRecords = 64

// sharedWordEase is how much lower the margin is for a record found by its
// vector that also holds a word of the query: two weak signals that agree
// (docs/memory.md: on the evaluation, paraphrase 0.79 -> 0.83 with
// "nothing relevant" 0.94 -> 0.91; 0.05: 0.81 and 0.94, 0.15: 0.86 and
// 0.88).
const sharedWordEase = 0.1

// vecFloors are the similarity floors of one query: strict for a record
// found by its vector alone, eased for one that also holds a query word.
type vecFloors struct{ strict, eased float64 }

// admits reports whether a record of cosine sim passes: the strict floor,
// or the eased one when it shares a word with the query.
func (f vecFloors) admits(sim float64, sharesWord bool) bool {
	return sim >= f.strict || (sharesWord && sim >= f.eased)
}

// floorsFor returns a query's floors (similarityFloor at the margin and at
// the margin eased by sharedWordEase; both the margin's floor alone when
// the margin is off).
func floorsFor(minSim, margin, baseSum float64, n int) vecFloors {
	strict := similarityFloor(minSim, margin, baseSum, n)
	if margin <= 0 {
		return vecFloors{strict, strict}
	}
	return vecFloors{strict, similarityFloor(minSim, max(margin-sharedWordEase, 0), baseSum, n)}
}

// search returns the owner's k records most similar to the unit vector q
// (at least the eased floor of floorsFor; not of excludeTask), best first,
// reading vectors through v, and the query's floors.
func (x *vecIndex) search(v *persistence.Snapshot, owner string, q []float32, k int, minSim, margin float64, excludeTask string) ([]vecHit, vecFloors, error) {
	x.mu.RLock()
	o, dims, angle := x.owners[owner], x.dims, x.angle
	var codes []uint64
	var refs []string
	var metas []vecMeta
	var tasks []int32
	exclude := int32(-2) // no record's
	if o != nil {
		codes, refs, metas, tasks = o.codes, o.refs, o.metas, o.task
		if n, ok := o.taskNo[excludeTask]; ok && excludeTask != "" {
			exclude = n
		}
	}
	x.mu.RUnlock()
	none := vecFloors{minSim, minSim}
	if len(refs) == 0 || k <= 0 {
		return nil, none, nil
	}
	if len(q) != dims {
		return nil, none, fmt.Errorf("%w: the query has %d, the index %d", ErrEmbeddingDims, len(q), dims)
	}
	qc := signCode(q)
	words := len(qc)
	short := vecShortlist * k
	h := make(hamHeap, 0, short+1)
	// The baseline is over the owner's other records: the asking Task's
	// own (its request is being embedded while it recalls) would move it
	// with the embedder's progress.
	var baseSum float64
	others := 0
	for i := range refs {
		if tasks[i] == exclude {
			continue
		}
		d := hamming(qc, codes[i*words:(i+1)*words])
		baseSum += angle[d]
		others++
		if len(h) == short && d >= h[0].d {
			continue
		}
		heap.Push(&h, hamItem{d, i})
		if len(h) > short {
			heap.Pop(&h)
		}
	}
	floors := floorsFor(minSim, margin, baseSum, others)
	out := make([]vecHit, 0, len(h))
	for _, it := range h {
		var sim float64
		err := v.Get(persistence.VectorKey(owner, []byte(refs[it.i])), func(b []byte) error {
			if len(b) != 4*dims {
				return fmt.Errorf("%w: vector of %d bytes, want %d dimensions", errCorrupt, len(b), dims)
			}
			sim = dotBytes(q, b)
			return nil
		})
		if errors.Is(err, persistence.ErrNotFound) {
			continue // committed after this snapshot
		}
		if err != nil {
			return nil, floors, err
		}
		if sim >= floors.eased {
			out = append(out, vecHit{ref: refs[it.i], meta: metas[it.i], similarity: sim})
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].similarity != out[j].similarity {
			return out[i].similarity > out[j].similarity
		}
		return out[i].ref > out[j].ref
	})
	if len(out) > k {
		out = out[:k]
	}
	return out, floors, nil
}
