package actors_test

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"lemo/actors"
	"lemo/actors/taskstate"
	"lemo/api"
	"lemo/providers"
	"lemo/providers/fake"
	"lemo/tools/discovery"
)

// offeredNames are the tool names a model request offers, sorted.
func offeredNames(req *providers.Request) []string {
	var out []string
	for _, t := range req.Tools {
		out = append(out, t.Name)
	}
	slices.Sort(out)
	return out
}

func withDiscovery(initial ...string) func(*actors.Options) {
	return func(o *actors.Options) { o.InitialTools = append([]string{}, initial...) }
}

// A Task of a daemon with tool discovery starts with the initial set; a
// call of an offered tool that is not loaded fails naming tools.load;
// tools.search finds it, tools.load records the load, and the next Cycle
// offers it and runs its call.
func TestDiscoveryLoadsFromTheNextCycle(t *testing.T) {
	h := newHarnessWith(t, fake.Sequence(
		fake.Turn{ToolCalls: []providers.ToolCall{call("p1", "test_live", "too early"), fake.ToolCall("p2", "tools_search", map[string]string{"query": "live"})}},
		fake.Turn{ToolCalls: []providers.ToolCall{fake.ToolCall("p3", "tools_load", map[string][]string{"names": {"test_live"}})}},
		fake.Turn{ToolCalls: []providers.ToolCall{call("p4", "test_live", "now")}},
		fake.Turn{Text: "done"},
	), withDiscovery("test.echo"), discovery.New()...)
	id := h.create("find a tool")
	evs := h.waitStatus(id, api.TaskStatus_TASK_STATUS_FINISHED)

	reqs := h.model.Requests()
	if len(reqs) != 4 {
		t.Fatalf("model calls = %d, want 4:\n%s", len(reqs), dump(evs))
	}
	initial := []string{"test_echo", "tools_load", "tools_search"}
	for i, want := range [][]string{initial, initial, {"test_echo", "test_live", "tools_load", "tools_search"}, {"test_echo", "test_live", "tools_load", "tools_search"}} {
		if got := offeredNames(reqs[i]); !slices.Equal(got, want) {
			t.Fatalf("Cycle %d offers %q, want %q", i+1, got, want)
		}
	}
	early, _ := toolMessage(reqs[1], "call-1-1")
	if !strings.Contains(early, `"test_live" is not loaded`) || !strings.Contains(early, "tools_load") || !strings.Contains(early, "tools.load") {
		t.Fatalf("the call of a tool not loaded reads %q, want it to name tools.load", early)
	}
	found, _ := toolMessage(reqs[1], "call-1-2")
	var sr discovery.SearchResult
	if err := json.Unmarshal([]byte(found), &sr); err != nil || len(sr.Matches) == 0 || sr.Matches[0].Name != "test.live" || sr.Matches[0].Loaded {
		t.Fatalf("tools.search result = %s (%v), want test.live first, not loaded", found, err)
	}
	loaded, _ := toolMessage(reqs[2], "call-2-1")
	if !strings.Contains(loaded, `"loaded":["test.live"]`) {
		t.Fatalf("tools.load result = %s", loaded)
	}
	if got, _ := toolMessage(reqs[3], "call-3-1"); got != `{"echo":"now"}` {
		t.Fatalf("the loaded tool's result = %q", got)
	}
	var tl *api.ToolsLoaded
	for _, e := range evs {
		if e.GetToolsLoaded() != nil {
			if tl != nil {
				t.Fatalf("two loads recorded:\n%s", dump(evs))
			}
			tl = e.GetToolsLoaded()
		}
	}
	if tl == nil || !slices.Equal(tl.GetTools(), []string{"test.live"}) || tl.GetCallId() != "call-2-1" {
		t.Fatalf("recorded load = %v, want test.live by call-2-1", tl)
	}
	if ts := taskstate.ToolSetOf(evs); !ts.Discovery || !slices.Equal(ts.Names, []string{"test.echo", "test.live", "tools.load", "tools.search"}) {
		t.Fatalf("ToolSetOf(history) = %+v", ts)
	}
	checkContiguous(t, evs)
}

