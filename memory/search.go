package memory

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/bits"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
	"unsafe"

	"lemo/excerpt"
	"lemo/persistence"
)

// Ranking: Okapi BM25 (k1 = 1.2, b = 0.75) with the non-negative idf
// ln(1 + (N - df + 0.5) / (df + 0.5)), where N, the average length and df
// are exact over the owner's whole index (segments and pending documents)
// at the instant of the query. Equal scores are ordered by recency (the
// record's time, then its ref); which of the records equal in score and
// time a search of k keeps is decided by the order it scored them (see
// worse). A hit's Relevance is its score divided by
// the score of a document that matched the relevanceTerms most specific of
// the query's terms that occur in the index, with unbounded frequency, so
// it lies in [0, 1] and is comparable across queries; Matched counts the
// query terms it contains. Recall's threshold applies to both.
const (
	bm25K1 = 1.2
	bm25B  = 0.75
	// relevanceTerms is how many of the query's most specific terms define
	// a perfect match for Relevance.
	relevanceTerms = 3
	// maxQueryTerms bounds the terms a search uses (its rarest ones).
	maxQueryTerms = 32
	// MaxSearchLimit bounds the hits of one search.
	MaxSearchLimit = 50
	// MaxQueryBytes bounds a search's text.
	MaxQueryBytes = 8 << 10
)

// Query is a memory search, always within one owner's records.
type Query struct {
	Owner string
	Text  string
	// Kinds keeps only records of these kinds; empty keeps all.
	Kinds []Kind
	// Task keeps only records of this Task (for a fact: recorded by it).
	Task string
	// ExcludeTask drops the records of this Task.
	ExcludeTask string
	// Since and Until bound the records' time (inclusive); zero: unbounded.
	Since, Until time.Time
	// Limit bounds the hits (default 10, at most MaxSearchLimit).
	Limit int
	// TextBytes bounds each hit's Text; 0 leaves Text empty.
	TextBytes int
}

// Hit is one search result with its provenance.
type Hit struct {
	TaskID string
	// Seq is the event's seq; 0 for a fact.
	Seq uint64
	// FactID is set for a fact.
	FactID string
	Kind   Kind
	Time   time.Time
	// Source says where the record came from ("user", "assistant",
	// "call <id> (<tool>)", "fact <id> recorded by <method> in call <id>").
	Source    string
	Score     float64
	Relevance float64
	// Matched is how many of the query's terms the record contains, of
	// QueryTerms.
	Matched    int
	QueryTerms int
	// TextBytes is the size of the record's whole text.
	TextBytes int
	Untrusted bool
	// SupersededBy names a fact that supersedes this one.
	SupersededBy string
	// PassageFrom and PassageTo are the byte range of the passage that
	// matched, for a long record indexed as passages (passage.go); both 0
	// for a record indexed whole.
	PassageFrom, PassageTo int
	// Text is the record's text (for a passage match, the passage's), cut
	// to Query.TextBytes.
	Text      string
	Truncated bool

	hash uint64
	// mask: bit i set when the record holds the search's query term i
	// (searchResult.qterms).
	mask uint32
}

func segID(owner string, seg uint64) string { return owner + "/" + strconv.FormatUint(seg, 10) }

// view runs fn with a snapshot for a query: segments and pending documents
// read through it agree (see pending.go).
func (m *Memory) view(fn func(v *persistence.Snapshot) error) error {
	m.viewMu.RLock()
	defer m.viewMu.RUnlock()
	return m.store.View(fn)
}

// liveSegments returns the owner's live segments as of v, oldest first.
func (m *Memory) liveSegments(v *persistence.Snapshot, owner string) ([]*segment, error) {
	var out []*segment
	err := v.Scan(persistence.SegmentPrefix(owner), persistence.ScanOptions{KeysOnly: true}, func(k, _ []byte) error {
		seg := persistence.SegmentFromKey(k)
		id := segID(owner, seg)
		m.mu.Lock()
		s := m.segs[id]
		m.mu.Unlock()
		if s == nil {
			b, err := v.GetCopy(k)
			if err != nil {
				return err
			}
			hdr, err := decodeHeader(b)
			if err != nil {
				return fmt.Errorf("segment %d: %w", seg, err)
			}
			s = &segment{owner: owner, hdr: hdr}
			m.mu.Lock()
			if have := m.segs[id]; have != nil {
				s = have
			} else {
				m.segs[id] = s
			}
			m.mu.Unlock()
		}
		out = append(out, s)
		return nil
	})
	return out, err
}

