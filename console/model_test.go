package console

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/x/ansi"

	"lemo/api"
)

// updating reports the -update flag (declared by teatest's golden
// package, which rewrites its own golden files with it too).
func updating() bool {
	f := flag.Lookup("update")
	return f != nil && f.Value.String() == "true"
}

// golden compares a screen with testdata/<name>.golden.
func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name+".golden")
	if updating() {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./console -update to create it)", err)
	}
	if got != string(want) {
		t.Fatalf("screen %s differs from %s (go test ./console -update rewrites it):\n%s", name, path, got)
	}
}

// checkSize checks a screen has exactly h lines of at most w cells.
func checkSize(t *testing.T, screen string, w, h int) {
	t.Helper()
	lines := strings.Split(screen, "\n")
	if len(lines) != h {
		t.Fatalf("screen has %d lines, want %d:\n%s", len(lines), h, screen)
	}
	for i, l := range lines {
		if n := ansi.StringWidth(l); n > w {
			t.Fatalf("line %d is %d cells wide, more than %d: %q", i, n, w, l)
		}
	}
}

func TestBuildRows(t *testing.T) {
	f := fixture()
	tasks := map[string]*taskState{}
	for _, m := range f.metas {
		tasks[m.GetTaskId()] = &taskState{meta: m}
	}
	rows := buildRows(f.tree, tasks)
	var got []string
	for _, r := range rows {
		got = append(got, fmt.Sprintf("%s%s|%s|%s|%s|%s", r.prefix, r.label, r.kind, r.taskID, r.callID, r.tool))
	}
	want := []string{
		"daemon|daemon|||",
		"├ hub|hub|||",
		"└ tasks|tasks|||",
		"  ├ …AAAAAA sleep a while|task|" + taskA + "||",
		"  │ ├ cycle-2|cycle|" + taskA + "||",
		"  │ └ tool-call-1-1|tool|" + taskA + "|call-1-1|shell.run",
		"  │   └ session-pi|session|" + taskA + "|call-1-1|",
		"  ├ …BBBBBB echo approve me|task|" + taskB + "||",
		"  └ …CCCCCC hello there|task|" + taskC + "||",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("rows:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if rows[8].actor != nil || rows[8].key != "dormant/"+taskC {
		t.Errorf("the finished Task is not dormant: %+v", rows[8])
	}
	// Without a tree (a token that may not inspect): the Tasks alone.
	rows = buildRows(nil, tasks)
	if len(rows) != 3 || rows[0].taskID != taskA || rows[2].taskID != taskC || rows[0].prefix != "" {
		t.Errorf("rows without a tree: %+v", rows)
	}
}

// The tree pane at 80×24: every actor with its state, time in state,
// mailbox, messages and restarts; the selected row's details.
func TestTreeScreen(t *testing.T) {
	tm := newTestModel(t, fixture(), 80, 24)
	screen := tm.View()
	checkSize(t, screen, 80, 24)
	golden(t, "tree-80x24", screen)
	for _, want := range []string{"tool-call-1-1", "running shell.run", "calling fake/shell", "awaiting_approval ?1", "session-pi", "hello there", "finished"} {
		if !strings.Contains(screen, want) {
			t.Errorf("the tree screen lacks %q", want)
		}
	}
	// RST shows what the Task's supervision decided: 0 restarts of its
	// own, 2 children stopped; its detail line says the last decision.
	if !strings.Contains(screen, "   0/2") {
		t.Errorf("the Task's RST column does not show its 2 stopped children:\n%s", screen)
	}
	screen = tm.keys("down", "down", "down")
	if !strings.Contains(screen, "supervision: cycle-1: stop (panic): panic: model exploded") {
		t.Errorf("the Task's last supervision decision is not shown:\n%s", screen)
	}
	// The session row is selected: its failure is in the detail line.
	screen = tm.keys("down", "down", "down")
	if !strings.Contains(screen, "last failure: panic: session exploded") {
		t.Errorf("the session's failure is not shown:\n%s", screen)
	}
	// Wide: the failure has its own column.
	tm.send(tea.WindowSizeMsg{Width: 160, Height: 40})
	screen = tm.View()
	checkSize(t, screen, 160, 40)
	if !strings.Contains(screen, "LAST FAILURE") {
		t.Errorf("no failure column at 160 columns:\n%s", screen)
	}
	if !strings.Contains(screen, "0/2 cycle-1: stop (panic)") {
		t.Errorf("the failure column does not show the Task's last decision at 160 columns:\n%s", screen)
	}
}

// The Task pane: the transcript through the tool Views, token usage and
// what the model saw per Cycle, live deltas and pending approvals.
func TestTaskScreen(t *testing.T) {
	f := fixture()
	tm := newTestModel(t, f, 80, 24)
	screen := tm.keys("down", "down", "down", "enter")
	checkSize(t, screen, 80, 24)
	for _, want := range []string{
		"task " + taskA + " · sleep a while",
		"> sleep a while",
		"→ call-1-1 $ sleep 300", // the shell View
		"cycle 1 completed · tokens in 2739 (est 3394) out 12",
		"instructions 84, tools 3302, recall 120, conversation 8",
		"1 excerpted", "1 recalled from …CCCCCC",
	} {
		if !strings.Contains(strings.ReplaceAll(screen, "\n    ", " "), want) {
			t.Errorf("the task screen lacks %q:\n%s", want, screen)
		}
	}
	// Live: the model's text streams, a call's state updates.
	tm.push(
		&api.Update{Body: &api.Update_Delta{Delta: &api.Delta{TaskId: taskA, Cycle: 2, Kind: api.DeltaKind_DELTA_KIND_INPUT, Input: &api.InputSummary{EstimatedTokens: 3500, CeilingTokens: 91750, WindowTokens: 131072, WindowKnown: true, AfterFirstResponse: true}}}},
		textDelta(taskA, 2, "thinking about "), textDelta(taskA, 2, "the sleep"),
		&api.Update{Body: &api.Update_Delta{Delta: &api.Delta{TaskId: taskA, Kind: api.DeltaKind_DELTA_KIND_TOOL_STATE, CallId: "call-1-1", Data: []byte(`{"phase":"running","elapsed_ms":1500,"stdout_bytes":0}`)}}},
	)
	screen = tm.frame(epoch.Add(time.Second))
	for _, want := range []string{"⋯ cycle 2 sees 3500 tok", "⋯ cycle 2: thinking about the sleep", "⋯ call-1-1 shell.run: running 1.5s, 0 bytes out"} {
		if !strings.Contains(screen, want) {
			t.Errorf("the live section lacks %q:\n%s", want, screen)
		}
	}
	golden(t, "task-80x24", screen)
	// Why the ceiling is what it is: 35% of the window (131072) for cycle
	// 1, before the first response; 70% for cycle 2, after it (the live
	// line is cut at 80 columns: read it wider).
	joined := strings.ReplaceAll(screen, "\n    ", " ")
	if !strings.Contains(joined, "of ceiling 45875 (35% of the window until the first response, then 70%), window 131072") {
		t.Errorf("cycle 1 does not explain its ceiling as 35%% of the window:\n%s", screen)
	}
	tm.send(tea.WindowSizeMsg{Width: 160, Height: 24})
	if wide := tm.frame(epoch.Add(time.Second)); !strings.Contains(wide, "⋯ cycle 2 sees 3500 tok of ceiling 91750 (70% of the window after the first response), window 131072") {
		t.Errorf("cycle 2 does not explain its ceiling as 70%% of the window:\n%s", wide)
	}
	tm.send(tea.WindowSizeMsg{Width: 80, Height: 24})
	// i shows what the model saw in detail.
	screen = tm.keys("i", "g")
	for _, want := range []string{"excerpt: seq 7 call-1-1 result, 800 of 5000 tokens kept", "recalled: task " + taskC + " seq 5 (fact), 120 tokens"} {
		if !strings.Contains(screen, want) {
			t.Errorf("the details lack %q:\n%s", want, screen)
		}
	}
	// A committed event arriving live joins the transcript once.
	next := api.NewEvent(taskA, 9, ts(9), &api.ToolFailed{CallId: "call-1-1", Kind: api.ToolFailureKind_TOOL_FAILURE_KIND_CANCELLED, Message: "stopped by local"})
	tm.push(eventUpdate(f.history[taskA][7]), eventUpdate(next), eventUpdate(next))
	tm.keys("G")
	screen = tm.frame(epoch.Add(2 * time.Second))
	if n := strings.Count(screen, "✗ call-1-1 shell.run failed (cancelled): stopped by local"); n != 1 {
		t.Errorf("the live failure shows %d times:\n%s", n, screen)
	}
	// A tools.load's record says what the next model calls get.
	tm.push(eventUpdate(api.NewEvent(taskA, 10, ts(10), &api.ToolsLoaded{Tools: []string{"files.write", "mcp.git.log"}, CallId: "call-1-1"})))
	tm.keys("G")
	if screen = tm.frame(epoch.Add(3 * time.Second)); !strings.Contains(screen, "+ tools loaded for the next model calls: files.write, mcp.git.log") {
		t.Errorf("the load is not shown:\n%s", screen)
	}
	// Task B: its pending approval.
	screen = tm.keys("esc", "down", "down", "down", "down", "enter")
	if !strings.Contains(screen, `? shell.run call-1-1 awaits approval: no allow rule covers "echo approve me"`) {
		t.Errorf("the pending approval is not shown:\n%s", screen)
	}
}

// Every action waits for y; any other key does nothing; the outcome (or
// the error) shows on the status line.
func TestActionsAreConfirmed(t *testing.T) {
	cases := []struct {
		name   string
		pick   []string
		key    string
		prompt string
		call   string
	}{
		{"pause", []string{"down", "down", "down"}, "p", "Pause task …AAAAAA? [y/N]", "pause " + taskA + " "},
		{"continue", []string{"down", "down", "down"}, "c", "Continue task …AAAAAA? [y/N]", "continue " + taskA + " "},
		{"cancel", []string{"down", "down", "down"}, "x", "Cancel task …AAAAAA? [y/N]", "cancel " + taskA + " "},
		{"approve", []string{"down", "down", "down", "down", "down", "down", "down"}, "a", "Approve shell.run call-1-1 of task …BBBBBB? [y/N]", "approve " + taskB + " " + taskB + ".call-1-1"},
		{"always allow", []string{"down", "down", "down", "down", "down", "down", "down"}, "A", "Approve call-1-1 and always allow this exact command in task …BBBBBB? [y/N]", "always " + taskB + " " + taskB + ".call-1-1"},
		{"deny", []string{"down", "down", "down", "down", "down", "down", "down"}, "d", "Deny shell.run call-1-1 of task …BBBBBB? [y/N]", "deny " + taskB + " " + taskB + ".call-1-1"},
		{"stop the selected tool", []string{"down", "down", "down", "down", "down"}, "s", "Stop shell.run call-1-1 of task …AAAAAA? [y/N]", "stop " + taskA + " call-1-1"},
		{"stop a task's tool", []string{"down", "down", "down"}, "s", "Stop shell.run call-1-1 of task …AAAAAA? [y/N]", "stop " + taskA + " call-1-1"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := fixture()
			tm := newTestModel(t, f, 80, 24)
			tm.keys(tc.pick...)
			screen := tm.keys(tc.key)
			if !strings.Contains(screen, tc.prompt) {
				t.Fatalf("no confirmation %q:\n%s", tc.prompt, screen)
			}
			screen = tm.keys("n")
			if calls := f.recorded(); len(calls) != 0 || !strings.Contains(screen, "not done") {
				t.Fatalf("declined, yet %v ran:\n%s", calls, screen)
			}
			tm.keys(tc.key)
			screen = tm.keys("y")
			if calls := f.recorded(); len(calls) != 1 || calls[0] != tc.call {
				t.Fatalf("calls = %q, want %q", calls, tc.call)
			}
			if !strings.Contains(screen, "; the task is") {
				t.Errorf("no outcome on the status line:\n%s", screen)
			}
			// A failing command says why.
			f = fixture()
			f.fail = errors.New("task: cannot do it")
			tm = newTestModel(t, f, 80, 24)
			tm.keys(tc.pick...)
			tm.keys(tc.key)
			screen = tm.keys("y")
			if !strings.Contains(screen, "failed: task: cannot do it") {
				t.Errorf("the error is not shown:\n%s", screen)
			}
		})
	}
	// Nothing to approve or stop: said, and nothing asked.
	f := fixture()
	tm := newTestModel(t, f, 80, 24)
	screen := tm.keys("down", "down", "down", "down", "down", "down", "down", "down", "a")
	if !strings.Contains(screen, "task …CCCCCC has no pending approval") || tm.confirm != nil {
		t.Errorf("approve without an approval:\n%s", screen)
	}
	if screen = tm.keys("s"); !strings.Contains(screen, "has no running tool call") {
		t.Errorf("stop without a running call:\n%s", screen)
	}
}

