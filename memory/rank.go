package memory

import (
	"encoding/json"
	"math"
	"slices"
	"sort"
	"strings"
	"time"

	"lemo/api"
)

// Recall's ranking (a pure function of the candidates, their texts and the
// time, so it is tested with tables). A candidate's rank is its relevance
// (its score over that of a perfect match of its query, in [0, 1]) times:
//   - for a record the query found, the coordination factor: the share of
//     the query's terms (by idf, those some record holds) it holds. BM25
//     favours a short record that holds a few of the query's words over
//     a longer one that holds more of them ("Who owns the ledger-api
//     service?" over "trk-03 runs parcel-tracker" for "Who owns the
//     service that runs on trk-03?"); the factor is Lucene's classic
//     coord, weighed by idf. Swept as an exponent on the evaluation
//     (complete@5 / MRR): 0: 0.48 / 0.77; 0.5: 0.52 / 0.79; 1: 0.56 /
//     0.77; 1.5 and 2: 0.56 / 0.77 (changed questions' MRR falling); 3:
//     recall@5 0.84. It is the plain factor (exponent 1).
//   - its kind's weight: a request (a user message of another Task)
//     restates a question without its answer, so it weighs
//     requestWeight times its sameness, the share of its terms the query
//     holds (a request that shares only some of the query's words asks
//     about something else); everything else 1;
//   - its hop: a record a later hop found (through an entity its source
//     names, hop.go) ranks at its source's rank times episodeWeight times
//     the entity's weight times the share of the query (by idf) that the
//     chain of records from the first hop's source to it holds, so a
//     record that answers what its source left open ranks just below
//     it; episode candidates (the answer and facts of a matched request's
//     Task, the conclusion drawn from a matched tool result) weigh
//     episodeWeight times the rank of the record that brought them, and
//     a conclusion drawn from a tool result conclusionWeight more (it
//     restates the read that is recalled beside it, so the records a hop
//     links through the read come first; see episodeRank);
//   - its recency: 1 + recencyWeight * 2^(-age/recencyHalfLife), so of
//     two equally relevant records the newer ranks first, and a record of
//     this week outranks one of last quarter that is up to 15% more
//     relevant (no more: an old answer that fits stays above a new one
//     that barely does).
//
// Automatic supersession: a record is superseded by a later record of
// another Task that states the same thing about the same subject with a
// different value. Both are of kinds that state values (answers, tool
// results, facts; not requests or failures), and "the same subject" is
// measured on their terms: at least supersedeOverlap of the earlier
// record's terms (the entities and the attribute it names) occur in the
// later one, and make at least supersedeShare of the later one's; the two
// texts differ, and the later one is newer. A later read of the same
// document (a tool result naming the same "path" with a "revision")
// supersedes the earlier whatever their terms, and the conclusion drawn
// from the earlier read (an answer of its Task after it) is superseded by
// the conclusion drawn from the later one, when both are recalled. The superseded record ranks just below its
// replacement and is labelled "superseded by <task>/<seq>, <time>". An
// explicit supersession (a fact naming the fact it corrects) is stronger:
// such a fact is not recalled at all.
const (
	requestWeight = 0.5
	episodeWeight = 0.9
	// conclusionWeight: swept on the evaluation, complete@5 0.68 at 1
	// and 0.8, 0.72 from 0.7 to 0.4, every other figure the same.
	conclusionWeight = 0.6
	recencyWeight    = 0.15
	recencyHalfLife  = 30 * 24 * time.Hour
	supersedeOverlap = 0.6
	supersedeShare   = 0.2
	// supersedeMinTerms: records with fewer terms say too little to tell
	// a changed value from a different statement.
	supersedeMinTerms = 3
)

// candidate is one recallable record with what ranking needs.
type candidate struct {
	Hit
	text string
	// hop is 1 for a record the query found, 2 for one the first results'
	// entities found; episode is set for a record an episode brought.
	hop     int
	episode bool
	rank    float64
	// other is the share of a request's terms the query does not hold
	// (1 - sameQuestion; 0 for other kinds, and for a request nothing
	// measured).
	other float64
	// supersededBy labels a record a later one replaced (automatic
	// supersession); super is the index of that record.
	supersededBy string
	super        int
	terms        map[string]bool
	// document names the document a tool result read (documentOf), once
	// documentRead (documentName reads it when supersession needs it).
	document     string
	documentRead bool
	// question is the request an answer answers, when both were recalled
	// (foldRequests): shown with the answer, not as an item of its own.
	question string
}