// pruneCaches drops cached segments that are no longer live.
func (m *Memory) pruneCaches() {
	live := make(map[string]bool)
	m.mu.Lock()
	owners := make([]string, 0, len(m.segOwners))
	for o := range m.segOwners {
		owners = append(owners, o)
	}
	m.mu.Unlock()
	_ = m.store.View(func(v *persistence.Snapshot) error {
		for _, o := range owners {
			_ = v.Scan(persistence.SegmentPrefix(o), persistence.ScanOptions{KeysOnly: true}, func(k, _ []byte) error {
				live[segID(o, persistence.SegmentFromKey(k))] = true
				return nil
			})
		}
		return nil
	})
	m.mu.Lock()
	defer m.mu.Unlock()
	for id := range m.segs {
		if !live[id] {
			delete(m.segs, id)
		}
	}
}

// filter is a query's restrictions, checked for every posting.
type filter struct {
	kinds       [8]bool
	since       int64
	until       int64
	task        string
	excludeTask string
	// need, for a hop's search, is what a candidate must hold.
	need *linkNeed
}

func (f *filter) allKinds() bool {
	for _, k := range f.kinds[1:6] {
		if !k {
			return false
		}
	}
	return true
}

func newFilter(q *Query) filter {
	f := filter{since: math.MinInt64, until: math.MaxInt64, task: q.Task, excludeTask: q.ExcludeTask}
	if len(q.Kinds) == 0 {
		for i := range f.kinds {
			f.kinds[i] = true
		}
	}
	for _, k := range q.Kinds {
		if int(k) < len(f.kinds) {
			f.kinds[k] = true
		}
	}
	if !q.Since.IsZero() {
		f.since = q.Since.UnixMilli()
	}
	if !q.Until.IsZero() {
		f.until = q.Until.UnixMilli()
	}
	return f
}

type qterm struct {
	term    string
	df      uint64
	idf     float64
	entries []entry
	has     []bool
}

// scored is a candidate: a document of a segment, or a pending one.
type scored struct {
	score   float64
	time    int64
	kind    Kind
	matched uint32 // bit i: the document holds query term i
	seg     *segment
	doc     uint32
	p       *pdoc
	// ord is the order in which the search scored the document (its
	// segment's or pending layer's place, then the document's place in
	// that one's scoring), whatever its k: candidates equal in score and
	// time rank by it (see worse).
	ord uint64
}

// worse orders candidates: by score, then by time (the newer first),
// then by ord (the one scored first first). It is a total order, so the
// best k of a search are the first k of its best n for any n >= k: a
// search for more candidates finds those of a search for fewer, and
// more (Recall's one-pass widening relies on it).
func worse(a, b *scored) bool {
	if a.score != b.score {
		return a.score < b.score
	}
	if a.time != b.time {
		return a.time < b.time
	}
	return a.ord > b.ord
}

// topK keeps the k best candidates offered, in a min-heap (the worst
// first). It is a heap of its own rather than container/heap's, whose
// interface boxes every candidate pushed.
type topK struct {
	k     int
	items []scored
}

func (h *topK) offer(s scored) {
	if len(h.items) < h.k {
		if h.items == nil {
			h.items = make([]scored, 0, h.k)
		}
		h.items = append(h.items, s)
		j := len(h.items) - 1
		for j > 0 { // up, moving the parents down into the hole
			i := (j - 1) / 2
			if !worse(&s, &h.items[i]) {
				break
			}
			h.items[j] = h.items[i]
			j = i
		}
		h.items[j] = s
		return
	}
	if worse(&h.items[0], &s) {
		h.down(s, len(h.items))
	}
}

// down puts s at the root of the heap of the first n items, in place of
// the root, and moves it down to its place (the children move up into
// the hole: one write per level where swaps made two).
func (h *topK) down(s scored, n int) {
	i := 0
	for {
		j := 2*i + 1
		if j >= n {
			break
		}
		if j+1 < n && worse(&h.items[j+1], &h.items[j]) {
			j++
		}
		if !worse(&h.items[j], &s) {
			break
		}
		h.items[i] = h.items[j]
		i = j
	}
	h.items[i] = s
}

// sorted returns the items best first, sorting the heap in place (a
// heapsort: the worst goes last, and so on).
func (h *topK) sorted() []scored {
	for n := len(h.items) - 1; n > 0; n-- {
		last := h.items[n]
		h.items[n] = h.items[0]
		h.down(last, n)
	}
	return h.items
}

// accumulator is the per-document state of a segment's scoring.
type accumulator struct {
	score   []float64
	matched []uint32
	touched []uint32
	// frac[tf<<8|norm] is a term's w·tf / (tf + K(norm)) for the common
	// small tf, 0 until a posting needs it; fracSet lists the entries
	// set, cleared after each term. It lives here, not on the stack: a
	// 16 KiB frame made every search grow its goroutine's stack.
	frac    [fracTFs << 8]float64
	fracSet []uint16
}