// Keys: moving, opening, switching Tasks, help and quitting.
func TestNavigation(t *testing.T) {
	tm := newTestModel(t, fixture(), 80, 24)
	if screen := tm.keys("enter"); !strings.Contains(screen, "select a Task first") {
		t.Errorf("enter on the daemon row:\n%s", screen)
	}
	screen := tm.keys("down", "down", "down", "tab")
	if !strings.Contains(screen, "task "+taskA) {
		t.Fatalf("tab did not open the Task:\n%s", screen)
	}
	if screen = tm.keys("]"); !strings.Contains(screen, "task "+taskB) {
		t.Errorf("] did not open the older Task:\n%s", screen)
	}
	if screen = tm.keys("]", "]"); !strings.Contains(screen, "task "+taskC) {
		t.Errorf("] past the oldest Task:\n%s", screen)
	}
	if screen = tm.keys("["); !strings.Contains(screen, "task "+taskB) {
		t.Errorf("[ did not open the newer Task:\n%s", screen)
	}
	if screen = tm.keys("?"); !strings.Contains(screen, "Tree columns") {
		t.Errorf("? shows no help:\n%s", screen)
	}
	// The key that closes the help does nothing else (issue 20): x here
	// must not ask to cancel the Task.
	if screen = tm.keys("x"); strings.Contains(screen, "Tree columns") || tm.confirm != nil {
		t.Errorf("the key that closed the help also acted:\n%s", screen)
	}
	tm.keys("esc")
	if tm.pane != paneTree {
		t.Errorf("esc did not go back to the tree")
	}
	_, cmd := tm.Update(keyMsg("q"))
	if cmd == nil || fmt.Sprint(cmd()) != "{}" {
		t.Errorf("q does not quit")
	}
}

