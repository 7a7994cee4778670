package actors

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/rs/zerolog"

	"lemo/actors/live"
	"lemo/actors/taskstate"
	"lemo/api"
	"lemo/logging"
	"lemo/memory"
	"lemo/persistence"
	"lemo/prompt"
	"lemo/providers"
	"lemo/supervision"
	"lemo/tools"
)

// Errors returned by the Daemon's API.
var (
	// ErrNotFound: no such Task, or one the caller may not see.
	ErrNotFound = taskstate.ErrNotFound
	// ErrInvalid: a command's input is malformed; the message says what is
	// accepted.
	ErrInvalid = taskstate.ErrInvalid
	// ErrTooLarge: a command's input exceeds a bound (the largest user
	// message); the message names the bound.
	ErrTooLarge = errors.New("too large")
	// ErrStopped: the daemon is stopping or stopped.
	ErrStopped = errors.New("daemon: stopping")
	// ErrInterrupted: the Task crashed while handling the command; it was
	// restarted from its history.
	ErrInterrupted = errors.New("task: interrupted while handling the command")
	// ErrNoSpace: the data folder's filesystem is below its free-space
	// floor; new work is refused until space is freed.
	ErrNoSpace = persistence.ErrNoSpace
)

// Caller is who issues a command: an owner, or an operator who sees every
// owner's Tasks.
type Caller struct {
	Owner    string
	Operator bool
}

// Operator is the in-process caller with access to every Task.
var Operator = Caller{Owner: "operator", Operator: true}

// CanSee reports whether the caller may see a Task of owner.
func (c Caller) CanSee(owner string) bool { return c.Operator || c.Owner == owner }

// Memory indexes what Tasks record and recalls it for later Cycles.
type Memory interface {
	// Postings returns the index records of events, committed in the same
	// transaction as the events (so history and index never disagree).
	Postings(owner string, events []*api.Event) []persistence.KV
	// Recall returns relevant evidence from other Tasks of the same owner
	// for a Cycle, within the recall budget; nothing when nothing is
	// relevant. It must not change the memory.
	Recall(ctx context.Context, q memory.RecallQuery) ([]prompt.Evidence, error)
	// RecordFact records an explicit fact made by tool call callID of Task
	// taskID (owned by owner), with that call as its source, and returns
	// its id.
	RecordFact(ctx context.Context, owner, taskID, callID string, in memory.FactInput) (string, error)
}

// Observer receives the tree's measurements (for metrics). Its methods are
// called on actor goroutines: they must be cheap and never block.
type Observer interface {
	// CycleDone reports a model call: outcome is "completed" or the failure
	// kind ("transient", "rate_limit", "cancelled", "overflow", ...).
	CycleDone(provider, model, outcome string, took time.Duration)
	// ToolDone reports a tool call: outcome is "ok" or the failure kind
	// ("error", "panic", "cancelled", ...).
	ToolDone(tool, outcome string, took time.Duration)
	// Supervised reports a supervision decision about an actor that
	// failed: its level ("cycle", "tool", "session", "task", "child_task")
	// and the directive ("restart" or "stop").
	Supervised(level, directive string)
}

// Deps are the parts the daemon is built from.
type Deps struct {
	Store     *persistence.Store
	Providers *providers.Registry
	Tools     *tools.Registry
	// Memory is optional: nil runs without indexing and recall.
	Memory Memory
	// Observer is optional: nil measures nothing.
	Observer Observer
	Log      zerolog.Logger
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Pricer finds models' prices for budgets; nil: no price is known
	// (cost is not counted and cost limits are refused).
	Pricer Pricer
	// Live keeps the live results (tool calls' whole outputs) within its
	// bounds; nil keeps them in memory within the default bounds and
	// spills nothing. The tasks tools read it too, so cmd/lemo creates it.
	Live *live.Accountant
}

// ApprovalPolicy decides whether a call needs a person's approval (or is
// denied outright) beyond what the tool itself asks for.
type ApprovalPolicy func(taskOwner string, tool *tools.Registered, input json.RawMessage) tools.Approval

// PolicyRule is one rule of a daemon-wide approval policy: the calls of the
// tools that Tool names (a name, or a pattern with "*") are allowed, need
// approval (ask) or are denied.
type PolicyRule struct {
	Tool string
	Rule string // "allow", "ask" or "deny"
}

