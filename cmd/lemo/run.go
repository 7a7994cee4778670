package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"lemo/actors/taskstate"
	"lemo/api"
	"lemo/client"
)

// runTask implements lemo run: create a Task and stream it until it stops.
func runTask(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	f := newClientFlags("run", `"request" [flags]`, "Create a Task and stream its progress (model text, tool calls, the answer) until it\n"+
		"stops. Ctrl-C detaches: the Task goes on (lemo attach <id> shows it again) unless\n"+
		"--cancel-on-exit. Calls that need approval are asked for on the terminal.", stdout, stderr)
	model := f.fs.String("model", "", "model provider/model (default: the daemon's models.default)")
	cancelOnExit := f.fs.Bool("cancel-on-exit", false, "cancel the Task when interrupted")
	toolList := f.fs.String("tools", "", "comma-separated tools the Task may use (default: all)")
	workspace := f.fs.String("workspace", "", "an existing absolute folder the Task works in, in a folder the daemon grants this token (workspaces.grants; default: a folder of its own)")
	reasoning := f.fs.Bool("reasoning", false, "show the model's reasoning")
	var rules approvalFlags
	f.fs.Var(rules.of(api.ApprovalRule_APPROVAL_RULE_ASK), "ask", "calls of the tools PATTERN names (shell.run, files.*, *) need your approval; repeatable")
	f.fs.Var(rules.of(api.ApprovalRule_APPROVAL_RULE_DENY), "deny", "calls of the tools PATTERN names never run (deny wins over ask); repeatable")
	pos, err := f.parse(args, 1, 1)
	if err != nil {
		return helpOK(err)
	}
	c, err := f.connect(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	in := client.CreateTask{Request: pos[0], Model: *model, Workspace: *workspace, Approvals: rules.list}
	if *toolList != "" {
		in.Tools, in.ToolsRestricted = strings.Split(*toolList, ","), true
	}
	meta, err := c.CreateTask(ctx, in)
	if err != nil {
		return err
	}
	var prompt *bufio.Reader
	if !f.json && isTerminal(stdin) {
		prompt = bufio.NewReader(stdin)
	}
	final, err := streamTask(ctx, c, stdout, stderr, streamOptions{taskID: meta.GetTaskId(), from: 1, json: f.json, reasoning: *reasoning, prompt: prompt, stopWhenIdle: true})
	if ctx.Err() != nil {
		if *cancelOnExit {
			cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if _, err := c.Cancel(cctx, meta.GetTaskId()); err != nil {
				return fmt.Errorf("cancel task %s: %w", meta.GetTaskId(), err)
			}
			fmt.Fprintf(stderr, "cancelled task %s\n", meta.GetTaskId())
			return &exitError{code: 130, err: errors.New("interrupted")}
		}
		fmt.Fprintf(stderr, "detached; task %s goes on (lemo attach %s)\n", meta.GetTaskId(), meta.GetTaskId())
		return nil
	}
	if err != nil {
		return describe(err, meta.GetTaskId())
	}
	return exitFor(final, stderr)
}

// approvalFlags collects the Task's approval rules of --ask and --deny in
// the order given.
type approvalFlags struct{ list []*api.ToolApproval }

// of returns the flag.Value that adds rules of kind r.
func (a *approvalFlags) of(r api.ApprovalRule) flag.Value { return &approvalFlag{all: a, rule: r} }

type approvalFlag struct {
	all  *approvalFlags
	rule api.ApprovalRule
}

func (f *approvalFlag) String() string { return "" }

func (f *approvalFlag) Set(pattern string) error {
	pattern = strings.TrimSpace(pattern)
	if pattern == "" {
		return errors.New("want a tool name or a pattern with '*', such as shell.run or files.*")
	}
	f.all.list = append(f.all.list, &api.ToolApproval{Tool: pattern, Rule: f.rule})
	return nil
}

// exitFor turns how a Task stopped into the command's result.
func exitFor(m *api.TaskMeta, stderr io.Writer) error {
	switch m.GetStatus() {
	case api.TaskStatus_TASK_STATUS_FAILED:
		return fmt.Errorf("task %s failed: %s", m.GetTaskId(), m.GetStatusDetail())
	case api.TaskStatus_TASK_STATUS_CANCELLED:
		return fmt.Errorf("task %s was cancelled", m.GetTaskId())
	case api.TaskStatus_TASK_STATUS_PAUSED:
		fmt.Fprintf(stderr, "task %s is paused (%s); continue it with: lemo continue %s\n", m.GetTaskId(), m.GetStatusDetail(), m.GetTaskId())
	}
	return nil
}

func helpOK(err error) error {
	if errors.Is(err, flag.ErrHelp) {
		return nil
	}
	return err
}

func isTerminal(r io.Reader) bool {
	f, ok := r.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

type streamOptions struct {
	taskID    string
	from      uint64
	json      bool
	noDeltas  bool
	reasoning bool
	// prompt, when set, asks for approvals inline.
	prompt *bufio.Reader
	// stopWhenIdle ends the stream once the Task stops running (paused
	// too); else only once it finished, failed or was cancelled.
	stopWhenIdle bool
}

// streamTask follows a Task, printing its updates, until it stops (see
// streamOptions) or ctx ends; it resumes by itself after disconnections.
// It returns the Task's last metadata.
func streamTask(ctx context.Context, c *client.Conn, stdout, stderr io.Writer, o streamOptions) (*api.TaskMeta, error) {
	var views *client.Views
	if tl, err := c.Tools(ctx); err == nil {
		views = client.NewViews(tl)
	} else {
		views = client.NewViews(nil)
	}
	r := newRenderer(stdout, views)
	r.reasoning = o.reasoning
	var meta *api.TaskMeta
	if o.from > 1 {
		// The status before the first seq shown.
		if m, err := c.Task(ctx, o.taskID); err == nil {
			meta = m
		}
	}
	caughtUp := false
	// Approvals requested in the part of the history replayed before the
	// stream caught up are asked for once it has, if still pending.
	var pending []*api.ApprovalRequested
	done := func() bool {
		if !caughtUp || meta == nil {
			return false
		}
		st := meta.GetStatus()
		if terminal(st) {
			return true
		}
		return o.stopWhenIdle && st == api.TaskStatus_TASK_STATUS_PAUSED
	}
	fo := client.FollowOptions{TaskID: o.taskID, FromSeq: o.from, NoDeltas: o.noDeltas, Notice: func(why string) {
		fmt.Fprintf(stderr, "lemo: stream interrupted (%s); resuming\n", why)
	}}
	err := c.Follow(ctx, fo, func(u *api.Update) error {
		if o.json {
			printJSON(stdout, u)
		} else {
			r.update(u)
		}
		switch b := u.GetBody().(type) {
		case *api.Update_Event:
			if meta == nil || b.Event.GetSeq() > meta.GetLastSeq() {
				meta = api.FoldMeta(meta, b.Event)
			}
			if o.prompt == nil {
				break
			}
			if a := b.Event.GetApprovalRequested(); a != nil {
				if caughtUp {
					ask(ctx, c, o.prompt, stdout, a)
				} else {
					pending = append(pending, a)
				}
			}
			if r := b.Event.GetApprovalResolved(); r != nil {
				pending = slices.DeleteFunc(pending, func(a *api.ApprovalRequested) bool { return a.GetApprovalId() == r.GetApprovalId() })
			}
		case *api.Update_CaughtUp:
			caughtUp = true
			for _, a := range pending {
				ask(ctx, c, o.prompt, stdout, a)
			}
			pending = nil
		}
		if done() {
			return client.ErrStopFollowing
		}
		return nil
	})
	if err != nil {
		return meta, err
	}
	return meta, nil
}

// ask asks the person at the terminal to decide an approval.
func ask(ctx context.Context, c *client.Conn, in *bufio.Reader, w io.Writer, a *api.ApprovalRequested) {
	fmt.Fprintf(w, "approve %s? [y/N/s=skip] ", a.GetApprovalId())
	line, err := in.ReadString('\n')
	if err != nil {
		fmt.Fprintln(w)
		return
	}
	switch strings.ToLower(strings.TrimSpace(line)) {
	case "y", "yes":
		if _, err := c.Resolve(ctx, a.GetApprovalId(), true, ""); err != nil {
			fmt.Fprintf(w, "lemo: approve: %v\n", err)
		}
	case "s", "skip":
		fmt.Fprintf(w, "left pending: lemo approve %s\n", a.GetApprovalId())
	default:
		if _, err := c.Resolve(ctx, a.GetApprovalId(), false, "denied at the terminal"); err != nil {
			fmt.Fprintf(w, "lemo: deny: %v\n", err)
		}
	}
}

// statusWord is a status as people read it.
func statusWord(st api.TaskStatus) string { return taskstate.StatusName(st) }