// fracTFs: term frequencies below it use accumulator.frac.
const fracTFs = 8

var accPool = sync.Pool{New: func() any { return new(accumulator) }}

// searchResult is a search's candidates, best first.
type searchResult struct {
	cands []scored
	// perfect is the score of a perfect match (the Relevance divisor);
	// terms the number of query terms used.
	perfect float64
	terms   int
	// qterms and idf are the query's terms used, in the order of the
	// candidates' matched bits, and their idf; links, for a hop's search,
	// the bit masks of its entities (0 for one left out).
	qterms []string
	idf    []float64
	held   []bool // some record holds the term
	links  []uint32
}

// searchOpts tune one search beyond its Query.
type searchOpts struct {
	// k is how many candidates to return; maxTerms bounds the query's
	// terms (its rarest ones).
	k, maxTerms int
	// own counts, for each term, the excluded Task's records that contain
	// it, and ownDocs those records: the statistics of the query are those
	// of the records it can find (see Recall: the Task's own request would
	// otherwise make its words look common-but-matchable and raise the bar).
	own     map[string]int
	ownDocs int
	// minDF drops query terms held by fewer records (a term only one
	// record holds cannot link it to another: the second hop).
	minDF uint64
	// maxDFShare, when positive, drops query terms held by more than that
	// share of the records (with at least 3 kept): common words link
	// nothing (the second hop).
	maxDFShare float64
	// evidenceBar measures Relevance against the terms the evidence holds
	// (see evidenceBar).
	evidenceBar bool
	// widenFrom, when positive, makes the search one of widenFrom
	// candidates that widens to k when they are passages of few records
	// (fewRecords), in one scoring pass: it returns the first widenFrom
	// of the best k unless those are few records' passages, the best k
	// then.
	widenFrom int
	// segs and pend, when pend is set, are the owner's live segments and
	// pending documents of the snapshot (read once for a recall's several
	// searches).
	segs []*segment
	pend *pendingSet
	// terms, when set, are the query's terms (already tokenized) instead
	// of those of the Query's text.
	terms []string
	// links, when set, makes the search a hop's (hop.go): each is an
	// entity, the terms a record must all hold to name it, and a record
	// is a candidate only when it names one of them and holds one of
	// terms. minDF and maxDFShare then apply to an entity's rarest term
	// (an entity only one record names links nothing; a common one links
	// everything), not to terms.
	links [][]string
}

// search scores the owner's documents for q and returns the best k, using
// at most maxTerms of the query's terms (its rarest).
func (m *Memory) search(v *persistence.Snapshot, q *Query, k, maxTerms int) (*searchResult, error) {
	return m.searchWith(v, q, searchOpts{k: k, maxTerms: maxTerms})
}

