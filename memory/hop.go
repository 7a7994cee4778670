package memory

import (
	"slices"
	"sort"
	"strings"
	"unicode"
	"unicode/utf8"
)

// The later hops of recall (recall.go) follow a link: a record the query
// found names something (a host, a service, a person) beside the query's
// words, and the question's remaining words ask about that thing. "Who
// owns the service that runs on trk-03?" finds "trk-03 runs
// parcel-tracker"; what is left of the question ("owns", "service") is
// then asked of parcel-tracker, which finds "Rafael Duarte owns
// parcel-tracker". So a hop takes from each of its source records:
//   - the residual: the query's terms the record does not hold (what it
//     leaves unanswered); a record that holds them all needs no next hop;
//   - its entities: the names that stand in the same clause as one of the
//     query's words, within secondHopNear names of it. A name is a
//     compound word, its parts joined by '-', '.' or '_' ("parcel-tracker",
//     "pg-main-1", "10.4.3.21"): a record links it only when it holds
//     every part. A clause ends at a line break, a semicolon, a bracket, a
//     quote, a bar or a sentence's or list's punctuation (',', '.', '!',
//     '?' followed by a space): "bil-app-02 runs ledger-api, trk-03 runs
//     parcel-tracker" links trk-03 with parcel-tracker, not with
//     ledger-api. A comma within data ("Antwerp,54,71") does not end one.
//     A heading (a line that starts with '#') names what the lines of its
//     section speak of, so its names stand beside the query words of its
//     section too ("## inventory-sync" over "Purpose: pulls stock levels
//     from the warehouse"); a listing's line numbers ("    31\t", as
//     files.read shows a file) are no names.
// The hop's one search looks for records that hold an entity and at least
// one residual term; each ranks at its source's rank times episodeWeight
// times its coverage, the share of the residual (by idf) it holds: a
// record that answers all of what its source left open ranks just below
// it, as an episode's answer does.

// hopEntity is a name a hop links through.
type hopEntity struct {
	terms []string
	// weight is how specific the query words it stands beside are: the
	// greatest idf of an anchor term within secondHopNear names of it in
	// its clause, over the greatest idf of an anchor term the text holds
	// (1: it stands beside the text's most specific query word).
	weight float64
	// dist is its least distance to a query word (in names), first its
	// first position; sources lists the hop's sources that name it.
	dist, first int
	sources     []int
	// reach is the best of its sources' ranks times its weight.
	reach float64
}

// compound is one name of a text: the terms of a word whose parts are
// joined by '-', '.' or '_', and the clause it stands in.
type compound struct {
	terms  []string
	clause int
	// section is the clause of the heading the name stands under (a
	// line that starts with '#', after a listing's line number), -1
	// under none; heading is set for a name of the heading itself.
	section int
	heading bool
}

// maxCompoundTerms: a longer run of joined parts is no name (a path, a
// dotted identifier of many parts); it is left out.
const maxCompoundTerms = 4

// compounds splits text into its names, in order, each with its clause
// (see above). In JSON mode (a tool result) the escapes of a JSON string
// are read: "\n" ends a clause, "\t" separates, "\uXXXX" is its rune.
func compounds(text string, json bool) []compound {
	var out []compound
	var raw []byte
	clause := 0
	section, heading, lineStart := -1, false, true
	var tk tokenizer
	flush := func() {
		if len(raw) == 0 {
			return
		}
		var terms []string
		tk.each(string(raw), false, func(t []byte) bool {
			if !json || !jsonNoise[string(t)] {
				terms = append(terms, string(t))
			}
			return len(terms) <= maxCompoundTerms
		})
		raw = raw[:0]
		if len(terms) > 0 && len(terms) <= maxCompoundTerms {
			out = append(out, compound{terms: terms, clause: clause, section: section, heading: heading})
		}
	}
	isWord := func(r rune) bool {
		return unicode.IsLetter(r) || unicode.IsDigit(r) || unicode.Is(unicode.Mn, r)
	}
	// next decodes the rune at i (a JSON escape in JSON mode) and returns
	// it, its width, and whether it is a line break.
	next := func(i int) (rune, int, bool) {
		c := text[i]
		if json && c == '\\' && i+1 < len(text) {
			switch text[i+1] {
			case 'n', 'r':
				return '\n', 2, true
			case 't':
				return '\t', 2, false
			case 'u':
				if i+6 <= len(text) {
					if r, ok := hex4(text[i+2 : i+6]); ok {
						return r, 6, r == '\n'
					}
				}
			}
			return rune(text[i+1]), 2, false
		}
		if c < utf8.RuneSelf {
			return rune(c), 1, c == '\n' || c == '\r'
		}
		r, n := utf8.DecodeRuneInString(text[i:])
		return r, n, false
	}
	width := func(i int) int {
		_, n, _ := next(i)
		return n
	}
	for i := 0; i < len(text); {
		r, n, br := next(i)
		i += n
		if lineStart && !br {
			lineStart = false
			// A listing's line number ("    31\t") is no name; a line
			// that starts with '#' after it is a heading.
			j, c := i-n, r
			for (c == ' ' || (c >= '0' && c <= '9')) && j < len(text) {
				j += width(j)
				if j < len(text) {
					c, _, _ = next(j)
				}
			}
			if c == '\t' && j < len(text) {
				j += width(j)
				c = 0
				if j < len(text) {
					c, _, _ = next(j)
				}
			} else {
				j, c = i-n, r
			}
			if c == '#' {
				clause++
				section, heading = clause, true
				for j < len(text) {
					if c, _, _ = next(j); c != '#' {
						break
					}
					j += width(j)
				}
			}
			if j != i-n {
				i = j
				continue
			}
		}
		if br {
			flush()
			heading, lineStart = false, true
		}
		if !br && isWord(r) {
			raw = utf8.AppendRune(raw, r)
			continue
		}
		var after rune = ' '
		if i < len(text) {
			after, _, _ = next(i)
		}
		if (r == '-' || r == '.' || r == '_') && len(raw) > 0 && isWord(after) {
			raw = utf8.AppendRune(raw, r)
			continue
		}
		flush()
		switch {
		case br || strings.ContainsRune(";()[]{}|\"", r):
			clause++
			// A JSON string's value starts a line of what it holds.
			lineStart = lineStart || (json && r == '"')
		case strings.ContainsRune(",.!?", r) && !isWord(after):
			clause++
		}
	}
	flush()
	return out
}