// A token that may not inspect sees its Tasks without the tree.
func TestWithoutOperator(t *testing.T) {
	f := fixture()
	f.welcome = &api.Welcome{Owner: "alice"}
	tm := newTestModel(t, f, 80, 24)
	screen := tm.View()
	if !strings.Contains(screen, "actor tree: permission denied: the actor tree is shown to operator tokens only") || !strings.Contains(screen, "echo approve me") {
		t.Errorf("a non-operator's screen:\n%s", screen)
	}
}

// A burst of 10,000 deltas waiting at one frame is applied by that frame
// and rendered once; frames with nothing new render nothing.
func TestBurstIsOneFrame(t *testing.T) {
	tm := newTestModel(t, fixture(), 80, 24)
	tm.keys("down", "down", "down", "enter")
	before := tm.renders
	for i := range 10000 {
		tm.push(textDelta(taskA, 2, fmt.Sprintf("d%d ", i)))
	}
	screen := tm.frame(epoch.Add(time.Second))
	if tm.renders != before+1 {
		t.Errorf("renders = %d after one frame, want %d", tm.renders, before+1)
	}
	if !strings.Contains(screen, "d9998 d9999") {
		t.Errorf("the last delta is not on screen:\n%s", screen)
	}
	for i := range 5 {
		tm.frame(epoch.Add(time.Second + time.Duration(i)*50*time.Millisecond))
	}
	if tm.renders != before+1 {
		t.Errorf("idle frames rendered: %d renders, want %d", tm.renders, before+1)
	}
}

