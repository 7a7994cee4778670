package memory

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"sort"
	"strings"
	"sync"
	"unsafe"

	"lemo/persistence"
)

// A segment is an immutable inverted index over a set of documents,
// numbered 0..docs-1 within it. It is stored as (persistence key layout):
//
//	header  segment number, document count, summed lengths, time range, the
//	        first term of each term block and the number of blocks of each
//	        family; writing it makes the segment live
//	b/<n>   term block: terms in order, each with its document frequency and
//	        postings (document number delta, term frequency), inline when
//	        small, else in overflow chunks x/<n>
//	c/<n>   column block: kind, length code and time of colBlockDocs documents
//	d/<n>   document table block: ref, source, hash, size of docBlockDocs
//	        documents (read only for results)
//
// The documents of a Task are also listed under the term taskTerm(task), so
// a search restricted to (or excluding) a Task reads one posting list.
const (
	segVersion     = 1
	termBlockBytes = 16 << 10
	inlineMax      = 4 << 10
	chunkBytes     = 64 << 10
	colBlockDocs   = 8192
	docBlockDocs   = 128
)

// taskTerm is the term that lists a Task's documents; real terms never
// contain \x01.
func taskTerm(task string) string { return "\x01" + task }

type segHeader struct {
	seg        uint64
	docs       uint32
	sumLen     uint64
	minTime    int64
	maxTime    int64
	firstTerms []string
	colBlocks  uint32
	docBlocks  uint32
	chunks     uint32
}

func (h *segHeader) encode() []byte {
	n := 64
	for _, t := range h.firstTerms {
		n += len(t) + 2
	}
	b := make([]byte, 0, n)
	b = append(b, segVersion)
	b = binary.AppendUvarint(b, h.seg)
	b = binary.AppendUvarint(b, uint64(h.docs))
	b = binary.AppendUvarint(b, h.sumLen)
	b = binary.AppendVarint(b, h.minTime)
	b = binary.AppendVarint(b, h.maxTime)
	b = binary.AppendUvarint(b, uint64(h.colBlocks))
	b = binary.AppendUvarint(b, uint64(h.docBlocks))
	b = binary.AppendUvarint(b, uint64(h.chunks))
	b = binary.AppendUvarint(b, uint64(len(h.firstTerms)))
	for _, t := range h.firstTerms {
		b = appendString(b, t)
	}
	return b
}

func decodeHeader(b []byte) (*segHeader, error) {
	r := reader{b: b}
	if r.byte() != segVersion {
		return nil, fmt.Errorf("%w: segment header: unknown version", errCorrupt)
	}
	h := &segHeader{}
	h.seg = r.uvarint()
	h.docs = uint32(r.uvarint())
	h.sumLen = r.uvarint()
	h.minTime = r.varint()
	h.maxTime = r.varint()
	h.colBlocks = uint32(r.uvarint())
	h.docBlocks = uint32(r.uvarint())
	h.chunks = uint32(r.uvarint())
	n := r.uvarint()
	if n > uint64(len(b)) {
		return nil, fmt.Errorf("%w: segment header", errCorrupt)
	}
	h.firstTerms = make([]string, n)
	for i := range h.firstTerms {
		h.firstTerms[i] = r.string()
	}
	if r.err {
		return nil, fmt.Errorf("%w: segment header", errCorrupt)
	}
	return h, nil
}

// segment is a live segment as queries see it: its header and, once
// loaded, its columns (immutable, shared by all queries).
type segment struct {
	owner string
	hdr   *segHeader

	mu    sync.Mutex
	cols  *columns
	tasks map[string][]uint32 // memoised task posting lists
	// terms memoises lookups (a Task's Cycles recall with much the same
	// terms); cleared when it reaches maxMemoTerms.
	terms map[string]lookupResult
}

type lookupResult struct {
	e  entry
	ok bool
}

const maxMemoTerms = 8192

type columns struct {
	kinds []byte
	norms []byte
	times []int64
}

// entry is one term of a term block.
type entry struct {
	df         uint32
	chunks     uint32 // 0: postings inline
	firstChunk uint32
	// inline is the postings when chunks is 0; nil when the entry came
	// from the lookup memo, which keeps where they are instead: bytes
	// lo..hi of term block blk.
	inline []byte
	blk    uint32
	lo, hi uint32
}

// blockSource fetches segment blocks, through the cache, and decoded
// document blocks through rows (nil: decoded each time).
type blockSource struct {
	v     *persistence.Snapshot
	cache *blockCache
	rows  *lru[[]parsedRow]
}

