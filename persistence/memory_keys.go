package persistence

import "encoding/binary"

// Memory key layout (the Task log's layout is in keys.go). The memory
// package owns these records; they are written as Append extras, so an index
// posting commits in the same transaction as the event it indexes.
//
//	i/<owner>/p/<ref>                          pending index document: indexed, not yet in a segment
//	i/<owner>/h/<seg:8>                        segment header; its presence makes the segment live
//	i/<owner>/<fam:1>/<seg:8>/<n:4>            segment block of family fam:
//	                                             b  term block (terms, document frequencies, postings)
//	                                             c  column block (kind, length, time of each document)
//	                                             d  document table block (ref, source, hash, size)
//	                                             x  overflow chunk of one large posting list
//	i/<owner>/q/<ref>                          embedding of a record (semantic recall): its sign code and metadata
//	i/<owner>/v/<ref>                          embedding of a record: the vector itself
//	j/format                                   memory format marker
//	j/embedmodel                               the model the embeddings were made with
//	j/e/<task>                                 embedding watermark: last seq of the Task whose records have vectors
//	j/w/<task>                                 index watermark: last seq of the Task that was indexed
//	j/u/<task>                                 the Task has events its watermark does not cover (see UnindexedKey)
//	j/markers                                  every append since this key exists left j/u markers
//	k/<owner>/f/<fact>                         fact (immutable)
//	k/<owner>/s/<fact>/<by>                    fact <fact> is superseded by fact <by> (empty value)
//
// <ref> names an indexed record: "<task>/e<seq:8>" for an event,
// "<task>/f<fact>" for a fact recorded by a call of <task>. Owners, Task ids
// and fact ids contain no '/', so every "<...>/" prefix above selects exactly
// one owner, segment or fact. Segment numbers are big-endian, so a prefix
// scan reads segments oldest first.
const (
	prefixIndex     = 'i'
	prefixIndexMeta = 'j'
	prefixFact      = 'k'
)

// Families of segment blocks.
const (
	BlockTerms    byte = 'b'
	BlockColumns  byte = 'c'
	BlockDocs     byte = 'd'
	BlockOverflow byte = 'x'
)

// IndexPrefix is the prefix of every per-owner index record: "i/".
func IndexPrefix() []byte { return []byte{prefixIndex, '/'} }

// IndexOwnerPrefix is the prefix of one owner's index records.
func IndexOwnerPrefix(owner string) []byte {
	k := make([]byte, 0, len(owner)+4)
	k = append(k, prefixIndex, '/')
	k = append(k, owner...)
	return append(k, '/')
}

func indexFamily(owner string, fam byte) []byte {
	return append(IndexOwnerPrefix(owner), fam, '/')
}

// PendingPrefix is the prefix of an owner's pending documents.
func PendingPrefix(owner string) []byte { return indexFamily(owner, 'p') }

// PendingKey is the key of a pending document.
func PendingKey(owner string, ref []byte) []byte {
	return append(PendingPrefix(owner), ref...)
}

// SegmentPrefix is the prefix of an owner's segment headers.
func SegmentPrefix(owner string) []byte { return indexFamily(owner, 'h') }

// SegmentKey is the key of a segment header.
func SegmentKey(owner string, seg uint64) []byte {
	return binary.BigEndian.AppendUint64(SegmentPrefix(owner), seg)
}

// SegmentFromKey returns the segment number of a header key.
func SegmentFromKey(k []byte) uint64 {
	return binary.BigEndian.Uint64(k[len(k)-8:])
}

// BlockFamilyPrefix is the prefix of all blocks of family fam of an owner.
func BlockFamilyPrefix(owner string, fam byte) []byte { return indexFamily(owner, fam) }

// BlockPrefix is the prefix of the blocks of family fam of one segment.
func BlockPrefix(owner string, fam byte, seg uint64) []byte {
	return append(binary.BigEndian.AppendUint64(indexFamily(owner, fam), seg), '/')
}

// BlockKey is the key of block n of family fam of a segment.
func BlockKey(owner string, fam byte, seg uint64, n uint32) []byte {
	return binary.BigEndian.AppendUint32(BlockPrefix(owner, fam, seg), n)
}

// BlockSegment returns the segment number of a block key of owner and
// family fam.
func BlockSegment(owner string, fam byte, k []byte) (uint64, bool) {
	p := len(indexFamily(owner, fam))
	if len(k) < p+8 {
		return 0, false
	}
	return binary.BigEndian.Uint64(k[p : p+8]), true
}

// IndexFormatKey is the key of the memory format marker.
func IndexFormatKey() []byte { return []byte{prefixIndexMeta, '/', 'f', 'o', 'r', 'm', 'a', 't'} }

// WatermarkPrefix is the prefix of every index watermark.
func WatermarkPrefix() []byte { return []byte{prefixIndexMeta, '/', 'w', '/'} }

// WatermarkKey is the key of a Task's index watermark.
func WatermarkKey(task string) []byte { return append(WatermarkPrefix(), task...) }

// WatermarkValue encodes a watermark (a seq) as stored under WatermarkKey.
func WatermarkValue(seq uint64) []byte { return binary.BigEndian.AppendUint64(nil, seq) }

