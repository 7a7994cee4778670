package console

import (
	"errors"
	"strings"
	"testing"
	"time"

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

// While the pane is open the sessions are read again every Refresh (1s
// here), as the tree is; in the tree they are not read.
func TestSessionsPaneRefreshes(t *testing.T) {
	f := fixture()
	tm := newTestModel(t, f, 80, 24)
	tm.keys("S")
	reads := func() int {
		n := 0
		for _, c := range f.recorded() {
			if strings.HasPrefix(c, "sessions") {
				n++
			}
		}
		return n
	}
	if n := reads(); n != 1 {
		t.Fatalf("opening the pane read the sessions %d times, want 1", n)
	}
	tm.frame(epoch.Add(500 * time.Millisecond))
	if n := reads(); n != 1 {
		t.Errorf("read again after 500ms: %d reads", n)
	}
	tm.frame(epoch.Add(time.Second))
	if n := reads(); n != 2 {
		t.Errorf("%d reads after a second, want 2", n)
	}
	tm.keys("esc")
	tm.frame(epoch.Add(5 * time.Second))
	if n := reads(); n != 2 {
		t.Errorf("%d reads with the pane closed, want still 2", n)
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