func (m *Memory) searchWith(v *persistence.Snapshot, q *Query, o searchOpts) (*searchResult, error) {
	k, maxTerms := o.k, o.maxTerms
	terms := o.terms
	if terms == nil {
		terms = Terms(q.Text)
	}
	if o.links != nil {
		terms = slices.Clone(terms)
		for _, l := range o.links {
			for _, t := range l {
				if !slices.Contains(terms, t) {
					terms = append(terms, t)
				}
			}
		}
	}
	if len(terms) == 0 {
		return &searchResult{}, nil
	}
	segs, pend := o.segs, o.pend
	if pend == nil {
		var err error
		if segs, err = m.liveSegments(v, q.Owner); err != nil {
			return nil, err
		}
		if pend, err = m.pendingSet(v, q.Owner); err != nil {
			return nil, err
		}
	}
	n, sumLen := uint64(pend.n), pend.sumLen
	for _, s := range segs {
		n += uint64(s.hdr.docs)
		sumLen += s.hdr.sumLen
	}
	if o.ownDocs > 0 && uint64(o.ownDocs) < n {
		n -= uint64(o.ownDocs)
	}
	if n == 0 {
		return &searchResult{}, nil
	}
	src := blockSource{v: v, cache: m.cache}
	qts := make([]qterm, 0, len(terms))
	for _, t := range terms {
		qt := qterm{term: t, entries: make([]entry, len(segs)), has: make([]bool, len(segs))}
		for si, s := range segs {
			e, ok, err := s.lookup(src, t)
			if err != nil {
				return nil, err
			}
			if ok {
				qt.entries[si], qt.has[si] = e, true
				qt.df += uint64(e.df)
			}
		}
		qt.df += uint64(pend.df(t))
		if own := uint64(o.own[t]); own > 0 {
			// Only the excluded Task holds what it holds of this term.
			qt.df -= min(own, qt.df)
			if qt.df == 0 {
				continue
			}
		}
		if o.links == nil && o.minDF > 0 && qt.df < o.minDF {
			continue
		}
		if o.links == nil && o.maxDFShare > 0 && float64(qt.df) > max(3, o.maxDFShare*float64(n)) {
			continue
		}
		qt.idf = math.Log(1 + (float64(n)-float64(qt.df)+0.5)/(float64(qt.df)+0.5))
		qts = append(qts, qt)
	}
	sort.SliceStable(qts, func(i, j int) bool {
		if qts[i].idf != qts[j].idf {
			return qts[i].idf > qts[j].idf
		}
		return qts[i].term < qts[j].term
	})
	var need *linkNeed
	if o.links != nil {
		qts, need = linkTerms(qts, o, n)
		if !slices.ContainsFunc(need.links, func(m uint32) bool { return m != 0 }) {
			return &searchResult{links: need.links}, nil // no entity to look up
		}
	}
	if maxTerms > 0 && len(qts) > maxTerms {
		qts = qts[:maxTerms]
	}
	// A term the excluded Task alone holds still counts as one of the
	// query's terms (a record must match two of them), though it no
	// longer raises the bar of a perfect match.
	res := &searchResult{terms: min(len(terms), max(maxTerms, len(qts)))}
	if maxTerms <= 0 {
		res.terms = len(terms)
	}
	for i, n := 0, 0; i < len(qts) && n < relevanceTerms; i++ {
		if qts[i].df > 0 {
			res.perfect += qts[i].idf * (bm25K1 + 1)
			n++
		}
	}
	avg := float64(sumLen) / float64(n)
	if avg <= 0 {
		avg = 1
	}
	var kNorm [256]float64
	for i := range kNorm {
		kNorm[i] = bm25K1 * (1 - bm25B + bm25B*float64(normTable[i])/avg)
	}
	f := newFilter(q)
	f.need = need
	top := &topK{k: k}
	for si, s := range segs {
		if err := m.scoreSegment(src, s, si, qts, &f, &kNorm, top); err != nil {
			return nil, err
		}
	}
	m.scorePending(pend, len(segs), qts, &f, &kNorm, top)
	res.cands = top.sorted()
	if w := o.widenFrom; w > 0 && len(res.cands) > w && !fewRecords(res.cands[:w]) {
		// The search of w candidates would not have widened: its
		// candidates are the first w (worse is a total order).
		res.cands = res.cands[:w]
	}
	if o.evidenceBar {
		if p := evidenceBar(qts, res.cands); p > 0 {
			res.perfect = p
		}
	}
	res.qterms = make([]string, len(qts))
	res.idf = make([]float64, len(qts))
	res.held = make([]bool, len(qts))
	for i, qt := range qts {
		res.qterms[i], res.idf[i], res.held[i] = qt.term, qt.idf, qt.df > 0
	}
	if need != nil {
		res.links = need.links
	}
	return res, nil
}

// linkNeed is what a hop's candidate must hold (searchOpts.links): every
// term of one of links (bit masks of the query's terms, 0 for an entity
// left out), and one of rest.
type linkNeed struct {
	links []uint32
	rest  uint32
}

func (l *linkNeed) ok(matched uint32) bool {
	if matched&l.rest == 0 {
		return false
	}
	for _, m := range l.links {
		if m != 0 && matched&m == m {
			return true
		}
	}
	return false
}

// linkTerms keeps of a hop's terms (qts, rarest first) the query's terms
// (o.terms) and the terms of the entities it can look up: each entity's
// terms must all be held by some record, and its rarest by at least
// o.minDF records and by no more than o.maxDFShare of the n records (with
// at least 3 allowed). It returns the kept terms (rarest first, at most
// 32, entities' terms first to fit) and what a candidate must hold.
func linkTerms(qts []qterm, o searchOpts, n uint64) ([]qterm, *linkNeed) {
	df := make(map[string]uint64, len(qts))
	for _, qt := range qts {
		df[qt.term] = qt.df
	}
	valid := make([]bool, len(o.links))
	keep := make(map[string]bool)
	room := 32
	for i, l := range o.links {
		rare := uint64(math.MaxUint64)
		for _, t := range l {
			d, ok := df[t]
			if !ok || d == 0 {
				rare = 0
				break
			}
			rare = min(rare, d)
		}
		if rare == 0 || rare < o.minDF || (o.maxDFShare > 0 && float64(rare) > max(3, o.maxDFShare*float64(n))) {
			continue
		}
		add := 0
		for _, t := range l {
			if !keep[t] {
				add++
			}
		}
		if add > room-1 { // room for one query term at least
			continue
		}
		room -= add
		valid[i] = true
		for _, t := range l {
			keep[t] = true
		}
	}
	out := qts[:0:0]
	for _, qt := range qts {
		if keep[qt.term] || (room > 0 && slices.Contains(o.terms, qt.term) && qt.df > 0) {
			if !keep[qt.term] {
				room--
			}
			out = append(out, qt)
		}
	}
	need := &linkNeed{links: make([]uint32, len(o.links))}
	bit := make(map[string]uint32, len(out))
	for i, qt := range out {
		bit[qt.term] = 1 << uint(i)
		if !keep[qt.term] {
			need.rest |= 1 << uint(i)
		}
	}
	for i, l := range o.links {
		if !valid[i] {
			continue
		}
		for _, t := range l {
			need.links[i] |= bit[t]
		}
	}
	return out, need
}

