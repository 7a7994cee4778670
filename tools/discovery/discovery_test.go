package discovery

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"

	"lemo/tools"
)

var offered = []tools.OfferedTool{
	{Name: "files.edit", Description: "Replace exact text in a file of the workspace. Give old and new text."},
	{Name: "files.read", Description: "Read a text file of the workspace, whole or by line range.", Loaded: true},
	{Name: "files.write", Description: "Create or overwrite a file in the workspace with the given content."},
	{Name: "mcp.git.log", Description: "Show the commit log of a repository.\nLists hashes and subjects."},
	{Name: "memory.search", Description: "Search the owner's memory: requests, answers, facts."},
	{Name: "shell.run", Description: "Run a shell command in the workspace and return its output.", Loaded: true},
	{Name: "tools.load", Description: "Add tools.", Loaded: true},
	{Name: "tools.search", Description: "Find tools.", Loaded: true},
}

func names(ms []Match) []string {
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = m.Name
	}
	return out
}

func TestRank(t *testing.T) {
	for _, tc := range []struct {
		query string
		limit int
		want  []string
		more  int
	}{
		{"write a file", 10, []string{"files.write", "files.edit", "files.read"}, 0},
		{"files.write", 10, []string{"files.write", "files.edit", "files.read"}, 0},
		{"files_write", 10, []string{"files.write", "files.edit", "files.read"}, 0},
		{"git commits", 10, []string{"mcp.git.log"}, 0},
		{"run command", 10, []string{"shell.run"}, 0},
		{"memory", 10, []string{"memory.search"}, 0},
		{"kubernetes", 10, nil, 0},
		{"the a of", 10, nil, 0},
		{"file", 2, []string{"files.edit", "files.read"}, 1},
		{"*", 3, []string{"files.edit", "files.read", "files.write"}, 5},
	} {
		got, more := Rank(tc.query, offered, tc.limit)
		if !slices.Equal(names(got), tc.want) || more != tc.more {
			t.Errorf("Rank(%q) = %q, more %d; want %q, more %d", tc.query, names(got), more, tc.want, tc.more)
		}
	}
}

