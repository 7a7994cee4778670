package taskstate

import (
	"errors"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"lemo/api"
)

// child builds a State of a Task created by a spawn of parent at depth d.
func childOf(t *testing.T, id, parent string, depth uint32, tools []string) *State {
	t.Helper()
	s := New()
	s.TaskID = id
	create := Create(CreateInput{Owner: "alice", Model: "fake/m", Request: "sub", Tools: tools, ToolsRestricted: tools != nil})
	tc := create[0].(*api.TaskCreated)
	tc.ParentId, tc.Depth = parent, depth
	apply(s, create)
	return s
}

// discovering is a root Task that started with the discovery tools and
// files.read and loaded tasks.spawn.
func discovering(t *testing.T) *State {
	t.Helper()
	s := New()
	s.TaskID = "P"
	apply(s, Create(CreateInput{Owner: "alice", Model: "fake/m", Request: "sub", Tools: []string{"tools.search", "tools.load", "files.read"}, Discovery: true}))
	apply(s, []proto.Message{&api.ToolsLoaded{Tools: []string{"tasks.spawn"}, CallId: "l1"}})
	return s
}

func TestSpawn(t *testing.T) {
	lim := TreeLimits{MaxDepth: 3, MaxChildren: 2}
	tests := []struct {
		name    string
		s       func(t *testing.T) *State
		in      SpawnInput
		wantErr error
		errHas  string
		check   func(t *testing.T, sp Spawned)
	}{
		{name: "root spawns a child at depth 1 with its tools and model",
			s:  func(t *testing.T) *State { return childOf(t, "P", "", 0, []string{"files.read", "shell.run"}) },
			in: SpawnInput{CallID: "call-1-1", Request: "count the files"},
			check: func(t *testing.T, sp Spawned) {
				tc := sp.Child[0].(*api.TaskCreated)
				if tc.GetParentId() != "P" || tc.GetParentCallId() != "call-1-1" || tc.GetDepth() != 1 || tc.GetModel() != "fake/m" || !tc.GetToolsRestricted() || len(tc.GetTools()) != 2 {
					t.Fatalf("child TaskCreated = %v", tc)
				}
				cs := sp.Parent[0].(*api.ChildSpawned)
				if cs.GetChildId() != "C" || cs.GetCallId() != "call-1-1" {
					t.Fatalf("ChildSpawned = %v", cs)
				}
				if got := kindsOf(sp.Child); !eq(got, []string{"TaskCreated", "UserMessage"}) {
					t.Fatalf("child bodies = %v", got)
				}
			}},
		{name: "a subset of the tools and instructions",
			s:  func(t *testing.T) *State { return childOf(t, "P", "", 0, []string{"files.read", "shell.run"}) },
			in: SpawnInput{CallID: "c", Request: "r", Tools: []string{"files.read"}, Instructions: "be brief", Model: "fake/other"},
			check: func(t *testing.T, sp Spawned) {
				tc := sp.Child[0].(*api.TaskCreated)
				if len(tc.GetTools()) != 1 || tc.GetModel() != "fake/other" {
					t.Fatalf("child TaskCreated = %v", tc)
				}
				if um := sp.Child[1].(*api.UserMessage); !strings.Contains(um.GetText(), "be brief") {
					t.Fatalf("request %q lacks the instructions", um.GetText())
				}
			}},
		{name: "more tools than the parent's", wantErr: ErrInvalid, errHas: "shell.run",
			s:  func(t *testing.T) *State { return childOf(t, "P", "", 0, []string{"files.read"}) },
			in: SpawnInput{CallID: "c", Request: "r", Tools: []string{"files.read", "shell.run"}}},
		{name: "a parent that discovers tools passes on what it loaded, and discovery",
			s:  discovering,
			in: SpawnInput{CallID: "c", Request: "r"},
			check: func(t *testing.T, sp Spawned) {
				tc := sp.Child[0].(*api.TaskCreated)
				if !tc.GetToolsDiscovery() || !eq(tc.GetTools(), []string{"files.read", "tasks.spawn", "tools.load", "tools.search"}) {
					t.Fatalf("child TaskCreated = %v, want the parent's loaded set with discovery", tc)
				}
			}},
		{name: "a subset of a discovering parent's loaded tools is a fixed set",
			s:  discovering,
			in: SpawnInput{CallID: "c", Request: "r", Tools: []string{"tasks.spawn"}},
			check: func(t *testing.T, sp Spawned) {
				tc := sp.Child[0].(*api.TaskCreated)
				if tc.GetToolsDiscovery() || !tc.GetToolsRestricted() || !eq(tc.GetTools(), []string{"tasks.spawn"}) {
					t.Fatalf("child TaskCreated = %v, want only tasks.spawn, fixed", tc)
				}
			}},
		{name: "a tool a discovering parent has not loaded", wantErr: ErrInvalid, errHas: "shell.run",
			s:  discovering,
			in: SpawnInput{CallID: "c", Request: "r", Tools: []string{"shell.run"}}},
		{name: "a parent offered every tool may give any", s: func(t *testing.T) *State { return childOf(t, "P", "", 0, nil) },
			in: SpawnInput{CallID: "c", Request: "r", Tools: []string{"shell.run"}},
			check: func(t *testing.T, sp Spawned) {
				if tc := sp.Child[0].(*api.TaskCreated); !tc.GetToolsRestricted() || !eq(tc.GetTools(), []string{"shell.run"}) {
					t.Fatalf("child TaskCreated = %v", tc)
				}
			}},
		{name: "too deep", wantErr: ErrLimit, errHas: "tasks.max_depth",
			s:  func(t *testing.T) *State { return childOf(t, "P", "G", 3, nil) },
			in: SpawnInput{CallID: "c", Request: "r"}},
		{name: "depth 2 may still spawn at 3",
			s:  func(t *testing.T) *State { return childOf(t, "P", "G", 2, nil) },
			in: SpawnInput{CallID: "c", Request: "r"},
			check: func(t *testing.T, sp Spawned) {
				if d := sp.Child[0].(*api.TaskCreated).GetDepth(); d != 3 {
					t.Fatalf("depth = %d, want 3", d)
				}
			}},
		{name: "too many children", wantErr: ErrLimit, errHas: "tasks.max_children",
			s: func(t *testing.T) *State {
				s := childOf(t, "P", "", 0, nil)
				apply(s, []proto.Message{&api.ChildSpawned{ChildId: "A", CallId: "a"}, &api.ChildSpawned{ChildId: "B", CallId: "b"}})
				return s
			},
			in: SpawnInput{CallID: "c", Request: "r"}},
		{name: "too many with the spawns of the same record", wantErr: ErrLimit, errHas: "tasks.max_children",
			s: func(t *testing.T) *State {
				s := childOf(t, "P", "", 0, nil)
				apply(s, []proto.Message{&api.ChildSpawned{ChildId: "A", CallId: "a"}})
				return s
			},
			in: SpawnInput{CallID: "c", Request: "r", Earlier: 1}},
		{name: "empty request", wantErr: ErrInvalid, errHas: "request",
			s:  func(t *testing.T) *State { return childOf(t, "P", "", 0, nil) },
			in: SpawnInput{CallID: "c", Request: "  "}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sp, err := tt.s(t).Spawn("C", tt.in, lim)
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) || !strings.Contains(err.Error(), tt.errHas) {
					t.Fatalf("Spawn err = %v, want %v naming %q", err, tt.wantErr, tt.errHas)
				}
				return
			}
			if err != nil {
				t.Fatalf("Spawn: %v", err)
			}
			tt.check(t, sp)
		})
	}
}

