package tests

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"lemo/api"
)

// lemo run in a real terminal asks for a call's approval inline: "y"
// approves it and the call runs; "n" denies it and the call never runs.
// Either way the Task finishes and lemo run exits 0.
func TestRunAsksInline(t *testing.T) {
	tmux := needTmux(t)
	data := filepath.Join(t.TempDir(), "data")
	d := serveRemote(t, data)
	c := d.connect(t, "")
	for _, tc := range []struct {
		answer  string
		outcome api.ApprovalOutcome
	}{
		{"y", api.ApprovalOutcome_APPROVAL_OUTCOME_APPROVED},
		{"n", api.ApprovalOutcome_APPROVAL_OUTCOME_DENIED},
	} {
		t.Run(tc.answer, func(t *testing.T) {
			done := filepath.Join(t.TempDir(), "exit")
			script := fmt.Sprintf("%s run --model fake/shell 'echo inline %s'; echo $? > %s; sleep 600", lemoBin, tc.answer, done)
			term := newTerminal(t, tmux, []string{"LEMO_DATA=" + data}, "sh", "-c", script)
			screen := term.waitFor("approve ", "? [y/N/s=skip]")
			var id string
			for _, line := range strings.Split(screen, "\n") {
				if f := strings.Fields(line); len(f) >= 2 && f[0] == "task" {
					id = f[1]
				}
			}
			if id == "" {
				t.Fatalf("lemo run did not name its Task; screen:\n%s", screen)
			}
			term.keys(tc.answer, "Enter")
			deadline := time.Now().Add(30 * time.Second)
			for {
				if b, err := os.ReadFile(done); err == nil && len(b) > 0 {
					if code := strings.TrimSpace(string(b)); code != "0" {
						t.Fatalf("lemo run exited with %s; screen:\n%s", code, term.screen())
					}
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("lemo run did not end; screen:\n%s", term.screen())
				}
				waitABit()
			}
			waitTask(t, c, id, "finished", statusIs(api.TaskStatus_TASK_STATUS_FINISHED))
			evs, err := c.ReadHistory(context.Background(), id, 1)
			if err != nil {
				t.Fatal(err)
			}
			var resolved *api.ApprovalResolved
			ran := false
			for _, ev := range evs {
				if r := ev.GetApprovalResolved(); r != nil {
					resolved = r
				}
				ran = ran || ev.GetToolResult() != nil
			}
			if resolved.GetOutcome() != tc.outcome || ran != (tc.answer == "y") {
				t.Fatalf("answer %q: resolved %v, the call ran: %v", tc.answer, resolved, ran)
			}
		})
	}
}
