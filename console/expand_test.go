package console

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"lemo/api"
)

const taskD = "01M8PEPSX4T06MEF12P3DDDDDD"

// childFixture adds to the fixture a child Task D of A with a history
// longer than an expanded row shows.
func childFixture() *fakeBackend {
	f := fixture()
	bodies := []protoMessage{
		&api.TaskCreated{Owner: "local", Model: "fake/shell", Title: "count the files", Workspace: "/w/a", ParentId: taskA, Depth: 1},
		&api.UserMessage{Text: "count the files"},
		&api.StatusChanged{Status: api.TaskStatus_TASK_STATUS_RUNNING, Detail: "spawned by task " + taskA},
	}
	for i := 1; i <= 3; i++ {
		call := fmt.Sprintf("call-%d-1", i)
		bodies = append(bodies,
			&api.CycleStarted{Cycle: uint32(i), Model: "fake/shell"},
			&api.ToolCallRecorded{CallId: call, Cycle: uint32(i), Tool: "shell.run", Arguments: shellArgs(fmt.Sprintf("ls dir%d", i))},
			&api.ToolResult{CallId: call, OutputBytes: uint64(10 * i)},
		)
	}
	f.history[taskD] = events(taskD, bodies...)
	f.metas = append(f.metas, fold(f.history[taskD]))
	return f
}

// rowOf is the index of Task id's row.
func (tm *testModel) rowOf(id string) int {
	for i, r := range tm.rows {
		if r.taskID == id && r.kind == "task" && r.callID == "" {
			return i
		}
	}
	tm.t.Fatalf("no row for task %s", id)
	return -1
}

// A child Task's row expands to its recent events (the newest few, kept
// current as they happen) and collapses again; the other rows stay as
// they were.
func TestExpandChildRow(t *testing.T) {
	f := childFixture()
	tm := newTestModel(t, f, 100, 30)
	down := make([]string, tm.rowOf(taskD))
	for i := range down {
		down[i] = "down"
	}
	screen := tm.keys(down...)
	if !strings.Contains(screen, "▸ …DDDDDD count the files") {
		t.Fatalf("the child's row is not marked expandable:\n%s", screen)
	}
	before := len(tm.rows)
	screen = tm.keys("e")
	evs := f.history[taskD]
	if len(tm.rows) != before+maxRecentEvents || !strings.Contains(screen, "▾ …DDDDDD") {
		t.Fatalf("expanded: %d rows, want %d; screen:\n%s", len(tm.rows), before+maxRecentEvents, screen)
	}
	for _, ev := range evs[len(evs)-maxRecentEvents:] {
		if want := fmt.Sprintf("· %d %s", ev.GetSeq(), api.Kind(ev)); !strings.Contains(screen, want) {
			t.Errorf("the expanded row lacks %q:\n%s", want, screen)
		}
	}
	if !strings.Contains(screen, "· 12 tool_result call-3-1 shell.run: 30 bytes") {
		t.Errorf("a result does not name its call's tool:\n%s", screen)
	}
	if first := evs[len(evs)-maxRecentEvents-1]; strings.Contains(screen, fmt.Sprintf("· %d %s", first.GetSeq(), api.Kind(first))) {
		t.Errorf("an older event than the newest %d shows:\n%s", maxRecentEvents, screen)
	}
	// A new event joins at the end (once), the oldest shown leaves.
	next := api.NewEvent(taskD, uint64(len(evs)+1), ts(50), &api.StatusChanged{Status: api.TaskStatus_TASK_STATUS_FINISHED, Detail: "answered"})
	tm.push(eventUpdate(next), eventUpdate(next))
	screen = tm.frame(epoch.Add(time.Second))
	if n := strings.Count(screen, fmt.Sprintf("· %d status_changed finished answered", next.GetSeq())); n != 1 || len(tm.rows) != before+maxRecentEvents {
		t.Fatalf("the new event shows %d times in %d rows:\n%s", n, len(tm.rows), screen)
	}
	if old := evs[len(evs)-maxRecentEvents]; strings.Contains(screen, fmt.Sprintf("· %d %s", old.GetSeq(), api.Kind(old))) {
		t.Errorf("the oldest event stays after a new one:\n%s", screen)
	}
	// ← on one of its events collapses it; the selection goes back to it.
	screen = tm.keys("down", "down", "left")
	if len(tm.rows) != before || !strings.Contains(screen, "▸ …DDDDDD") || strings.Contains(screen, "status_changed") {
		t.Fatalf("collapsed: %d rows, want %d:\n%s", len(tm.rows), before, screen)
	}
	if r := tm.selectedRow(); r == nil || r.taskID != taskD || r.kind != "task" {
		t.Fatalf("after the collapse the selection is %+v, want the child's row", r)
	}
	// → expands it again, e collapses it.
	if tm.keys("right"); len(tm.rows) != before+maxRecentEvents {
		t.Fatalf("→ did not expand: %d rows", len(tm.rows))
	}
	if tm.keys("e"); len(tm.rows) != before {
		t.Fatalf("e did not collapse: %d rows", len(tm.rows))
	}
	// While collapsed, its events are not kept.
	tm.push(eventUpdate(api.NewEvent(taskD, next.GetSeq()+1, ts(60), &api.UserMessage{Text: "more"})))
	tm.frame(epoch.Add(2 * time.Second))
	if n := len(tm.task(taskD).recent); n != 0 || len(tm.rows) != before {
		t.Fatalf("collapsed, it keeps %d events and shows %d rows", n, len(tm.rows))
	}
}