func TestExistingChild(t *testing.T) {
	s := childOf(t, "P", "", 0, nil)
	apply(s, []proto.Message{&api.ChildSpawned{ChildId: "A", CallId: "call-1-1"}})
	if id, ok := s.ExistingChild("call-1-1"); !ok || id != "A" {
		t.Fatalf("ExistingChild(call-1-1) = %q, %v; want A", id, ok)
	}
	if _, ok := s.ExistingChild("call-1-2"); ok {
		t.Fatal("ExistingChild(call-1-2) found a child")
	}
}

func TestRelation(t *testing.T) {
	s := childOf(t, "C1", "P", 1, nil)
	apply(s, []proto.Message{&api.ChildSpawned{ChildId: "G", CallId: "x"}})
	tests := []struct {
		peer    Peer
		want    string
		wantErr error
	}{
		{Peer{ID: "P", Exists: true, Owner: "alice"}, "parent", nil},
		{Peer{ID: "G", Exists: true, Owner: "alice", ParentID: "C1"}, "child", nil},
		{Peer{ID: "C2", Exists: true, Owner: "alice", ParentID: "P"}, "sibling", nil},
		{Peer{ID: "Z", Exists: true, Owner: "alice", ParentID: "Q"}, "", ErrInvalid},
		{Peer{ID: "Z", Exists: true, Owner: "alice"}, "", ErrInvalid},
		{Peer{ID: "C2", Exists: true, Owner: "bob", ParentID: "P"}, "", ErrNotFound},
		{Peer{ID: "P", Exists: true, Owner: "bob"}, "", ErrNotFound},
		{Peer{ID: "N"}, "", ErrNotFound},
		{Peer{ID: "C1", Exists: true, Owner: "alice", ParentID: "P"}, "", ErrInvalid},
	}
	for _, tt := range tests {
		got, err := s.Relation(tt.peer)
		if got != tt.want || !errors.Is(err, tt.wantErr) || (tt.wantErr == nil) != (err == nil) {
			t.Errorf("Relation(%+v) = %q, %v; want %q, %v", tt.peer, got, err, tt.want, tt.wantErr)
		}
	}
	// A root's other roots are not siblings.
	root := childOf(t, "R", "", 0, nil)
	if _, err := root.Relation(Peer{ID: "R2", Exists: true, Owner: "alice"}); !errors.Is(err, ErrInvalid) {
		t.Errorf("root to another root: %v, want ErrInvalid", err)
	}
}