func (s blockSource) get(owner string, fam byte, seg uint64, n uint32) ([]byte, error) {
	key := persistence.BlockKey(owner, fam, seg, n)
	if b, ok := s.cache.get(key); ok {
		return b, nil
	}
	b, err := s.v.GetCopy(key)
	if err != nil {
		return nil, fmt.Errorf("segment %d block %c/%d: %w", seg, fam, n, err)
	}
	s.cache.put(string(key), b)
	return b, nil
}

// lookup finds term in the segment.
func (s *segment) lookup(src blockSource, term string) (entry, bool, error) {
	s.mu.Lock()
	r, hit := s.terms[term]
	s.mu.Unlock()
	if hit {
		return r.e, r.ok, nil
	}
	ft := s.hdr.firstTerms
	i := sort.Search(len(ft), func(i int) bool { return ft[i] > term }) - 1
	if i >= 0 {
		blk, err := src.get(s.owner, persistence.BlockTerms, s.hdr.seg, uint32(i))
		if err != nil {
			return entry{}, false, err
		}
		r.e, r.ok = findInBlock(blk, term)
		r.e.blk = uint32(i)
	}
	memo := r
	memo.e.inline = nil // the memo must not pin the block
	s.mu.Lock()
	if s.terms == nil || len(s.terms) >= maxMemoTerms {
		s.terms = make(map[string]lookupResult)
	}
	s.terms[term] = memo
	s.mu.Unlock()
	return r.e, r.ok, nil
}

// A term block is: count (uvarint), count big-endian uint32 offsets of the
// entries (from the end of the offset table), then the entries: term, df,
// chunks, then either the inline postings or the first chunk number.
func findInBlock(blk []byte, term string) (entry, bool) {
	count, n := binary.Uvarint(blk)
	if n <= 0 || uint64(len(blk)-n) < count*4 {
		return entry{}, false
	}
	offs := blk[n : n+int(count)*4]
	body := blk[n+int(count)*4:]
	tb := []byte(term)
	i := sort.Search(int(count), func(i int) bool {
		return bytes.Compare(entryTerm(body, offs, i), tb) >= 0
	})
	if i == int(count) || !bytes.Equal(entryTerm(body, offs, i), tb) {
		return entry{}, false
	}
	rest := body[binary.BigEndian.Uint32(offs[i*4:]):]
	_, e := decodeEntry(rest)
	if e.chunks == 0 {
		// Where the inline postings are in blk: they end where the rest
		// of the block after them begins.
		start := len(blk) - len(rest)
		r := reader{b: rest}
		r.bytes() // term
		r.uvarint()
		r.uvarint()
		n := r.uvarint()
		e.lo = uint32(start + (len(rest) - len(r.b)))
		e.hi = e.lo + uint32(n)
	}
	return e, true
}

func entryTerm(body, offs []byte, i int) []byte {
	off := binary.BigEndian.Uint32(offs[i*4:])
	if int(off) >= len(body) {
		return nil
	}
	l, n := binary.Uvarint(body[off:])
	if n <= 0 || int(off)+n+int(l) > len(body) {
		return nil
	}
	return body[int(off)+n : int(off)+n+int(l)]
}

func decodeEntry(b []byte) (string, entry) {
	r := reader{b: b}
	term := r.string()
	var e entry
	e.df = uint32(r.uvarint())
	e.chunks = uint32(r.uvarint())
	if e.chunks == 0 {
		e.inline = r.bytes()
	} else {
		e.firstChunk = uint32(r.uvarint())
	}
	return term, e
}

// eachEntry calls fn with every entry of a term block, in term order.
func eachEntry(blk []byte, fn func(term string, e entry) error) error {
	count, n := binary.Uvarint(blk)
	if n <= 0 || uint64(len(blk)-n) < count*4 {
		return fmt.Errorf("%w: term block", errCorrupt)
	}
	offs := blk[n : n+int(count)*4]
	body := blk[n+int(count)*4:]
	for i := 0; i < int(count); i++ {
		off := binary.BigEndian.Uint32(offs[i*4:])
		if int(off) > len(body) {
			return fmt.Errorf("%w: term block", errCorrupt)
		}
		term, e := decodeEntry(body[off:])
		if err := fn(term, e); err != nil {
			return err
		}
	}
	return nil
}

// postings calls fn with each (document, term frequency) of an entry, in
// document order.
func (s *segment) postings(src blockSource, e entry, fn func(doc, tf uint32)) error {
	if e.chunks == 0 {
		b, err := s.inline(src, e)
		if err != nil {
			return err
		}
		decodePostings(b, fn)
		return nil
	}
	for c := uint32(0); c < e.chunks; c++ {
		b, err := src.get(s.owner, persistence.BlockOverflow, s.hdr.seg, e.firstChunk+c)
		if err != nil {
			return err
		}
		decodePostings(b, fn)
	}
	return nil
}

