package taskstate

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"google.golang.org/protobuf/proto"

	"lemo/api"
	"lemo/internal/didyoumean"
)

// The discovery tools: a Task whose tools are discovered always has them.
const (
	SearchTool = "tools.search"
	LoadTool   = "tools.load"
)

// MaxLoadNames bounds the tools one tools.load call names.
const MaxLoadNames = 16

// ToolSet is the tools a Task offers its model, derived from its history
// alone: its creation (TaskCreated's tools, tools_restricted,
// tools_discovery) and every later ToolsLoaded, so each Cycle, a continue
// after a restart and a child created "with the parent's tools" see the
// same set.
type ToolSet struct {
	// All: every registered tool (a Task created without an allow-list by
	// a daemon without tool discovery).
	All bool
	// Names are the tools when not All, sorted, without duplicates.
	Names []string
	// Discovery: tools.load may add registered tools (tools.initial); when
	// false and not All the set is fixed (lemo run --tools).
	Discovery bool
}

// Has reports whether the set holds the tool named name.
func (ts ToolSet) Has(name string) bool {
	if ts.All {
		return true
	}
	_, ok := slices.BinarySearch(ts.Names, name)
	return ok
}

// Restricted reports whether the set is a list of names (not every tool).
func (ts ToolSet) Restricted() bool { return !ts.All }

// Inherit gives a new Task this tool set (a child created with its
// parent's tools): the same tools, discovered or fixed as they were.
func (ts ToolSet) Inherit(in *CreateInput) {
	in.Tools = slices.Clone(ts.Names)
	in.ToolsRestricted = !ts.All
	in.Discovery = ts.Discovery
}

// ToolSet returns the Task's current tool set.
func (s *State) ToolSet() ToolSet {
	if !s.ToolsRestricted && !s.Discovery {
		return ToolSet{All: true}
	}
	if !s.Discovery {
		return ToolSet{Names: sortedUnique(s.Tools)}
	}
	return ToolSet{Names: sortedUnique(s.Tools, s.Loaded), Discovery: true}
}

// ToolSetOf returns the tool set of a Task with this history (its events
// in seq order, from its creation): what a child created with its
// parent's tools starts with.
func ToolSetOf(history []*api.Event) ToolSet {
	s := New()
	for _, ev := range history {
		switch ev.Body.(type) {
		case *api.Event_TaskCreated, *api.Event_ToolsLoaded:
			s.Apply(ev)
		}
	}
	return s.ToolSet()
}

func sortedUnique(lists ...[]string) []string {
	var out []string
	for _, l := range lists {
		out = append(out, l...)
	}
	sort.Strings(out)
	return slices.Compact(out)
}

// InitialTools resolves the names and patterns of tools.initial against
// the registered tools: the tools a new Task with discovery starts with,
// sorted; the discovery tools are always among them when registered. A
// plain name that is not registered is left out (the daemon checks the
// configuration at startup).
func InitialTools(initial, registered []string, match func(pattern, tool string) bool) []string {
	var out []string
	for _, r := range registered {
		if r == SearchTool || r == LoadTool {
			out = append(out, r)
			continue
		}
		for _, p := range initial {
			if match(p, r) {
				out = append(out, r)
				break
			}
		}
	}
	return sortedUnique(out)
}

// LoadInput is one tools.load request of a running call.
type LoadInput struct {
	// CallID is the tools.load call that asks.
	CallID string
	// Names are the tools to load as the model wrote them: tool names
	// ("files.write") or the names the model sees ("files_write").
	Names []string
	// Registered are the names of every registered tool.
	Registered []string
	// ModelName maps a tool name to the name the model sees.
	ModelName func(string) string
	// Match reports whether a tool name pattern matches a tool (for the
	// Task's deny rules).
	Match func(pattern, tool string) bool
}

// LoadResult says what a load did.
type LoadResult struct {
	// Loaded are the tools added; Already those the set held before.
	Loaded, Already []string
}