// words is c's terms: those of the passage that matched, for a long
// record (add sets them from it), else of its text; made once.
func (c *candidate) words() map[string]bool {
	if c.terms == nil {
		t := c.text
		if c.PassageTo > 0 {
			t = c.text[c.PassageFrom:c.PassageTo]
		}
		c.terms = termSet(t, c.Kind == KindToolResult)
	}
	return c.terms
}

func kindWeight(k Kind) float64 {
	if k == KindUserMessage {
		return requestWeight
	}
	return 1
}

// weight is the candidate's kind weight; a request's is also its
// sameness: the share of its terms the query holds (sameQuestion).
func (c *candidate) weight() float64 {
	if c.Kind == KindUserMessage {
		return requestWeight * (1 - c.other)
	}
	return 1
}

// sameQuestion is how much a request asks what the query asks: the share
// of its terms that the query (or also) holds. A request restates its
// question; one that shares only some of the query's words ("Who owns the
// ledger-api service?" for "Who owns the service that runs on trk-03?")
// asks about something else, and its answer answers that.
func sameQuestion(request string, query map[string]bool, also []string) float64 {
	terms := termSet(request, false)
	if len(terms) == 0 {
		return 0
	}
	n := 0
	for t := range terms {
		if query[t] || slices.Contains(also, t) {
			n++
		}
	}
	return float64(n) / float64(len(terms))
}

func recency(now, t time.Time) float64 {
	age := now.Sub(t)
	if age < 0 {
		age = 0
	}
	return 1 + recencyWeight*math.Exp2(-float64(age)/float64(recencyHalfLife))
}

// rankCandidates orders cands best first: it sets each candidate's rank,
// finds automatic supersessions and places every superseded candidate
// just below its replacement. Candidates with equal content must already
// be merged.
func rankCandidates(cands []*candidate, now time.Time, query map[string]bool) []*candidate {
	for _, c := range cands {
		if c.rank == 0 {
			c.rank = c.Relevance * c.weight()
		}
		c.rank *= recency(now, c.Time)
		c.words()
		c.super = -1
	}
	sort.SliceStable(cands, func(i, j int) bool { return better(cands[i], cands[j]) })
	// Each candidate looks for the latest record that replaces it.
	for i, old := range cands {
		for j, nw := range cands {
			if i == j || !nw.Time.After(old.Time) || nw.TaskID == old.TaskID || nw.hash == old.hash {
				continue
			}
			if !states(old.Kind) || !states(nw.Kind) || !(sameSubject(old.terms, nw.terms) || sameDocument(old, nw)) {
				continue
			}
			if old.super < 0 || nw.Time.After(cands[old.super].Time) {
				old.super = j
			}
		}
	}
	// A conclusion drawn from a superseded tool result (an answer of its
	// Task after it) is superseded by the conclusion drawn from the
	// replacement (the first answer of its Task after it), when that is
	// recalled too.
	for _, c := range cands {
		if c.super >= 0 || c.Kind != KindAssistantMessage {
			continue
		}
		for _, res := range cands {
			if res.TaskID != c.TaskID || res.Kind != KindToolResult || res.super < 0 || !res.Time.Before(c.Time) {
				continue
			}
			nw := cands[res.super]
			next := -1
			for k, a := range cands {
				if a.TaskID == nw.TaskID && a.Kind == KindAssistantMessage && a.Time.After(nw.Time) && a.Time.After(c.Time) &&
					(next < 0 || a.Time.Before(cands[next].Time)) {
					next = k
				}
			}
			if next >= 0 {
				c.super = next
				break
			}
		}
	}
	for _, c := range cands {
		if c.super >= 0 {
			nw := cands[c.super]
			c.supersededBy = "superseded by " + ref(nw) + ", " + nw.Time.UTC().Format(time.RFC3339)
		}
	}
	// Place each superseded candidate right below its replacement (after
	// any other candidates it replaced that rank higher), unless the query
	// names a value only it states (asksAbout): a question about the old
	// value asks about the superseded record, which keeps its rank (and
	// its label).
	out := make([]*candidate, 0, len(cands))
	placed := make(map[*candidate]bool)
	var place func(c *candidate)
	place = func(c *candidate) {
		if placed[c] {
			return
		}
		placed[c] = true
		out = append(out, c)
		for _, o := range cands {
			if o.super >= 0 && cands[o.super] == c && !asksAbout(query, o, c) {
				place(o)
			}
		}
	}
	for _, c := range cands {
		if c.super < 0 || asksAbout(query, c, cands[c.super]) {
			place(c)
		}
	}
	for _, c := range cands { // cycles cannot occur (time), but stay total
		place(c)
	}
	return foldRequests(out)
}