// A load that names an unknown tool, or one the Task's own rule denies,
// fails the call with a clear message and records nothing.
func TestDiscoveryRefusedLoads(t *testing.T) {
	h := newHarnessWith(t, fake.Sequence(
		fake.Turn{ToolCalls: []providers.ToolCall{
			fake.ToolCall("p1", "tools_load", map[string][]string{"names": {"test.lvie"}}),
			fake.ToolCall("p2", "tools_load", map[string][]string{"names": {"test.block"}}),
		}},
		fake.Turn{Text: "gave up"},
	), withDiscovery(), discovery.New()...)
	m, err := h.d.CreateTask(context.Background(), actors.Operator, actors.CreateTask{Request: "load badly", Model: "fake/m",
		Approvals: []*api.ToolApproval{{Tool: "test.block", Rule: api.ApprovalRule_APPROVAL_RULE_DENY}}})
	if err != nil {
		t.Fatal(err)
	}
	evs := h.waitStatus(m.GetTaskId(), api.TaskStatus_TASK_STATUS_FINISHED)
	fails := map[string]string{}
	for _, e := range evs {
		if e.GetToolsLoaded() != nil {
			t.Fatalf("a refused load was recorded:\n%s", dump(evs))
		}
		if f := e.GetToolFailed(); f != nil {
			fails[f.GetCallId()] = f.GetMessage()
		}
	}
	if msg := fails["call-1-1"]; !strings.Contains(msg, `no tool is named "test.lvie"`) || !strings.Contains(msg, "did you mean test.live") {
		t.Fatalf("unknown name: %q", msg)
	}
	if msg := fails["call-1-2"]; !strings.Contains(msg, "test.block is not offered to this task") || !strings.Contains(msg, "deny test.block") {
		t.Fatalf("denied tool: %q", msg)
	}
}

// --tools fixes the set: the discovery tools are not offered, and naming
// them is refused at creation.
func TestDiscoveryFixedSet(t *testing.T) {
	h := newHarnessWith(t, fake.Echo(), withDiscovery("test.echo"), discovery.New()...)
	m, err := h.d.CreateTask(context.Background(), actors.Operator, actors.CreateTask{Request: "fixed", Model: "fake/m", Tools: []string{"test.live"}, ToolsRestricted: true})
	if err != nil {
		t.Fatal(err)
	}
	h.waitStatus(m.GetTaskId(), api.TaskStatus_TASK_STATUS_FINISHED)
	if got := offeredNames(h.model.Requests()[0]); !slices.Equal(got, []string{"test_live"}) {
		t.Fatalf("a fixed set offers %q, want only test_live", got)
	}
	_, err = h.d.CreateTask(context.Background(), actors.Operator, actors.CreateTask{Request: "fixed", Model: "fake/m", Tools: []string{"test.live", "tools.load"}, ToolsRestricted: true})
	if err == nil || !strings.Contains(err.Error(), "fixed set") {
		t.Fatalf("--tools naming tools.load: %v, want a refusal", err)
	}
}

// A restart between tools.load and the next Cycle keeps the loaded set:
// the set is rebuilt from the history.
func TestDiscoveryLoadSurvivesRestart(t *testing.T) {
	h := newHarnessWith(t, fake.Sequence(
		fake.Turn{ToolCalls: []providers.ToolCall{fake.ToolCall("p1", "tools_load", map[string][]string{"names": {"test.live"}}), call("p2", "test_block", "b1")}},
		fake.Turn{ToolCalls: []providers.ToolCall{call("p3", "test_live", "after restart")}},
		fake.Turn{Text: "done"},
	), withDiscovery("test.block"), discovery.New()...)
	id := h.create("load, then restart")
	h.waitFor(id, "the load recorded and the block running", func(evs []*api.Event) bool {
		return has(evs, func(e *api.Event) bool { return e.GetToolsLoaded() != nil }) && h.blocks.isRunning("b1")
	})
	h.restart()
	if _, err := h.d.Continue(context.Background(), actors.Operator, id, ""); err != nil {
		t.Fatalf("Continue: %v", err)
	}
	h.waitStatus(id, api.TaskStatus_TASK_STATUS_FINISHED)
	reqs := h.model.Requests()
	if len(reqs) != 3 {
		t.Fatalf("model calls = %d, want 3", len(reqs))
	}
	if got, want := offeredNames(reqs[1]), []string{"test_block", "test_live", "tools_load", "tools_search"}; !slices.Equal(got, want) {
		t.Fatalf("the Cycle after the restart offers %q, want %q", got, want)
	}
	if got, _ := toolMessage(reqs[2], "call-2-1"); got != `{"echo":"after restart"}` {
		t.Fatalf("the loaded tool's call after the restart reads %q", got)
	}
}