// RulePolicy returns the approval policy of rules: a call that a deny rule
// matches is refused; else one that an ask rule matches needs approval
// within deadline (0: none); else the policy requires nothing. Deny beats
// ask beats allow whatever their order: an allow rule never exempts a call
// from an ask or deny rule, the tool's own rule, a Task's rules or the
// model's request. It states that the daemon asks nothing for those tools,
// which is also what a tool no rule names gets.
func RulePolicy(rules []PolicyRule, deadline time.Duration) ApprovalPolicy {
	rules = append([]PolicyRule(nil), rules...)
	return func(_ string, tool *tools.Registered, _ json.RawMessage) tools.Approval {
		name := tool.Tool.Name()
		var ask string
		for _, r := range rules {
			if !tools.MatchPattern(r.Tool, name) {
				continue
			}
			switch r.Rule {
			case "deny":
				return tools.Approval{Deny: true, Reason: fmt.Sprintf("the daemon's approvals rule denies %s calls (deny %s)", name, r.Tool)}
			case "ask":
				if ask == "" {
					ask = r.Tool
				}
			}
		}
		if ask != "" {
			return tools.Approval{Required: true, Deadline: deadline, Reason: fmt.Sprintf("the daemon's approvals rule asks for approval of %s calls (ask %s)", name, ask)}
		}
		return tools.Approval{}
	}
}

// Options tune the daemon; zero values take the documented defaults.
type Options struct {
	// Instructions for every Cycle; "" means prompt.DefaultInstructions.
	Instructions string
	// Think asks reasoning-capable models to reason.
	Think bool
	// MaxCycles pauses a Task after this many Cycles without new input
	// (default 50).
	MaxCycles int
	// MaxParallelTools bounds a Task's concurrently running calls (default 4).
	MaxParallelTools int
	// ToolGrace is how long a cancelled tool may take to stop before its
	// outcome is recorded as unknown (default 10s).
	ToolGrace time.Duration
	// HoldFor bounds how long a Task holds the record of an answer while
	// the read-only calls it asks for run, so that the step is one commit
	// (hold.go); 0 means 100 ms, below 0 never holds.
	HoldFor time.Duration
	// IdleTimeout passivates an idle Task (default 1m).
	IdleTimeout time.Duration
	// PausedLiveTimeout passivates a Task that is not working (paused,
	// failed) but holds live results, which are then released (default
	// 30m).
	PausedLiveTimeout time.Duration
	// ShutdownTimeout bounds Stop (default 30s).
	ShutdownTimeout time.Duration
	// WorkspaceRoot holds the default workspace of each Task (a folder per
	// Task id); required unless every Task names its workspace. A request
	// never names it, a folder in it or one that contains it.
	WorkspaceRoot string
	// DataDir is the daemon's data folder (store, token): never a Task's
	// workspace, nor inside or containing one. "" when there is none.
	DataDir string
	// WorkspaceGrants are the folders, besides its own under WorkspaceRoot,
	// in which a caller may name a Task's workspace (WorkspacePolicy).
	// None: only the daemon's own.
	WorkspaceGrants []WorkspaceGrant
	// TaskBudget bounds restarts of a crashing Task (default 3 in 30s).
	TaskBudget supervision.Budget
	// SubscriptionBuffer bounds a subscriber's queue (default 1024).
	SubscriptionBuffer int
	// Approval adds policy approvals; nil: only tools' own. SetApproval
	// replaces it while the daemon runs.
	Approval ApprovalPolicy
	// ApprovalTimeout is the deadline of the approvals that a Task's own
	// rules or the model's request_approval require; 0: none.
	ApprovalTimeout time.Duration
	// MaxRequestBytes bounds a user message (default 256 KiB).
	MaxRequestBytes int

	// Agent trees: MaxDepth bounds a child's depth (default 3), MaxChildren
	// the children one Task spawns (default 8), MaxRunningChildren the
	// child Tasks running at once daemon-wide (default 32; later ones
	// queue).
	MaxDepth, MaxChildren, MaxRunningChildren int
	// Budget are the budget settings (budget.go).
	Budget BudgetOptions
	// Stopped are the processes of calls that were found running at the
	// daemon's start (left by a daemon killed outright) and stopped before
	// Start: recovery names them on the outcome-unknown record of their
	// call.
	Stopped []StoppedProcess
	// InitialTools turns tool discovery on (config tools.initial): a Task
	// created without an allow-list starts with the registered tools these
	// names and patterns ("files.*") match, plus tools.search and
	// tools.load, and loads others with tools.load. nil: such a Task is
	// offered every registered tool, without discovery.
	InitialTools []string
}

// StoppedProcess is a process of a call that was found running at the
// daemon's start and stopped.
type StoppedProcess struct {
	TaskID, CallID string
	Pid            int
	Command        string // its command name
}