func TestSendOnce(t *testing.T) {
	s := childOf(t, "C", "P", 1, nil)
	bodies, err := s.Send("P", "hello", "call-1-1")
	if err != nil || len(bodies) != 1 {
		t.Fatalf("Send = %v, %v", bodies, err)
	}
	apply(s, bodies)
	if again, err := s.Send("P", "hello", "call-1-1"); err != nil || again != nil {
		t.Fatalf("second Send of the same call = %v, %v; want nothing", again, err)
	}
	if seq, ok := s.SentSeq("call-1-1"); !ok || seq != s.LastSeq {
		t.Fatalf("SentSeq = %d, %v; want %d", seq, ok, s.LastSeq)
	}
	if _, err := s.Send("P", " ", "call-1-2"); !errors.Is(err, ErrInvalid) {
		t.Fatalf("empty text: %v", err)
	}
}

func TestEndEntry(t *testing.T) {
	finish := func(st api.TaskStatus) []proto.Message {
		return []proto.Message{
			&api.CycleStarted{Cycle: 1},
			&api.AssistantMessage{Cycle: 1, Text: "42"},
			&api.CycleFinished{Cycle: 1, Outcome: api.CycleOutcome_CYCLE_OUTCOME_COMPLETED, Usage: &api.Usage{PromptTokens: 10, CompletionTokens: 2}},
			&api.StatusChanged{Status: st, Detail: "answered"},
		}
	}
	tests := []struct {
		name   string
		parent string
		bodies []proto.Message
		want   api.TaskStatus // unspecified: no entry
	}{
		{"finished child", "P", finish(api.TaskStatus_TASK_STATUS_FINISHED), api.TaskStatus_TASK_STATUS_FINISHED},
		{"failed child", "P", finish(api.TaskStatus_TASK_STATUS_FAILED), api.TaskStatus_TASK_STATUS_FAILED},
		{"cancelled child", "P", []proto.Message{&api.StatusChanged{Status: api.TaskStatus_TASK_STATUS_CANCELLED}}, api.TaskStatus_TASK_STATUS_CANCELLED},
		{"paused child", "P", []proto.Message{&api.StatusChanged{Status: api.TaskStatus_TASK_STATUS_PAUSED}}, 0},
		{"ended then reopened", "P", []proto.Message{&api.StatusChanged{Status: api.TaskStatus_TASK_STATUS_FINISHED}, &api.StatusChanged{Status: api.TaskStatus_TASK_STATUS_RUNNING}}, 0},
		{"a root has no parent to tell", "", finish(api.TaskStatus_TASK_STATUS_FINISHED), 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := childOf(t, "C", tt.parent, 1, nil)
			evs := s.Stamp(tt.bodies, now)
			e := s.EndEntry(evs)
			if tt.want == 0 {
				if e != nil {
					t.Fatalf("EndEntry = %v, want none", e)
				}
				return
			}
			if e == nil || e.GetChildEnded().GetStatus() != tt.want || e.GetFrom() != "C" {
				t.Fatalf("EndEntry = %v, want status %v from C", e, tt.want)
			}
			last := evs[len(evs)-1].GetSeq()
			if e.GetFromSeq() != last || e.GetChildEnded().GetChildSeq() != last {
				t.Fatalf("entry seq = %d/%d, want %d", e.GetFromSeq(), e.GetChildEnded().GetChildSeq(), last)
			}
			if tt.want == api.TaskStatus_TASK_STATUS_FINISHED && (e.GetChildEnded().GetAnswer() != "42" || e.GetChildEnded().GetUsage().GetPromptTokens() != 10) {
				t.Fatalf("entry = %v, want answer 42 and 10 prompt tokens", e)
			}
		})
	}
}