// 1,000 deltas a second, as they would arrive between 20 frames of one
// second: every frame applies what arrived and renders once. How long a
// frame takes (it must stay well inside its 50ms) is
// BenchmarkFrameOf50Deltas's.
func TestThousandDeltasASecond(t *testing.T) {
	tm := newTestModel(t, fixture(), 80, 24)
	tm.keys("down", "down", "down", "enter")
	before, applied := tm.renders, tm.applied
	seq := 0
	for frame := range 20 {
		for range 50 { // 1,000/s over a 50ms frame
			tm.push(textDelta(taskA, 2, fmt.Sprintf("%d ", seq)))
			seq++
		}
		screen := tm.frame(epoch.Add(time.Duration(frame+1) * 50 * time.Millisecond))
		if !strings.Contains(screen, fmt.Sprintf("%d %d", seq-2, seq-1)) {
			t.Fatalf("frame %d does not show delta %d:\n%s", frame, seq-1, screen)
		}
	}
	if got := tm.renders - before; got != 20 {
		t.Errorf("renders = %d for 20 frames, want 20", got)
	}
	if got := tm.applied - applied; got != 1000 {
		t.Errorf("applied %d updates, want 1000", got)
	}
}

// BenchmarkFrameOf50Deltas measures one frame at 1,000 deltas a second:
// apply the 50 deltas that arrived in its 50ms and render 80x24 with the
// Task's answer open. ns/op is the frame's cost; the loop falls behind
// when it nears 50ms.
func BenchmarkFrameOf50Deltas(b *testing.B) {
	tm := newTestModel(b, fixture(), 80, 24)
	tm.keys("down", "down", "down", "enter")
	seq := 0
	b.ReportAllocs()
	b.ResetTimer()
	for frame := range b.N {
		b.StopTimer()
		for range 50 {
			tm.push(textDelta(taskA, 2, fmt.Sprintf("%d ", seq)))
			seq++
		}
		b.StartTimer()
		tm.frame(epoch.Add(time.Duration(frame+1) * 50 * time.Millisecond))
	}
}