func (o *Options) defaults() {
	if o.MaxCycles == 0 {
		o.MaxCycles = 50
	}
	if o.MaxParallelTools == 0 {
		o.MaxParallelTools = 4
	}
	if o.HoldFor == 0 {
		o.HoldFor = defaultHoldFor
	}
	if o.ToolGrace == 0 {
		o.ToolGrace = 10 * time.Second
	}
	if o.IdleTimeout == 0 {
		o.IdleTimeout = time.Minute
	}
	if o.PausedLiveTimeout == 0 {
		o.PausedLiveTimeout = 30 * time.Minute
	}
	if o.ShutdownTimeout == 0 {
		o.ShutdownTimeout = 30 * time.Second
	}
	if o.TaskBudget.Max == 0 {
		o.TaskBudget = supervision.DefaultTaskBudget
	}
	if o.SubscriptionBuffer == 0 {
		o.SubscriptionBuffer = 1024
	}
	if o.MaxRequestBytes == 0 {
		o.MaxRequestBytes = 256 << 10
	}
	if o.MaxDepth == 0 {
		o.MaxDepth = 3
	}
	if o.MaxChildren == 0 {
		o.MaxChildren = 8
	}
	if o.MaxRunningChildren == 0 {
		o.MaxRunningChildren = 32
	}
}

// env is what every actor of the tree shares.
type env struct {
	deps   Deps
	opts   Options
	log    zerolog.Logger
	system *actor.ActorSystem
	hub    *actor.PID
	tasks  *actor.PID
	// gor tracks every goroutine the tree starts, so Stop can wait for them.
	gor sync.WaitGroup
	// workers run the mailboxes and the goroutines the tree starts.
	workers *workers
	// incarnations numbers Task actor instances.
	incarnations atomic.Uint64
	// appending tracks the Tasks' appends in flight (load waits for them).
	appending appending
	inspector *inspector
	// limits are the part of opts that may change (SetLimits).
	limits atomic.Pointer[Limits]
	// policy is the daemon's approval policy (SetApproval).
	policy atomic.Pointer[approvalPolicy]
	// workspaces decides the workspaces requests name.
	workspaces WorkspacePolicy
	// books are the tree roots' books (treebudget.go): they outlive the
	// roots' actor incarnations.
	books rootBooks
	// dayLimits is each owner's daily budget in force (never nil after
	// Start; SetOwnerDayBudget).
	dayLimits atomic.Pointer[api.BudgetAmounts]
	// admission is the admission of child Tasks, read at the start
	// (admission.go).
	admission *taskstate.Admission
}

// approvalPolicy is the daemon's approval policy and the deadline of the
// approvals required by Tasks' rules and by models.
type approvalPolicy struct {
	fn      ApprovalPolicy
	timeout time.Duration
}

// SetApproval replaces the daemon's approval policy (nil: none) and the
// deadline of the approvals that Tasks' rules and models ask for (0: none).
// Calls that have not yet been judged use the new policy; approvals already
// requested keep theirs. It is safe to call at any time.
func (d *Daemon) SetApproval(p ApprovalPolicy, timeout time.Duration) {
	d.env.policy.Store(&approvalPolicy{fn: p, timeout: timeout})
}

func (e *env) now() time.Time { return e.deps.Now() }

// goroutine runs f on a tracked goroutine (a worker's).
func (e *env) goroutine(f func()) {
	e.gor.Add(1)
	e.workers.Go(func() {
		defer e.gor.Done()
		f()
	})
}

// Daemon is a running actor tree.
type Daemon struct {
	env     *env
	root    *actor.PID
	stopped atomic.Bool
	stopMu  sync.Mutex
	// diskWake asks resumeLoop to continue the Tasks the full disk paused;
	// diskStop ends it.
	diskWake chan struct{}
	diskStop context.CancelFunc
}

