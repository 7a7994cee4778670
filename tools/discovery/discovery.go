package discovery

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"unicode"

	"lemo/tools"
)

// Tool names: the same as actors/taskstate's SearchTool and LoadTool.
const (
	NameSearch = "tools.search"
	NameLoad   = "tools.load"
)

// Bounds of the tools' inputs and outputs.
const (
	// MaxResults bounds tools.search's matches.
	MaxResults = 10
	// MaxQueryChars bounds tools.search's query.
	MaxQueryChars = 200
	// SummaryChars bounds a match's one-line summary.
	SummaryChars = 120
	// MaxNames bounds the names of one tools.load call.
	MaxNames = 16
)

// ErrFixed: the Task's tools were fixed at its creation; it has no Toolset.
var ErrFixed = errors.New("discovery: this task's tools were fixed when it was created (lemo run --tools): it cannot search or load others")

// New returns tools.search and tools.load.
func New() []tools.Tool { return []tools.Tool{Search{}, Load{}} }

// Search is tools.search.
type Search struct{}

var _ tools.Tool = Search{}

func (Search) Name() string { return NameSearch }
func (Search) Description() string {
	return "Find more tools by what they do. Returns names and summaries; load one with tools_load to call it."
}
func (Search) InputSchema() json.RawMessage {
	return json.RawMessage(fmt.Sprintf(`{"type":"object","properties":{"query":{"type":"string","minLength":1,"maxLength":%d,"description":"what the tool should do, or * for all"}},"required":["query"],"additionalProperties":false}`, MaxQueryChars))
}
func (Search) StateSchema() json.RawMessage { return nil }
func (Search) ResultSchema() json.RawMessage {
	return json.RawMessage(fmt.Sprintf(`{"type":"object","required":["matches","more"],"properties":{"matches":{"type":"array","maxItems":%d,"items":{"type":"object","required":["name","summary","loaded"],"properties":{"name":{"type":"string"},"summary":{"type":"string"},"loaded":{"type":"boolean"}}}},"more":{"type":"integer","minimum":0},"note":{"type":"string"}}}`, MaxResults))
}
func (Search) View() string { return "" }

// Retain keeps the whole result: it is small and bounded.
func (Search) Retain(output, input json.RawMessage) json.RawMessage { return output }

// Match is one tools.search result.
type Match struct {
	Name    string `json:"name"`
	Summary string `json:"summary"`
	Loaded  bool   `json:"loaded"`
}

// SearchResult is tools.search's output.
type SearchResult struct {
	Matches []Match `json:"matches"`
	// More counts the matches beyond the bound.
	More int    `json:"more"`
	Note string `json:"note,omitempty"`
}

// Execute implements tools.Tool.
func (Search) Execute(ctx context.Context, c tools.Call, emit tools.Emit) (json.RawMessage, error) {
	if c.Toolset == nil {
		return nil, ErrFixed
	}
	var in struct {
		Query string `json:"query"`
	}
	if err := json.Unmarshal(c.Input, &in); err != nil {
		return nil, &tools.ValidationError{What: "input", Detail: err.Error()}
	}
	var offered []tools.OfferedTool
	for _, t := range c.Toolset.Offered() {
		if t.Name != NameSearch && t.Name != NameLoad {
			offered = append(offered, t)
		}
	}
	ms, more := Rank(in.Query, offered, MaxResults)
	res := SearchResult{Matches: ms, More: more}
	switch {
	case len(ms) == 0:
		names := make([]string, 0, len(offered))
		for _, t := range offered {
			names = append(names, t.Name)
		}
		res.Note = fmt.Sprintf("no tool matched %q; %d tools are offered: %s", in.Query, len(offered), clip(strings.Join(names, ", "), 600))
	case more > 0:
		res.Note = fmt.Sprintf("%d more matched; a narrower query shows them", more)
	}
	if p, ok := c.Toolset.(tools.PendingSource); ok {
		if note := pendingNote(p.Pending()); note != "" {
			res.Note = strings.TrimPrefix(res.Note+"; "+note, "; ")
		}
	}
	return json.Marshal(res)
}

// pendingNote says which sources have not listed their tools yet (an MCP
// server that is not up), so that the model knows a tool of theirs may
// appear later; "" when none.
func pendingNote(ps []tools.Pending) string {
	if len(ps) == 0 {
		return ""
	}
	var parts []string
	for _, p := range ps {
		parts = append(parts, fmt.Sprintf("%s* (the %s: %s)", p.Prefix, p.Source, p.State))
	}
	return clip("not offered yet, as their sources have not listed them: "+strings.Join(parts, ", ")+"; search again later", 600)
}

