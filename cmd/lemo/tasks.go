package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"lemo/actors/taskstate"
	"lemo/api"
	"lemo/client"
	"lemo/providers"
)

// listTasks implements lemo tasks.
func listTasks(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	f := newClientFlags("tasks", "[flags]", "List the Tasks this token may see, newest first.", stdout, stderr)
	limit := f.fs.Int("limit", 50, "at most this many Tasks (0: all)")
	tree := f.fs.Bool("tree", false, "show child Tasks under the Tasks that spawned them")
	if _, err := f.parse(args, 0, 0); err != nil {
		return helpOK(err)
	}
	c, err := f.connect(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	var all []*api.TaskMeta
	before := ""
	for {
		page := 500
		if *limit > 0 {
			page = min(page, *limit-len(all))
		}
		list, next, err := c.ListTasks(ctx, before, page)
		if err != nil {
			return err
		}
		all = append(all, list...)
		if next == "" || (*limit > 0 && len(all) >= *limit) {
			break
		}
		before = next
	}
	if f.json {
		printJSONList(stdout, all)
		return nil
	}
	if len(all) == 0 {
		fmt.Fprintln(stdout, "no tasks")
		return nil
	}
	rows := make([]treeRow, len(all))
	for i, m := range all {
		rows[i] = treeRow{meta: m}
	}
	if *tree {
		rows = treeOrder(all)
	}
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tSTATUS\tMODEL\tCYCLES\tTOKENS\tCOST\tTIME\tUPDATED\tOWNER\tTITLE")
	now := time.Now()
	for _, r := range rows {
		m := r.meta
		id := m.GetTaskId()
		if r.depth > 0 {
			id = strings.Repeat("  ", r.depth-1) + "└ " + id
		}
		tok, cost, working := spendColumns(m.GetBudget(), now)
		if *tree {
			tok += belowTokens(m.GetTaskId(), all, now)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\n", id, taskstate.StatusWord(m), m.GetModel(), m.GetCycles(), tok, cost, working,
			m.GetUpdated().AsTime().Local().Format(time.DateTime), m.GetOwner(), clip(m.GetTitle(), 50))
	}
	return tw.Flush()
}

// treeRow is a Task and its depth under the listed Task it descends from.
type treeRow struct {
	meta  *api.TaskMeta
	depth int
}

// treeOrder lists Tasks as their trees: each root (or Task whose parent is
// not listed) in list order, its children under it, oldest first.
func treeOrder(metas []*api.TaskMeta) []treeRow {
	listed := make(map[string]bool, len(metas))
	for _, m := range metas {
		listed[m.GetTaskId()] = true
	}
	kids := make(map[string][]*api.TaskMeta)
	for i := len(metas) - 1; i >= 0; i-- { // newest first: oldest child first
		m := metas[i]
		if p := m.GetParentId(); p != "" && listed[p] {
			kids[p] = append(kids[p], m)
		}
	}
	var out []treeRow
	var walk func(m *api.TaskMeta, depth int)
	walk = func(m *api.TaskMeta, depth int) {
		out = append(out, treeRow{meta: m, depth: depth})
		for _, k := range kids[m.GetTaskId()] {
			walk(k, depth+1)
		}
	}
	for _, m := range metas {
		if p := m.GetParentId(); p == "" || !listed[p] {
			walk(m, 0)
		}
	}
	return out
}

// belowTokens is what the listed descendants of Task id spent, charged to
// it as their ancestor (" +N below"), or "" when they spent nothing.
func belowTokens(id string, metas []*api.TaskMeta, now time.Time) string {
	if n := taskstate.TreeSpent(id, metas, now).GetTokens(); n > 0 {
		return fmt.Sprintf(" +%d below", n)
	}
	return ""
}

func clip(s string, n int) string {
	s = strings.ReplaceAll(s, "\n", " ")
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}

// attach implements lemo attach.
func attach(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	f := newClientFlags("attach", "<task id> [flags]", "Show a Task's history from a seq and follow it live, until it finished, failed or\n"+
		"was cancelled (Ctrl-C detaches earlier; the Task goes on).", stdout, stderr)
	from := f.fs.Uint64("from", 1, "first seq to show")
	noDeltas := f.fs.Bool("no-deltas", false, "leave out live deltas (committed events only)")
	reasoning := f.fs.Bool("reasoning", false, "show the model's reasoning")
	pos, err := f.parse(args, 1, 1)
	if err != nil {
		return helpOK(err)
	}
	c, err := f.connect(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	id, err := resolveTask(ctx, c, pos[0])
	if err != nil {
		return err
	}
	_, err = streamTask(ctx, c, stdout, stderr, streamOptions{taskID: id, from: max(*from, 1), json: f.json, noDeltas: *noDeltas, reasoning: *reasoning})
	if ctx.Err() != nil {
		return nil
	}
	return describe(err, id)
}

// control implements lemo pause, continue and cancel.
func control(ctx context.Context, cmd string, args []string, stdout, stderr io.Writer) error {
	detail := map[string]string{
		"pause":    "Pause a running Task: its model call is cancelled; running tool calls finish.",
		"continue": "Continue a paused or failed Task (with another model when --model is given).",
		"cancel":   "Cancel a Task: its model call and tool calls are cancelled.",
	}[cmd]
	f := newClientFlags(cmd, "<task id> [flags]", detail, stdout, stderr)
	var model *string
	if cmd == "continue" {
		model = f.fs.String("model", "", "continue with this model (provider/model)")
		f.short("m", "model")
	}
	pos, err := f.parse(args, 1, 1)
	if err != nil {
		return helpOK(err)
	}
	c, err := f.connect(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	id, err := resolveTask(ctx, c, pos[0])
	if err != nil {
		return err
	}
	var m *api.TaskMeta
	switch cmd {
	case "pause":
		m, err = c.Pause(ctx, id)
	case "continue":
		m, err = c.Continue(ctx, id, *model)
	default:
		m, err = c.Cancel(ctx, id)
	}
	if err != nil {
		return describe(err, id)
	}
	if f.json {
		printJSON(stdout, m)
		return nil
	}
	fmt.Fprintf(stdout, "task %s is %s\n", m.GetTaskId(), statusWord(m.GetStatus()))
	return nil
}

// listTools implements lemo tools.
func listTools(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	f := newClientFlags("tools", "[flags]", "List the daemon's tools: their contracts (schemas with --json) and Views.", stdout, stderr)
	if _, err := f.parse(args, 0, 0); err != nil {
		return helpOK(err)
	}
	c, err := f.connect(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	tl, err := c.ToolList(ctx)
	if err != nil {
		return err
	}
	list := tl.GetTools()
	if f.json {
		printJSONList(stdout, list)
		return nil
	}
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	servers := len(tl.GetPending()) > 0 // a column for the MCP servers' states when there are any
	for _, t := range list {
		servers = servers || t.GetServer() != ""
	}
	if servers {
		fmt.Fprintln(tw, "NAME\tVIEW\tSERVER\tDESCRIPTION")
	} else {
		fmt.Fprintln(tw, "NAME\tVIEW\tDESCRIPTION")
	}
	for _, t := range list {
		view := t.GetView()
		if view == "" {
			view = "json"
		}
		if servers {
			srv := "-"
			if t.GetServer() != "" {
				srv = "mcp " + t.GetServer() + " (" + t.GetServerState() + ")"
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", t.GetName(), view, srv, clip(firstSentence(t.GetDescription()), 80))
			continue
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\n", t.GetName(), view, clip(firstSentence(t.GetDescription()), 80))
	}
	// A server whose tools are not listed yet: one line saying why.
	for _, p := range tl.GetPending() {
		fmt.Fprintf(tw, "%s*\t-\t%s (%s)\t%s\n", p.GetPrefix(), p.GetSource(), p.GetState(), "its tools are offered once it lists them")
	}
	return tw.Flush()
}

func firstSentence(s string) string {
	if i := strings.Index(s, ". "); i >= 0 {
		return s[:i+1]
	}
	return s
}

// listModels implements lemo models.
func listModels(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	f := newClientFlags("models", "[flags]", "List the models of every configured provider, and the providers that failed.", stdout, stderr)
	if _, err := f.parse(args, 0, 0); err != nil {
		return helpOK(err)
	}
	c, err := f.connect(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	l, err := c.Models(ctx)
	if err != nil {
		return err
	}
	if f.json {
		printJSON(stdout, l)
		return nil
	}
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "MODEL\tWINDOW\tTOOLS\tREASONING")
	for _, m := range l.GetModels() {
		window := "unknown"
		if m.GetWindow() > 0 {
			window = strconv.FormatUint(m.GetWindow(), 10)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", m.GetId(), window, yes(m.GetTools()), yes(m.GetReasoning()))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	var tried []string
	for _, pf := range l.GetFailures() {
		fmt.Fprintf(stderr, "provider %s: %s\n", pf.GetProvider(), pf.GetError())
		tried = append(tried, pf.GetProvider())
	}
	if len(l.GetModels()) > 0 {
		return nil
	}
	// Nothing usable: say what was tried and how to configure a provider
	// (the daemon reads its configuration when it starts, so the hint
	// names the settings, not this process's environment).
	if len(tried) == 0 {
		fmt.Fprintln(stderr, "no configured provider offers a model (or none is configured)")
	}
	for _, name := range tried {
		fmt.Fprintln(stderr, providers.ConfigHint(name))
	}
	fmt.Fprintln(stderr, "providers and their settings:")
	for _, h := range providers.SetupHints() {
		fmt.Fprintln(stderr, "  "+h)
	}
	fmt.Fprintln(stderr, "after a change restart lemo serve; lemo doctor checks every configured provider")
	if len(tried) == 0 {
		return fmt.Errorf("no model is available")
	}
	return fmt.Errorf("no provider could list its models (tried: %s)", strings.Join(tried, ", "))
}

func yes(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

// listApprovals implements lemo approvals.
func listApprovals(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	f := newClientFlags("approvals", "[flags]", "List the tool calls waiting for a person's approval.", stdout, stderr)
	if _, err := f.parse(args, 0, 0); err != nil {
		return helpOK(err)
	}
	c, err := f.connect(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	list, err := c.Approvals(ctx)
	if err != nil {
		return err
	}
	if f.json {
		printJSONList(stdout, list)
		return nil
	}
	if len(list) == 0 {
		fmt.Fprintln(stdout, "no pending approvals")
		return nil
	}
	calls := approvalCalls(ctx, c, list)
	// A child Task's approval shows the path from its root.
	metas := map[string]*api.TaskMeta{}
	parents := func(id string) (string, bool) {
		m, ok := metas[id]
		if !ok {
			m, _ = c.Task(ctx, id)
			metas[id] = m
		}
		return m.GetParentId(), m != nil
	}
	var views *client.Views
	if tl, err := c.Tools(ctx); err == nil {
		views = client.NewViews(tl)
	} else {
		views = client.NewViews(nil)
	}
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "APPROVAL\tTASK\tTOOL\tSUMMARY\tDEADLINE\tREASON")
	for _, ev := range list {
		a := ev.GetApprovalRequested()
		deadline := "none"
		if a.GetDeadline() != nil {
			deadline = a.GetDeadline().AsTime().Local().Format(time.DateTime)
		}
		tool, summary := a.GetTool(), ""
		if call := calls[a.GetApprovalId()]; call != nil {
			if call.GetTool() != "" {
				tool = call.GetTool()
			}
			summary = views.For(tool).Call(tool, call.GetArguments())
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", a.GetApprovalId(), taskPath(ev.GetTaskId(), parents), orText(tool, "-"), orText(clip(summary, 60), "-"), deadline, clip(a.GetReason(), 80))
	}
	return tw.Flush()
}

// approvalCalls finds the recorded call of each approval (by approval id)
// in its Task's history, read once per Task; a history that cannot be
// read leaves its approvals without a summary.
func approvalCalls(ctx context.Context, c *client.Conn, list []*api.Event) map[string]*api.ToolCallRecorded {
	byTask := map[string][]*api.ApprovalRequested{}
	for _, ev := range list {
		byTask[ev.GetTaskId()] = append(byTask[ev.GetTaskId()], ev.GetApprovalRequested())
	}
	out := make(map[string]*api.ToolCallRecorded, len(list))
	for task, approvals := range byTask {
		evs, err := c.ReadHistory(ctx, task, 1)
		if err != nil {
			continue
		}
		recorded := map[string]*api.ToolCallRecorded{}
		for _, ev := range evs {
			if r := ev.GetToolCallRecorded(); r != nil {
				recorded[r.GetCallId()] = r
			}
		}
		for _, a := range approvals {
			out[a.GetApprovalId()] = recorded[a.GetCallId()]
		}
	}
	return out
}

func orText(s, alt string) string {
	if s == "" {
		return alt
	}
	return s
}

// resolve implements lemo approve and lemo deny.
func resolve(ctx context.Context, cmd string, args []string, stdout, stderr io.Writer) error {
	approve := cmd == "approve"
	detail := "Approve a pending tool call; it then runs."
	if !approve {
		detail = "Deny a pending tool call; the model is told why."
	}
	f := newClientFlags(cmd, "<approval id> [flags]", detail+"\nThe approval id is <task id>.<call id>, as lemo approvals lists it; the task id\n"+
		"may be any unique beginning or end of it (as the console shows it).", stdout, stderr)
	reason := f.fs.String("reason", "", "why (shown to the model when denying)")
	var always *bool
	if approve {
		always = f.fs.Bool("always", false, "also allow the Task's later calls of the same kind without asking: the same tool (for shell.run: the same command); a deny or the model's own request still asks")
	}
	pos, err := f.parse(args, 1, 1)
	if err != nil {
		return helpOK(err)
	}
	c, err := f.connect(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	id, err := resolveApproval(ctx, c, pos[0])
	if err != nil {
		return err
	}
	var m *api.TaskMeta
	if always != nil && *always {
		m, err = c.AllowForTask(ctx, id, *reason)
	} else {
		m, err = c.Resolve(ctx, id, approve, *reason)
	}
	if err != nil {
		if errorsIsNotFound(err) {
			return &notFound{msg: fmt.Sprintf("unknown approval %s (answered, timed out, cancelled, or not one this token may see)", id)}
		}
		return err
	}
	if f.json {
		printJSON(stdout, m)
		return nil
	}
	word := "approved"
	switch {
	case !approve:
		word = "denied"
	case *always:
		word = "approved (and allowed for the rest of the task)"
	}
	fmt.Fprintf(stdout, "%s %s; task %s is %s\n", word, id, m.GetTaskId(), statusWord(m.GetStatus()))
	if m.GetStatus() == api.TaskStatus_TASK_STATUS_PAUSED {
		// A decision does not continue a paused Task (one the daemon's
		// stop interrupted, for example): the person says when it goes on.
		fmt.Fprintf(stdout, "the decision takes effect when it continues: lemo continue %s\n", m.GetTaskId())
	}
	return nil
}

// resolveApproval turns what the person typed as an approval id,
// <task id>.<call id> with the task id whole or any unique beginning or
// end of it, into the whole approval id; the daemon matches only Tasks the
// token may see, and an ambiguous task part is an error listing the
// matches.
func resolveApproval(ctx context.Context, c *client.Conn, arg string) (string, error) {
	taskPart, callPart, ok := strings.Cut(arg, ".")
	if !ok || taskPart == "" || callPart == "" {
		return "", usageError("approval id %q: want <task id>.<call id>, as lemo approvals lists it (the task id may be any unique beginning or end of it)", arg)
	}
	m, err := c.Task(ctx, taskPart)
	switch {
	case errors.Is(err, client.ErrNotFound):
		return "", &notFound{msg: fmt.Sprintf("unknown approval %s (no task id this token may see is, begins or ends with %s)", arg, taskPart)}
	case err != nil:
		return "", fmt.Errorf("approval %s: %w", arg, err)
	}
	return m.GetTaskId() + "." + callPart, nil
}

// steer implements lemo steer.
func steer(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	f := newClientFlags("steer", "<task id> <call id> <json input>", "Send steering input (JSON) to a running tool call that accepts it (the delegate).", stdout, stderr)
	pos, err := f.parse(args, 3, 3)
	if err != nil {
		return helpOK(err)
	}
	if !json.Valid([]byte(pos[2])) {
		return usageError("steer: the input is not JSON")
	}
	c, err := f.connect(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	id, err := resolveTask(ctx, c, pos[0])
	if err != nil {
		return err
	}
	if err := c.Steer(ctx, id, pos[1], json.RawMessage(pos[2])); err != nil {
		return describe(err, id)
	}
	if f.json {
		fmt.Fprintln(stdout, `{"steered": true}`)
		return nil
	}
	fmt.Fprintf(stdout, "steered call %s of task %s\n", pos[1], id)
	return nil
}

func errorsIsNotFound(err error) bool {
	var e *client.Error
	return errors.As(err, &e) && e.Code == api.ErrorCode_ERROR_CODE_NOT_FOUND
}

// send implements lemo send: a follow-up message (a finished Task
// reopens), then the reply followed as lemo run does.
func send(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	f := newClientFlags("send", `<task id> "message" [flags]`, "Send a follow-up message to a Task (a finished, failed or cancelled Task reopens)\n"+
		"and follow the reply as lemo run does, until the Task stops again. Ctrl-C\n"+
		"detaches; --no-follow returns at once.", stdout, stderr)
	noFollow := f.fs.Bool("no-follow", false, "return once the message is recorded (lemo attach follows later)")
	reasoning := f.fs.Bool("reasoning", false, "show the model's reasoning")
	pos, err := f.parse(args, 2, 2)
	if err != nil {
		return helpOK(err)
	}
	c, err := f.connect(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	before, err := c.Task(ctx, pos[0])
	if err != nil {
		return describe(err, pos[0])
	}
	id := before.GetTaskId()
	m, err := c.SendMessage(ctx, id, pos[1])
	if err != nil {
		return describe(err, id)
	}
	switch {
	case f.json:
		printJSON(stdout, m)
	case *noFollow:
		fmt.Fprintf(stdout, "task %s is %s (lemo attach %s --from %d)\n", m.GetTaskId(), statusWord(m.GetStatus()), m.GetTaskId(), m.GetLastSeq())
	default:
		fmt.Fprintf(stdout, "task %s is %s\n", m.GetTaskId(), statusWord(m.GetStatus()))
	}
	if *noFollow {
		return nil
	}
	var answers <-chan string
	if !f.json && isTerminal(stdin) {
		answers = readAnswers(stdin)
	}
	// From the message just recorded: it, then the reply.
	final, err := streamTask(ctx, c, stdout, stderr, streamOptions{taskID: id, from: before.GetLastSeq() + 1, json: f.json, reasoning: *reasoning, answers: answers, stopWhenIdle: true})
	if ctx.Err() != nil {
		fmt.Fprintf(stderr, "detached; task %s goes on (lemo attach %s)\n", id, id)
		return nil
	}
	if err != nil {
		return describe(err, id)
	}
	return exitFor(final, stderr)
}

// taskPath is a Task's path from its root ("root/child/task"), read with
// parentOf (a Task's parent, "" for a root; false when unknown). It stops
// at maxPath Tasks.
func taskPath(id string, parentOf func(string) (string, bool)) string {
	const maxPath = 16
	path := []string{id}
	for cur := id; len(path) < maxPath; {
		p, ok := parentOf(cur)
		if !ok || p == "" {
			break
		}
		path = append([]string{p}, path...)
		cur = p
	}
	return strings.Join(path, "/")
}
