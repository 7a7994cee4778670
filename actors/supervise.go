package actors

import (
	"fmt"
	"strings"

	"github.com/asynkron/protoactor-go/actor"

	"lemo/api"
	"lemo/supervision"
)

// Supervision in the tree (package supervision holds the policy):
//   - A Task supervises its Cycle and Tool actors (task.HandleFailure): a
//     panic on their goroutines is routed into their Receive (routePanic),
//     so it reaches the Task, which stops the child and records its failure
//     with the decision (a Failure of scope cycle or tool, decision "stop").
//   - A Tool supervises its sessions (toolActor.HandleFailure): stopped, the
//     call goes on.
//   - The task manager supervises Task actors (manager.onFailure): within
//     the budget the Task restarts from its history and its new incarnation
//     records the crash (a Failure of scope task, decision "restart", with
//     its crashes and budget) before it recovers; past the budget it is
//     stopped and recorded as failed (decision "stop"). crashRecorded is
//     where a stopped Task's failure record is published, and where a child
//     Task's parent is told (supervision.Decision.TellParent).
// Every decision is counted (Observer.Supervised: lemo_supervision_decisions_total)
// and shown by the inspector on the supervisor's row (stopped children,
// last decision) and the child's (restarts, last failure).

// noteDecision records a supervision decision about child, which failed
// with reason: the inspector's view of the child and of its supervisor, and
// the metrics. The caller carries the decision out.
func (e *env) noteDecision(child *actor.PID, level supervision.Level, reason any, d supervision.Decision) {
	e.inspector.failed(child.Id, fmt.Sprint(reason))
	parent, name := child.Id, child.Id
	if i := strings.LastIndexByte(child.Id, '/'); i >= 0 {
		parent, name = child.Id[:i], child.Id[i+1:]
	}
	e.inspector.decided(parent, fmt.Sprintf("%s: %s (%s): %v", name, d.Directive, d.Kind, reason), d.Directive == supervision.Stop)
	e.deps.Observer.Supervised(level.String(), d.Directive.String())
}

// childLevel is the level of a child of a Task actor, from its name: a
// Cycle ("cycle-<n>"), a Tool ("tool-<call>") or a child Task (its id).
func childLevel(child *actor.PID) supervision.Level {
	name := child.Id[strings.LastIndexByte(child.Id, '/')+1:]
	switch {
	case strings.HasPrefix(name, "cycle-"):
		return supervision.LevelCycle
	case strings.HasPrefix(name, "tool-"):
		return supervision.LevelTool
	}
	return supervision.LevelChildTask
}

// crashFailure is the Failure a Task actor's crash records.
func crashFailure(reason any, d supervision.Decision, crashes int, budget supervision.Budget) *api.Failure {
	return &api.Failure{Scope: api.FailureScope_FAILURE_SCOPE_TASK, Kind: d.Kind, Message: capText(fmt.Sprint(reason), 4096),
		Decision: d.Directive.String(), Crashes: uint32(max(crashes, 0)), Budget: uint32(max(budget.Max, 0))}
}