// Start recovers the store and starts the tree. No command is accepted
// before recovery finished.
func Start(ctx context.Context, deps Deps, opts Options) (*Daemon, error) {
	if deps.Store == nil || deps.Providers == nil || deps.Tools == nil {
		return nil, fmt.Errorf("actors: Start needs a store, a provider registry and a tool registry")
	}
	if deps.Now == nil {
		deps.Now = time.Now
	}
	if deps.Observer == nil {
		deps.Observer = nopObserver{}
	}
	if deps.Live == nil {
		a, err := live.New("", live.Limits{})
		if err != nil {
			return nil, err
		}
		deps.Live = a
	}
	opts.defaults()
	wp, err := newWorkspacePolicy(opts.DataDir, opts.WorkspaceRoot, opts.WorkspaceGrants)
	if err != nil {
		return nil, fmt.Errorf("actors: workspaces: %w", err)
	}
	e := &env{deps: deps, opts: opts, log: deps.Log, inspector: newInspector(), workspaces: wp, workers: newWorkers(maxIdleWorkers)}
	e.limits.Store(limitsOf(opts))
	e.dayLimits.Store(&api.BudgetAmounts{Tokens: opts.Budget.PerOwnerDay.GetTokens(), CostNanoUsd: opts.Budget.PerOwnerDay.GetCostNanoUsd()})
	e.policy.Store(&approvalPolicy{fn: opts.Approval, timeout: opts.ApprovalTimeout})
	n, err := recoverStore(ctx, deps.Store, deps.Now(), stoppedNotes(opts.Stopped), rerunnable(deps.Tools), opts.Budget.recoveryCharge(deps.Tools))
	if err != nil {
		return nil, fmt.Errorf("recover store: %w", err)
	}
	if n > 0 {
		e.log.Info().Int("tasks", n).Msg("recovered tasks left running or awaiting approval: paused as interrupted")
	}
	var open []*api.TaskMeta
	if e.admission, open, err = loadAdmission(deps.Store, opts.MaxRunningChildren); err != nil {
		return nil, fmt.Errorf("read the child tasks' admission: %w", err)
	}
	below, err := progressBelow(deps.Store, open)
	if err != nil {
		return nil, fmt.Errorf("read the child tasks' progress: %w", err)
	}
	e.system = actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger {
		return logging.Slog(deps.Log, "protoactor")
	}), actor.WithDeadLetterRequestLogging(false))
	d := &Daemon{env: e}
	ready := make(chan struct{})
	rootProps := e.props("daemon", func() actor.Actor { return &rootActor{env: e, ready: ready} })
	root, err := e.system.Root.SpawnNamed(rootProps, "daemon")
	if err != nil {
		e.workers.close()
		return nil, fmt.Errorf("spawn daemon root: %w", err)
	}
	d.root = root
	select {
	case <-ready:
	case <-ctx.Done():
		_ = e.system.Root.StopFuture(root).Wait()
		e.workers.close()
		return nil, ctx.Err()
	}
	// The hub tells subscriptions of the child Tasks that had not ended
	// when the daemon started, before any subscription can reach it.
	for _, m := range below {
		e.system.Root.Send(e.hub, m)
	}
	// An evicted live result is dropped by its Task, if it is active.
	sys, tasks := e.system, e.tasks
	deps.Live.OnEvict(func(task, call string) { sys.Root.Send(tasks, &liveEvicted{taskID: task, callID: call}) })
	d.watchDisk()
	return d, nil
}

// System returns the internal actor system (for the inspector and gateway).
func (d *Daemon) System() *actor.ActorSystem { return d.env.system }

// CreateTask is a new Task's input.
type CreateTask struct {
	// Request is the user's request (required).
	Request string
	// Model is the model id, "provider/model" (required).
	Model string
	// Tools restricts the Task to these tools when ToolsRestricted is set.
	Tools           []string
	ToolsRestricted bool
	// Workspace is an existing absolute folder that the daemon's
	// WorkspacePolicy allows the caller (symlinks are resolved first and
	// the resolved path is recorded); "" gives the Task a folder of its
	// own under the workspace root.
	Workspace string
	// Approvals are the Task's own approval rules: a tool name or a
	// pattern with "*", and ask or deny. They only tighten what the tools
	// and the daemon's policy require (deny wins over ask); a plain name
	// must be a registered tool.
	Approvals []*api.ToolApproval
	// Budget is the Task's budget; a zero amount takes the daemon's
	// default in that dimension (Options.Budget). A cost limit needs the
	// model's price to be known.
	Budget *api.BudgetAmounts
}

// MaxTaskApprovals bounds a Task's own approval rules.
const MaxTaskApprovals = 64

// checkApprovals validates a Task's approval rules against the registry.
func checkApprovals(reg *tools.Registry, rules []*api.ToolApproval) error {
	if len(rules) > MaxTaskApprovals {
		return fmt.Errorf("%w: %d approval rules: at most %d are accepted", ErrInvalid, len(rules), MaxTaskApprovals)
	}
	for i, r := range rules {
		if err := tools.CheckPattern(r.GetTool()); err != nil {
			return fmt.Errorf("%w: approval rule %d: %v", ErrInvalid, i+1, err)
		}
		if !tools.IsPattern(r.GetTool()) {
			if _, ok := reg.Get(r.GetTool()); !ok {
				return fmt.Errorf("%w: approval rule %d: no tool is named %q; registered tools: %s (or use a pattern with '*')", ErrInvalid, i+1, r.GetTool(), strings.Join(toolNames(reg), ", "))
			}
		}
		switch r.GetRule() {
		case api.ApprovalRule_APPROVAL_RULE_ASK, api.ApprovalRule_APPROVAL_RULE_DENY:
		default:
			return fmt.Errorf("%w: approval rule %d (%s): rule %v: want ask or deny", ErrInvalid, i+1, r.GetTool(), r.GetRule())
		}
	}
	return nil
}

