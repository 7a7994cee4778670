package console

import (
	"errors"
	"strings"
	"testing"

	tea "github.com/charmbracelet/bubbletea"

	"lemo/api"
)

// S opens the delegate sessions: each with its kind, source, Task, time
// and first prompt; the selected one in full below (with its file for an
// operator); Enter opens its Task, r reads the list again, Esc goes back.
func TestSessionsPane(t *testing.T) {
	f := fixture()
	tm := newTestModel(t, f, 80, 24)
	if !strings.Contains(tm.View(), "S sessions") {
		t.Errorf("the tree's help line does not offer S")
	}
	screen := tm.keys("S")
	checkSize(t, screen, 80, 24)
	golden(t, "sessions-80x24", screen)
	for _, want := range []string{"SESSION", "FIRST PROMPT", "3f6c2a9e-51d…", "…AAAAAA", "2030-01-02 03:05", "write the tests for the p",
		"9a8b7c6d-000…", "agent", "started by hand",
		"session 3f6c2a9e-51d4-4b8e-9a0c-6d1e2f3a4b5c · task " + taskA} {
		if !strings.Contains(screen, want) {
			t.Errorf("the sessions screen lacks %q", want)
		}
	}
	if calls := f.recorded(); len(calls) != 1 || calls[0] != "sessions " {
		t.Errorf("calls = %q, want one listing of every session", calls)
	}
	// The detail line names the selected session's file (the daemon sends
	// paths to operators only).
	tm.send(tea80x24Wide())
	screen = tm.keys("down")
	if !strings.Contains(screen, "/home/u/.pi/agent/sessions/--home-u-src--/2030-01-01_9a8b7c6d.jsonl") {
		t.Errorf("the selected session's file is not shown:\n%s", screen)
	}
	if screen = tm.keys("enter"); !strings.Contains(screen, "was not started by a Task") || tm.pane != paneSessions {
		t.Errorf("enter on the agent's own session:\n%s", screen)
	}
	tm.keys("r")
	if calls := f.recorded(); len(calls) != 2 {
		t.Errorf("r did not read the sessions again: %q", calls)
	}
	if tm.selectedSession().GetSessionId() != "9a8b7c6d-0000-4111-8222-333344445555" {
		t.Errorf("the selection moved on refresh")
	}
	screen = tm.keys("up", "enter")
	if tm.pane != paneTask || !strings.Contains(screen, "task "+taskA+" · sleep a while") {
		t.Fatalf("enter did not open the session's Task:\n%s", screen)
	}
	tm.keys("S", "esc")
	if tm.pane != paneTree {
		t.Errorf("esc did not go back to the tree")
	}
}

// A listing that fails says so; an empty one says why.
func TestSessionsPaneEmptyAndFailing(t *testing.T) {
	f := fixture()
	f.welcome = &api.Welcome{Owner: "alice"}
	f.sessions = &api.DelegateSessionList{Warnings: []string{"the delegate tool is not configured on this daemon"}}
	tm := newTestModel(t, f, 80, 24)
	screen := tm.keys("S")
	if !strings.Contains(screen, "no delegate sessions") || !strings.Contains(screen, "the delegate tool is not configured") {
		t.Errorf("the empty sessions screen:\n%s", screen)
	}
	f.sessErr = errors.New("permission denied")
	screen = tm.keys("r")
	if !strings.Contains(screen, "not read: permission denied") || !strings.Contains(screen, "no delegate sessions") {
		t.Errorf("a failed listing:\n%s", screen)
	}
}

func tea80x24Wide() tea.WindowSizeMsg { return tea.WindowSizeMsg{Width: 160, Height: 24} }