// Rank returns the offered tools that match query, best first, at most
// limit of them, and how many more matched. A query of "*" matches every
// tool (by name). Each word of the query scores against a tool's name
// (whole parts of it most) and its description; tools that score nothing
// are left out.
func Rank(query string, offered []tools.OfferedTool, limit int) ([]Match, int) {
	type scored struct {
		t     tools.OfferedTool
		score int
	}
	all := strings.TrimSpace(query) == "*"
	words := terms(query)
	var hits []scored
	for _, t := range offered {
		s := 0
		if all {
			s = 1
		} else {
			s = score(words, strings.ToLower(query), t)
		}
		if s > 0 {
			hits = append(hits, scored{t, s})
		}
	}
	sort.SliceStable(hits, func(i, j int) bool {
		if hits[i].score != hits[j].score {
			return hits[i].score > hits[j].score
		}
		return hits[i].t.Name < hits[j].t.Name
	})
	more := 0
	if len(hits) > limit {
		more = len(hits) - limit
		hits = hits[:limit]
	}
	out := make([]Match, len(hits))
	for i, h := range hits {
		out[i] = Match{Name: h.t.Name, Summary: Summary(h.t.Description), Loaded: h.t.Loaded}
	}
	return out, more
}

func score(words []string, query string, t tools.OfferedTool) int {
	name := strings.ToLower(t.Name)
	s := 0
	if q := strings.TrimSpace(query); q == name || q == tools.ModelName(name) {
		s += 10
	}
	parts := terms(name)
	desc := terms(t.Description)
	for _, w := range words {
		switch {
		case slices.Contains(parts, w):
			s += 4
		case strings.Contains(name, w):
			s += 2
		}
		for _, d := range desc {
			if d == w || (len(w) >= 4 && strings.HasPrefix(d, w)) || (len(d) >= 4 && strings.HasPrefix(w, d)) {
				s++
				break
			}
		}
	}
	return s
}

// stopWords are query words that say nothing about a tool.
var stopWords = map[string]bool{"a": true, "an": true, "the": true, "to": true, "of": true, "and": true, "or": true, "in": true, "on": true, "for": true, "with": true, "tool": true, "tools": true, "is": true, "it": true}

// terms splits text into lower-case words of letters and digits, without
// stop words.
func terms(text string) []string {
	fs := strings.FieldsFunc(strings.ToLower(text), func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) })
	out := fs[:0]
	for _, f := range fs {
		if !stopWords[f] {
			out = append(out, f)
		}
	}
	return out
}

// Summary is the first sentence of a description on one line, at most
// SummaryChars characters. Descriptions may come from outside the daemon
// (an MCP server): control characters are removed.
func Summary(desc string) string {
	line := tools.SanitiseReason(desc, 4*SummaryChars)
	if i := strings.Index(line, ". "); i >= 0 {
		line = line[:i+1]
	}
	return tools.SanitiseReason(line, SummaryChars)
}

func clip(s string, n int) string {
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}

// Load is tools.load.
type Load struct{}

var _ tools.Tool = Load{}

func (Load) Name() string { return NameLoad }
func (Load) Description() string {
	return "Add tools to this task by name (see tools_search); call them from your next turn on."
}
func (Load) InputSchema() json.RawMessage {
	return json.RawMessage(fmt.Sprintf(`{"type":"object","properties":{"names":{"type":"array","minItems":1,"maxItems":%d,"items":{"type":"string","minLength":1,"maxLength":%d}}},"required":["names"],"additionalProperties":false}`, MaxNames, tools.MaxNameLen))
}
func (Load) StateSchema() json.RawMessage { return nil }
func (Load) ResultSchema() json.RawMessage {
	return json.RawMessage(`{"type":"object","required":["loaded","already"],"properties":{"loaded":{"type":"array","items":{"type":"string"}},"already":{"type":"array","items":{"type":"string"}},"note":{"type":"string"}}}`)
}
func (Load) View() string { return "" }

// Retain keeps the whole result: it names the tools loaded.
func (Load) Retain(output, input json.RawMessage) json.RawMessage { return output }

// LoadOutput is tools.load's output.
type LoadOutput struct {
	Loaded  []string `json:"loaded"`
	Already []string `json:"already"`
	Note    string   `json:"note,omitempty"`
}

// Execute implements tools.Tool.
func (Load) Execute(ctx context.Context, c tools.Call, emit tools.Emit) (json.RawMessage, error) {
	if c.Toolset == nil {
		return nil, ErrFixed
	}
	var in struct {
		Names []string `json:"names"`
	}
	if err := json.Unmarshal(c.Input, &in); err != nil {
		return nil, &tools.ValidationError{What: "input", Detail: err.Error()}
	}
	r, err := c.Toolset.Load(ctx, in.Names)
	if err != nil {
		return nil, err
	}
	out := LoadOutput{Loaded: r.Loaded, Already: r.Already}
	if out.Loaded == nil {
		out.Loaded = []string{}
	}
	if out.Already == nil {
		out.Already = []string{}
	}
	if len(out.Loaded) > 0 {
		names := make([]string, len(out.Loaded))
		for i, n := range out.Loaded {
			names[i] = tools.ModelName(n)
		}
		out.Note = "from your next turn on you can call " + strings.Join(names, ", ")
	}
	return json.Marshal(out)
}
