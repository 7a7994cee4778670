package memory

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/bits"
	"slices"
	"sort"
	"strings"
	"time"
	"unicode/utf8"

	"lemo/api"
	"lemo/excerpt"
	"lemo/persistence"
	"lemo/prompt"
)

// Recall's query and candidates.
const (
	// recallQueryTerms is how many of the query's terms recall uses: its
	// most specific (rarest) ones.
	recallQueryTerms = 16
	// focusBytes bounds each part of the latest focus that joins the query.
	focusBytes = 2 << 10
	// requestBytes bounds the part of the request that joins the query.
	requestBytes = 4 << 10
	// maxItemTokens bounds one recalled item; a longer record is recalled
	// as a labelled excerpt.
	maxItemTokens = 2500
)

// RecallText returns the text recall queries with: the Task's request
// (its first user message) and its latest focus (the latest user message,
// the latest assistant text and the arguments of the latest tool calls).
func RecallText(history []*api.Event) string {
	var request, lastUser, lastAssistant string
	var lastArgs []string
	for _, ev := range history {
		switch b := ev.Body.(type) {
		case *api.Event_UserMessage:
			if request == "" {
				request = b.UserMessage.GetText()
			} else {
				lastUser = b.UserMessage.GetText()
			}
		case *api.Event_AssistantMessage:
			lastAssistant = b.AssistantMessage.GetText()
			lastArgs = lastArgs[:0]
		case *api.Event_ToolCallRecorded:
			lastArgs = append(lastArgs, string(b.ToolCallRecorded.GetArguments()))
		}
	}
	parts := []string{excerpt.Head(request, requestBytes), excerpt.Tail(lastUser, focusBytes), excerpt.Tail(lastAssistant, focusBytes)}
	for _, a := range lastArgs {
		parts = append(parts, excerpt.Head(a, focusBytes/2))
	}
	return excerpt.Head(strings.Join(parts, "\n"), MaxQueryBytes)
}

// RecallQuery is what a Cycle recalls for.
type RecallQuery struct {
	Owner  string
	TaskID string
	// History is the Task's history; recall excludes what is already in it.
	History []*api.Event
}

// Recall's candidates.
const (
	// recallCandidates is how many records each hop considers.
	recallCandidates = 48
	// vectorCandidates is how many records the vector search adds to the
	// first hop (their fused rank falls fast: the 16th of one list alone
	// weighs 0.80 of the first's; more would cost reads and ranking work
	// for records the budget rarely has room for).
	vectorCandidates = 16
	// episodeSources is how many of the best first-hop records bring
	// their episode (see expandEpisode).
	episodeSources = 8
	// episodeEvents bounds the events read after a record for its episode.
	episodeEvents = 64
	// secondHopSources is how many of the best first-hop records give
	// their entities to the second hop, laterHopSources how many of the
	// records a hop found give theirs to the next, and maxHops how many
	// hops recall makes (the query's is the first). A third hop follows a
	// chain of three records ("10.4.3.21" → trk-03 → parcel-tracker → its
	// owner). Measured (complete@5): with the entity's records ordered by
	// the rank they reach, two hops 0.60, three 0.64 (before that order,
	// 0.48 either way); the third hop from the best one record of the
	// second, looking up two entities, completes as many as from two
	// records and four entities, at less cost (BenchmarkRecall100K p50
	// 2.2 ms with two records and four entities, 1.5-1.7 ms with one and
	// two, 1.2 ms without a third hop, all under load).
	secondHopSources = 3
	laterHopSources  = 1
	maxHops          = 3
	// hopEntities is how many entities the second hop looks up (the most
	// telling first; each is one search; half as many each later hop),
	// and secondHopPerEntity how many new records it takes of each.
	// Entities looked up by the second hop, 2, 4 or 8: the same figures.
	hopEntities        = 4
	secondHopPerEntity = 2
	// hopMaxDF: a name that more than this share of the records hold is
	// no entity to look up (it links everything, and its postings cost).
	// Swept on the evaluation (complete@5 on multi-hop): 0.05: 0.40;
	// 0.10: 0.48; no limit: 0.48 (a record must also hold a word its
	// source left open, which is what keeps a common name from linking
	// everything). 0.10 bounds the cost at the same figures.
	hopMaxDF = 0.1
	// maxEntityTerms bounds the terms of the entities a hop chooses from.
	maxEntityTerms = 1024
)