func TestSummary(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"Show the commit log of a repository.\nLists hashes and subjects.", "Show the commit log of a repository."},
		{"One line", "One line"},
		{"bell\x07 and\ttab", "bell and tab"},
		{strings.Repeat("x", 300), strings.Repeat("x", SummaryChars) + "…"},
	} {
		if got := Summary(tc.in); got != tc.want {
			t.Errorf("Summary(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// toolset is a tools.Toolset with function fields.
type toolset struct {
	offered []tools.OfferedTool
	load    func(names []string) (tools.LoadResult, error)
}

func (s toolset) Offered() []tools.OfferedTool { return s.offered }

// pendingToolset is a toolset with sources that have not listed their
// tools yet.
type pendingToolset struct {
	toolset
	pending []tools.Pending
}

func (s pendingToolset) Pending() []tools.Pending { return s.pending }

// A search says which sources have not listed their tools yet (an MCP
// server that is not up), whether or not something matched.
func TestSearchNamesPendingSources(t *testing.T) {
	ts := pendingToolset{toolset: toolset{offered: offered}, pending: []tools.Pending{{Source: "mcp server late", Prefix: "mcp.late.", State: "listing failed: refused; retrying in 8s"}}}
	const want = "not offered yet, as their sources have not listed them: mcp.late.* (the mcp server late: listing failed: refused; retrying in 8s); search again later"
	for _, q := range []string{"write file", "kubernetes"} {
		out, err := execute(t, Search{}, ts, `{"query":"`+q+`"}`)
		if err != nil {
			t.Fatal(err)
		}
		var res SearchResult
		if err := json.Unmarshal(out, &res); err != nil {
			t.Fatal(err)
		}
		if !strings.HasSuffix(res.Note, want) {
			t.Errorf("%s: note %q, want it to end with %q", q, res.Note, want)
		}
	}
	out, err := execute(t, Search{}, toolset{offered: offered}, `{"query":"write file"}`)
	if err != nil || strings.Contains(string(out), "not offered yet") {
		t.Fatalf("without pending sources: %s, %v", out, err)
	}
}
func (s toolset) Load(ctx context.Context, names []string) (tools.LoadResult, error) {
	return s.load(names)
}

func execute(t *testing.T, tool tools.Tool, ts tools.Toolset, input string) (json.RawMessage, error) {
	t.Helper()
	reg := tools.NewRegistry()
	if err := reg.Register(tool); err != nil {
		t.Fatal(err)
	}
	r, _ := reg.Get(tool.Name())
	if err := r.ValidateInput(json.RawMessage(input)); err != nil {
		return nil, err
	}
	out, err := tool.Execute(context.Background(), tools.Call{Input: json.RawMessage(input), Toolset: ts}, nil)
	if err == nil {
		if verr := r.ValidateOutput(out); verr != nil {
			t.Fatalf("output %s: %v", out, verr)
		}
	}
	return out, err
}

func TestSearchExecute(t *testing.T) {
	ts := toolset{offered: offered}
	out, err := execute(t, Search{}, ts, `{"query":"write file"}`)
	if err != nil {
		t.Fatal(err)
	}
	var res SearchResult
	if err := json.Unmarshal(out, &res); err != nil {
		t.Fatal(err)
	}
	if len(res.Matches) == 0 || res.Matches[0].Name != "files.write" || res.Matches[0].Loaded {
		t.Fatalf("matches = %+v, want files.write first, not loaded", res.Matches)
	}
	for _, m := range res.Matches {
		if m.Name == NameSearch || m.Name == NameLoad {
			t.Fatalf("the discovery tools list themselves: %+v", res.Matches)
		}
	}
	out, err = execute(t, Search{}, ts, `{"query":"kubernetes"}`)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(out), `no tool matched \"kubernetes\"`) || !strings.Contains(string(out), "files.edit, files.read") {
		t.Fatalf("no-match output = %s, want a note listing the offered tools", out)
	}
	if _, err := execute(t, Search{}, ts, `{"query":""}`); err == nil {
		t.Fatal("an empty query passed the input schema")
	}
	if _, err := execute(t, Search{}, nil, `{"query":"x"}`); !errors.Is(err, ErrFixed) {
		t.Fatalf("without a Toolset: %v, want ErrFixed", err)
	}
}

func TestLoadExecute(t *testing.T) {
	var asked []string
	ts := toolset{load: func(names []string) (tools.LoadResult, error) {
		asked = names
		if slices.Contains(names, "nope") {
			return tools.LoadResult{}, &tools.ValidationError{What: "input", Detail: `no tool is named "nope"`}
		}
		return tools.LoadResult{Loaded: []string{"files.write"}}, nil
	}}
	out, err := execute(t, Load{}, ts, `{"names":["files.write"]}`)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(asked, []string{"files.write"}) {
		t.Fatalf("Load asked for %q", asked)
	}
	if want := `{"loaded":["files.write"],"already":[],"note":"from your next turn on you can call files_write"}`; string(out) != want {
		t.Fatalf("output = %s, want %s", out, want)
	}
	if _, err := execute(t, Load{}, ts, `{"names":["nope"]}`); err == nil || !strings.Contains(err.Error(), `no tool is named "nope"`) {
		t.Fatalf("a refused load: %v", err)
	}
	if _, err := execute(t, Load{}, ts, `{"names":[]}`); err == nil {
		t.Fatal("no names passed the input schema")
	}
	if _, err := execute(t, Load{}, nil, `{"names":["files.write"]}`); !errors.Is(err, ErrFixed) {
		t.Fatalf("without a Toolset: %v, want ErrFixed", err)
	}
}