func toolNames(reg *tools.Registry) []string {
	var out []string
	for _, r := range reg.List() {
		out = append(out, r.Tool.Name())
	}
	return out
}

// CreateTask validates the input and creates a Task owned by the caller.
// It returns once the Task's creation is durable.
func (d *Daemon) CreateTask(ctx context.Context, c Caller, in CreateTask) (*api.TaskMeta, error) {
	if err := d.usable(); err != nil {
		return nil, err
	}
	if err := persistence.ValidOwner(c.Owner); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	if err := d.env.deps.Store.CheckSpace(); err != nil {
		return nil, err
	}
	if err := d.validText("request", in.Request); err != nil {
		return nil, err
	}
	if err := providers.ValidateModelID(in.Model); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	if _, err := d.env.deps.Providers.Model(ctx, in.Model); err != nil {
		return nil, fmt.Errorf("%w: model %s: %v", ErrInvalid, in.Model, err)
	}
	if _, err := d.env.deps.Tools.Select(in.Tools, in.ToolsRestricted); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	discovery := false
	if in.ToolsRestricted {
		for _, n := range in.Tools {
			if n == taskstate.SearchTool || n == taskstate.LoadTool {
				return nil, fmt.Errorf("%w: %s: a Task whose tools are listed (lemo run --tools) has a fixed set and does not discover others; leave %s and %s out, or list no tools to start with tools.initial and load more", ErrInvalid, n, taskstate.SearchTool, taskstate.LoadTool)
			}
		}
	} else if d.env.opts.InitialTools != nil {
		discovery = true
		in.Tools = taskstate.InitialTools(d.env.opts.InitialTools, toolNames(d.env.deps.Tools), tools.MatchPattern)
	}
	if err := checkApprovals(d.env.deps.Tools, in.Approvals); err != nil {
		return nil, err
	}
	budget := d.env.opts.Budget.merged(in.Budget)
	price, err := d.price(ctx, in.Model, budget)
	if err != nil {
		return nil, err
	}
	id := persistence.NewTaskID(d.env.now())
	ws, err := d.workspace(c, id, in.Workspace)
	if err != nil {
		return nil, err
	}
	cmd := taskCommand{taskID: id, caller: c, cmd: &cmdCreate{in: taskstate.CreateInput{
		Owner: c.Owner, Model: in.Model, Request: in.Request, Workspace: ws, Tools: in.Tools, ToolsRestricted: in.ToolsRestricted, Discovery: discovery,
		Approvals: cloneApprovals(in.Approvals), Budget: budget, Price: price,
	}}}
	return d.command(ctx, cmd)
}

