package console

import (
	"strings"
	"testing"
	"time"

	"lemo/api"
)

// / filters the tree to the rows that match (and those above them); Esc
// clears it.
func TestTreeFilter(t *testing.T) {
	tm := newTestModel(t, fixture(), 80, 24)
	all := len(tm.rows)
	screen := tm.keys("/", "C", "C", "C", "C", "C", "C")
	if !strings.Contains(screen, "/CCCCCC") {
		t.Fatalf("the filter being typed is not shown:\n%s", screen)
	}
	if len(tm.rows) == 0 || len(tm.rows) >= all {
		t.Fatalf("%d rows of %d after filtering", len(tm.rows), all)
	}
	for _, r := range tm.rows {
		if !strings.Contains(r.key+r.taskID, taskC) && !strings.HasPrefix(tasksPath, r.key) && r.key != "daemon" {
			t.Errorf("row %q (task %q) does not match the filter", r.key, r.taskID)
		}
	}
	screen = tm.keys("enter")
	if !strings.Contains(screen, `filter "CCCCCC"`) {
		t.Fatalf("the kept filter is not said:\n%s", screen)
	}
	tm.keys("esc")
	if len(tm.rows) != all {
		t.Fatalf("esc left %d rows of %d", len(tm.rows), all)
	}
}

// A status message goes away after a while (errors after longer).
func TestStatusExpires(t *testing.T) {
	tm := newTestModel(t, fixture(), 80, 24)
	screen := tm.keys("enter")
	if !strings.Contains(screen, "select a Task first") {
		t.Fatalf("no status:\n%s", screen)
	}
	if screen = tm.frame(epoch.Add(statusTTL)); !strings.Contains(screen, "select a Task first") {
		t.Fatalf("an error went away as soon as a plain status:\n%s", screen)
	}
	if screen = tm.frame(epoch.Add(2*statusTTL + time.Millisecond)); strings.Contains(screen, "select a Task first") {
		t.Fatalf("the status stayed:\n%s", screen)
	}
}

// o sorts the Tasks by the next column: the live ones by each, the
// dormant ones (which show only STATE) by STATE, else newest first; a full
// turn comes back to newest first.
func TestSortByColumn(t *testing.T) {
	f := fixture()
	// Two more dormant Tasks: the newest cancelled, the oldest failed.
	const newest, oldest = "01M8PEPSX4T06MEF12P3DDDDDD", "01M8PEPSX4T06MEF12N0EEEEEE"
	f.metas = append(f.metas,
		&api.TaskMeta{TaskId: newest, Owner: "local", Model: "fake/echo", Title: "stopped", Status: api.TaskStatus_TASK_STATUS_CANCELLED},
		&api.TaskMeta{TaskId: oldest, Owner: "local", Model: "fake/echo", Title: "broke", Status: api.TaskStatus_TASK_STATUS_FAILED})
	tm := newTestModel(t, f, 80, 24)
	rowsOf := func(live bool) []string {
		var ids []string
		for _, r := range tm.rows {
			if r.kind == "task" && (r.actor != nil) == live {
				ids = append(ids, r.taskID)
			}
		}
		return ids
	}
	order := func() []string { return rowsOf(true) }
	dormant := func() string { return strings.Join(rowsOf(false), " ") }
	newestFirst := strings.Join([]string{newest, taskC, oldest}, " ")
	if got := dormant(); got != newestFirst {
		t.Fatalf("dormant Tasks by default: %s, want newest first: %s", got, newestFirst)
	}
	// taskA's id sorts after taskB's: it is the newer.
	if got := order(); len(got) != 2 || got[0] != taskA {
		t.Fatalf("default order %v, want newest (%s) first", got, taskA)
	}
	screen := tm.keys("o")
	if got := order(); tm.sortBy != "STATE" || got[0] != taskB || !strings.Contains(screen, "sorted by STATE") {
		t.Fatalf("sorted by %q: %v, want %s (awaiting_approval) first:\n%s", tm.sortBy, got, taskB, screen)
	}
	// cancelled, failed, finished.
	if got, want := dormant(), strings.Join([]string{newest, oldest, taskC}, " "); got != want {
		t.Fatalf("dormant Tasks by STATE: %s, want %s", got, want)
	}
	tm.keys("o") // FOR: dormant rows have no time in state
	if got := dormant(); tm.sortBy != "FOR" || got != newestFirst {
		t.Fatalf("dormant Tasks by FOR: %s, want newest first: %s", got, newestFirst)
	}
	tm.keys("o", "o", "o", "o")
	if got := order(); tm.sortBy != "" || got[0] != taskA || dormant() != newestFirst {
		t.Fatalf("after a full turn: %q %v, dormant %s", tm.sortBy, got, dormant())
	}
}