// Recall implements actors.Memory: the evidence from the owner's other
// Tasks most relevant to the Task's request and latest focus, best first,
// within Options.RecallTokens. It finds records in two hops (the query,
// then the entities of the first results), brings the episodes of matched
// requests and tool results (their answers, facts and conclusions), ranks
// them (rank.go: relevance, kind, hop, recency, automatic supersession)
// and keeps those whose relevance reaches Options.MinRelevance and that
// contain two of their query's terms; nothing when nothing does. The same
// content is recalled once, nothing already in the Task's conversation is
// recalled, and facts explicitly superseded are not recalled. It reads
// only: no score or record changes because something was recalled, and
// nothing recalled is indexed again.
func (m *Memory) Recall(ctx context.Context, q RecallQuery) ([]prompt.Evidence, error) {
	text := RecallText(q.History)
	if strings.TrimSpace(text) == "" {
		return nil, nil
	}
	sq := Query{Owner: q.Owner, Text: text, ExcludeTask: q.TaskID}
	if err := m.validQuery(&sq); err != nil {
		return nil, err
	}
	if err := m.waitLoaded(ctx); err != nil {
		return nil, err
	}
	conv := conversationTexts(q.History)
	// The cached result answers for the query and the recall's settings.
	key := fmt.Sprintf("%d/%d/%g\x00%s", m.opt.RecallTokens, m.opt.RecallItems, m.opt.MinRelevance, text)
	if cached, ok := m.recalls.get(q.Owner, q.TaskID, key, m.opt.RecallReuse); ok {
		out := make([]prompt.Evidence, 0, len(cached))
		for _, e := range cached {
			if !conv.has(e.Text) {
				out = append(out, e)
			}
		}
		return out, nil
	}
	gen := m.recalls.generation(q.Owner)
	m.recallsComputed.Add(1)
	own, ownDocs := ownTerms(q.History)
	qvec := m.embedQuery(ctx, text) // nil: lexical recall alone
	var out []prompt.Evidence
	err := m.view(func(v *persistence.Snapshot) error {
		r := recaller{m: m, v: v, ctx: ctx, owner: q.Owner, conv: conv, byHash: make(map[uint64]*candidate), inConv: make(map[uint64]bool), query: make(map[string]bool)}
		terms := Terms(text)
		for _, t := range terms {
			r.query[t] = true
		}
		segs, err := m.liveSegments(v, q.Owner)
		if err != nil {
			return err
		}
		pend, err := m.pendingSet(v, q.Owner)
		if err != nil {
			return err
		}
		// When passages of a few long records take most of the
		// recallCandidates places, the search looks further, so other
		// records keep theirs (widenFrom: one scoring pass either way).
		so := searchOpts{k: recallCandidates * passageWiden, widenFrom: recallCandidates, maxTerms: recallQueryTerms, own: own, ownDocs: ownDocs, evidenceBar: true, segs: segs, pend: pend, terms: terms}
		res, err := m.searchWith(v, &sq, so)
		if err != nil {
			return err
		}
		first, err := r.take(res, 1, 2, m.opt.MinRelevance, 0)
		if err != nil {
			return err
		}
		// The lexical ranking: relevance, kind and the coordination
		// factor (the share of the query, by idf, that the record holds;
		// see rank.go). The rank is set here so the episodes and the
		// hops start from the best records, not the newest.
		for i, t := range res.qterms {
			if res.held[i] {
				r.qorder = append(r.qorder, t)
				r.qidf = append(r.qidf, res.idf[i])
				r.qmass += res.idf[i]
			}
		}
		// Each candidate's content is one of first (add keeps a content
		// once), so its hash names it.
		lexical := make(map[uint64]float64, len(first))
		for _, c := range first {
			lexical[c.hash] = c.Relevance * r.coverage(c.words())
			c.rank = lexical[c.hash] * c.weight()
		}
		if qvec != nil {
			near, floors, err := m.emb.vecs.search(v, q.Owner, qvec, vectorCandidates, m.opt.MinSimilarity, m.opt.MinSimilarityMargin, q.TaskID)
			if err != nil {
				return err
			}
			// Nothing near enough: the lexical ranking stands as it is.
			if len(near) > 0 {
				// Fusion takes each record's coordinated lexical
				// relevance; the fused relevance then ranks (a record
				// found by its vector alone shares no words with the
				// query to coordinate).
				if first, err = r.fuseNear(first, lexical, near, floors); err != nil {
					return err
				}
				for _, c := range first {
					c.rank = c.Relevance * c.weight()
				}
			}
		}
		if len(first) == 0 {
			return nil
		}
		sort.SliceStable(first, func(i, j int) bool { return better(first[i], first[j]) })
		for _, c := range first[:min(len(first), episodeSources)] {
			if err := r.expandEpisode(c); err != nil {
				return err
			}
		}
		// The later hops (hop.go) start from the best records that state
		// something (not requests, which restate the query, nor
		// failures), each asking what it leaves open of the query of
		// the names it states beside the query's words. The query's
		// terms weigh by their idf (anchors); those no record holds do
		// not count toward coverage.
		anchors := make(map[string]float64)
		for t := range r.query {
			anchors[t] = 0
		}
		for i, t := range res.qterms {
			anchors[t] = res.idf[i]
		}
		var srcs []hopSource
		for _, c := range first {
			if len(srcs) < secondHopSources && states(c.Kind) {
				srcs = append(srcs, r.hopSource(c, res.qterms, anchors, nil, nil, nil))
			}
		}
		hso := searchOpts{own: own, ownDocs: ownDocs, minDF: 2, maxDFShare: hopMaxDF, segs: segs, pend: pend}
		for hop := 2; hop <= maxHops && len(srcs) > 0; hop++ {
			if srcs, err = r.hop(&sq, hso, srcs, hop, anchors); err != nil {
				return err
			}
			srcs = srcs[:min(len(srcs), laterHopSources)]
		}
		ranked := rankCandidates(r.all, m.opt.Now(), r.query)
		out = m.fit(ranked, r.query)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("memory: recall: %w", err)
	}
	// The Task's own records committed before this recall are in gen; the
	// cache counts those added after it as the Task's own.
	m.recalls.put(q.Owner, q.TaskID, key, gen, out)
	return out, nil
}

// hopSource is a record a later hop starts from: its rank, the query's
// terms it leaves open and the words its names stand beside.
type hopSource struct {
	c        *candidate
	text     string
	rank     float64
	residual []string
	anchors  map[string]float64
	// held are the query's terms the chain of records up to this one
	// holds.
	held map[string]bool
}

// hopSource makes c a source of a later hop: residual are the terms of
// open (the query's or what a previous hop left) that c does not hold;
// its anchors are the query's terms and, for a record a hop found, the
// entity it was found through.
func (r *recaller) hopSource(c *candidate, open []string, query map[string]float64, entity []string, entityIDF []float64, held map[string]bool) hopSource {
	s := hopSource{c: c, text: c.text, rank: c.rank, anchors: query, held: make(map[string]bool)}
	for t := range held {
		s.held[t] = true
	}
	if s.rank == 0 {
		s.rank = c.Relevance * c.weight()
	}
	if c.PassageTo > 0 {
		s.text = c.text[c.PassageFrom:c.PassageTo] // what matched
	}
	terms := c.words()
	for _, t := range open {
		if !terms[t] {
			s.residual = append(s.residual, t)
		}
	}
	for t := range r.held(c) {
		s.held[t] = true
	}
	if len(entity) > 0 {
		s.anchors = make(map[string]float64, len(query)+len(entity))
		for t, w := range query {
			s.anchors[t] = w
		}
		for i, t := range entity {
			s.anchors[t] = entityIDF[i]
		}
	}
	return s
}

// hop looks up the entities its sources name (hop.go), the most telling
// first, one search each: the records that name the entity and hold a
// term its sources left open, scored on the entity and those terms. Each
// ranks at its source's rank times episodeWeight times its relevance to
// that search (its score over that of a perfect match) times the
// entity's weight, at most secondHopPerEntity new records per entity; a
// record already found keeps the better of its ranks. An entity too rare
// (only one record names it) or too common to link is skipped; at most
// hopEntities are looked up. It returns the new records that leave
// something open, as the next hop's sources, best first.
func (r *recaller) hop(sq *Query, so searchOpts, srcs []hopSource, hop int, query map[string]float64) ([]hopSource, error) {
	found := make([][]hopEntity, len(srcs))
	for i, s := range srcs {
		if len(s.residual) > 0 { // else it answers all the query asks
			found[i] = nearEntities(s.text, s.c.Kind == KindToolResult, s.anchors)
		}
	}
	rank := make([]float64, len(srcs))
	for i, s := range srcs {
		rank[i] = s.rank
	}
	ents := chooseEntities(found, rank, maxEntityTerms)
	var next []hopSource
	looked := 0
	for _, e := range ents {
		if looked == hopEntities>>(hop-2) {
			break
		}
		open := make(map[string]bool)
		for _, si := range e.sources {
			for _, t := range srcs[si].residual {
				open[t] = true
			}
		}
		so.links = [][]string{e.terms}
		so.terms = so.terms[:0]
		for t := range open {
			so.terms = append(so.terms, t)
		}
		sort.Strings(so.terms)
		so.k = secondHopPerEntity + 4
		res, err := r.m.searchWith(r.v, sq, so)
		if err != nil {
			return nil, err
		}
		if res.links == nil || res.links[0] == 0 {
			continue // not an entity: too rare or too common
		}
		looked++
		bit := make(map[string]uint32, len(res.qterms))
		perfect := 0.0
		for i, t := range res.qterms {
			bit[t] = 1 << uint(i)
			perfect += res.idf[i] * (bm25K1 + 1)
		}
		hits, err := r.m.hits(r.v, r.owner, res)
		if err != nil {
			return nil, err
		}
		// The entity's records, best first by the rank they reach (the
		// chain's coverage, not the search's score: a record that
		// answers more of what was left open comes first).
		type linked struct {
			h         *Hit
			rel, best float64
			src       int
		}
		var ls []linked
		for i := range hits {
			h := &hits[i]
			if h.SupersededBy != "" || perfect == 0 {
				continue
			}
			l := linked{h: h, rel: min(h.Score/perfect, 1), src: -1}
			for _, si := range e.sources {
				chain := make(map[string]bool, len(srcs[si].held)+len(res.qterms))
				for t := range srcs[si].held {
					chain[t] = true
				}
				for i, t := range res.qterms {
					if h.mask&(1<<uint(i)) != 0 && r.query[t] {
						chain[t] = true
					}
				}
				if rk := srcs[si].rank * episodeWeight * r.coverage(chain) * e.weight; rk > l.best {
					l.best, l.src = rk, si
				}
			}
			if l.best > 0 {
				ls = append(ls, l)
			}
		}
		sort.SliceStable(ls, func(i, j int) bool {
			return ls[i].best*kindWeight(ls[i].h.Kind) > ls[j].best*kindWeight(ls[j].h.Kind)
		})
		taken := 0
		for _, l := range ls {
			h, best := l.h, l.best
			if taken == secondHopPerEntity {
				break
			}
			if have := r.byHash[h.hash]; have != nil {
				if have.rank == 0 {
					have.rank = have.Relevance * have.weight()
				}
				have.rank = max(have.rank, best*have.weight())
				continue
			}
			c, err := r.add(h, e.terms...)
			if err != nil {
				return nil, err
			}
			if c == nil {
				continue
			}
			taken++
			c.hop, c.rank, c.Relevance = hop, best*c.weight(), l.rel
			if err := r.expandEpisode(c); err != nil {
				return nil, err
			}
			if states(c.Kind) {
				var idf []float64
				for _, t := range e.terms {
					idf = append(idf, res.idf[bits.TrailingZeros32(bit[t])])
				}
				if ns := r.hopSource(c, srcs[l.src].residual, query, e.terms, idf, srcs[l.src].held); len(ns.residual) > 0 {
					next = append(next, ns)
				}
			}
		}
	}
	sort.SliceStable(next, func(i, j int) bool { return next[i].rank > next[j].rank })
	return next, nil
}

// recaller gathers one recall's candidates, each content once.
type recaller struct {
	m      *Memory
	v      *persistence.Snapshot
	ctx    context.Context
	owner  string
	conv   *convTexts
	all    []*candidate
	byHash map[uint64]*candidate
	// inConv, when not nil, holds the hashes of event records found in
	// the conversation (addIf).
	inConv map[uint64]bool
	// query is the query's terms; qorder those the search used that some
	// record holds, in the search's order, with their idf (qidf) and its
	// sum (qmass).
	query  map[string]bool
	qorder []string
	qidf   []float64
	qmass  float64
}

// held returns the query's terms that c holds (in the passage that
// matched, for a long record).
func (r *recaller) held(c *candidate) map[string]bool {
	terms := c.words()
	out := make(map[string]bool)
	for t := range r.query {
		if terms[t] {
			out[t] = true
		}
	}
	return out
}

// coverage is the share of the query (by idf) that the terms held hold
// (a record's words or the query terms of a chain: only the query's
// count). It adds in the query's order: a sum in a map's order differs in
// its last bits from one call to the next, which decided between records
// that tie (the evaluation's runs differed by a question or two).
func (r *recaller) coverage(held map[string]bool) float64 {
	if r.qmass == 0 {
		return 0
	}
	got := 0.0
	for i, t := range r.qorder {
		if held[t] {
			got += r.qidf[i]
		}
	}
	return got / r.qmass
}

// take turns a search's results into candidates: those relevant enough
// (minRel, and matching minMatched of the query's terms), not superseded
// by a fact, not in the conversation, each content once (a content already
// a candidate keeps its better rank), at most limit new ones when limit is
// positive. It returns the new candidates.
func (r *recaller) take(res *searchResult, hop, minMatched int, minRel float64, limit int) ([]*candidate, error) {
	// The hits of the candidates the loop below would pass over (too
	// little relevance, too few of the query's terms) are not made: their
	// rows are not read. The loop keeps its checks.
	need := min(minMatched, res.terms)
	keep := func(c *scored) bool {
		return res.relevance(c) >= minRel && bits.OnesCount32(c.matched) >= need
	}
	var out []*candidate
	err := r.m.eachHit(r.v, r.owner, res, keep, func(h *Hit) (bool, error) {
		if limit > 0 && len(out) == limit {
			return false, nil
		}
		if h.Relevance < minRel {
			return false, nil // hits are in score order
		}
		// One shared word is not relevance: a record must contain two
		// of the query's terms (the one, for a one-term query); the
		// second hop's terms are entities, one of which links.
		if h.Matched < min(minMatched, h.QueryTerms) || h.SupersededBy != "" {
			return true, nil
		}
		if have := r.byHash[h.hash]; have != nil {
			if hop == 1 && have.hop == 2 {
				have.hop, have.Relevance, have.rank = 1, h.Relevance, 0
			}
			return true, nil
		}
		c, err := r.add(h)
		if err != nil {
			return false, err
		}
		if c != nil {
			c.hop = hop
			out = append(out, c)
		}
		return true, nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// fuseNear adds the records found by their vectors to the first hop's
// candidates and gives every candidate its fused relevance (fuse): a
// record the lexical search did not find needs the strict floor, or the
// eased one when it holds a word of the query (vecFloors).
func (r *recaller) fuseNear(first []*candidate, lexical map[uint64]float64, near []vecHit, floors vecFloors) ([]*candidate, error) {
	similarity := make(map[uint64]float64, len(near))
	for _, n := range near {
		task, seq, fact, from, to, ok := parseDocRef(n.ref)
		if !ok {
			return nil, fmt.Errorf("%w: ref %q", errCorrupt, n.ref)
		}
		if fact != "" {
			// A fact superseded explicitly is not recalled.
			if by, err := supersededBy(r.v, r.owner, fact); err != nil || by != "" {
				if err != nil {
					return nil, err
				}
				continue
			}
		}
		if r.byHash[n.meta.hash] == nil {
			h := Hit{TaskID: task, Seq: seq, FactID: fact, Kind: n.meta.kind, Time: time.UnixMilli(n.meta.time).UTC(), Source: n.meta.source,
				TextBytes: int(n.meta.textBytes), Untrusted: n.meta.untrusted, hash: n.meta.hash, PassageFrom: from, PassageTo: to}
			c, err := r.addIf(&h, func(c *candidate) bool {
				return floors.admits(n.similarity, r.sharesWord(c))
			})
			if err != nil {
				return nil, err
			}
			if c == nil {
				continue
			}
			c.hop = 1
			first = append(first, c)
		}
		similarity[n.meta.hash] = max(similarity[n.meta.hash], n.similarity)
	}
	rel := fuse(lexical, similarity, floors.eased)
	for _, c := range first {
		c.Relevance = rel[c.hash]
	}
	sort.SliceStable(first, func(i, j int) bool { return first[i].Relevance > first[j].Relevance })
	return first, nil
}

// episodeRank is the rank of what src's episode brings (addEpisode): just
// below src, and further below when src is a tool result, whose
// conclusion restates it (conclusionWeight).
func episodeRank(src *candidate) float64 {
	rank := src.Relevance * src.weight() * episodeWeight
	if src.hop == 1 && src.rank > 0 {
		rank = src.rank * episodeWeight
	}
	if src.hop >= 2 {
		// A later hop's request links the entity to its Task's answer:
		// the answer takes the request's rank without the request's
		// weight.
		rank = src.rank / src.weight() * episodeWeight
	}
	if src.Kind == KindToolResult {
		rank *= conclusionWeight
	}
	return rank
}

// add reads a hit's text and makes it a candidate, unless its content is
// already one or is in the conversation (nil then).
func (r *recaller) add(h *Hit, also ...string) (*candidate, error) {
	return r.addIf(h, nil, also...)
}

// addIf is add for a candidate that keep (when not nil) accepts.
func (r *recaller) addIf(h *Hit, keep func(*candidate) bool, also ...string) (*candidate, error) {
	if err := r.ctx.Err(); err != nil {
		return nil, err
	}
	// An event record's hash is its text's (a fact's is of the text it
	// is indexed by): one found in the conversation names every record
	// of that text, as byHash does for those recalled.
	if h.FactID == "" && r.inConv != nil && r.inConv[h.hash] {
		return nil, nil
	}
	text, err := r.m.recordText(r.v, r.owner, h)
	if errors.Is(err, persistence.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if r.conv.has(text) {
		if h.FactID == "" && r.inConv != nil {
			r.inConv[h.hash] = true
		}
		return nil, nil
	}
	c := &candidate{Hit: *h, text: text}
	if h.Kind == KindUserMessage {
		c.other = 1 - sameQuestion(text, r.query, also)
	}
	if h.PassageTo > len(text) || h.PassageFrom >= h.PassageTo {
		// Bounds that do not fit the text: the record is measured whole
		// (words takes the passage that matched otherwise).
		c.PassageFrom, c.PassageTo = 0, 0
	}
	if keep != nil && !keep(c) {
		return nil, nil
	}
	r.byHash[h.hash] = c
	r.all = append(r.all, c)
	return c, nil
}

// sharesWord reports whether c holds a word of the query.
func (r *recaller) sharesWord(c *candidate) bool {
	for t := range c.words() {
		if r.query[t] {
			return true
		}
	}
	return false
}

// expandEpisode adds what the episode of a matched record concluded: for
// a request, its Task's answer to it and the facts recorded on the way;
// for a tool result or a failure, the conclusion the model drew next. Each
// ranks just below the record that brought it (episodeWeight).
func (r *recaller) expandEpisode(src *candidate) error {
	if src.FactID != "" || src.Kind == KindAssistantMessage || src.Seq == 0 {
		return nil
	}
	var answer *api.Event
	var factCalls []string
	for seq := src.Seq + 1; seq <= src.Seq+episodeEvents; seq++ {
		ev, err := r.v.Event(src.TaskID, seq)
		if errors.Is(err, persistence.ErrNotFound) {
			break
		}
		if err != nil {
			return err
		}
		if ev.GetUserMessage() != nil {
			break // the next request starts another episode
		}
		if a := ev.GetAssistantMessage(); a != nil && strings.TrimSpace(a.GetText()) != "" {
			answer = ev
			if src.Kind != KindUserMessage {
				break // a result's conclusion is the next answer
			}
		}
		if c := ev.GetToolCallRecorded(); c != nil && c.GetTool() == "memory.record" && src.Kind == KindUserMessage {
			factCalls = append(factCalls, c.GetCallId())
		}
		if res := ev.GetToolResult(); res != nil && slices.Contains(factCalls, res.GetCallId()) {
			var out struct{ ID string }
			if json.Unmarshal(res.GetRetainedOutput(), &out) == nil && out.ID != "" {
				if err := r.addFact(src, out.ID); err != nil {
					return err
				}
			}
		}
	}
	if answer == nil {
		return nil
	}
	_, text, _, source, _, _ := recordText(answer, nil)
	h := Hit{TaskID: src.TaskID, Seq: answer.GetSeq(), Kind: KindAssistantMessage, Time: answer.GetTime().AsTime().UTC(), Source: source,
		Relevance: src.Relevance, hash: contentHash(text)}
	return r.addEpisode(src, &h, text)
}

func (r *recaller) addFact(src *candidate, id string) error {
	f, err := readFact(r.v, r.owner, id)
	if errors.Is(err, persistence.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	if by, err := supersededBy(r.v, r.owner, id); err != nil || by != "" {
		return err
	}
	h := Hit{TaskID: f.Task, FactID: f.ID, Kind: KindFact, Time: f.Time, Source: f.source(), Relevance: src.Relevance, hash: contentHash(f.Content)}
	return r.addEpisode(src, &h, f.Content)
}

func (r *recaller) addEpisode(src *candidate, h *Hit, text string) error {
	rank := episodeRank(src)
	if have := r.byHash[h.hash]; have != nil {
		if have.rank < rank && have.hop != 1 {
			have.rank = rank
		}
		return nil
	}
	if r.conv.has(text) {
		return nil
	}
	c := &candidate{Hit: *h, text: text, hop: src.hop, episode: true, rank: rank}
	r.byHash[h.hash] = c
	r.all = append(r.all, c)
	return nil
}

// fit renders the ranked candidates as evidence within the recall budget,
// in order, skipping what does not fit.
func (m *Memory) fit(ranked []*candidate, query map[string]bool) []prompt.Evidence {
	budget := m.opt.RecallTokens - prompt.RecallOverhead
	used := 0
	var out []prompt.Evidence
	for _, c := range ranked {
		if budget-used <= 0 || (m.opt.RecallItems > 0 && len(out) >= m.opt.RecallItems) {
			break
		}
		source := c.Source
		if c.supersededBy != "" {
			source += "; " + c.supersededBy
		}
		e := prompt.Evidence{TaskID: c.TaskID, Seq: c.Seq, Kind: c.Kind.String(), Time: c.Time, Source: source,
			Text: c.text, Question: questionLine(c.question), Score: math.Round(c.rank*1000) / 1000, Untrusted: c.Untrusted}
		if c.PassageTo > 0 {
			e.Text = passageEvidence(&c.Hit, c.text)
		}
		t := prompt.EvidenceTokens(&e)
		if t > maxItemTokens {
			keep := maxItemTokens - (t - prompt.Estimate(c.text))
			if x, ok := passageExcerpt(&c.Hit, c.text, query, keep); ok {
				e.Text = x
			} else {
				e.Text = excerptEvidence(&c.Hit, c.text, keep)
			}
			t = prompt.EvidenceTokens(&e)
		}
		if used+t > budget {
			continue
		}
		used += t
		out = append(out, e)
	}
	return out
}

// questionLine is the request an answer answered, as its evidence shows it:
// at most maxQuestionBytes (cut at a rune, marked), on one line.
func questionLine(q string) string {
	q = strings.Join(strings.Fields(q), " ")
	if len(q) <= maxQuestionBytes {
		return q
	}
	return excerpt.Head(q, maxQuestionBytes) + " […]"
}

// maxQuestionBytes bounds the request an answer's evidence shows.
const maxQuestionBytes = 400

// passageEvidence shows the passage of a long record that matched (the
// record is indexed as passages: passage.go), labelled with where it lies
// and the record's handle.
func passageEvidence(h *Hit, text string) string {
	l := fmt.Sprintf("[… excerpt: bytes %d-%d of this record's %d, the passage that matches", h.PassageFrom, h.PassageTo, len(text))
	if h.Seq > 0 {
		l += "; the whole record: " + prompt.Handle(h.TaskID, h.Seq)
	}
	l += "]\n" + text[h.PassageFrom:h.PassageTo]
	if h.PassageTo < len(text) {
		l += "\n[…]"
	}
	return l
}

// passageExcerpt returns the passage of a long record that holds the most
// of the query's terms, about keep tokens of it, labelled with where it
// lies and the record's handle; ok is false when no passage holds a query
// term more than the record's head does (the head and tail excerpt is
// then as good).
func passageExcerpt(h *Hit, text string, query map[string]bool, keep int) (string, bool) {
	label := func(from, to int) string {
		l := fmt.Sprintf("[… excerpt: bytes %d-%d of this record's %d, the passage that matches", from, to, len(text))
		if h.Seq > 0 {
			l += "; the whole record: " + prompt.Handle(h.TaskID, h.Seq)
		}
		return l + "]"
	}
	room := (keep - prompt.Estimate(label(len(text), len(text))) - 4) * 4 // bytes, ASCII estimate
	if room <= 0 || len(text) <= room {
		return "", false
	}
	score := func(from, to int) int {
		var tk tokenizer
		seen := make(map[string]bool)
		tk.each(text[from:to], true, func(t []byte) bool {
			if query[string(t)] {
				seen[string(t)] = true
			}
			return true
		})
		return len(seen)
	}
	step := max(room/4, 64)
	bestFrom, best := 0, score(0, room)
	for from := step; from < len(text)-step; from += step {
		to := min(from+room, len(text))
		if n := score(from, to); n > best {
			bestFrom, best = from, n
		}
	}
	if bestFrom == 0 || best == 0 {
		return "", false
	}
	from, to := bestFrom, min(bestFrom+room, len(text))
	// Cut on rune boundaries, at line breaks when near.
	for from > 0 && !utf8.RuneStart(text[from]) {
		from--
	}
	for to < len(text) && !utf8.RuneStart(text[to]) {
		to--
	}
	if i := strings.IndexByte(text[from:to], '\n'); i >= 0 && i < 160 {
		from += i + 1
	}
	if i := strings.LastIndexByte(text[from:to], '\n'); i > 0 && to-(from+i) < 160 {
		to = from + i
	}
	return label(from, to) + "\n" + text[from:to] + "\n[…]", true
}

// excerptEvidence shortens a long recalled record, naming its handle.
func excerptEvidence(h *Hit, text string, keep int) string {
	label := fmt.Sprintf("[… excerpt: this record has %d bytes; the middle was left out here", len(text))
	if h.Seq > 0 {
		label += "; the whole record: " + prompt.Handle(h.TaskID, h.Seq)
	}
	label += "]"
	return prompt.Excerpt(text, keep-prompt.Estimate(label)-2, label)
}

// convTexts indexes the indexable records of a Task's conversation by the
// length of their trimmed text, so a candidate is compared only with
// records of its own length (and no text is copied to build it). Failure
// records' texts are formatted, not stored, so they are made and indexed
// only when a candidate is first compared: most Cycles' recalls compare
// none, and a conversation of failed calls formatted every one of them at
// every Cycle.
type convTexts struct {
	history []*api.Event
	byLen   map[int][]int
	// failures are the failure records not yet indexed; texts holds the
	// trimmed texts of those indexed.
	failures []int
	texts    map[int]string
}

func conversationTexts(history []*api.Event) *convTexts {
	c := &convTexts{history: history, byLen: make(map[int][]int)}
	for i, ev := range history {
		n := -1
		switch b := ev.Body.(type) {
		case *api.Event_UserMessage:
			n = len(strings.TrimSpace(b.UserMessage.GetText()))
		case *api.Event_AssistantMessage:
			n = len(strings.TrimSpace(b.AssistantMessage.GetText()))
		case *api.Event_ToolResult:
			n = len(bytes.TrimSpace(b.ToolResult.GetRetainedOutput()))
		case *api.Event_ToolFailed, *api.Event_Failure:
			c.failures = append(c.failures, i)
		}
		if n > 0 {
			c.byLen[n] = append(c.byLen[n], i)
		}
	}
	return c
}

// indexFailures formats the failure records' texts and indexes them.
func (c *convTexts) indexFailures() {
	if len(c.failures) == 0 {
		return
	}
	c.texts = make(map[int]string, len(c.failures))
	for _, i := range c.failures {
		if _, text, _, _, _, ok := recordText(c.history[i], nil); ok {
			if t := strings.TrimSpace(text); t != "" {
				c.texts[i] = t
				c.byLen[len(t)] = append(c.byLen[len(t)], i)
			}
		}
	}
	c.failures = nil
}

func (c *convTexts) has(text string) bool {
	c.indexFailures()
	t := strings.TrimSpace(text)
	for _, i := range c.byLen[len(t)] {
		if s, ok := c.texts[i]; ok {
			if s == t {
				return true
			}
			continue
		}
		if _, s, _, _, _, ok := recordText(c.history[i], nil); ok && strings.TrimSpace(s) == t {
			return true
		}
	}
	return false
}
