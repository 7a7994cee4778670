package main

import (
	"context"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"lemo/api"
)

// listSessions implements lemo sessions: the delegate agent's resumable
// sessions that this token may see.
func listSessions(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	f := newClientFlags("sessions", "[flags]", "List the delegate agent's sessions, newest first: an owner's token sees the sessions\n"+
		"its Tasks created; an operator's sees every session (the agent's own folders too)\nand where each one is stored.", stdout, stderr)
	task := f.fs.String("task", "", "only this Task's sessions")
	if _, err := f.parse(args, 0, 0); err != nil {
		return helpOK(err)
	}
	c, err := f.connect(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	if *task != "" {
		if *task, err = resolveTask(ctx, c, *task); err != nil {
			return err
		}
	}
	list, err := c.DelegateSessions(ctx, *task)
	if err != nil {
		return describe(err, *task)
	}
	if f.json {
		printJSON(stdout, list)
		return nil
	}
	for _, w := range list.GetWarnings() {
		fmt.Fprintln(stderr, "warning:", w)
	}
	if len(list.GetSessions()) == 0 {
		fmt.Fprintln(stdout, "no delegate sessions")
		return nil
	}
	withPath := c.Welcome().GetOperator()
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	head := "SESSION\tKIND\tSOURCE\tTASK\tMODIFIED\tFIRST PROMPT"
	if withPath {
		head += "\tPATH"
	}
	fmt.Fprintln(tw, head)
	for _, s := range list.GetSessions() {
		line := fmt.Sprintf("%s\t%s\t%s\t%s\t%s\t%s", s.GetSessionId(), s.GetKind(), s.GetSource(), orDash(s.GetTaskId()),
			sessionTime(s), orDash(clip(s.GetFirstPrompt(), 50)))
		if withPath {
			line += "\t" + s.GetPath()
		}
		fmt.Fprintln(tw, line)
	}
	return tw.Flush()
}

func sessionTime(s *api.DelegateSession) string {
	if s.GetModified() == nil {
		return "-"
	}
	return s.GetModified().AsTime().Local().Format(time.DateTime)
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
