package memory

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"sort"
	"strings"

	"github.com/cespare/xxhash/v2"

	"lemo/api"
)

// Kind is what an indexed record is.
type Kind uint8

// Kinds of indexed records.
const (
	KindUserMessage      Kind = 1
	KindAssistantMessage Kind = 2
	KindToolResult       Kind = 3
	KindFact             Kind = 4
	KindFailure          Kind = 5
)

var kindNames = [...]string{"", "user_message", "assistant_message", "tool_result", "fact", "failure"}

// String returns the kind's name ("user_message", ..., "failure").
func (k Kind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return fmt.Sprintf("kind(%d)", uint8(k))
}

// ParseKind returns the kind named s.
func ParseKind(s string) (Kind, bool) {
	for i, n := range kindNames {
		if i > 0 && n == s {
			return Kind(i), true
		}
	}
	return 0, false
}

// KindNames lists the names of the kinds, in order.
func KindNames() []string { return append([]string(nil), kindNames[1:]...) }

// docInfo is what the index knows of a record besides its terms.
type docInfo struct {
	ref       string // persistence.EventRef or FactRef
	kind      Kind
	untrusted bool
	time      int64 // unix milliseconds
	length    uint32
	textBytes uint32
	hash      uint64
	source    string
}

// pdoc is a pending document: indexed, not yet in a segment.
type pdoc struct {
	docInfo
	norm  byte
	terms []termFreq // sorted by term
}

type termFreq struct {
	term string
	tf   uint32
}

const recordVersion = 1

// contentHash identifies a record's content for deduplication: the same
// text (ignoring surrounding space) has the same hash in every process.
func contentHash(text string) uint64 { return xxhash.Sum64String(strings.TrimSpace(text)) }

// analyze tokenizes text into a pending document.
func analyze(info docInfo, text string, json bool) *pdoc {
	return analyzeWith(info, text, json, nil)
}

// analyzeScratch is what analyzing reuses between the passages of a
// record.
type analyzeScratch struct {
	tk     tokenizer
	counts map[string]uint32
}

func analyzeWith(info docInfo, text string, json bool, sc *analyzeScratch) *pdoc {
	if sc == nil {
		sc = &analyzeScratch{}
	}
	if sc.counts == nil {
		sc.counts = make(map[string]uint32)
	}
	tk, counts := &sc.tk, sc.counts
	clear(counts)
	n := 0
	tk.each(text, json, func(t []byte) bool {
		counts[string(t)]++
		n++
		return n < maxDocTokens
	})
	d := &pdoc{docInfo: info}
	d.length = uint32(n)
	d.norm = encodeNorm(n)
	d.textBytes = uint32(len(text))
	d.hash = contentHash(text)
	d.terms = make([]termFreq, 0, len(counts))
	for t, c := range counts {
		d.terms = append(d.terms, termFreq{t, c})
	}
	sort.Slice(d.terms, func(i, j int) bool { return d.terms[i].term < d.terms[j].term })
	return d
}

// encode returns the stored form of a pending document (its ref is the
// key). Layout: version, kind, flags, time (varint ms), length, text bytes,
// hash (8 bytes), source, term count, then each term with its frequency.
func (d *pdoc) encode() []byte {
	n := 32 + len(d.source)
	for _, t := range d.terms {
		n += len(t.term) + 4
	}
	b := make([]byte, 0, n)
	b = append(b, recordVersion, byte(d.kind), flags(d.untrusted))
	b = binary.AppendVarint(b, d.time)
	b = binary.AppendUvarint(b, uint64(d.length))
	b = binary.AppendUvarint(b, uint64(d.textBytes))
	b = binary.BigEndian.AppendUint64(b, d.hash)
	b = appendString(b, d.source)
	b = binary.AppendUvarint(b, uint64(len(d.terms)))
	for _, t := range d.terms {
		b = appendString(b, t.term)
		b = binary.AppendUvarint(b, uint64(t.tf))
	}
	return b
}

func flags(untrusted bool) byte {
	if untrusted {
		return 1
	}
	return 0
}

var errCorrupt = errors.New("memory: corrupt index record")

func decodePending(ref string, b []byte) (*pdoc, error) {
	r := reader{b: b}
	if r.byte() != recordVersion {
		return nil, fmt.Errorf("%w: pending document %q: unknown version", errCorrupt, ref)
	}
	d := &pdoc{}
	d.ref = ref
	d.kind = Kind(r.byte())
	d.untrusted = r.byte()&1 != 0
	d.time = r.varint()
	d.length = uint32(r.uvarint())
	d.norm = encodeNorm(int(d.length))
	d.textBytes = uint32(r.uvarint())
	d.hash = r.uint64()
	d.source = r.string()
	n := r.uvarint()
	if n > uint64(len(b)) {
		return nil, fmt.Errorf("%w: pending document %q", errCorrupt, ref)
	}
	d.terms = make([]termFreq, n)
	for i := range d.terms {
		d.terms[i].term = r.string()
		d.terms[i].tf = uint32(r.uvarint())
	}
	if r.err {
		return nil, fmt.Errorf("%w: pending document %q", errCorrupt, ref)
	}
	return d, nil
}