// nearEntities returns the names of text that stand in the same clause as
// a name holding one of the anchor terms, within secondHopNear names of
// it, and hold none of them, in order of first appearance.
func nearEntities(text string, json bool, anchors map[string]float64) []hopEntity {
	cs := compounds(text, json)
	anchor := make([]bool, len(cs))
	idf := make([]float64, len(cs))
	top := 0.0
	for i, c := range cs {
		for _, t := range c.terms {
			if w, ok := anchors[t]; ok {
				anchor[i] = true
				idf[i] = max(idf[i], w)
				top = max(top, w)
			}
		}
	}
	if top == 0 {
		return nil
	}
	var out []hopEntity
	at := make(map[string]int)
	for i, c := range cs {
		if anchor[i] {
			continue
		}
		d, w := secondHopNear+1, 0.0
		for j := max(0, i-secondHopNear); j <= min(len(cs)-1, i+secondHopNear); j++ {
			if anchor[j] && cs[j].clause == c.clause {
				d = min(d, abs(i-j))
				w = max(w, idf[j])
			}
		}
		if c.heading {
			// A heading names what its section's lines speak of: it
			// stands nearest to them all, so at the same weight it is
			// looked up before the words beside a query word in a line
			// ("Purpose", "every", "management" in "Purpose: pulls stock
			// levels from the warehouse management system every five
			// minutes" under "## inventory-sync").
			for j := range cs {
				if anchor[j] && !cs[j].heading && cs[j].section == c.section {
					d = 0
					w = max(w, idf[j])
				}
			}
		}
		if d > secondHopNear || w == 0 {
			continue
		}
		key := strings.Join(c.terms, " ")
		if k, ok := at[key]; ok {
			out[k].dist = min(out[k].dist, d)
			out[k].weight = max(out[k].weight, w/top)
			continue
		}
		at[key] = len(out)
		out = append(out, hopEntity{terms: c.terms, weight: w / top, dist: d, first: i})
	}
	return out
}

func abs(n int) int {
	if n < 0 {
		return -n
	}
	return n
}

// chooseEntities merges the entities of a hop's sources (found[i] are
// source i's, rank[i] its rank) and returns those to look up, best first:
// by the rank a record they link could reach (their best source's rank
// times their weight), then named by more sources, then nearer a query
// word, then earlier; with at most maxTerms terms in all.
func chooseEntities(found [][]hopEntity, rank []float64, maxTerms int) []hopEntity {
	var all []hopEntity
	at := make(map[string]int)
	for si, es := range found {
		for _, e := range es {
			key := strings.Join(e.terms, " ")
			if k, ok := at[key]; ok {
				a := &all[k]
				if !slices.Contains(a.sources, si) {
					a.sources = append(a.sources, si)
				}
				a.dist = min(a.dist, e.dist)
				a.weight = max(a.weight, e.weight)
				a.reach = max(a.reach, rank[si]*e.weight)
				continue
			}
			at[key] = len(all)
			e.sources = []int{si}
			e.reach = rank[si] * e.weight
			e.first += si << 20 // earlier sources first
			all = append(all, e)
		}
	}
	sort.SliceStable(all, func(i, j int) bool {
		a, b := &all[i], &all[j]
		if a.reach != b.reach {
			return a.reach > b.reach
		}
		if len(a.sources) != len(b.sources) {
			return len(a.sources) > len(b.sources)
		}
		if a.dist != b.dist {
			return a.dist < b.dist
		}
		return a.first < b.first
	})
	var out []hopEntity
	n := 0
	for _, e := range all {
		if n+len(e.terms) > maxTerms {
			continue
		}
		n += len(e.terms)
		out = append(out, e)
	}
	return out
}
