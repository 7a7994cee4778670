package taskstate

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"lemo/api"
)

// match is a tool pattern matcher for the tests: a name, or a prefix
// with a trailing "*".
func match(pattern, tool string) bool {
	if p, ok := strings.CutSuffix(pattern, "*"); ok {
		return strings.HasPrefix(tool, p)
	}
	return pattern == tool
}

func modelName(n string) string { return strings.ReplaceAll(n, ".", "_") }

var registered = []string{"files.edit", "files.read", "files.write", "mcp.git.log", "shell.run", "tools.load", "tools.search"}

// historyOf stamps bodies into events of task T1 from seq 1.
func historyOf(bodies ...proto.Message) []*api.Event {
	s := New()
	s.TaskID = "T1"
	evs := s.Stamp(bodies, now)
	return evs
}

func TestToolSetOf(t *testing.T) {
	created := func(in CreateInput) proto.Message { return Create(in)[0] }
	discovered := CreateInput{Owner: "a", Model: "m", Request: "r", Tools: []string{"tools.load", "tools.search", "files.read"}, Discovery: true}
	for _, tc := range []struct {
		name   string
		bodies []proto.Message
		want   ToolSet
	}{
		{"no allow-list: every tool", []proto.Message{created(CreateInput{Owner: "a", Model: "m", Request: "r"})},
			ToolSet{All: true}},
		{"--tools fixes the set", []proto.Message{created(CreateInput{Owner: "a", Model: "m", Request: "r", Tools: []string{"shell.run", "files.read"}, ToolsRestricted: true})},
			ToolSet{Names: []string{"files.read", "shell.run"}}},
		{"--tools none", []proto.Message{created(CreateInput{Owner: "a", Model: "m", Request: "r", ToolsRestricted: true})},
			ToolSet{}},
		{"discovery: the initial set", []proto.Message{created(discovered)},
			ToolSet{Names: []string{"files.read", "tools.load", "tools.search"}, Discovery: true}},
		{"discovery: loads add in order, once", []proto.Message{created(discovered),
			&api.UserMessage{Text: "x"},
			&api.ToolsLoaded{Tools: []string{"shell.run"}, CallId: "call-1-1"},
			&api.StatusChanged{Status: api.TaskStatus_TASK_STATUS_PAUSED},
			&api.ToolsLoaded{Tools: []string{"mcp.git.log", "files.read"}, CallId: "call-2-1"}},
			ToolSet{Names: []string{"files.read", "mcp.git.log", "shell.run", "tools.load", "tools.search"}, Discovery: true}},
		{"a load without discovery changes nothing", []proto.Message{created(CreateInput{Owner: "a", Model: "m", Request: "r", Tools: []string{"files.read"}, ToolsRestricted: true}),
			&api.ToolsLoaded{Tools: []string{"shell.run"}}},
			ToolSet{Names: []string{"files.read"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			evs := historyOf(tc.bodies...)
			got := ToolSetOf(evs)
			if got.All != tc.want.All || got.Discovery != tc.want.Discovery || !slices.Equal(got.Names, tc.want.Names) {
				t.Fatalf("ToolSetOf = %+v, want %+v", got, tc.want)
			}
			// The Task's own fold agrees with ToolSetOf.
			s := New()
			for _, ev := range evs {
				s.Apply(ev)
			}
			if st := s.ToolSet(); st.All != got.All || !slices.Equal(st.Names, got.Names) || st.Discovery != got.Discovery {
				t.Fatalf("State.ToolSet = %+v, ToolSetOf = %+v", st, got)
			}
			// A child created with this set has it.
			in := CreateInput{Owner: "a", Model: "m", Request: "child"}
			got.Inherit(&in)
			if child := ToolSetOf(historyOf(Create(in)...)); child.All != got.All || child.Discovery != got.Discovery || !slices.Equal(child.Names, got.Names) {
				t.Fatalf("a child created with %+v has %+v", got, child)
			}
		})
	}
}

func TestInitialTools(t *testing.T) {
	for _, tc := range []struct {
		initial []string
		want    []string
	}{
		{nil, []string{"tools.load", "tools.search"}},
		{[]string{"files.read", "shell.run"}, []string{"files.read", "shell.run", "tools.load", "tools.search"}},
		{[]string{"files.*", "nope"}, []string{"files.edit", "files.read", "files.write", "tools.load", "tools.search"}},
		{[]string{"*"}, registered},
	} {
		if got := InitialTools(tc.initial, registered, match); !slices.Equal(got, tc.want) {
			t.Errorf("InitialTools(%q) = %q, want %q", tc.initial, got, tc.want)
		}
	}
}

func TestLoadTools(t *testing.T) {
	// running returns a discovered Task with a running tools.load call
	// call-1-1, its rules denying shell.*.
	running := func(t *testing.T, in CreateInput, loads ...proto.Message) *State {
		s := New()
		s.TaskID = "T1"
		apply(s, Create(in))
		apply(s, loads)
		apply(s, []proto.Message{&api.CycleStarted{Cycle: 1}, &api.AssistantMessage{Cycle: 1, ToolCallIds: []string{"call-1-1"}},
			&api.ToolCallRecorded{CallId: "call-1-1", Cycle: 1, Tool: LoadTool},
			&api.CycleFinished{Cycle: 1, Outcome: api.CycleOutcome_CYCLE_OUTCOME_COMPLETED},
			&api.ToolExecutionStarted{CallId: "call-1-1"}})
		return s
	}
	disc := CreateInput{Owner: "a", Model: "m", Request: "r", Tools: []string{"files.read", "tools.load", "tools.search"}, Discovery: true,
		Approvals: []*api.ToolApproval{{Tool: "shell.*", Rule: api.ApprovalRule_APPROVAL_RULE_DENY}, {Tool: "files.edit", Rule: api.ApprovalRule_APPROVAL_RULE_ASK}}}
	fixed := CreateInput{Owner: "a", Model: "m", Request: "r", Tools: []string{"tools.load"}, ToolsRestricted: true}
	for _, tc := range []struct {
		name    string
		in      CreateInput
		before  []proto.Message
		call    string
		names   []string
		loaded  []string
		already []string
		errHas  []string
	}{
		{name: "loads by name", in: disc, names: []string{"files.write", "mcp.git.log"}, loaded: []string{"files.write", "mcp.git.log"}},
		{name: "by the model's name, once", in: disc, names: []string{"files_write", "files.write"}, loaded: []string{"files.write"}},
		{name: "an ask rule still offers", in: disc, names: []string{"files.edit"}, loaded: []string{"files.edit"}},
		{name: "already in the set", in: disc, before: []proto.Message{&api.ToolsLoaded{Tools: []string{"files.write"}}},
			names: []string{"files.write", "files.read", "files.edit"}, loaded: []string{"files.edit"}, already: []string{"files.read", "files.write"}},
		{name: "everything there: no event", in: disc, names: []string{"files.read"}, already: []string{"files.read"}},
		{name: "unknown name lists close ones", in: disc, names: []string{"files.wirte", "files.edit"},
			errHas: []string{`no tool is named "files.wirte"`, "did you mean files.write", "nothing was loaded", "tools.search"}},
		{name: "unknown far name", in: disc, names: []string{"kubernetes"}, errHas: []string{`no tool is named "kubernetes"`}},
		{name: "denied by the task's rule: not offered", in: disc, names: []string{"shell.run"},
			errHas: []string{"shell.run is not offered to this task", "deny shell.*"}},
		{name: "every problem at once", in: disc, names: []string{"shell.run", "nope.x"},
			errHas: []string{"shell.run is not offered", `no tool is named "nope.x"`}},
		{name: "empty", in: disc, names: nil, errHas: []string{"names is empty"}},
		{name: "too many", in: disc, names: slices.Repeat([]string{"files.read"}, MaxLoadNames+1), errHas: []string{"at most 16"}},
		{name: "not the running call", in: disc, call: "call-9-9", names: []string{"files.write"}, errHas: []string{"not a running tools.load call"}},
		{name: "fixed set", in: fixed, names: []string{"files.write"}, errHas: []string{"fixed when it was created", "--tools"}},
		{name: "every tool offered", in: CreateInput{Owner: "a", Model: "m", Request: "r"}, names: []string{"files.write"}, errHas: []string{"every tool already"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := running(t, tc.in, tc.before...)
			call := tc.call
			if call == "" {
				call = "call-1-1"
			}
			bodies, res, err := s.LoadTools(LoadInput{CallID: call, Names: tc.names, Registered: registered, ModelName: modelName, Match: match})
			if len(tc.errHas) > 0 {
				if err == nil || !errors.Is(err, ErrInvalid) {
					t.Fatalf("LoadTools err = %v, want an ErrInvalid", err)
				}
				for _, w := range tc.errHas {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("error %q lacks %q", err, w)
					}
				}
				if bodies != nil {
					t.Fatalf("a refused load records %v", bodies)
				}
				return
			}
			if err != nil {
				t.Fatalf("LoadTools: %v", err)
			}
			if !slices.Equal(res.Loaded, tc.loaded) || !slices.Equal(res.Already, tc.already) {
				t.Fatalf("result = %+v, want loaded %q already %q", res, tc.loaded, tc.already)
			}
			if len(tc.loaded) == 0 {
				if len(bodies) != 0 {
					t.Fatalf("bodies = %v, want none", bodies)
				}
				return
			}
			tl, ok := bodies[0].(*api.ToolsLoaded)
			if len(bodies) != 1 || !ok || !slices.Equal(tl.GetTools(), tc.loaded) || tl.GetCallId() != call {
				t.Fatalf("bodies = %v, want one ToolsLoaded of %q by %s", bodies, tc.loaded, call)
			}
			before := s.ToolSet()
			apply(s, bodies)
			for _, n := range tc.loaded {
				if before.Has(n) || !s.ToolSet().Has(n) {
					t.Fatalf("%s: in the set before %v, after %v", n, before.Has(n), s.ToolSet().Has(n))
				}
			}
		})
	}
}

func TestCloseNames(t *testing.T) {
	names := []string{"files.edit", "files.read", "files.write", "memory.record", "shell.run", "tasks.read"}
	for _, tc := range []struct {
		name string
		want []string
	}{
		{"files.raed", []string{"files.read"}},
		{"shell", []string{"shell.run"}},
		{"SHELL_RUN", []string{"shell.run"}},
		{"read", []string{"files.read", "tasks.read"}},
		{"kubernetes", nil},
	} {
		if got := CloseNames(tc.name, names, 3); !slices.Equal(got, tc.want) {
			t.Errorf("CloseNames(%q) = %q, want %q", tc.name, got, tc.want)
		}
	}
}

func TestNotLoadedNamesToolsLoad(t *testing.T) {
	msg := NotLoaded("files_write", "files.write")
	for _, w := range []string{`"files_write" is not loaded`, "tools_load", "tools.load", `["files.write"]`} {
		if !strings.Contains(msg, w) {
			t.Errorf("NotLoaded = %q, lacks %q", msg, w)
		}
	}
}