// evidenceBar is the score of a perfect match of the relevanceTerms most
// specific query terms that some candidate other than a request holds
// (qts are rarest first), or 0 when no such candidate holds one. Words
// only requests hold (earlier wordings of the question, which restate it
// without an answer) then do not raise the bar the evidence is measured
// against; a word no record holds never did.
func evidenceBar(qts []qterm, cands []scored) float64 {
	var held uint32
	for _, c := range cands {
		if c.kind != KindUserMessage {
			held |= c.matched
		}
	}
	p := 0.0
	for i, n := 0, 0; i < len(qts) && n < relevanceTerms; i++ {
		if held&(1<<uint(i)) != 0 {
			p += qts[i].idf * (bm25K1 + 1)
			n++
		}
	}
	return p
}

func (m *Memory) scoreSegment(src blockSource, s *segment, si int, qts []qterm, f *filter, kNorm *[256]float64, top *topK) error {
	any := false
	for _, qt := range qts {
		if qt.has[si] {
			any = true
			break
		}
	}
	if !any || s.hdr.maxTime < f.since || s.hdr.minTime > f.until {
		return nil
	}
	var allow, deny []uint32
	if f.task != "" {
		d, err := s.taskDocs(src, f.task)
		if err != nil {
			return err
		}
		if len(d) == 0 {
			return nil
		}
		allow = d
	}
	if f.excludeTask != "" {
		d, err := s.taskDocs(src, f.excludeTask)
		if err != nil {
			return err
		}
		deny = d
	}
	cols, err := s.loadColumns(src)
	if err != nil {
		return err
	}
	ap := accPool.Get().(*accumulator)
	defer accPool.Put(ap)
	if cap(ap.score) < int(s.hdr.docs) {
		ap.score = make([]float64, s.hdr.docs)
		ap.matched = make([]uint32, s.hdr.docs)
	}
	acc, matched := ap.score[:s.hdr.docs], ap.matched[:s.hdr.docs]
	touched := ap.touched[:0]
	defer func() {
		for _, d := range touched {
			acc[d], matched[d] = 0, 0
		}
		ap.touched = touched[:0]
	}()
	plain := f.allKinds() && f.since == math.MinInt64 && f.until == math.MaxInt64 && allow == nil && deny == nil
	for qi, qt := range qts {
		bit := uint32(1) << uint(qi)
		if !qt.has[si] {
			continue
		}
		// Each frac entry is computed the first time a posting needs it
		// (a posting's value is the same either way): filling the whole
		// table for every term and segment cost more than the postings
		// of a recall's query.
		w := qt.idf * (bm25K1 + 1)
		frac := &ap.frac
		// The loop below is the search's hot path: postings are decoded
		// inline (one-byte varints first) rather than through a callback.
		err := s.chunks(src, qt.entries[si], func(b []byte) {
			var doc uint32
			for i := 0; i < len(b); {
				var d, tf uint32
				if c := b[i]; c < 0x80 {
					d = uint32(c)
					i++
				} else {
					v, n := binary.Uvarint(b[i:])
					if n <= 0 {
						return
					}
					d = uint32(v)
					i += n
				}
				if i >= len(b) {
					return
				}
				if c := b[i]; c < 0x80 {
					tf = uint32(c)
					i++
				} else {
					v, n := binary.Uvarint(b[i:])
					if n <= 0 {
						return
					}
					tf = uint32(v)
					i += n
				}
				doc += d
				if int(doc) >= len(acc) {
					return
				}
				if !plain {
					if !f.kinds[cols.kinds[doc]&7] {
						continue
					}
					if t := cols.times[doc]; t < f.since || t > f.until {
						continue
					}
					if allow != nil && !containsDoc(allow, doc) {
						continue
					}
					if deny != nil && containsDoc(deny, doc) {
						continue
					}
				}
				if acc[doc] == 0 {
					touched = append(touched, doc)
				}
				if tf < fracTFs {
					n := cols.norms[doc]
					k := uint16(tf)<<8 | uint16(n)
					v := frac[k]
					if v == 0 {
						ft := float64(tf)
						v = w * ft / (ft + kNorm[n])
						frac[k] = v
						ap.fracSet = append(ap.fracSet, k)
					}
					acc[doc] += v
				} else {
					ft := float64(tf)
					acc[doc] += w * ft / (ft + kNorm[cols.norms[doc]])
				}
				matched[doc] |= bit
			}
		})
		for _, k := range ap.fracSet {
			frac[k] = 0
		}
		ap.fracSet = ap.fracSet[:0]
		if err != nil {
			return err
		}
	}
	for i, d := range touched {
		sc := acc[d]
		if f.need != nil && !f.need.ok(matched[d]) {
			continue
		}
		ord := uint64(si)<<32 | uint64(i)
		if len(top.items) == top.k {
			// No better than the worst kept (worse, inline): skipped.
			if low := &top.items[0]; sc < low.score || (sc == low.score && (cols.times[d] < low.time || (cols.times[d] == low.time && ord > low.ord))) {
				continue
			}
		}
		top.offer(scored{score: sc, time: cols.times[d], kind: Kind(cols.kinds[d]), matched: matched[d], seg: s, doc: d, ord: ord})
	}
	return nil
}