// chunks calls fn with the encoded postings of an entry, one inline list
// or overflow chunk at a time, in document order.
func (s *segment) chunks(src blockSource, e entry, fn func(b []byte)) error {
	if e.chunks == 0 {
		b, err := s.inline(src, e)
		if err != nil {
			return err
		}
		fn(b)
		return nil
	}
	for c := uint32(0); c < e.chunks; c++ {
		b, err := src.get(s.owner, persistence.BlockOverflow, s.hdr.seg, e.firstChunk+c)
		if err != nil {
			return err
		}
		fn(b)
	}
	return nil
}

// inline returns an entry's inline postings, reading its block when the
// entry came from the memo.
func (s *segment) inline(src blockSource, e entry) ([]byte, error) {
	if e.inline != nil || e.hi == e.lo {
		return e.inline, nil
	}
	blk, err := src.get(s.owner, persistence.BlockTerms, s.hdr.seg, e.blk)
	if err != nil {
		return nil, err
	}
	if int(e.hi) > len(blk) {
		return nil, fmt.Errorf("%w: segment %d term block %d", errCorrupt, s.hdr.seg, e.blk)
	}
	return blk[e.lo:e.hi], nil
}

// Postings are (delta, tf) uvarint pairs; the first delta of a list or of
// a chunk is the absolute document number.
func decodePostings(b []byte, fn func(doc, tf uint32)) {
	var doc uint32
	for len(b) > 0 {
		d, n := binary.Uvarint(b)
		if n <= 0 {
			return
		}
		b = b[n:]
		tf, m := binary.Uvarint(b)
		if m <= 0 {
			return
		}
		b = b[m:]
		doc += uint32(d)
		fn(doc, uint32(tf))
	}
}

// loadColumns returns the segment's columns, reading them once.
func (s *segment) loadColumns(src blockSource) (*columns, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cols != nil {
		return s.cols, nil
	}
	c := &columns{
		kinds: make([]byte, 0, s.hdr.docs),
		norms: make([]byte, 0, s.hdr.docs),
		times: make([]int64, 0, s.hdr.docs),
	}
	for i := uint32(0); i < s.hdr.colBlocks; i++ {
		b, err := src.v.GetCopy(persistence.BlockKey(s.owner, persistence.BlockColumns, s.hdr.seg, i))
		if err != nil {
			return nil, fmt.Errorf("segment %d columns %d: %w", s.hdr.seg, i, err)
		}
		if err := decodeColumns(b, c); err != nil {
			return nil, err
		}
	}
	if len(c.kinds) != int(s.hdr.docs) {
		return nil, fmt.Errorf("%w: segment %d has %d column rows for %d documents", errCorrupt, s.hdr.seg, len(c.kinds), s.hdr.docs)
	}
	s.cols = c
	return c, nil
}

// A column block is: count, count kinds, count length codes, count times
// (varint deltas, the first absolute).
func encodeColumns(kinds, norms []byte, times []int64) []byte {
	b := make([]byte, 0, len(kinds)*5+8)
	b = binary.AppendUvarint(b, uint64(len(kinds)))
	b = append(b, kinds...)
	b = append(b, norms...)
	var prev int64
	for _, t := range times {
		b = binary.AppendVarint(b, t-prev)
		prev = t
	}
	return b
}

func decodeColumns(b []byte, c *columns) error {
	r := reader{b: b}
	n := r.uvarint()
	if n > uint64(len(r.b))/2 {
		return fmt.Errorf("%w: column block", errCorrupt)
	}
	c.kinds = append(c.kinds, r.b[:n]...)
	c.norms = append(c.norms, r.b[n:2*n]...)
	r.b = r.b[2*n:]
	var t int64
	for i := uint64(0); i < n; i++ {
		t += r.varint()
		c.times = append(c.times, t)
	}
	if r.err {
		return fmt.Errorf("%w: column block", errCorrupt)
	}
	return nil
}

// docRow is one row of the document table.
type docRow struct {
	ref       string
	source    string
	hash      uint64
	textBytes uint32
	untrusted bool
}

func appendDocRow(b []byte, d *docRow) []byte {
	b = appendString(b, d.ref)
	b = appendString(b, d.source)
	b = binary.BigEndian.AppendUint64(b, d.hash)
	b = binary.AppendUvarint(b, uint64(d.textBytes))
	return append(b, flags(d.untrusted))
}

func decodeDocRows(b []byte) ([]docRow, error) {
	r := reader{b: b}
	n := r.uvarint()
	if n > uint64(len(b)) {
		return nil, fmt.Errorf("%w: document block", errCorrupt)
	}
	rows := make([]docRow, n)
	for i := range rows {
		rows[i].ref = r.string()
		rows[i].source = r.string()
		rows[i].hash = r.uint64()
		rows[i].textBytes = uint32(r.uvarint())
		rows[i].untrusted = r.byte()&1 != 0
	}
	if r.err {
		return nil, fmt.Errorf("%w: document block", errCorrupt)
	}
	return rows, nil
}