// cloneApprovals copies the caller's rules, so the recorded event shares
// nothing with them.
func cloneApprovals(rules []*api.ToolApproval) []*api.ToolApproval {
	out := make([]*api.ToolApproval, 0, len(rules))
	for _, r := range rules {
		out = append(out, &api.ToolApproval{Tool: r.GetTool(), Rule: r.GetRule()})
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// workspace returns the folder a new Task works in: the requested one,
// resolved and allowed by the policy, or a folder of its own.
func (d *Daemon) workspace(c Caller, id, ws string) (string, error) {
	if ws != "" {
		if !filepath.IsAbs(ws) {
			return "", fmt.Errorf("%w: workspace %q: want an absolute path", ErrInvalid, ws)
		}
		real, err := resolveFolder(ws)
		if err != nil {
			return "", fmt.Errorf("%w: workspace %v", ErrInvalid, err)
		}
		if err := d.env.workspaces.Allow(c, real); err != nil {
			if real != filepath.Clean(ws) {
				return "", fmt.Errorf("%w (%s, its symlinks resolved)", err, ws)
			}
			return "", err
		}
		return real, nil
	}
	if d.env.opts.WorkspaceRoot == "" {
		return "", fmt.Errorf("%w: no workspace given and the daemon has no workspace root", ErrInvalid)
	}
	// The resolved root, so that the recorded path has no symlinks either.
	ws = filepath.Join(d.env.workspaces.Root, id)
	if err := os.MkdirAll(ws, 0o700); err != nil {
		return "", fmt.Errorf("create workspace: %w", err)
	}
	return ws, nil
}

func (d *Daemon) validText(what, s string) error {
	limit := d.Limits().MaxRequestBytes
	switch {
	case strings.TrimSpace(s) == "":
		return fmt.Errorf("%w: %s is empty", ErrInvalid, what)
	case len(s) > limit:
		return fmt.Errorf("%w: %s of %d bytes exceeds the limit of %d bytes (tasks.max_request_bytes)", ErrTooLarge, what, len(s), limit)
	}
	if err := api.CheckText(s, true); err != nil {
		return fmt.Errorf("%w: %s %v", ErrInvalid, what, err)
	}
	return nil
}

func validTaskID(id string) error {
	if err := persistence.ValidTaskID(id); err != nil {
		return fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	return nil
}

// SendMessage records a follow-up message. A finished, failed or cancelled
// Task is reopened; a paused one stays paused until continued.
func (d *Daemon) SendMessage(ctx context.Context, c Caller, taskID, text string) (*api.TaskMeta, error) {
	if err := d.validText("message", text); err != nil {
		return nil, err
	}
	if err := d.env.deps.Store.CheckSpace(); err != nil {
		return nil, err
	}
	return d.taskCmd(ctx, c, taskID, &cmdMessage{text: text})
}

// Pause pauses a running Task: its model call is cancelled, its running
// tool calls finish and their live results are kept.
func (d *Daemon) Pause(ctx context.Context, c Caller, taskID string) (*api.TaskMeta, error) {
	return d.taskCmd(ctx, c, taskID, &cmdPause{})
}

// Continue resumes a paused or failed Task, with another model when model
// is not "".
func (d *Daemon) Continue(ctx context.Context, c Caller, taskID, model string) (*api.TaskMeta, error) {
	if err := d.env.deps.Store.CheckSpace(); err != nil {
		return nil, err
	}
	if model != "" {
		if err := providers.ValidateModelID(model); err != nil {
			return nil, fmt.Errorf("%w: %v", ErrInvalid, err)
		}
		if _, err := d.env.deps.Providers.Model(ctx, model); err != nil {
			return nil, fmt.Errorf("%w: model %s: %v", ErrInvalid, model, err)
		}
	}
	var price *api.Price
	if model != "" {
		// The Task refuses an unknown price if it has a cost limit.
		price, _ = d.price(ctx, model, nil)
	}
	return d.taskCmd(ctx, c, taskID, &cmdContinue{model: model, price: price})
}

// Cancel cancels a Task: its model call and tool calls are cancelled and
// its live results released.
func (d *Daemon) Cancel(ctx context.Context, c Caller, taskID string) (*api.TaskMeta, error) {
	return d.taskCmd(ctx, c, taskID, &cmdCancel{})
}

// Resolve answers a pending approval: approve or deny (with a reason).
func (d *Daemon) Resolve(ctx context.Context, c Caller, taskID, approvalID string, approve bool, reason string) (*api.TaskMeta, error) {
	if approvalID == "" {
		return nil, fmt.Errorf("%w: approval id is empty", ErrInvalid)
	}
	outcome := api.ApprovalOutcome_APPROVAL_OUTCOME_DENIED
	if approve {
		outcome = api.ApprovalOutcome_APPROVAL_OUTCOME_APPROVED
	}
	return d.taskCmd(ctx, c, taskID, &cmdResolve{approvalID: approvalID, outcome: outcome, by: c.Owner, reason: reason})
}

// ResolveApproval answers a pending approval by its id alone (the id names
// its Task).
func (d *Daemon) ResolveApproval(ctx context.Context, c Caller, approvalID string, approve bool, reason string) (*api.TaskMeta, error) {
	taskID, ok := taskstate.SplitApprovalID(approvalID)
	if !ok {
		return nil, fmt.Errorf("%w: approval id %q: want <task id>.<call id>", ErrInvalid, approvalID)
	}
	return d.Resolve(ctx, c, taskID, approvalID, approve, reason)
}

// AllowForTask approves a pending approval (by its id alone) and allows
// the Task's later calls of the same kind without asking: calls of the
// same tool, and for a tool that judges its input (the shell) of the same
// scope (the exact command). The rule is part of the Task's history; it
// never overrides a deny nor the model's own request_approval.
func (d *Daemon) AllowForTask(ctx context.Context, c Caller, approvalID, reason string) (*api.TaskMeta, error) {
	taskID, ok := taskstate.SplitApprovalID(approvalID)
	if !ok {
		return nil, fmt.Errorf("%w: approval id %q: want <task id>.<call id>", ErrInvalid, approvalID)
	}
	return d.taskCmd(ctx, c, taskID, &cmdResolve{approvalID: approvalID, outcome: api.ApprovalOutcome_APPROVAL_OUTCOME_APPROVED, by: c.Owner, reason: reason, always: true})
}

// PendingApprovals returns the approval requests not yet answered that the
// caller may see (every owner's for an operator), oldest Task first. They
// survive restarts: a client that attaches later sees them too.
func (d *Daemon) PendingApprovals(ctx context.Context, c Caller) ([]*api.Event, error) {
	owner := c.Owner
	if c.Operator {
		owner = ""
	}
	return d.env.deps.Store.PendingApprovals(owner)
}

// PendingBelow returns the approval requests not yet answered of the
// Tasks below taskID (its descendants), each labelled with its path from
// the root, oldest Task first: what a subscription to taskID is told
// before its live TreeEvents. Only Tasks the caller may see count (a
// descendant has its root's owner; the check holds all the same).
func (d *Daemon) PendingBelow(ctx context.Context, c Caller, taskID string) ([]*api.TreeEvent, error) {
	if _, err := d.Task(ctx, c, taskID); err != nil {
		return nil, err
	}
	evs, err := d.PendingApprovals(ctx, c)
	if err != nil {
		return nil, err
	}
	var out []*api.TreeEvent
	paths := map[string][]string{} // Task id -> path, nil when not below
	for _, ev := range evs {
		id := ev.GetTaskId()
		path, seen := paths[id]
		if !seen {
			if m, err := d.env.deps.Store.Meta(id); err == nil && c.CanSee(m.GetOwner()) && m.GetParentId() != "" {
				if anc := readAncestry(d.env.deps.Store, m.GetParentId()); taskstate.IsBelow(taskID, anc) {
					path = append(anc, id)
				}
			}
			paths[id] = path
		}
		if path != nil {
			out = append(out, &api.TreeEvent{Path: path, Event: ev})
		}
	}
	return out, nil
}

// Steer sends steering input to a running tool call (one whose tool accepts
// steering, such as the delegate). It returns once the call took the input
// into account, or why it could not.
func (d *Daemon) Steer(ctx context.Context, c Caller, taskID, callID string, input json.RawMessage) error {
	if callID == "" {
		return fmt.Errorf("%w: call id is empty", ErrInvalid)
	}
	if !json.Valid(input) {
		return fmt.Errorf("%w: steering input is not JSON", ErrInvalid)
	}
	_, err := d.taskCmd(ctx, c, taskID, &cmdSteer{callID: callID, input: input})
	return err
}

// StopCall stops one running tool call of a Task, the way Cancel stops
// all of them, and leaves the Task running: the call's context is
// cancelled (its process group killed) and it is recorded as a cancelled
// failure, or as outcome unknown when it does not stop within the tool
// grace period; the model then sees that failure. It returns once the
// cancellation was delivered, not when the call has ended.
func (d *Daemon) StopCall(ctx context.Context, c Caller, taskID, callID string) (*api.TaskMeta, error) {
	if callID == "" {
		return nil, fmt.Errorf("%w: call id is empty", ErrInvalid)
	}
	return d.taskCmd(ctx, c, taskID, &cmdStopCall{callID: callID, by: c.Owner})
}

func (d *Daemon) taskCmd(ctx context.Context, c Caller, taskID string, cmd any) (*api.TaskMeta, error) {
	if err := validTaskID(taskID); err != nil {
		return nil, err
	}
	return d.command(ctx, taskCommand{taskID: taskID, caller: c, cmd: cmd})
}

func (d *Daemon) usable() error {
	if d.stopped.Load() {
		return ErrStopped
	}
	return nil
}

// command sends cmd to the manager and waits for the Task's answer.
func (d *Daemon) command(ctx context.Context, cmd taskCommand) (*api.TaskMeta, error) {
	if err := d.usable(); err != nil {
		return nil, err
	}
	cmd.reply = make(chan reply, 1)
	d.env.system.Root.Send(d.env.tasks, &cmd)
	select {
	case r := <-cmd.reply:
		return r.meta, r.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// Task returns a Task's metadata.
func (d *Daemon) Task(ctx context.Context, c Caller, taskID string) (*api.TaskMeta, error) {
	if err := validTaskID(taskID); err != nil {
		return nil, err
	}
	m, err := d.env.deps.Store.Meta(taskID)
	if errors.Is(err, persistence.ErrNotFound) || (err == nil && !c.CanSee(m.GetOwner())) {
		return nil, fmt.Errorf("%w: task %s", ErrNotFound, taskID)
	}
	return m, err
}

// FindTask returns the metadata of the Task the caller may see whose id
// is idOrPart, or begins or ends with it (as the console's short ids do);
// ErrNotFound when none does, ErrInvalid listing the matches when more
// than one does. Another owner's Tasks are never matched.
func (d *Daemon) FindTask(ctx context.Context, c Caller, idOrPart string) (*api.TaskMeta, error) {
	m, err := d.Task(ctx, c, idOrPart)
	if !errors.Is(err, ErrNotFound) {
		return m, err
	}
	owner := c.Owner
	if c.Operator {
		owner = ""
	}
	const shown = 5
	ids, more, ferr := d.env.deps.Store.FindTasks(owner, idOrPart, shown)
	if ferr != nil {
		return nil, ferr
	}
	switch {
	case len(ids) == 0:
		return nil, fmt.Errorf("%w: no task id is, begins or ends with %s", ErrNotFound, idOrPart)
	case len(ids) > 1:
		list := strings.Join(ids, ", ")
		if more {
			list += ", ..."
		}
		return nil, fmt.Errorf("%w: %s names more than one task (%s): give more of the id", ErrInvalid, idOrPart, list)
	}
	return d.Task(ctx, c, ids[0])
}

// ListTasks lists the Tasks the caller may see, newest first.
func (d *Daemon) ListTasks(ctx context.Context, c Caller, before string, limit int) ([]*api.TaskMeta, string, error) {
	o := persistence.ListOptions{Before: before, Limit: limit}
	if !c.Operator {
		o.Owner = c.Owner
	}
	return d.env.deps.Store.ListTasks(o)
}

// History returns at most limit events of a Task from seq from.
func (d *Daemon) History(ctx context.Context, c Caller, taskID string, from uint64, limit int) ([]*api.Event, error) {
	if _, err := d.Task(ctx, c, taskID); err != nil {
		return nil, err
	}
	return d.env.deps.Store.ReadEvents(taskID, from, limit)
}

// Stop durably pauses running Tasks as interrupted (after cancelling their
// model calls and tool calls), stops the tree and waits for its goroutines.
// It is safe to call more than once.
func (d *Daemon) Stop(ctx context.Context) error {
	d.stopMu.Lock()
	defer d.stopMu.Unlock()
	if d.stopped.Swap(true) {
		return nil
	}
	e := d.env
	d.unwatchDisk()
	ctx, cancel := context.WithTimeout(ctx, e.opts.ShutdownTimeout)
	defer cancel()
	done := make(chan struct{})
	e.system.Root.Send(e.tasks, &shutdown{done: done})
	var err error
	select {
	case <-done:
	case <-ctx.Done():
		err = fmt.Errorf("stop: tasks did not stop in time: %w", ctx.Err())
	}
	if ferr := e.system.Root.StopFuture(d.root).Wait(); ferr != nil && err == nil {
		err = fmt.Errorf("stop actors: %w", ferr)
	}
	e.system.Shutdown()
	waited := make(chan struct{})
	go func() {
		e.gor.Wait()
		e.workers.close()
		e.workers.wait()
		close(waited)
	}()
	select {
	case <-waited:
	case <-ctx.Done():
		if err == nil {
			err = fmt.Errorf("stop: goroutines did not end in time: %w", ctx.Err())
		}
	}
	return err
}

// rootActor spawns and supervises the hub and the task manager.
type rootActor struct {
	env   *env
	ready chan struct{}
}

func (r *rootActor) Receive(ctx actor.Context) {
	switch ctx.Message().(type) {
	case *actor.Started:
		hub, err := ctx.SpawnNamed(r.env.props("hub", func() actor.Actor { return newHub(r.env) }), "hub")
		if err != nil {
			panic(fmt.Sprintf("spawn hub: %v", err))
		}
		tasks, err := ctx.SpawnNamed(r.env.props("tasks", func() actor.Actor { return newManager(r.env) }), "tasks")
		if err != nil {
			panic(fmt.Sprintf("spawn task manager: %v", err))
		}
		if r.ready != nil {
			r.env.hub, r.env.tasks = hub, tasks
			close(r.ready)
			r.ready = nil
		}
	}
}

type nopObserver struct{}

func (nopObserver) CycleDone(provider, model, outcome string, took time.Duration) {}
func (nopObserver) ToolDone(tool, outcome string, took time.Duration)             {}
func (nopObserver) Supervised(level, directive string)                            {}