func TestTakeAndWait(t *testing.T) {
	s := childOf(t, "P", "", 0, nil)
	apply(s, []proto.Message{&api.ChildSpawned{ChildId: "A", CallId: "a"}, &api.ChildSpawned{ChildId: "B", CallId: "b"}})
	if done, _, err := s.WaitState([]string{"A", "B"}, WaitAny); done || err != nil {
		t.Fatalf("WaitState before any end = %v, %v", done, err)
	}
	if _, _, err := s.WaitState([]string{"A", "X"}, WaitAll); !errors.Is(err, ErrNotFound) {
		t.Fatalf("WaitState on a stranger: %v, want ErrNotFound", err)
	}
	bodies := s.Take([]*api.InboxEntry{
		{From: "A", FromSeq: 9, ChildEnded: &api.ChildEnded{Status: api.TaskStatus_TASK_STATUS_FINISHED, Answer: "a"}},
		{From: "Q", FromSeq: 3, ChildEnded: &api.ChildEnded{Status: api.TaskStatus_TASK_STATUS_FINISHED}}, // not a child
		{From: "B", FromSeq: 4, Text: "hi"},
	})
	if got := kindsOf(bodies); !eq(got, []string{"ChildEnded", "MessageReceived"}) {
		t.Fatalf("Take = %v", got)
	}
	apply(s, bodies)
	if done, ended, _ := s.WaitState([]string{"A", "B"}, WaitAny); !done || len(ended) != 1 || ended[0].ID != "A" {
		t.Fatalf("WaitState any after A ended = %v, %v", done, ended)
	}
	if done, _, _ := s.WaitState([]string{"A", "B"}, WaitAll); done {
		t.Fatal("WaitState all done with B running")
	}
	if got := s.LiveChildren(); !eq(got, []string{"B"}) {
		t.Fatalf("LiveChildren = %v, want [B]", got)
	}
	if m := s.MessagesAfter(0); len(m) != 1 || m[0].From != "B" || m[0].Text != "hi" {
		t.Fatalf("MessagesAfter(0) = %v", m)
	}
	if m := s.MessagesAfter(s.LastSeq); len(m) != 0 {
		t.Fatalf("MessagesAfter(last) = %v, want none", m)
	}
}

func TestFromParent(t *testing.T) {
	running := func(t *testing.T) *State { return childOf(t, "C", "P", 1, nil) }
	created := func(t *testing.T) *State {
		s := New()
		s.TaskID = "C"
		create := Create(CreateInput{Owner: "alice", Model: "fake/m", Request: "sub"})
		create[0].(*api.TaskCreated).ParentId = "P"
		apply(s, create[:2])
		return s
	}
	paused := func(r api.PauseReason) func(t *testing.T) *State {
		return func(t *testing.T) *State {
			s := childOf(t, "C", "P", 1, nil)
			apply(s, []proto.Message{&api.StatusChanged{Status: api.TaskStatus_TASK_STATUS_PAUSED, PauseReason: r}})
			return s
		}
	}
	ended := func(st api.TaskStatus) func(t *testing.T) *State {
		return func(t *testing.T) *State {
			s := childOf(t, "C", "P", 1, nil)
			apply(s, []proto.Message{&api.StatusChanged{Status: st}})
			return s
		}
	}
	tests := []struct {
		name string
		s    func(t *testing.T) *State
		c    Cascade
		want api.TaskStatus // 0: nothing recorded
		why  api.PauseReason
	}{
		{"pause a running child", running, CascadePause, api.TaskStatus_TASK_STATUS_PAUSED, api.PauseReason_PAUSE_REASON_PARENT},
		{"pause a paused child", paused(api.PauseReason_PAUSE_REASON_USER), CascadePause, 0, 0},
		{"continue a child its parent paused", paused(api.PauseReason_PAUSE_REASON_PARENT), CascadeContinue, api.TaskStatus_TASK_STATUS_RUNNING, 0},
		{"continue an interrupted child", paused(api.PauseReason_PAUSE_REASON_INTERRUPTED), CascadeContinue, api.TaskStatus_TASK_STATUS_RUNNING, 0},
		{"a child a person paused stays paused", paused(api.PauseReason_PAUSE_REASON_USER), CascadeContinue, 0, 0},
		{"continue a running child", running, CascadeContinue, 0, 0},
		{"a child never started waits for a place", created, CascadeContinue, 0, 0},
		{"pause a child never started", created, CascadePause, 0, 0},
		{"cancel a running child", running, CascadeCancel, api.TaskStatus_TASK_STATUS_CANCELLED, 0},
		{"cancel a paused child", paused(api.PauseReason_PAUSE_REASON_USER), CascadeCancel, api.TaskStatus_TASK_STATUS_CANCELLED, 0},
		{"a finished child stays finished", ended(api.TaskStatus_TASK_STATUS_FINISHED), CascadeCancel, 0, 0},
		{"a cancelled child records nothing", ended(api.TaskStatus_TASK_STATUS_CANCELLED), CascadeCancel, 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := tt.s(t)
			bodies := s.FromParent(tt.c)
			if tt.want == 0 {
				if bodies != nil {
					t.Fatalf("FromParent = %v, want nothing", kindsOf(bodies))
				}
				return
			}
			apply(s, bodies)
			if s.Status != tt.want || s.PauseReason != tt.why {
				t.Fatalf("after FromParent: %v/%v, want %v/%v", s.Status, s.PauseReason, tt.want, tt.why)
			}
		})
	}
}