// Child Tasks sit under their parent's row, live or dormant; a running
// child's actors under it.
func TestBuildRowsTree(t *testing.T) {
	tree := &api.ActorTree{Actors: []*api.ActorInfo{
		{Id: "daemon", Kind: "daemon"},
		{Id: "daemon/tasks", Kind: "tasks"},
		{Id: "daemon/tasks/P0000001", Kind: "task"},
		{Id: "daemon/tasks/C0000002", Kind: "task"},
		{Id: "daemon/tasks/C0000002/cycle-1", Kind: "cycle"},
		{Id: "daemon/tasks/P0000001/C0000006", Kind: "task"},
		{Id: "daemon/tasks/P0000001/C0000006/tool-call-1-1", Kind: "tool"},
	}}
	tasks := map[string]*taskState{
		"P0000001": {meta: &api.TaskMeta{TaskId: "P0000001"}},
		"C0000002": {meta: &api.TaskMeta{TaskId: "C0000002", ParentId: "P0000001"}},
		"C0000003": {meta: &api.TaskMeta{TaskId: "C0000003", ParentId: "P0000001"}},
		"G0000004": {meta: &api.TaskMeta{TaskId: "G0000004", ParentId: "C0000003"}},
		"R0000005": {meta: &api.TaskMeta{TaskId: "R0000005", ParentId: "gone"}},
		"C0000006": {meta: &api.TaskMeta{TaskId: "C0000006", ParentId: "P0000001"}},
	}
	var got []string
	rows := buildRows(tree, tasks)
	for _, r := range rows {
		got = append(got, r.prefix+r.label)
	}
	for _, r := range rows {
		if r.key == "daemon/tasks/P0000001/C0000006/tool-call-1-1" && (r.taskID != "C0000006" || r.callID != "call-1-1") {
			t.Fatalf("the nested tool row belongs to task %q, call %q; want C0000006, call-1-1", r.taskID, r.callID)
		}
	}
	want := []string{
		"daemon",
		"└ tasks",
		"  ├ P0000001",
		"  │ ├ C0000002",
		"  │ │ └ cycle-1",
		"  │ ├ C0000003",
		"  │ │ └ G0000004",
		"  │ └ C0000006",
		"  │   └ tool-call-1-1",
		"  └ R0000005",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("rows:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
