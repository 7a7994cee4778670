package memory

import (
	"cmp"
	"encoding/binary"
	"slices"
	"strings"
)

// Passage-level indexing. BM25's length normalisation makes a long record
// (a catalog, a long file read, a long answer) lose to short ones even
// where a part of it answers the query exactly, and its terms all meet in
// one document although they stand far apart. So an event's record longer
// than passageMinBytes is indexed as passages instead of whole: windows of
// about passageBytes that overlap by passageOverlap (a statement cut by one
// window's edge is whole in the next), each a document of the lexical
// index whose ref names the record and the passage's byte range. A record
// then ranks by its best passage; search and recall show that passage
// (recall labels it with where it lies and the record's tasks.read_block
// handle), and every passage carries the record's content hash, so one
// record is one result however many of its passages match.
//
// Facts are indexed whole: they are bounded (Options.MaxFactBytes) and
// state one thing.
const (
	passageMinBytes = 1536
	passageBytes    = 1024
	passageOverlap  = 256
	// passageCut is how far back from a window's edge a cut looks for a
	// line break or a space.
	passageCut = 128
	// maxPassages bounds the passages of one record (about 390 KB of it,
	// more than the largest retained tool output; the rest of a longer
	// text is not indexed, as a whole record's tokens beyond maxDocTokens
	// are not).
	maxPassages = 512
)

// passageSpans returns the byte ranges of text's passages, in order, or
// nil when text is short enough to be indexed whole. Each range starts
// where the previous one's last passageOverlap bytes start (about), ends
// at a line break or a space when one is near, and the last one ends the
// text (or the maxPassages-th its window). It is a pure function of text.
func passageSpans(text string) [][2]int {
	if len(text) <= passageMinBytes {
		return nil
	}
	var out [][2]int
	from := 0
	for {
		to := from + passageBytes
		if to >= len(text)-passageOverlap {
			// The rest fits in this passage (with at most its overlap).
			out = append(out, [2]int{from, len(text)})
			return out
		}
		to = cutAt(text, to)
		out = append(out, [2]int{from, to})
		if len(out) == maxPassages {
			return out
		}
		next := cutAt(text, to-passageOverlap)
		if next <= from {
			next = to - passageOverlap
		}
		from = next
	}
}

// cutAt returns a cut position at or before i: just after a line break (a
// raw one or a JSON "\n" escape) or a space within passageCut bytes, else
// i moved back to a rune boundary.
func cutAt(text string, i int) int {
	lo := max(i-passageCut, 1)
	if j := strings.LastIndexByte(text[lo:i], '\n'); j >= 0 {
		return lo + j + 1
	}
	if j := strings.LastIndex(text[lo:i], `\n`); j >= 0 {
		return lo + j + 2
	}
	if j := strings.LastIndexByte(text[lo:i], ' '); j >= 0 {
		return lo + j + 1
	}
	for i > 0 && text[i]&0xC0 == 0x80 {
		i--
	}
	return i
}

// passageRef is the ref of the passage [from, to) of the record base (an
// event ref): base, a 0 byte, 'p', then from and to (4 bytes each). No
// record ref has a 0 byte after its Task's '/e' and seq at that place, so
// the two never meet.
func passageRef(base []byte, from, to int) []byte {
	r := make([]byte, 0, len(base)+10)
	r = append(r, base...)
	r = append(r, 0, 'p')
	r = binary.BigEndian.AppendUint32(r, uint32(from))
	return binary.BigEndian.AppendUint32(r, uint32(to))
}

// passageSuffix is the length of what passageRef adds.
const passageSuffix = 10

// parseDocRef splits the ref of an index document into its record's Task,
// event seq or fact id, and the byte range of its passage (0, 0 for a
// record indexed whole). The parts share ref.
func parseDocRef(ref string) (task string, seq uint64, fact string, from, to int, ok bool) {
	if n := len(ref); n > passageSuffix && ref[n-passageSuffix] == 0 && ref[n-passageSuffix+1] == 'p' {
		task, seq, fact, ok = parseRef(ref[:n-passageSuffix])
		if !ok || fact != "" {
			return "", 0, "", 0, 0, false
		}
		from = int(binary.BigEndian.Uint32([]byte(ref[n-8 : n-4])))
		to = int(binary.BigEndian.Uint32([]byte(ref[n-4:])))
		return task, seq, "", from, to, from < to
	}
	task, seq, fact, ok = parseRef(ref)
	return task, seq, fact, 0, 0, ok
}

// analyzeRecord returns the pending documents of one record: the record
// whole, or its passages (see passageSpans), each with the record's size
// and content hash.
func analyzeRecord(info docInfo, text string, json bool) []*pdoc {
	spans := passageSpans(text)
	if spans == nil {
		return []*pdoc{analyze(info, text, json)}
	}
	hash := contentHash(text)
	base := []byte(info.ref)
	out := make([]*pdoc, 0, len(spans))
	var sc analyzeScratch
	for _, s := range spans {
		pi := info
		pi.ref = string(passageRef(base, s[0], s[1]))
		d := analyzeWith(pi, text[s[0]:s[1]], json, &sc)
		d.textBytes = uint32(len(text))
		d.hash = hash
		out = append(out, d)
	}
	return out
}

// passageWiden is how many times more candidates recall's first hop looks
// at when passages of a few records took most of its places (fewRecords).
const passageWiden = 4

// fewRecords tells whether the candidates of a search are passages of
// fewer than half as many records: passages of one record share its time
// and kind (two records sharing both to the millisecond are counted as
// one, which only makes the search look further).
func fewRecords(cands []scored) bool {
	type rec struct {
		time int64
		kind Kind
	}
	var buf [recallCandidates]rec // no allocation for recall's search
	recs := buf[:0]
	for _, c := range cands {
		recs = append(recs, rec{c.time, c.kind})
	}
	slices.SortFunc(recs, func(a, b rec) int {
		if a.time != b.time {
			return cmp.Compare(a.time, b.time)
		}
		return cmp.Compare(a.kind, b.kind)
	})
	distinct := 0
	for i := range recs {
		if i == 0 || recs[i] != recs[i-1] {
			distinct++
		}
	}
	return 2*distinct < len(cands)
}