// LoadTools validates a tools.load request and returns the ToolsLoaded
// event to record (none when every tool is loaded already). A load is all
// or nothing: one name that cannot be loaded fails it, with every problem
// in one error. A name no tool has gets the closest names; a tool the
// Task's own rules deny is not offered to it; a Task whose tools are
// fixed (--tools) or all offered loads nothing.
func (s *State) LoadTools(in LoadInput) ([]proto.Message, LoadResult, error) {
	ts := s.ToolSet()
	if !ts.Discovery {
		if ts.All {
			return nil, LoadResult{}, fmt.Errorf("%w: this task is offered every tool already; nothing to load", ErrInvalid)
		}
		return nil, LoadResult{}, fmt.Errorf("%w: this task's tools were fixed when it was created (lemo run --tools): it cannot load others", ErrInvalid)
	}
	if c, ok := s.Calls[in.CallID]; !ok || !c.Started || c.Tool != LoadTool {
		return nil, LoadResult{}, fmt.Errorf("%w: call %s is not a running %s call of this task", ErrInvalid, in.CallID, LoadTool)
	}
	switch {
	case len(in.Names) == 0:
		return nil, LoadResult{}, fmt.Errorf("%w: names is empty: name the tools to load (tools.search finds them)", ErrInvalid)
	case len(in.Names) > MaxLoadNames:
		return nil, LoadResult{}, fmt.Errorf("%w: %d names: at most %d tools are loaded at once", ErrInvalid, len(in.Names), MaxLoadNames)
	}
	byName := make(map[string]string, 2*len(in.Registered))
	for _, r := range in.Registered {
		byName[in.ModelName(r)] = r
	}
	for _, r := range in.Registered {
		byName[r] = r // a tool's own name wins over another's model name
	}
	var res LoadResult
	var problems []string
	seen := make(map[string]bool)
	for _, n := range in.Names {
		name, ok := byName[n]
		if !ok {
			p := fmt.Sprintf("no tool is named %q", n)
			if close := CloseNames(n, in.Registered, 3); len(close) > 0 {
				p += fmt.Sprintf(" (did you mean %s?)", strings.Join(close, ", "))
			}
			problems = append(problems, p)
			continue
		}
		if seen[name] {
			continue
		}
		seen[name] = true
		if why := s.notOffered(name, in.Match); why != "" {
			problems = append(problems, fmt.Sprintf("%s is not offered to this task: %s", name, why))
			continue
		}
		if ts.Has(name) {
			res.Already = append(res.Already, name)
		} else {
			res.Loaded = append(res.Loaded, name)
		}
	}
	if len(problems) > 0 {
		return nil, LoadResult{}, fmt.Errorf("%w: %s; nothing was loaded; tools.search finds tools by what they do", ErrInvalid, strings.Join(problems, "; "))
	}
	sort.Strings(res.Loaded)
	sort.Strings(res.Already)
	if len(res.Loaded) == 0 {
		return nil, res, nil
	}
	return []proto.Message{&api.ToolsLoaded{Tools: res.Loaded, CallId: in.CallID}}, res, nil
}

// Offered reports whether the Task may load the registered tool name:
// its tools are discovered and none of its own rules denies the tool.
func (s *State) Offered(name string, match func(pattern, tool string) bool) bool {
	return s.Discovery && s.notOffered(name, match) == ""
}

// notOffered says why a registered tool is not offered to the Task: one of
// its own rules denies every call of it.
func (s *State) notOffered(name string, match func(pattern, tool string) bool) string {
	for _, r := range s.Rules {
		if r.GetRule() == api.ApprovalRule_APPROVAL_RULE_DENY && match(r.GetTool(), name) {
			return fmt.Sprintf("its rule denies it (deny %s)", r.GetTool())
		}
	}
	return ""
}

// NotLoaded is the failure message of a call of a tool that this Task
// could load but has not: modelName as the model called it, tool its name.
func NotLoaded(modelName, tool string) string {
	return fmt.Sprintf("tool %q is not loaded in this task: load it with %s {\"names\":[%q]} (the tools.load tool); it can be called from the next model call on", modelName, strings.ReplaceAll(LoadTool, ".", "_"), tool)
}

// CloseNames returns up to n of names closest to name: those that contain
// it or that it contains, then those within a small edit distance, nearest
// first.
func CloseNames(name string, names []string, n int) []string {
	norm := func(s string) string { return strings.NewReplacer("_", ".", "-", ".").Replace(strings.ToLower(s)) }
	want := norm(name)
	type cand struct {
		name string
		d    int
	}
	var cs []cand
	limit := max(2, len(want)/3)
	for _, c := range names {
		got := norm(c)
		d := didyoumean.Distance(want, got)
		switch {
		case got == want:
			d = 0
		case strings.Contains(got, want) || strings.Contains(want, got):
			d = min(d, 1)
		case d > limit:
			continue
		}
		cs = append(cs, cand{c, d})
	}
	sort.SliceStable(cs, func(i, j int) bool {
		if cs[i].d != cs[j].d {
			return cs[i].d < cs[j].d
		}
		return cs[i].name < cs[j].name
	})
	var out []string
	for i := 0; i < len(cs) && i < n; i++ {
		out = append(out, cs[i].name)
	}
	return out
}
