package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/charmbracelet/x/term"

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
	toolList := f.fs.String("tools", "", "comma-separated tools the Task may use, a fixed set, or none (default: the daemon's tools.initial, and the Task loads others with tools.search and tools.load)")
	workspace := f.fs.String("workspace", "", "the folder the Task works in, one the daemon grants this token (workspaces.grants); relative to the current folder for a local daemon (default: the current folder for a local daemon, else a folder of its own)")
	private := f.fs.Bool("private-workspace", false, "the Task works in a folder of its own in the daemon's data folder, not in the current folder")
	reasoning := f.fs.Bool("reasoning", false, "show the model's reasoning")
	f.short("m", "model")
	f.short("w", "workspace")
	var rules approvalFlags
	f.fs.Var(rules.of(api.ApprovalRule_APPROVAL_RULE_ASK), "ask", "calls of the tools PATTERN names (shell.run, files.*, *) need your approval; repeatable")
	f.fs.Var(rules.of(api.ApprovalRule_APPROVAL_RULE_DENY), "deny", "calls of the tools PATTERN names never run (deny wins over ask); repeatable")
	var budget budgetFlags
	budget.add(f.fs, false)
	pos, err := f.parse(args, 1, 1)
	if err != nil {
		return helpOK(err)
	}
	if _, err := chooseWorkspace(*workspace, *private, true, "/"); err != nil {
		return usageError("%v", err) // before looking for the daemon
	}
	limits, err := budget.amounts()
	if err != nil {
		return err
	}
	c, err := f.connect(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	cwd, err := os.Getwd()
	if err != nil && f.local && !*private && !filepath.IsAbs(*workspace) {
		return fmt.Errorf("the current folder: %w (name one with --workspace /absolute/folder, or pass --private-workspace)", err)
	}
	ws, err := chooseWorkspace(*workspace, *private, f.local, cwd)
	if err != nil {
		return usageError("%v", err)
	}
	in := client.CreateTask{Request: pos[0], Model: *model, Workspace: ws.path, Approvals: rules.list, Budget: limits}
	in.Tools, in.ToolsRestricted = parseTools(*toolList)
	meta, err := c.CreateTask(ctx, in)
	if err != nil {
		return workspaceRefused(err, ws)
	}
	var answers <-chan string
	if !f.json && isTerminal(stdin) {
		answers = readAnswers(stdin)
	}
	final, err := streamTask(ctx, c, stdout, stderr, streamOptions{taskID: meta.GetTaskId(), from: 1, json: f.json, reasoning: *reasoning, answers: answers, stopWhenIdle: true})
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

// workspaceRefused words the daemon's refusal of the workspace lemo run
// asked for (err, when it is one; other errors are returned as they are)
// with what to do instead. A folder of the Task's own is never chosen
// silently: the current folder, the default, refused is an error too. The
// error keeps the daemon's code (permission_denied, exit status 1).
func workspaceRefused(err error, ws workspaceChoice) error {
	if !errors.Is(err, client.ErrPermissionDenied) || ws.path == "" {
		return err
	}
	if ws.implicit {
		return fmt.Errorf("the daemon refuses the current folder (%s), where lemo run puts the Task unless told otherwise: %w; "+
			"run it with --private-workspace (a folder of the Task's own), with -w naming a folder the daemon grants, "+
			"or grant this one to the token's owner in the daemon's workspaces.grants", ws.path, err)
	}
	return fmt.Errorf("%w; lemo run --private-workspace gives the Task a folder of its own", err)
}

// workspaceChoice is the workspace lemo run asks the daemon for.
type workspaceChoice struct {
	// path is the absolute folder, or "" for a folder of the Task's own.
	path string
	// implicit: path is the current folder, chosen by default (no
	// --workspace): its refusal says so.
	implicit bool
}

// chooseWorkspace decides lemo run's workspace from --workspace (flag),
// --private-workspace (private), whether the daemon is local (found
// through its data folder's daemon.json, so it shares this machine's
// folders) and the current folder cwd (absolute).
//
// Against a local daemon the Task works where the person stands unless
// told otherwise, and a relative --workspace is resolved against cwd.
// Against a daemon reached by address the client's folders mean nothing
// there: the default is the Task's own folder and --workspace must be an
// absolute folder on the daemon's machine. The daemon's workspace policy
// decides in every case (it resolves symlinks and refuses the data folder
// and any folder not granted).
func chooseWorkspace(flag string, private, local bool, cwd string) (workspaceChoice, error) {
	switch {
	case private && flag != "":
		return workspaceChoice{}, errors.New("--workspace and --private-workspace both given: choose one")
	case private:
		return workspaceChoice{}, nil
	case flag == "" && local:
		return workspaceChoice{path: cwd, implicit: true}, nil
	case flag == "":
		return workspaceChoice{}, nil
	case filepath.IsAbs(flag):
		return workspaceChoice{path: filepath.Clean(flag)}, nil
	case local:
		return workspaceChoice{path: filepath.Join(cwd, flag)}, nil
	}
	return workspaceChoice{}, fmt.Errorf("--workspace %q: a relative folder needs a local daemon (found through its data folder); the daemon reached by --addr or LEMO_ADDR needs an absolute folder on its machine", flag)
}

// parseTools reads --tools: "" leaves the set to the daemon (tools.initial
// and discovery), "none" offers no tool at all, else the comma-separated
// names are the Task's fixed set.
func parseTools(v string) (list []string, restricted bool) {
	switch v = strings.TrimSpace(v); v {
	case "":
		return nil, false
	case "none":
		return nil, true
	}
	for _, n := range strings.Split(v, ",") {
		if n = strings.TrimSpace(n); n != "" {
			list = append(list, n)
		}
	}
	return list, true
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

// taskEndError is a Task that failed or was cancelled while followed.
type taskEndError struct{ code, msg string }

func (e *taskEndError) Error() string { return e.msg }

// exitFor turns how a Task stopped into the command's result.
func exitFor(m *api.TaskMeta, stderr io.Writer) error {
	switch m.GetStatus() {
	case api.TaskStatus_TASK_STATUS_FAILED:
		return &taskEndError{code: "task_failed", msg: fmt.Sprintf("task %s failed: %s", m.GetTaskId(), m.GetStatusDetail())}
	case api.TaskStatus_TASK_STATUS_CANCELLED:
		return &taskEndError{code: "task_cancelled", msg: fmt.Sprintf("task %s was cancelled", m.GetTaskId())}
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
	// Not a character device test: /dev/null is one, and a prompt on it
	// would read its end at once.
	return term.IsTerminal(f.Fd())
}

type streamOptions struct {
	taskID    string
	from      uint64
	json      bool
	noDeltas  bool
	reasoning bool
	// answers, when set, are the lines the person at the terminal types:
	// approvals are asked for inline.
	answers <-chan string
	// stopWhenIdle ends the stream once the Task stops running (paused
	// too); else only once it finished, failed or was cancelled.
	stopWhenIdle bool
}

// streamTask follows a Task, printing its updates, until it stops (see
// streamOptions) or ctx ends; it resumes by itself after disconnections.
// It returns the Task's last metadata.
//
// The stream and the person's answers are read in one loop, so a prompt
// never holds the stream: an approval decided elsewhere takes its prompt
// away and the next one is asked at once, and Ctrl-C (ctx) ends the
// command at once, leaving the approval pending.
func streamTask(ctx context.Context, c *client.Conn, stdout, stderr io.Writer, o streamOptions) (*api.TaskMeta, error) {
	var views *client.Views
	if tl, err := c.Tools(ctx); err == nil {
		views = client.NewViews(tl)
	} else {
		views = client.NewViews(nil)
	}
	out := &promptWriter{w: stdout}
	r := newRenderer(out, views)
	r.reasoning = o.reasoning
	var meta *api.TaskMeta
	if o.from > 1 {
		// The status before the first seq shown.
		if m, err := c.Task(ctx, o.taskID); err == nil {
			meta = m
		}
	}
	caughtUp := false
	p := &prompter{out: out, workspace: meta.GetWorkspace()}
	done := func() bool {
		if !caughtUp || meta == nil {
			return false
		}
		st := meta.GetStatus()
		if api.StatusEnded(st) {
			return true
		}
		return o.stopWhenIdle && st == api.TaskStatus_TASK_STATUS_PAUSED
	}
	fctx, stop := context.WithCancel(ctx)
	defer stop()
	updates := make(chan *api.Update)
	followed := make(chan error, 1)
	// Follow calls Notice on its own goroutine; the loop below reads the
	// count only through noticed.
	noticed := make(chan string)
	intr := &interruptions{w: stderr}
	fo := client.FollowOptions{TaskID: o.taskID, FromSeq: o.from, NoDeltas: o.noDeltas, Notice: func(why string) {
		select {
		case noticed <- why:
		case <-fctx.Done():
		}
	}}
	go func() {
		followed <- c.Follow(fctx, fo, func(u *api.Update) error {
			select {
			case updates <- u:
				return nil
			case <-fctx.Done():
				return client.ErrStopFollowing
			}
		})
	}()
	answers := o.answers
	for {
		select {
		case why := <-noticed:
			intr.notice(why)
		case u := <-updates:
			intr.delivered()
			if o.json {
				printJSON(out, u)
			} else {
				r.update(u)
			}
			switch b := u.GetBody().(type) {
			case *api.Update_Event:
				if meta == nil || b.Event.GetSeq() > meta.GetLastSeq() {
					meta = api.FoldMeta(meta, b.Event)
				}
				if answers != nil {
					p.event(b.Event)
				}
			case *api.Update_TreeEvent:
				if answers != nil {
					p.tree(b.TreeEvent)
				}
			case *api.Update_TreeState:
				if answers != nil {
					p.treeState(b.TreeState)
				}
			case *api.Update_CaughtUp:
				caughtUp = true
			}
			if done() {
				p.close()
				stop()
				<-followed
				return meta, nil
			}
			if caughtUp && answers != nil {
				p.ask()
			}
		case line, ok := <-answers:
			if !ok {
				// stdin ended: nobody can answer here any more.
				answers = nil
				p.giveUp()
				continue
			}
			p.answered(ctx, c, line)
			p.ask()
		case err := <-followed:
			p.close()
			return meta, err
		}
	}
}

// promptWriter ends an open prompt's line before anything else is
// written, so updates that arrive while a prompt waits start on a line of
// their own.
type promptWriter struct {
	w    io.Writer
	open bool
}

func (p *promptWriter) Write(b []byte) (int, error) {
	if p.open {
		p.open = false
		if _, err := io.WriteString(p.w, "\n"); err != nil {
			return 0, err
		}
	}
	return p.w.Write(b)
}

// prompt writes a prompt that waits on its line for an answer.
func (p *promptWriter) prompt(format string, args ...any) {
	_, _ = fmt.Fprintf(p, format, args...)
	p.open = true
}

// prompter asks the person at the terminal to decide the Task's pending
// approvals, one at a time, in the order they were requested.
type prompter struct {
	out *promptWriter
	// workspace is the Task's folder; calls are the tool and arguments of
	// each call recorded, for the details shown with a prompt.
	workspace string
	// (keyed "<task id>.<call id>", as approval ids are).
	calls map[string]*api.ToolCallRecorded
	// detailed holds the approvals whose details were shown, and whether
	// lines were left out (m shows them).
	detailed map[string]bool
	// pending are the approvals not yet decided; pending[0] is the one
	// asked (or to be asked).
	pending []*api.ApprovalRequested
	// paths label the pending approvals of Tasks below the followed one
	// with their Task's path from the root (by approval id).
	paths map[string]string
	// asked is the approval id the open prompt is for.
	asked string
}

// tree takes note of a descendant's approvals, as event does of the
// followed Task's, labelled with the descendant's path.
func (p *prompter) tree(te *api.TreeEvent) {
	if a := te.GetEvent().GetApprovalRequested(); a != nil {
		if p.paths == nil {
			p.paths = make(map[string]string)
		}
		p.paths[a.GetApprovalId()] = strings.Join(te.GetPath(), "/")
	}
	p.event(te.GetEvent())
}

// treeState starts over with what a (re)subscription tells of the Tasks
// below: the approvals pending below are told again right after it (one
// decided while the stream was down is not), and the calls open below are
// what their prompts show.
func (p *prompter) treeState(ts *api.TreeState) {
	for _, a := range slices.Clone(p.pending) {
		if p.paths[a.GetApprovalId()] != "" {
			p.drop(a.GetApprovalId())
		}
	}
	for _, te := range ts.GetEvents() {
		p.tree(te)
	}
}

// event takes note of approvals requested and decided, the calls they
// are for and the Task's folder.
func (p *prompter) event(ev *api.Event) {
	if c := ev.GetTaskCreated(); c != nil {
		p.workspace = c.GetWorkspace()
	}
	if c := ev.GetToolCallRecorded(); c != nil {
		if p.calls == nil {
			p.calls = make(map[string]*api.ToolCallRecorded)
		}
		p.calls[taskstate.ApprovalID(ev.GetTaskId(), c.GetCallId())] = c
	}
	if r := ev.GetToolResult(); r != nil {
		delete(p.calls, taskstate.ApprovalID(ev.GetTaskId(), r.GetCallId()))
	}
	if f := ev.GetToolFailed(); f != nil {
		delete(p.calls, taskstate.ApprovalID(ev.GetTaskId(), f.GetCallId()))
	}
	if a := ev.GetApprovalRequested(); a != nil && !slices.ContainsFunc(p.pending, func(x *api.ApprovalRequested) bool { return x.GetApprovalId() == a.GetApprovalId() }) {
		// (A resubscription tells again what is pending below.)
		p.pending = append(p.pending, a)
	}
	if r := ev.GetApprovalResolved(); r != nil {
		p.drop(r.GetApprovalId())
	}
}

func (p *prompter) drop(id string) {
	p.pending = slices.DeleteFunc(p.pending, func(a *api.ApprovalRequested) bool { return a.GetApprovalId() == id })
	delete(p.paths, id)
	if p.asked == id {
		// Decided elsewhere (or by the answer just given): the prompt
		// is no longer for anything.
		p.asked = ""
		p.close()
	}
}

// ask shows the prompt for the first pending approval unless one is open.
func (p *prompter) ask() {
	if len(p.pending) == 0 || (p.asked != "" && p.out.open) {
		return
	}
	a := p.pending[0]
	p.asked = a.GetApprovalId()
	more, shown := p.detailed[a.GetApprovalId()]
	if !shown {
		if p.detailed == nil {
			p.detailed = make(map[string]bool)
		}
		more = p.detail(a, approvalLines)
		p.detailed[a.GetApprovalId()] = more
	}
	// A running call's question about its own work is decided once; the
	// other approvals may also be allowed for the rest of the Task.
	keys, hint := "y/N/a=always/s=skip", "a approves and allows "+p.kind(a)+" for this task, n REASON denies with a reason"
	if a.GetDuringRun() {
		keys, hint = "y/N/s=skip", "n REASON denies with a reason"
	}
	if more {
		hint = "m shows all, " + hint
	}
	where := ""
	if path := p.paths[a.GetApprovalId()]; path != "" {
		where = " in task " + path
	}
	p.out.prompt("approve %s%s? [%s] (%s) ", a.GetApprovalId(), where, keys, hint)
}

// kind names what an "always" answer to a covers: the same command for
// the shell, else every call of the tool.
func (p *prompter) kind(a *api.ApprovalRequested) string {
	tool := a.GetTool()
	if c := p.calls[callKey(a)]; c != nil && c.GetTool() != "" {
		tool = c.GetTool()
	}
	if tool == "shell.run" {
		return "this exact command"
	}
	if tool == "" {
		return "such calls"
	}
	return tool + " calls"
}

// detail shows what the approval is for, at most limit lines (0: all);
// it reports whether it left lines out.
func (p *prompter) detail(a *api.ApprovalRequested, limit int) bool {
	c := p.calls[callKey(a)]
	if c == nil {
		return false
	}
	tool := c.GetTool()
	if tool == "" {
		tool = a.GetTool()
	}
	ws := p.workspace
	if p.paths[a.GetApprovalId()] != "" {
		// A descendant may work in a folder of its own (fresh_workspace),
		// which the events forwarded do not name: say nothing wrong.
		ws = ""
	}
	lines, more := approvalDetail(tool, c.GetArguments(), ws, limit)
	for _, l := range lines {
		fmt.Fprintln(p.out, l)
	}
	return more
}

// close ends an open prompt's line.
func (p *prompter) close() {
	if p.out.open {
		p.out.open = false
		_, _ = io.WriteString(p.out.w, "\n")
	}
}

// giveUp says how to decide what is pending once stdin has ended.
func (p *prompter) giveUp() {
	p.close()
	for _, a := range p.pending {
		fmt.Fprintf(p.out, "no more answers on stdin; decide with: lemo approve %s (or lemo deny)\n", a.GetApprovalId())
	}
	p.pending, p.asked = nil, ""
}

// answered carries out the line typed at the open prompt.
func (p *prompter) answered(ctx context.Context, c *client.Conn, line string) {
	// The terminal echoed the line and its newline.
	p.out.open = false
	id := p.asked
	if id == "" {
		return // typed while nothing was asked
	}
	p.asked = ""
	switch a := parseAnswer(line); {
	case a.more:
		for _, r := range p.pending {
			if r.GetApprovalId() == id {
				p.detail(r, 0)
				p.detailed[id] = false
			}
		}
		return // asked again
	case a.always:
		if _, err := c.AllowForTask(ctx, id, ""); err != nil {
			fmt.Fprintf(p.out, "lemo: approve always: %v\n", err)
		}
	case a.approve:
		if _, err := c.Resolve(ctx, id, true, ""); err != nil {
			fmt.Fprintf(p.out, "lemo: approve: %v\n", err)
		}
	case a.skip:
		fmt.Fprintf(p.out, "left pending: lemo approve %s\n", id)
	default:
		if _, err := c.Resolve(ctx, id, false, a.reason); err != nil {
			fmt.Fprintf(p.out, "lemo: deny: %v\n", err)
		}
	}
	// Ask the next one now; the decision's event removes nothing twice.
	p.pending = slices.DeleteFunc(p.pending, func(a *api.ApprovalRequested) bool { return a.GetApprovalId() == id })
	delete(p.paths, id)
}

// readAnswers delivers the lines read from in until it ends. The reading
// goroutine cannot be stopped (a read on a terminal does not take a
// context); it ends with in's end or the process.
func readAnswers(in io.Reader) <-chan string {
	lines := make(chan string)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(in)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	return lines
}

// interruptions tells the person that the stream broke and is being
// resumed: once, then (while the daemon stays away and Follow retries) a
// count at each doubling of the attempts, and once more when it resumed,
// instead of a line per attempt.
type interruptions struct {
	w        io.Writer
	attempts int
}

// notice is FollowOptions.Notice.
func (n *interruptions) notice(why string) {
	n.attempts++
	switch {
	case n.attempts == 1:
		fmt.Fprintf(n.w, "lemo: stream interrupted (%s); resuming\n", why)
	case n.attempts&(n.attempts-1) == 0: // 2, 4, 8, ...
		fmt.Fprintf(n.w, "lemo: still resuming after %d attempts (%s)\n", n.attempts, why)
	}
}

// delivered is told of each update: the stream is back.
func (n *interruptions) delivered() {
	if n.attempts > 0 {
		fmt.Fprintf(n.w, "lemo: stream resumed after %d attempt(s)\n", n.attempts)
		n.attempts = 0
	}
}

// statusWord is a status as people read it.
func statusWord(st api.TaskStatus) string { return taskstate.StatusName(st) }

// callKey is the key of the call an approval is for in prompter.calls.
func callKey(a *api.ApprovalRequested) string {
	task, _ := taskstate.SplitApprovalID(a.GetApprovalId())
	return taskstate.ApprovalID(task, a.GetCallId())
}