// scorePending scores the pending documents, term at a time like a
// segment (the same arithmetic, so a document scores the same wherever it
// is stored).
// Their candidates' ord follows the segments' (place is the first
// layer's).
func (m *Memory) scorePending(pend *pendingSet, place int, qts []qterm, f *filter, kNorm *[256]float64, top *topK) {
	for i, l := range pend.layers {
		scorePendLayer(l, place+i, qts, f, kNorm, top)
	}
}

func scorePendLayer(l *pendLayer, place int, qts []qterm, f *filter, kNorm *[256]float64, top *topK) {
	if len(l.docs) == 0 {
		return
	}
	// A segment's accumulator serves (its arrays are zero between uses).
	ap := accPool.Get().(*accumulator)
	defer accPool.Put(ap)
	if cap(ap.score) < len(l.docs) {
		ap.score = make([]float64, len(l.docs))
		ap.matched = make([]uint32, len(l.docs))
	}
	acc, matched := ap.score[:len(l.docs)], ap.matched[:len(l.docs)]
	touched := ap.touched[:0]
	defer func() {
		for _, d := range touched {
			acc[d], matched[d] = 0, 0
		}
		ap.touched = touched[:0]
	}()
	for qi, qt := range qts {
		bit := uint32(1) << uint(qi)
		w := qt.idf * (bm25K1 + 1)
		for _, pp := range l.byTerm[qt.term] {
			p := l.docs[pp.doc]
			if !f.kinds[p.kind&7] || p.time < f.since || p.time > f.until {
				continue
			}
			if (f.task != "" && !refOfTask(p.ref, f.task)) || (f.excludeTask != "" && refOfTask(p.ref, f.excludeTask)) {
				continue
			}
			if acc[pp.doc] == 0 {
				touched = append(touched, uint32(pp.doc))
			}
			ft := float64(pp.tf)
			acc[pp.doc] += w * ft / (ft + kNorm[p.norm])
			matched[pp.doc] |= bit
		}
	}
	for j, i := range touched {
		p := l.docs[i]
		if f.need != nil && !f.need.ok(matched[i]) {
			continue
		}
		top.offer(scored{score: acc[i], time: p.time, kind: p.kind, matched: matched[i], p: p, ord: uint64(place)<<32 | uint64(j)})
	}
}

// refOfTask reports whether ref is a valid document ref of task (whose
// parseDocRef names task): the full parse only when ref starts with the
// task's id and a '/', which the refs of other Tasks do not (a Task id
// holds no '/'), since a pending layer checks every posting.
func refOfTask(ref, task string) bool {
	if !strings.Contains(task, "/") && (len(ref) <= len(task) || ref[len(task)] != '/' || ref[:len(task)] != task) {
		return false
	}
	t, _, _, _, _, ok := parseDocRef(ref)
	return ok && t == task
}

func containsDoc(sorted []uint32, doc uint32) bool {
	i := sort.Search(len(sorted), func(i int) bool { return sorted[i] >= doc })
	return i < len(sorted) && sorted[i] == doc
}

// pick is a candidate to make a hit of, with its row (nil for a pending
// document) and ref: hits are ordered as picks, before they are made.
type pick struct {
	c   *scored
	row *parsedRow
	ref string
}

// comparePicks orders picks by score, time and ref (best, newest,
// greatest first).
func comparePicks(a, b pick) int {
	if c := compareScoreTime(a, b); c != 0 {
		return c
	}
	return strings.Compare(b.ref, a.ref)
}