// A on an approval approves it and allows such calls for the rest of the
// Task (the daemon's always_for_task), after y like every action; a
// running call's own question is decided once, so A is refused for it.
func TestAlwaysAllowAction(t *testing.T) {
	f := fixture()
	tm := newTestModel(t, f, 80, 24)
	screen := tm.keys("down", "down", "down", "down", "down", "down", "down", "enter")
	if !strings.Contains(screen, "a/A/d approve/always/deny") {
		t.Fatalf("the Task pane's help line does not offer A:\n%s", screen)
	}
	if screen = tm.keys("A"); !strings.Contains(screen, "Approve call-1-1 and always allow this exact command in task …BBBBBB? [y/N]") {
		t.Fatalf("no confirmation:\n%s", screen)
	}
	screen = tm.keys("y")
	if calls := f.recorded(); len(calls) != 1 || calls[0] != "always "+taskB+" "+taskB+".call-1-1" {
		t.Fatalf("calls = %q, want the always-allow of %s.call-1-1", calls, taskB)
	}
	if !strings.Contains(screen, "approved (always) shell.run call-1-1 of task …BBBBBB; the task is running") {
		t.Errorf("the outcome is not said:\n%s", screen)
	}
	if screen = tm.keys("?"); !strings.Contains(screen, "approve, always allow (in this Task), deny") {
		t.Errorf("the help does not explain A:\n%s", screen)
	}

	// A running call's own question.
	f = fixture()
	f.approvals[0].GetApprovalRequested().DuringRun = true
	tm = newTestModel(t, f, 80, 24)
	screen = tm.keys("down", "down", "down", "down", "down", "down", "down", "enter", "A")
	if tm.confirm != nil || !strings.Contains(screen, "decided once") {
		t.Fatalf("A on a running call's question was offered:\n%s", screen)
	}
	if calls := f.recorded(); len(calls) != 0 {
		t.Fatalf("calls = %q, want none", calls)
	}
}

// l shows the selected Task's events one a line, scrollable, and l again
// the transcript; the help says so.
func TestEventLogPane(t *testing.T) {
	f := fixture()
	tm := newTestModel(t, f, 80, 24)
	if screen := tm.keys("?"); !strings.Contains(screen, "the Task's event log") {
		t.Fatalf("the help does not offer l:\n%s", screen)
	}
	tm.keys("q") // closes the help only
	screen := tm.keys("down", "down", "down", "l")
	if tm.pane != paneTask || tm.open != taskA || !tm.eventLog {
		t.Fatalf("l on a Task row: pane %v open %q log %v", tm.pane, tm.open, tm.eventLog)
	}
	evs := f.history[taskA]
	for _, want := range []string{
		"SEQ TIME (UTC)",
		"task_created           by local with fake/shell in /w/a",
		"user_message           sleep a while",
		"tool_call_recorded     call-1-1 shell.run",
		"cycle_finished         cycle 1 completed · tokens in 2739",
	} {
		if !strings.Contains(screen, want) {
			t.Errorf("the log lacks %q:\n%s", want, screen)
		}
	}
	if n := strings.Count(screen, "\n     "); n < len(evs) {
		t.Errorf("%d event lines, want one for each of the %d events:\n%s", n, len(evs), screen)
	}
	// A new event joins the log at the end, once.
	next := api.NewEvent(taskA, uint64(len(evs)+1), ts(99), &api.ToolFailed{CallId: "call-1-1", Kind: api.ToolFailureKind_TOOL_FAILURE_KIND_CANCELLED, Message: "stopped by local"})
	tm.push(eventUpdate(next), eventUpdate(next))
	screen = tm.frame(epoch.Add(time.Second))
	if n := strings.Count(screen, "tool_failed            call-1-1 shell.run (cancelled): stop"); n != 1 {
		t.Errorf("the new event shows %d times:\n%s", n, screen)
	}
	// Scrolling: g goes to the top (the column header), G back to the end.
	for i := range 30 {
		tm.push(eventUpdate(api.NewEvent(taskA, uint64(len(evs)+2+i), ts(100), &api.ToolState{CallId: "call-1-1", State: []byte(`{"phase":"running"}`)})))
	}
	screen = tm.frame(epoch.Add(2 * time.Second))
	if strings.Contains(screen, "SEQ TIME") || !strings.Contains(screen, `tool_state             call-1-1 shell.run {"phase"`) {
		t.Fatalf("the log does not follow its end:\n%s", screen)
	}
	if screen = tm.keys("g"); !strings.Contains(screen, "SEQ TIME") {
		t.Errorf("g does not scroll to the top:\n%s", screen)
	}
	if screen = tm.keys("G"); strings.Contains(screen, "SEQ TIME") {
		t.Errorf("G does not scroll to the end:\n%s", screen)
	}
	// l again: the transcript.
	if screen = tm.keys("l", "g"); tm.eventLog || !strings.Contains(screen, "> sleep a while") || strings.Contains(screen, "user_message") {
		t.Errorf("l again did not bring the transcript back:\n%s", screen)
	}
}
