package memory

import (
	"encoding/binary"
	"fmt"

	"lemo/persistence"
)

// commitBytes bounds one index-maintenance transaction, far below Badger's
// limit even with the smallest memtable the store allows.
const commitBytes = 256 << 10

// segWriter writes one segment: documents in document order, then (or
// interleaved) terms in term order. Blocks are committed in bounded batches
// as they fill; finish returns the header, whose commit makes the segment
// live.
type segWriter struct {
	owner  string
	hdr    segHeader
	commit func([]persistence.KV) error

	batch      []persistence.KV
	batchBytes int

	// Current term block.
	blkBody  []byte
	blkOffs  []uint32
	blkFirst string
	blocks   uint32

	// Current term.
	term      string
	df        uint32
	cur       []byte
	prev      uint32
	chunkOpen bool // cur holds postings since the list or chunk began
	chunks    uint32
	first     uint32

	// Columns and document rows of the current blocks.
	kinds, norms []byte
	times        []int64
	rows         []byte
	rowCount     int
}

func newSegWriter(owner string, seg uint64, commit func([]persistence.KV) error) *segWriter {
	return &segWriter{owner: owner, hdr: segHeader{seg: seg}, commit: commit}
}

func (w *segWriter) put(fam byte, n uint32, val []byte) error {
	key := persistence.BlockKey(w.owner, fam, w.hdr.seg, n)
	w.batch = append(w.batch, persistence.KV{Key: key, Value: val})
	w.batchBytes += len(key) + len(val)
	if w.batchBytes >= commitBytes {
		return w.flush()
	}
	return nil
}

func (w *segWriter) flush() error {
	if len(w.batch) == 0 {
		return nil
	}
	err := w.commit(w.batch)
	w.batch, w.batchBytes = nil, 0
	return err
}

// addDoc appends the next document. The caller adds its length to
// hdr.sumLen.
func (w *segWriter) addDoc(kind Kind, norm byte, t int64, row *docRow) error {
	if w.hdr.docs == 0 || t < w.hdr.minTime {
		w.hdr.minTime = t
	}
	if w.hdr.docs == 0 || t > w.hdr.maxTime {
		w.hdr.maxTime = t
	}
	w.hdr.docs++
	w.kinds = append(w.kinds, byte(kind))
	w.norms = append(w.norms, norm)
	w.times = append(w.times, t)
	if len(w.kinds) == colBlockDocs {
		if err := w.sealColumns(); err != nil {
			return err
		}
	}
	w.rows = appendDocRow(w.rows, row)
	w.rowCount++
	if w.rowCount == docBlockDocs {
		return w.sealRows()
	}
	return nil
}

func (w *segWriter) sealColumns() error {
	if len(w.kinds) == 0 {
		return nil
	}
	b := encodeColumns(w.kinds, w.norms, w.times)
	w.kinds, w.norms, w.times = w.kinds[:0], w.norms[:0], w.times[:0]
	n := w.hdr.colBlocks
	w.hdr.colBlocks++
	return w.put(persistence.BlockColumns, n, b)
}

func (w *segWriter) sealRows() error {
	if w.rowCount == 0 {
		return nil
	}
	b := binary.AppendUvarint(make([]byte, 0, len(w.rows)+4), uint64(w.rowCount))
	b = append(b, w.rows...)
	w.rows, w.rowCount = w.rows[:0], 0
	n := w.hdr.docBlocks
	w.hdr.docBlocks++
	return w.put(persistence.BlockDocs, n, b)
}

// beginTerm starts the posting list of term; terms come in increasing order.
func (w *segWriter) beginTerm(term string) {
	w.term, w.df, w.cur, w.prev, w.chunkOpen, w.chunks = term, 0, w.cur[:0], 0, false, 0
	w.first = w.hdr.chunks
}

// addPosting appends a document (in increasing order) to the current term.
func (w *segWriter) addPosting(doc, tf uint32) error {
	if len(w.cur) >= chunkBytes {
		if err := w.sealChunk(); err != nil {
			return err
		}
	}
	delta := doc
	if w.chunkOpen {
		delta = doc - w.prev
	}
	w.cur = binary.AppendUvarint(w.cur, uint64(delta))
	w.cur = binary.AppendUvarint(w.cur, uint64(tf))
	w.prev, w.chunkOpen = doc, true
	w.df++
	return nil
}

func (w *segWriter) sealChunk() error {
	b := append([]byte(nil), w.cur...)
	w.cur, w.chunkOpen = w.cur[:0], false
	n := w.hdr.chunks
	w.hdr.chunks++
	w.chunks++
	return w.put(persistence.BlockOverflow, n, b)
}

// endTerm adds the current term's entry to the term block.
func (w *segWriter) endTerm() error {
	if w.df == 0 {
		return nil
	}
	if w.chunks > 0 || len(w.cur) > inlineMax {
		if len(w.cur) > 0 {
			if err := w.sealChunk(); err != nil {
				return err
			}
		}
	}
	if len(w.blkOffs) == 0 {
		w.blkFirst = w.term
	}
	w.blkOffs = append(w.blkOffs, uint32(len(w.blkBody)))
	b := appendString(w.blkBody, w.term)
	b = binary.AppendUvarint(b, uint64(w.df))
	b = binary.AppendUvarint(b, uint64(w.chunks))
	if w.chunks == 0 {
		b = binary.AppendUvarint(b, uint64(len(w.cur)))
		b = append(b, w.cur...)
	} else {
		b = binary.AppendUvarint(b, uint64(w.first))
	}
	w.blkBody = b
	if len(w.blkBody) >= termBlockBytes {
		return w.sealBlock()
	}
	return nil
}

func (w *segWriter) sealBlock() error {
	if len(w.blkOffs) == 0 {
		return nil
	}
	b := binary.AppendUvarint(make([]byte, 0, len(w.blkBody)+len(w.blkOffs)*4+4), uint64(len(w.blkOffs)))
	for _, o := range w.blkOffs {
		b = binary.BigEndian.AppendUint32(b, o)
	}
	b = append(b, w.blkBody...)
	w.hdr.firstTerms = append(w.hdr.firstTerms, w.blkFirst)
	w.blkBody, w.blkOffs = w.blkBody[:0], w.blkOffs[:0]
	n := w.blocks
	w.blocks++
	return w.put(persistence.BlockTerms, n, b)
}

// finish commits the remaining blocks and returns the header record, which
// the caller commits (with what the segment replaces) to make it live.
func (w *segWriter) finish() (persistence.KV, error) {
	if err := w.sealBlock(); err != nil {
		return persistence.KV{}, err
	}
	if err := w.sealColumns(); err != nil {
		return persistence.KV{}, err
	}
	if err := w.sealRows(); err != nil {
		return persistence.KV{}, err
	}
	if err := w.flush(); err != nil {
		return persistence.KV{}, err
	}
	if int(w.blocks) != len(w.hdr.firstTerms) {
		return persistence.KV{}, fmt.Errorf("memory: segment %d: %d term blocks for %d first terms", w.hdr.seg, w.blocks, len(w.hdr.firstTerms))
	}
	return persistence.KV{Key: persistence.SegmentKey(w.owner, w.hdr.seg), Value: w.hdr.encode()}, nil
}
