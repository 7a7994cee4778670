package memory

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
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
	// their entities to the second hop, and secondHopTermCount how many
	// of those (the rarest) it queries with.
	secondHopSources = 3
	// secondHopEntities is how many entities the second hop looks up, and
	// secondHopPerEntity how many records it takes of each.
	secondHopEntities  = 4
	secondHopPerEntity = 2
	// secondHopMaxDF: a word held by more than this share of the records
	// is no entity.
	secondHopMaxDF = 0.05
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
		r := recaller{m: m, v: v, ctx: ctx, owner: q.Owner, conv: conv, byHash: make(map[uint64]*candidate)}
		segs, err := m.liveSegments(v, q.Owner)
		if err != nil {
			return err
		}
		pend, err := m.pendingSet(v, q.Owner)
		if err != nil {
			return err
		}
		so := searchOpts{k: recallCandidates, maxTerms: recallQueryTerms, own: own, ownDocs: ownDocs, evidenceBar: true, segs: segs, pend: pend}
		res, err := m.searchWith(v, &sq, so)
		if err != nil {
			return err
		}
		if len(res.cands) == so.k && fewRecords(res.cands) {
			// Passages of a few long records took most places: look
			// further, so other records keep theirs.
			so.k *= passageWiden
			if res, err = m.searchWith(v, &sq, so); err != nil {
				return err
			}
		}
		first, err := r.take(res, 1, 2, m.opt.MinRelevance, 0)
		if err != nil {
			return err
		}
		if qvec != nil {
			near, err := m.emb.vecs.search(v, q.Owner, qvec, vectorCandidates, m.opt.MinSimilarity, q.TaskID)
			if err != nil {
				return err
			}
			// Nothing near enough: the lexical ranking stands as it is.
			if len(near) > 0 {
				if first, err = r.fuseNear(first, near); err != nil {
					return err
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
		// The second hop starts from the best records that state
		// something (not requests, which restate the query, nor failures).
		var texts []string
		for _, c := range first {
			if len(texts) < secondHopSources && states(c.Kind) {
				if c.PassageTo > 0 {
					texts = append(texts, c.text[c.PassageFrom:c.PassageTo]) // what matched
				} else {
					texts = append(texts, c.text)
				}
			}
		}
		// Each entity is looked up on its own: a record that links it to
		// something else is short and names it, whatever else it says.
		best := first[0].Relevance * kindWeight(first[0].Kind)
		looked := 0
		for _, term := range secondHopTerms(text, texts, maxSecondHopTerms) {
			if looked == secondHopEntities {
				break
			}
			res2, err := m.searchWith(v, &sq, searchOpts{k: secondHopPerEntity + 4, own: own, ownDocs: ownDocs, minDF: 2, maxDFShare: secondHopMaxDF, terms: []string{term}, segs: segs, pend: pend})
			if err != nil {
				return err
			}
			if res2.perfect == 0 {
				continue // not an entity: too rare or too common
			}
			looked++
			second, err := r.take(res2, 2, 1, m.opt.MinRelevance, secondHopPerEntity)
			if err != nil {
				return err
			}
			for _, c := range second {
				c.rank = c.Relevance * kindWeight(c.Kind) * secondHopWeight * best
				if err := r.expandEpisode(c); err != nil {
					return err
				}
			}
		}
		ranked := rankCandidates(r.all, m.opt.Now())
		query := make(map[string]bool)
		for _, t := range Terms(text) {
			query[t] = true
		}
		out = m.fit(ranked, query)
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

// recaller gathers one recall's candidates, each content once.
type recaller struct {
	m      *Memory
	v      *persistence.Snapshot
	ctx    context.Context
	owner  string
	conv   *convTexts
	all    []*candidate
	byHash map[uint64]*candidate
}

// take turns a search's results into candidates: those relevant enough
// (minRel, and matching minMatched of the query's terms), not superseded
// by a fact, not in the conversation, each content once (a content already
// a candidate keeps its better rank), at most limit new ones when limit is
// positive. It returns the new candidates.
func (r *recaller) take(res *searchResult, hop, minMatched int, minRel float64, limit int) ([]*candidate, error) {
	hits, err := r.m.hits(r.v, r.owner, res)
	if err != nil {
		return nil, err
	}
	var out []*candidate
	for i := range hits {
		h := &hits[i]
		if limit > 0 && len(out) == limit {
			break
		}
		if h.Relevance < minRel {
			break // hits are in score order
		}
		// One shared word is not relevance: a record must contain two
		// of the query's terms (the one, for a one-term query); the
		// second hop's terms are entities, one of which links.
		if h.Matched < min(minMatched, h.QueryTerms) || h.SupersededBy != "" {
			continue
		}
		if have := r.byHash[h.hash]; have != nil {
			if hop == 1 && have.hop == 2 {
				have.hop, have.Relevance, have.rank = 1, h.Relevance, 0
			}
			continue
		}
		c, err := r.add(h)
		if err != nil {
			return nil, err
		}
		if c != nil {
			c.hop = hop
			out = append(out, c)
		}
	}
	return out, nil
}

// fuseNear adds the records found by their vectors to the first hop's
// candidates and gives every candidate its fused relevance (fuse).
func (r *recaller) fuseNear(first []*candidate, near []vecHit) ([]*candidate, error) {
	lexical := make([]uint64, len(first))
	for i, c := range first {
		lexical[i] = c.hash
	}
	var semantic []uint64
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
		semantic = append(semantic, n.meta.hash)
		if r.byHash[n.meta.hash] != nil {
			continue
		}
		h := Hit{TaskID: task, Seq: seq, FactID: fact, Kind: n.meta.kind, Time: time.UnixMilli(n.meta.time).UTC(), Source: n.meta.source,
			TextBytes: int(n.meta.textBytes), Untrusted: n.meta.untrusted, hash: n.meta.hash, PassageFrom: from, PassageTo: to}
		c, err := r.add(&h)
		if err != nil {
			return nil, err
		}
		if c != nil {
			c.hop = 1
			first = append(first, c)
		}
	}
	rel := fuse(lexical, semantic)
	for _, c := range first {
		c.Relevance = rel[c.hash]
	}
	sort.SliceStable(first, func(i, j int) bool { return first[i].Relevance > first[j].Relevance })
	return first, nil
}

// add reads a hit's text and makes it a candidate, unless its content is
// already one or is in the conversation (nil then).
func (r *recaller) add(h *Hit) (*candidate, error) {
	if err := r.ctx.Err(); err != nil {
		return nil, err
	}
	text, err := r.m.recordText(r.v, r.owner, h)
	if errors.Is(err, persistence.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if r.conv.has(text) {
		return nil, nil
	}
	c := &candidate{Hit: *h, text: text}
	if h.PassageTo > len(text) || h.PassageFrom >= h.PassageTo {
		c.PassageFrom, c.PassageTo = 0, 0
	} else if h.PassageTo > 0 {
		// What the record says is measured on the passage that matched.
		c.terms = termSet(text[h.PassageFrom:h.PassageTo], h.Kind == KindToolResult)
	}
	r.byHash[h.hash] = c
	r.all = append(r.all, c)
	return c, nil
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
	rank := src.Relevance * kindWeight(src.Kind) * episodeWeight
	if src.hop == 2 {
		// A second-hop request links the entity to its Task's answer:
		// the answer takes the request's rank without the request's
		// weight.
		rank = src.rank / kindWeight(src.Kind) * episodeWeight
	}
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
			Text: c.text, Score: math.Round(c.rank*1000) / 1000, Untrusted: c.Untrusted}
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