// foldRequests shows a recalled request with its Task's answer when that
// is recalled too: the answer (the first of its Task after the request,
// for the latest request before it) carries the request as its question,
// and the request is no item of its own. A request restates a question without its answer; what a Cycle
// needs is the answer, with what it answered. The answer keeps its own
// place: taking the request's (measured) put an answer that a later one
// replaced above its replacement, where supersession had not seen it.
func foldRequests(ranked []*candidate) []*candidate {
	questionOf := make(map[*candidate]*candidate) // answer -> request
	for _, q := range ranked {
		if q.Kind != KindUserMessage || q.FactID != "" {
			continue
		}
		var a *candidate
		for _, c := range ranked {
			if c.Kind == KindAssistantMessage && c.TaskID == q.TaskID && c.FactID == "" && c.Seq > q.Seq && (a == nil || c.Seq < a.Seq) {
				a = c
			}
		}
		if a != nil && (questionOf[a] == nil || questionOf[a].Seq < q.Seq) {
			questionOf[a] = q
		}
	}
	if len(questionOf) == 0 {
		return ranked
	}
	answerOf := make(map[*candidate]*candidate, len(questionOf))
	for a, q := range questionOf {
		a.question = q.text
		answerOf[q] = a
	}
	out := make([]*candidate, 0, len(ranked)-len(answerOf))
	for _, c := range ranked {
		if answerOf[c] == nil {
			out = append(out, c)
		}
	}
	return out
}

// asksAbout reports whether the query names a value (a term with a digit:
// a count, a date, an id) that old states and its replacement nw does
// not: "Who owns the service whose SMS queue backed up to 12,408
// messages?" asks about the reading that said 12,408, which a later
// reading superseded.
func asksAbout(query map[string]bool, old, nw *candidate) bool {
	for t := range query {
		if old.terms[t] && !nw.terms[t] && strings.ContainsAny(t, "0123456789") {
			return true
		}
	}
	return false
}

func better(a, b *candidate) bool {
	if a.rank != b.rank {
		return a.rank > b.rank
	}
	if !a.Time.Equal(b.Time) {
		return a.Time.After(b.Time)
	}
	return ref(a) > ref(b)
}

func ref(c *candidate) string {
	if c.FactID != "" {
		return "fact " + c.FactID
	}
	return c.TaskID + "/" + itoa(c.Seq)
}

func itoa(n uint64) string {
	var b [20]byte
	i := len(b)
	for {
		i--
		b[i] = byte('0' + n%10)
		n /= 10
		if n == 0 {
			return string(b[i:])
		}
	}
}

// sameDocument reports whether a and b read the same document (documentOf).
func sameDocument(a, b *candidate) bool {
	d := a.documentName()
	return d != "" && d == b.documentName()
}

// documentName is the document c read (documentOf), parsed the first time
// it is asked: a tool result's JSON is parsed only for the pairs that
// supersession compares by document.
func (c *candidate) documentName() string {
	if !c.documentRead {
		c.documentRead = true
		if c.Kind == KindToolResult {
			c.document = documentOf(c.text)
		}
	}
	return c.document
}

// documentOf names the document a tool result read: the "path" its JSON
// output names beside a "revision" (a version of the document's content,
// as files.read reports), or "" when it names none. A later read of the
// same document is a newer version of it: it supersedes the earlier one
// whatever the share of terms they have in common.
func documentOf(text string) string {
	if !strings.HasPrefix(strings.TrimSpace(text), "{") {
		return ""
	}
	var out struct {
		Path     string `json:"path"`
		Revision string `json:"revision"`
	}
	if json.Unmarshal([]byte(text), &out) != nil || out.Path == "" || out.Revision == "" {
		return ""
	}
	return out.Path
}

// states reports whether records of kind k state values that a later
// record can replace: answers, tool results and facts do; a request asks
// and a failure reports that something did not happen.
func states(k Kind) bool {
	return k == KindAssistantMessage || k == KindToolResult || k == KindFact
}