// ParseWatermark decodes a WatermarkValue; anything else reads as 0.
func ParseWatermark(b []byte) uint64 {
	if len(b) != 8 {
		return 0
	}
	return binary.BigEndian.Uint64(b)
}

// UnindexedPrefix is the prefix of every unindexed marker.
func UnindexedPrefix() []byte { return []byte{prefixIndexMeta, '/', 'u', '/'} }

// UnindexedKey marks a Task whose log has events its index watermark does
// not cover. The store writes it, in the same transaction, with every
// append of events whose extras do not set the Task's watermark to at
// least their last seq (an append by a writer without the memory); the
// memory deletes it when it has indexed them. So the memory finds what it
// must catch up on from these markers, without reading every Task.
func UnindexedKey(task string) []byte { return append(UnindexedPrefix(), task...) }

// MarkersKey records that every append since it was written left its
// unindexed marker: stores written before markers existed need one full
// comparison of watermarks against the logs, after which the memory writes
// this key.
func MarkersKey() []byte { return []byte{prefixIndexMeta, '/', 'm', 'a', 'r', 'k', 'e', 'r', 's'} }

// coversEvents reports whether extra sets task's watermark to last or more.
func coversEvents(task string, last uint64, extra []KV) bool {
	wk := WatermarkKey(task)
	for _, kv := range extra {
		if !kv.Delete && string(kv.Key) == string(wk) && ParseWatermark(kv.Value) >= last {
			return true
		}
	}
	return false
}

// FactPrefix is the prefix of an owner's facts.
func FactPrefix(owner string) []byte {
	k := make([]byte, 0, len(owner)+5)
	k = append(k, prefixFact, '/')
	k = append(k, owner...)
	return append(k, '/', 'f', '/')
}

// FactKey is the key of a fact.
func FactKey(owner, id string) []byte { return append(FactPrefix(owner), id...) }

// SupersededPrefix is the prefix of the records naming the facts that
// supersede fact id.
func SupersededPrefix(owner, id string) []byte {
	k := make([]byte, 0, len(owner)+len(id)+6)
	k = append(k, prefixFact, '/')
	k = append(k, owner...)
	k = append(k, '/', 's', '/')
	k = append(k, id...)
	return append(k, '/')
}

// SupersededKey records that fact old is superseded by fact by.
func SupersededKey(owner, old, by string) []byte {
	return append(SupersededPrefix(owner, old), by...)
}

// EventRef is the ref of event seq of task: "<task>/e<seq:8>".
func EventRef(task string, seq uint64) []byte {
	r := make([]byte, 0, len(task)+10)
	r = append(r, task...)
	r = append(r, '/', 'e')
	return binary.BigEndian.AppendUint64(r, seq)
}

// FactRef is the ref of a fact recorded by a call of task: "<task>/f<fact>".
func FactRef(task, fact string) []byte {
	r := make([]byte, 0, len(task)+len(fact)+2)
	r = append(r, task...)
	r = append(r, '/', 'f')
	return append(r, fact...)
}

// ParseRef splits a ref into its Task and either an event seq or a fact id.
func ParseRef(ref []byte) (task string, seq uint64, fact string, ok bool) {
	for i, c := range ref {
		if c != '/' {
			continue
		}
		task = string(ref[:i])
		rest := ref[i+1:]
		switch {
		case len(rest) == 9 && rest[0] == 'e':
			return task, binary.BigEndian.Uint64(rest[1:]), "", task != ""
		case len(rest) > 1 && rest[0] == 'f':
			return task, 0, string(rest[1:]), task != ""
		}
		return "", 0, "", false
	}
	return "", 0, "", false
}

// Families of embedding records (semantic recall).
const (
	vectorCodes byte = 'q'
	vectorData  byte = 'v'
)

// VectorCodePrefix is the prefix of an owner's embedding codes.
func VectorCodePrefix(owner string) []byte { return indexFamily(owner, vectorCodes) }

// VectorCodeKey is the key of a record's embedding code and metadata.
func VectorCodeKey(owner string, ref []byte) []byte { return append(VectorCodePrefix(owner), ref...) }

// VectorKey is the key of a record's embedding vector.
func VectorKey(owner string, ref []byte) []byte {
	return append(indexFamily(owner, vectorData), ref...)
}

// VectorPrefix is the prefix of an owner's embedding vectors.
func VectorPrefix(owner string) []byte { return indexFamily(owner, vectorData) }

// EmbedModelKey is the key of the name of the model the embeddings were
// made with.
func EmbedModelKey() []byte {
	return []byte{prefixIndexMeta, '/', 'e', 'm', 'b', 'e', 'd', 'm', 'o', 'd', 'e', 'l'}
}

// EmbedWatermarkPrefix is the prefix of every embedding watermark.
func EmbedWatermarkPrefix() []byte { return []byte{prefixIndexMeta, '/', 'e', '/'} }

// EmbedWatermarkKey is the key of a Task's embedding watermark (a
// WatermarkValue).
func EmbedWatermarkKey(task string) []byte { return append(EmbedWatermarkPrefix(), task...) }