// rowBlock returns the document table rows of document block n, with
// their refs parsed (a document's row is rowOf them). The rows of a
// block are decoded together the first time one of them is asked for
// and kept in the memory's cache of decoded blocks (src.rows, bounded in
// bytes): results come back to the same documents Cycle after Cycle, and
// finding one row in an encoded block means decoding the rows before it.
func (s *segment) rowBlock(src blockSource, n uint32) ([]parsedRow, error) {
	key := persistence.BlockKey(s.owner, persistence.BlockDocs, s.hdr.seg, n)
	rows, ok := src.rows.get(key)
	if !ok {
		blk, err := src.get(s.owner, persistence.BlockDocs, s.hdr.seg, n)
		if err != nil {
			return nil, err
		}
		if rows, err = decodeParsedRows(blk); err != nil {
			return nil, fmt.Errorf("segment %d: %w", s.hdr.seg, err)
		}
		src.rows.put(string(key), rows)
	}
	return rows, nil
}

// rowOf returns doc's row of its block's rows.
func (s *segment) rowOf(rows []parsedRow, doc uint32) (*parsedRow, error) {
	i := doc % docBlockDocs
	if i >= uint32(len(rows)) {
		return nil, fmt.Errorf("%w: segment %d has no row %d", errCorrupt, s.hdr.seg, doc)
	}
	return &rows[i], nil
}

// rowsCost is what a decoded document block holds: its rows and the text
// their strings share.
func rowsCost(rows []parsedRow) int {
	n := len(rows) * int(unsafe.Sizeof(parsedRow{}))
	for i := range rows {
		n += len(rows[i].ref) + len(rows[i].source)
	}
	return n
}

// parsedRow is a document table row with its ref parsed.
type parsedRow struct {
	docRow
	task string
	seq  uint64
	fact string
	// from and to: the passage's byte range (passage.go), 0 and 0 for a
	// record indexed whole.
	from, to int
}

// decodeParsedRows decodes a document table block. The rows' strings
// share one copy of the block.
func decodeParsedRows(blk []byte) ([]parsedRow, error) {
	text := string(blk)
	r := reader{b: blk}
	n := r.uvarint()
	if n > uint64(len(blk)) || n > docBlockDocs {
		return nil, fmt.Errorf("%w: document block of %d rows", errCorrupt, n)
	}
	str := func() string {
		b := r.bytes()
		if r.err {
			return ""
		}
		at := len(blk) - len(r.b) - len(b)
		return text[at : at+len(b)]
	}
	rows := make([]parsedRow, n)
	for i := range rows {
		row := &rows[i]
		row.ref = str()
		row.source = str()
		row.hash = r.uint64()
		row.textBytes = uint32(r.uvarint())
		row.untrusted = r.byte()&1 != 0
		if r.err {
			return nil, fmt.Errorf("%w: document block row %d", errCorrupt, i)
		}
		var ok bool
		if row.task, row.seq, row.fact, row.from, row.to, ok = parseDocRef(row.ref); !ok {
			return nil, fmt.Errorf("%w: ref %q", errCorrupt, row.ref)
		}
	}
	return rows, nil
}

// parseRef is persistence.ParseRef on a string, its parts sharing ref.
func parseRef(ref string) (task string, seq uint64, fact string, ok bool) {
	i := strings.IndexByte(ref, '/')
	if i <= 0 {
		return "", 0, "", false
	}
	task, rest := ref[:i], ref[i+1:]
	switch {
	case len(rest) == 9 && rest[0] == 'e':
		for j := 1; j < 9; j++ {
			seq = seq<<8 | uint64(rest[j])
		}
		return task, seq, "", true
	case len(rest) > 1 && rest[0] == 'f':
		return task, 0, rest[1:], true
	}
	return "", 0, "", false
}

// taskDocs returns the documents of task in the segment, sorted.
func (s *segment) taskDocs(src blockSource, task string) ([]uint32, error) {
	s.mu.Lock()
	if d, ok := s.tasks[task]; ok {
		s.mu.Unlock()
		return d, nil
	}
	s.mu.Unlock()
	e, ok, err := s.lookup(src, taskTerm(task))
	if err != nil || !ok {
		return nil, err
	}
	var docs []uint32
	if err := s.postings(src, e, func(doc, _ uint32) { docs = append(docs, doc) }); err != nil {
		return nil, err
	}
	s.mu.Lock()
	if s.tasks == nil || len(s.tasks) > 256 {
		s.tasks = make(map[string][]uint32)
	}
	s.tasks[task] = docs
	s.mu.Unlock()
	return docs, nil
}