// tf returns the frequency of term in the document, 0 when absent.
func (d *pdoc) tf(term string) uint32 {
	i := sort.Search(len(d.terms), func(i int) bool { return d.terms[i].term >= term })
	if i < len(d.terms) && d.terms[i].term == term {
		return d.terms[i].tf
	}
	return 0
}

func appendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

// reader decodes the varint formats of the index; a short or malformed
// input sets err and yields zero values.
type reader struct {
	b   []byte
	err bool
}

func (r *reader) byte() byte {
	if len(r.b) == 0 {
		r.err = true
		return 0
	}
	c := r.b[0]
	r.b = r.b[1:]
	return c
}

func (r *reader) uvarint() uint64 {
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.err = true
		r.b = nil
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *reader) varint() int64 {
	v, n := binary.Varint(r.b)
	if n <= 0 {
		r.err = true
		r.b = nil
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *reader) uint64() uint64 {
	if len(r.b) < 8 {
		r.err = true
		r.b = nil
		return 0
	}
	v := binary.BigEndian.Uint64(r.b)
	r.b = r.b[8:]
	return v
}

func (r *reader) bytes() []byte {
	n := r.uvarint()
	if n > uint64(len(r.b)) {
		r.err = true
		r.b = nil
		return nil
	}
	v := r.b[:n]
	r.b = r.b[n:]
	return v
}

func (r *reader) string() string { return string(r.bytes()) }

// Document lengths are stored as one byte (as Lucene stores norms): exact
// up to 32 tokens, then on a 3% geometric scale. Scores use the decoded
// length everywhere (pending documents and segments alike), so a record
// scores the same wherever it is stored.
var normTable = func() (t [256]uint32) {
	for i := range t {
		if i < 32 {
			t[i] = uint32(i)
			continue
		}
		t[i] = uint32(math.Round(32 * math.Pow(1.03, float64(i-31))))
	}
	return t
}()

func encodeNorm(n int) byte {
	// The largest code whose length is <= n.
	i := sort.Search(256, func(i int) bool { return normTable[i] > uint32(n) })
	if i == 0 {
		return 0
	}
	return byte(i - 1)
}

// recordText returns the indexed text of an event: its kind, its text,
// whether it is JSON, its source and whether it is untrusted. ok is false
// for events that are not indexed.
func recordText(ev *api.Event, tools map[string]string) (kind Kind, text string, json bool, source string, untrusted, ok bool) {
	switch b := ev.Body.(type) {
	case *api.Event_UserMessage:
		return KindUserMessage, b.UserMessage.GetText(), false, "user", false, strings.TrimSpace(b.UserMessage.GetText()) != ""
	case *api.Event_AssistantMessage:
		return KindAssistantMessage, b.AssistantMessage.GetText(), false, "assistant", false, strings.TrimSpace(b.AssistantMessage.GetText()) != ""
	case *api.Event_ToolResult:
		r := b.ToolResult
		if !r.GetRetained() || len(r.GetRetainedOutput()) == 0 {
			return 0, "", false, "", false, false
		}
		return KindToolResult, string(r.GetRetainedOutput()), true, callSource(r.GetCallId(), tools), r.GetUntrusted(), true
	case *api.Event_ToolFailed:
		f := b.ToolFailed
		if f.GetKind() == api.ToolFailureKind_TOOL_FAILURE_KIND_CANCELLED {
			return 0, "", false, "", false, false
		}
		kind := strings.ToLower(strings.TrimPrefix(f.GetKind().String(), "TOOL_FAILURE_KIND_"))
		return KindFailure, fmt.Sprintf("tool call failed (%s): %s", kind, f.GetMessage()), false, callSource(f.GetCallId(), tools), false, true
	case *api.Event_Failure:
		f := b.Failure
		if f.GetKind() == "cancelled" {
			return 0, "", false, "", false, false
		}
		scope := strings.ToLower(strings.TrimPrefix(f.GetScope().String(), "FAILURE_SCOPE_"))
		src := scope
		if f.GetCallId() != "" {
			src = callSource(f.GetCallId(), tools)
		}
		return KindFailure, fmt.Sprintf("%s failure (%s): %s", scope, f.GetKind(), f.GetMessage()), false, src, false, true
	}
	return 0, "", false, "", false, false
}

func callSource(call string, tools map[string]string) string {
	if t := tools[call]; t != "" {
		return "call " + call + " (" + t + ")"
	}
	return "call " + call
}