// compareScoreTime orders picks by score and time only.
func compareScoreTime(a, b pick) int {
	switch {
	case a.c.score != b.c.score:
		if a.c.score > b.c.score {
			return -1
		}
		return 1
	case a.c.time != b.c.time:
		if a.c.time > b.c.time {
			return -1
		}
		return 1
	}
	return 0
}

// sortPicks sorts picks by score, time and ref, stably. The candidates
// come ordered by score and time already (searchWith), so only runs that
// tie on both are sorted, by ref (records written in the same
// millisecond tie on time, and equal texts on score).
func sortPicks(ps []pick) {
	for i := 1; i < len(ps); i++ {
		if compareScoreTime(ps[i], ps[i-1]) < 0 {
			slices.SortStableFunc(ps, comparePicks) // not in score and time order: sort them all
			return
		}
	}
	for i := 0; i < len(ps); {
		j := i + 1
		for j < len(ps) && compareScoreTime(ps[j], ps[i]) == 0 {
			j++
		}
		if j-i > 1 {
			slices.SortStableFunc(ps[i:j], comparePicks)
		}
		i = j
	}
}

// relevance is a candidate's Relevance: its score over a perfect match's.
func (res *searchResult) relevance(c *scored) float64 {
	if res.perfect > 0 {
		return min(c.score/res.perfect, 1)
	}
	return 0
}

// hits resolves candidates into hits, ordered by score, time and ref.
func (m *Memory) hits(v *persistence.Snapshot, owner string, res *searchResult) ([]Hit, error) {
	out := make([]Hit, 0, len(res.cands))
	err := m.eachHit(v, owner, res, nil, func(h *Hit) (bool, error) {
		out = append(out, *h)
		return true, nil
	})
	return out, err
}

// eachHit calls fn with each hit of hits that keep (when not nil)
// accepts, in the same order, until fn returns false or an error: the
// others' rows are not read, nor whether a fact among them is
// superseded. The hit is fn's to read during the call only.
func (m *Memory) eachHit(v *persistence.Snapshot, owner string, res *searchResult, keep func(*scored) bool, fn func(*Hit) (bool, error)) error {
	src := blockSource{v: v, cache: m.cache, rows: m.rows}
	picks := make([]pick, 0, len(res.cands))
	// The document blocks read, each looked up in the shared cache once
	// (the candidates of a segment often share a few; a short list costs
	// less than a map).
	type block struct {
		seg  *segment
		n    uint32
		rows []parsedRow
	}
	var blocks []block
	for i := range res.cands {
		c := &res.cands[i]
		if keep != nil && !keep(c) {
			continue
		}
		if c.p != nil {
			picks = append(picks, pick{c: c, ref: c.p.ref})
			continue
		}
		n := c.doc / docBlockDocs
		var rows []parsedRow
		found := false
		for j := len(blocks) - 1; j >= 0; j-- { // the latest first
			if b := &blocks[j]; b.seg == c.seg && b.n == n {
				rows, found = b.rows, true
				break
			}
		}
		if !found {
			var err error
			if rows, err = c.seg.rowBlock(src, n); err != nil {
				return err
			}
			blocks = append(blocks, block{c.seg, n, rows})
		}
		r, err := c.seg.rowOf(rows, c.doc)
		if err != nil {
			return err
		}
		picks = append(picks, pick{c: c, row: r, ref: r.ref})
	}
	sortPicks(picks)
	var h Hit
	for _, pk := range picks {
		c := pk.c
		var info docRow
		var task, fact string
		var seq uint64
		var from, to int
		if r := pk.row; r != nil {
			info, task, seq, fact, from, to = r.docRow, r.task, r.seq, r.fact, r.from, r.to
		} else {
			info = docRow{ref: c.p.ref, source: c.p.source, hash: c.p.hash, textBytes: c.p.textBytes, untrusted: c.p.untrusted}
			var ok bool
			if task, seq, fact, from, to, ok = parseDocRef(info.ref); !ok {
				return fmt.Errorf("%w: ref %q", errCorrupt, info.ref)
			}
		}
		h = Hit{TaskID: task, Seq: seq, FactID: fact, Kind: c.kind, Time: time.UnixMilli(c.time).UTC(), Source: info.source,
			Score: c.score, Relevance: res.relevance(c), Matched: bits.OnesCount32(c.matched), QueryTerms: res.terms, TextBytes: int(info.textBytes),
			Untrusted: info.untrusted, hash: info.hash, PassageFrom: from, PassageTo: to, mask: c.matched}
		if fact != "" {
			by, err := supersededBy(v, owner, fact)
			if err != nil {
				return err
			}
			h.SupersededBy = by
		}
		if more, err := fn(&h); err != nil || !more {
			return err
		}
	}
	return nil
}