// sameSubject reports whether a later record speaks of the subject of an
// earlier one: most of the earlier one's terms (supersedeOverlap) occur in
// the later one, and they are a fair part of the later one's
// (supersedeShare), so a long record that happens to name a short one's
// entities does not replace it.
func sameSubject(old, nw map[string]bool) bool {
	if len(old) < supersedeMinTerms {
		return false
	}
	n := 0
	for t := range old {
		if nw[t] {
			n++
		}
	}
	return float64(n) >= supersedeOverlap*float64(len(old)) && float64(n) >= supersedeShare*float64(len(nw))
}

// termSet returns the distinct terms of text, without the field names of a
// files/tools JSON result that every such result shares.
func termSet(text string, json bool) map[string]bool {
	var tk tokenizer
	out := make(map[string]bool)
	tk.each(text, json, func(t []byte) bool {
		if !json || !jsonNoise[string(t)] {
			out[string(t)] = true
		}
		return len(out) < 4096
	})
	return out
}

// jsonNoise are the field names and literals of common tool results, which
// say nothing of their subject.
var jsonNoise = func() map[string]bool {
	m := make(map[string]bool)
	for _, w := range Terms("path revision content start_line end_line total_lines total_bytes truncated next_offset note excerpt true false null stdout stderr exit_code") {
		m[w] = true
	}
	return m
}()

// ownTerms counts, for each term, the Task's indexed records that the
// recall query is made of (its request, latest user message and latest
// answer: see RecallText) that contain it, and the number of those
// records (as the index counts them: each passage of a long one). Only these are counted: they are where the query's words come
// from, and reading the whole history on every Cycle would cost as much as
// the history is long (the Task's other records are excluded from the
// results all the same).
func ownTerms(history []*api.Event) (map[string]int, int) {
	var request, lastUser, lastAssistant *api.Event
	for _, ev := range history {
		switch ev.Body.(type) {
		case *api.Event_UserMessage:
			if request == nil {
				request = ev
			} else {
				lastUser = ev
			}
		case *api.Event_AssistantMessage:
			lastAssistant = ev
		}
	}
	own := make(map[string]int)
	docs := 0
	var tk tokenizer
	seen := make(map[string]bool)
	for _, ev := range []*api.Event{request, lastUser, lastAssistant} {
		if ev == nil {
			continue
		}
		_, text, json, _, _, ok := recordText(ev, nil)
		if !ok {
			continue
		}
		spans := passageSpans(text)
		if spans == nil {
			spans = [][2]int{{0, len(text)}}
		}
		for _, sp := range spans {
			docs++
			clear(seen)
			n := 0
			tk.each(text[sp[0]:sp[1]], json, func(t []byte) bool {
				if !seen[string(t)] {
					s := string(t)
					seen[s] = true
					own[s]++
				}
				n++
				return n < maxDocTokens
			})
		}
	}
	return own, docs
}

// secondHopNear is how near a query term an entity stands.
const secondHopNear = 3

// fuse combines each record's coordinated lexical relevance (lexical, in
// [0, 1]) with the cosine similarity of its vector to the query
// (similarity, at least floor): its relevance is the larger of the two,
// the cosine counted as semanticWeight times its share of the way from
// the floor to 1. So a record the words found keeps its relevance's size,
// a strong lexical match stays above any record its vector alone found,
// and a record found by its vector alone ranks by how near it is, not by
// its place in a list. Records are named by content hash; a record's
// passages count by their best.
//
// Reciprocal rank fusion, which this replaced, lost the lexical score's
// size (a relevance of 0.21 and one of 0.9 both became their rank's
// share) and interleaved the two lists: on the evaluation with GloVe
// vectors it cost complete@5 0.68 → 0.40–0.64 and exact questions' MRR
// 0.97 → 0.82–0.95; this keeps them (docs/memory.md).
func fuse(lexical, similarity map[uint64]float64, floor float64) map[uint64]float64 {
	out := make(map[uint64]float64, len(lexical)+len(similarity))
	for h, l := range lexical {
		out[h] = l
	}
	for h, sim := range similarity {
		share := 1.0
		if floor < 1 {
			share = min(max((sim-floor)/(1-floor), 0), 1)
		}
		out[h] = max(out[h], semanticWeight*share)
	}
	return out
}