func TestRerun(t *testing.T) {
	s := childOf(t, "P", "", 0, nil)
	apply(s, []proto.Message{
		&api.CycleStarted{Cycle: 1},
		&api.AssistantMessage{Cycle: 1, ToolCallIds: []string{"w", "x"}},
		&api.ToolCallRecorded{CallId: "w", Cycle: 1, Tool: "tasks.wait"},
		&api.ToolCallRecorded{CallId: "x", Cycle: 1, Tool: "shell.run"},
		&api.CycleFinished{Cycle: 1, Outcome: api.CycleOutcome_CYCLE_OUTCOME_COMPLETED},
		&api.ToolExecutionStarted{CallId: "w"},
		&api.ToolExecutionStarted{CallId: "x"},
	})
	got := s.Rerun(func(tool string) bool { return strings.HasPrefix(tool, "tasks.") })
	if !eq(got, []string{"w"}) {
		t.Fatalf("Rerun = %v, want [w]", got)
	}
	var unknown []string
	for _, b := range s.Recover(now) {
		if f, ok := b.(*api.ToolFailed); ok && f.GetKind() == api.ToolFailureKind_TOOL_FAILURE_KIND_OUTCOME_UNKNOWN {
			unknown = append(unknown, f.GetCallId())
		}
	}
	if !eq(unknown, []string{"x"}) {
		t.Fatalf("outcome unknown after Rerun = %v, want only the shell call", unknown)
	}
	apply(s, s.Recover(now))
	apply(s, []proto.Message{&api.StatusChanged{Status: api.TaskStatus_TASK_STATUS_RUNNING}})
	step := s.Next(NextOptions{Now: now, MaxParallelTools: 4, Approval: func(*Call) ApprovalNeed { return ApprovalNeed{Required: true} }})
	if step.Kind != StepStartTool || step.Call.ID != "w" {
		t.Fatalf("Next after Rerun = %v %v, want the wait started again without approval", step.Kind, step.Call)
	}
}

// Calls that may start together start in one record: up to the limit, and
// not past a call that needs a decision.
func TestNextStartsABatch(t *testing.T) {
	calls := func(ids ...string) *State {
		s := childOf(t, "P", "", 0, nil)
		b := []proto.Message{&api.CycleStarted{Cycle: 1}, &api.AssistantMessage{Cycle: 1, ToolCallIds: ids}}
		for _, id := range ids {
			tool := "t"
			if strings.HasPrefix(id, "ask") {
				tool = "ask"
			}
			b = append(b, &api.ToolCallRecorded{CallId: id, Cycle: 1, Tool: tool})
		}
		apply(s, append(b, &api.CycleFinished{Cycle: 1, Outcome: api.CycleOutcome_CYCLE_OUTCOME_COMPLETED}))
		return s
	}
	approval := func(c *Call) ApprovalNeed { return ApprovalNeed{Required: c.Tool == "ask"} }
	tests := []struct {
		s     *State
		limit int
		want  []string
	}{
		{calls("a", "b", "c"), 4, []string{"a", "b", "c"}},
		{calls("a", "b", "c"), 2, []string{"a", "b"}},
		{calls("a", "ask1", "c"), 4, []string{"a"}},
		{calls("a", "b", "ask1"), 4, []string{"a", "b"}},
	}
	for i, tt := range tests {
		st := tt.s.Next(NextOptions{Now: now, MaxParallelTools: tt.limit, Approval: approval})
		var got []string
		for _, c := range st.Calls {
			got = append(got, c.ID)
		}
		if st.Kind != StepStartTool || !eq(got, tt.want) || len(st.Bodies) != len(tt.want) {
			t.Errorf("%d: Next = %v %v (%d bodies), want a start of %v", i, st.Kind, got, len(st.Bodies), tt.want)
		}
	}
}