// bestPassages keeps the first hit of each record (hits are best first:
// a record indexed as passages ranks by its best one), at most limit.
func bestPassages(hits []Hit, limit int) []Hit {
	seen := make(map[string]bool, len(hits))
	out := hits[:0]
	for _, h := range hits {
		if len(out) == limit {
			break
		}
		if h.PassageTo > 0 {
			key := h.TaskID + "/" + strconv.FormatUint(h.Seq, 10)
			if seen[key] {
				continue
			}
			seen[key] = true
		}
		out = append(out, h)
	}
	return out
}

func supersededBy(v *persistence.Snapshot, owner, fact string) (string, error) {
	by := ""
	prefix := persistence.SupersededPrefix(owner, fact)
	err := v.Scan(prefix, persistence.ScanOptions{KeysOnly: true}, func(k, _ []byte) error {
		by = string(k[len(prefix):])
		return nil // the last (newest id) wins
	})
	return by, err
}

// Search returns the owner's records that best match q, best first, each
// with its provenance and (when q.TextBytes > 0) its text.
func (m *Memory) Search(ctx context.Context, q Query) ([]Hit, error) {
	if err := m.validQuery(&q); err != nil {
		return nil, err
	}
	if err := m.waitLoaded(ctx); err != nil {
		return nil, err
	}
	if q.Limit <= 0 {
		q.Limit = 10
	}
	q.Limit = min(q.Limit, MaxSearchLimit)
	var out []Hit
	err := m.view(func(v *persistence.Snapshot) error {
		// Passages of one record count once (its best): ask for more.
		res, err := m.search(v, &q, min(3*q.Limit, 3*MaxSearchLimit), maxQueryTerms)
		if err != nil {
			return err
		}
		if out, err = m.hits(v, q.Owner, res); err != nil {
			return err
		}
		out = bestPassages(out, q.Limit)
		if q.TextBytes <= 0 {
			return nil
		}
		for i := range out {
			if err := ctx.Err(); err != nil {
				return err
			}
			text, err := m.recordText(v, q.Owner, &out[i])
			if errors.Is(err, persistence.ErrNotFound) {
				out[i].Text = "[the record is no longer in the store]"
				continue
			}
			if err != nil {
				return err
			}
			if h := &out[i]; h.PassageTo > 0 && h.PassageTo <= len(text) {
				text = text[h.PassageFrom:h.PassageTo]
			}
			out[i].Text = excerpt.Head(text, q.TextBytes)
			out[i].Truncated = len(out[i].Text) < len(text) || out[i].PassageTo > 0
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("memory: search: %w", err)
	}
	return out, nil
}

func (m *Memory) validQuery(q *Query) error {
	if m.closed() {
		return ErrClosed
	}
	if err := persistence.ValidOwner(q.Owner); err != nil {
		return fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	if len(q.Text) > MaxQueryBytes {
		return fmt.Errorf("%w: query of %d bytes exceeds %d bytes", ErrInvalid, len(q.Text), MaxQueryBytes)
	}
	for _, t := range []string{q.Task, q.ExcludeTask} {
		if t != "" {
			if err := persistence.ValidTaskID(t); err != nil {
				return fmt.Errorf("%w: %v", ErrInvalid, err)
			}
		}
	}
	return nil
}

// recordText reads the whole text of a hit's record, through the cache of
// decoded texts (records are immutable).
func (m *Memory) recordText(v *persistence.Snapshot, owner string, h *Hit) (string, error) {
	var buf [128]byte
	key := append(buf[:0], owner...)
	key = append(key, 0)
	key = append(key, h.TaskID...)
	key = append(key, 0)
	key = append(key, h.FactID...)
	key = append(key, 0)
	key = strconv.AppendUint(key, h.Seq, 10)
	if b, ok := m.texts.get(key); ok {
		// The cache never changes a value it holds, so the text may
		// share its bytes.
		return unsafe.String(unsafe.SliceData(b), len(b)), nil
	}
	text, err := m.readRecordText(v, owner, h)
	if err == nil {
		m.texts.put(string(key), []byte(text))
	}
	return text, err
}

func (m *Memory) readRecordText(v *persistence.Snapshot, owner string, h *Hit) (string, error) {
	if h.FactID != "" {
		f, err := readFact(v, owner, h.FactID)
		if err != nil {
			return "", err
		}
		return f.Content, nil
	}
	ev, err := v.Event(h.TaskID, h.Seq)
	if err != nil {
		return "", err
	}
	_, text, _, _, _, ok := recordText(ev, nil)
	if !ok {
		return "", fmt.Errorf("%w: task %s seq %d is not an indexed record", errCorrupt, h.TaskID, h.Seq)
	}
	return text, nil
}
