package console

import (
	"strings"
	"testing"

	"lemo/api"
)

// A Task with a budget shows what it spent and has left on its tree row's
// detail line and in its pane.
func TestBudgetShown(t *testing.T) {
	f := fixture()
	f.history[taskC] = events(taskC,
		&api.TaskCreated{Owner: "local", Model: "fake/echo", Title: "hello there", Workspace: "/w/c", Budget: &api.BudgetAmounts{Tokens: 1000}},
		&api.UserMessage{Text: "hello there"},
		&api.StatusChanged{Status: api.TaskStatus_TASK_STATUS_RUNNING, Detail: "created"},
		&api.CycleStarted{Cycle: 1, Model: "fake/echo", Reservation: &api.BudgetReservation{InputTokens: 50, OutputTokens: 100}},
		&api.AssistantMessage{Cycle: 1, Text: "echo: hello there"},
		&api.CycleFinished{Cycle: 1, Outcome: api.CycleOutcome_CYCLE_OUTCOME_COMPLETED, Usage: &api.Usage{PromptTokens: 10, CompletionTokens: 3}},
		&api.StatusChanged{Status: api.TaskStatus_TASK_STATUS_FINISHED, Detail: "answered"},
	)
	f.metas = []*api.TaskMeta{fold(f.history[taskC]), fold(f.history[taskB]), fold(f.history[taskA])}
	tm := newTestModel(t, f, 120, 30)
	const want = "budget: tokens 13 of 1000 (987 left)"
	screen := tm.View()
	found := false
	for i := 0; i < 12 && !found; i++ {
		found = strings.Contains(screen, want)
		if !found {
			screen = tm.keys("down")
		}
	}
	if !found {
		t.Fatalf("no tree row's detail line shows %q:\n%s", want, screen)
	}
	screen = tm.keys("enter")
	if !strings.Contains(screen, want) || !strings.Contains(screen, "task "+taskC) {
		t.Fatalf("the task pane lacks %q:\n%s", want, screen)
	}
}
