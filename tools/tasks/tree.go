package tasks

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"lemo/api"
	"lemo/tools"
)

// The tree tools: a Task starts child Tasks, waits for them and exchanges
// messages with its parent, children and siblings. Each asks the calling
// Task (tools.Call.Tree), which records what happens; each is idempotent
// per call, so a call that was running when the daemon was killed runs
// again after it (tools.Rerunnable).
const (
	NameSpawn       = "tasks.spawn"
	NameWait        = "tasks.wait"
	NameSend        = "tasks.send"
	NameWaitMessage = "tasks.wait_message"
)

// Wait bounds.
const (
	// DefaultWait is a wait's timeout when the call names none.
	DefaultWait = 10 * time.Minute
	// MaxWait bounds a wait's timeout.
	MaxWait = time.Hour
	// MaxMessageBytes bounds one tasks.send text.
	MaxMessageBytes = 64 << 10
)

// NewTree returns the tree tools.
func NewTree(s Store) []tools.Tool {
	r := &reader{s: s}
	return []tools.Tool{&Spawn{r: r}, &Wait{r: r}, &Send{}, &WaitMessage{}}
}

var errNoTree = errors.New("this daemon offers no agent tree to this call")

type treeTool struct{}

func (treeTool) StateSchema() json.RawMessage { return nil }
func (treeTool) View() string                 { return View }
func (treeTool) Rerunnable() bool             { return true }

// Retain keeps the whole result: it is small and bounded.
func (treeTool) Retain(output, _ json.RawMessage) json.RawMessage { return output }

var timeoutSchema = obj{"type": "number", "minimum": 0, "maximum": MaxWait.Seconds(),
	"description": fmt.Sprintf("Seconds to wait at most (default %d); when it passes the result says what still runs.", int(DefaultWait.Seconds()))}

func timeout(sec *float64) time.Duration {
	if sec == nil {
		return DefaultWait
	}
	return time.Duration(*sec * float64(time.Second))
}

// Spawn is tasks.spawn.
type Spawn struct {
	r *reader
	treeTool
}

func (*Spawn) Name() string { return NameSpawn }
func (*Spawn) Description() string {
	return "Start a child task that works on a part of your task with its own history and model calls, in parallel with you. " +
		"It gets your tools unless you name fewer (never more) and works in your workspace unless fresh_workspace is set. " +
		"With wait it returns the child's answer (or failure); without, its id at once: collect it later with tasks.wait."
}
func (*Spawn) InputSchema() json.RawMessage {
	return schema(obj{"type": "object", "additionalProperties": false, "required": []string{"request"}, "properties": obj{
		"request":          obj{"type": "string", "minLength": 1, "maxLength": MaxMessageBytes, "description": "The child's task, in words."},
		"model":            obj{"type": "string", "description": "provider/model for the child (default: yours)."},
		"tools":            obj{"type": "array", "items": obj{"type": "string"}, "maxItems": 64, "description": "Tool names the child may use, a subset of yours (default: all of yours)."},
		"instructions":     obj{"type": "string", "maxLength": MaxMessageBytes, "description": "Extra instructions for the child."},
		"wait":             obj{"type": "boolean", "description": "Wait for the child to end and return its answer."},
		"timeout":          timeoutSchema,
		"fresh_workspace":  obj{"type": "boolean", "description": "Give the child an empty workspace of its own."},
		"max_tokens":       obj{"type": "integer", "minimum": 1, "description": "Token budget for the child (default and at most: what your budget has left)."},
		"max_cost_usd":     obj{"type": "number", "exclusiveMinimum": 0, "description": "Cost budget for the child in US dollars, e.g. 0.25 (default and at most: what your budget has left)."},
		"max_time_seconds": obj{"type": "number", "exclusiveMinimum": 0, "description": "Working-time budget for the child in seconds (default and at most: what your budget has left)."},
	}})
}
func (*Spawn) ResultSchema() json.RawMessage {
	return schema(obj{"type": "object", "required": []string{"id"}})
}

type spawnInput struct {
	Request      string      `json:"request"`
	Model        string      `json:"model"`
	Tools        []string    `json:"tools"`
	Instructions string      `json:"instructions"`
	Wait         bool        `json:"wait"`
	Timeout      *float64    `json:"timeout"`
	Fresh        bool        `json:"fresh_workspace"`
	MaxTokens    uint64      `json:"max_tokens"`
	MaxCost      json.Number `json:"max_cost_usd"`
	MaxTime      float64     `json:"max_time_seconds"`
}

type childResult struct {
	ID               string `json:"id"`
	Status           string `json:"status"`
	Answer           string `json:"answer,omitempty"`
	Detail           string `json:"detail,omitempty"`
	PromptTokens     uint64 `json:"prompt_tokens,omitempty"`
	CompletionTokens uint64 `json:"completion_tokens,omitempty"`
}

type spawnOutput struct {
	childResult
	Queued string `json:"queued,omitempty"`
	Note   string `json:"note,omitempty"`
}

// Execute spawns the child (once per call) and, with wait, waits for it.
func (s *Spawn) Execute(ctx context.Context, call tools.Call, _ tools.Emit) (json.RawMessage, error) {
	if call.Tree == nil {
		return nil, fmt.Errorf("%s: %w", NameSpawn, errNoTree)
	}
	var in spawnInput
	if err := json.Unmarshal(call.Input, &in); err != nil {
		return nil, fmt.Errorf("%s: input: %w", NameSpawn, err)
	}
	req := tools.SpawnRequest{Request: in.Request, Model: in.Model, Tools: in.Tools, Instructions: in.Instructions, FreshWorkspace: in.Fresh,
		MaxTokens: in.MaxTokens, MaxTime: time.Duration(in.MaxTime * float64(time.Second))}
	if in.MaxCost != "" {
		c, err := api.ParseUSD(in.MaxCost.String())
		if err != nil {
			return nil, fmt.Errorf("%s: max_cost_usd: %w", NameSpawn, err)
		}
		req.MaxCostNanoUSD = c
	}
	id, queued, err := call.Tree.Spawn(ctx, req)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", NameSpawn, err)
	}
	out := spawnOutput{childResult: childResult{ID: id, Status: "running"}}
	if queued {
		out.Status = "queued"
		out.Queued = "the daemon runs as many child tasks as it allows at once; this one starts when one of them ends"
	}
	if !in.Wait {
		out.Note = "collect its answer with tasks.wait"
		return json.Marshal(out)
	}
	ends, err := call.Tree.Wait(ctx, []string{id}, false, timeout(in.Timeout))
	switch {
	case err == nil && len(ends) == 1:
		out.childResult = result(ends[0])
		out.Queued = ""
	case errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil:
		out.Note = "still running after the timeout; collect its answer with tasks.wait"
	case err != nil:
		return nil, fmt.Errorf("%s: wait for %s: %w", NameSpawn, id, err)
	}
	return json.Marshal(out)
}

func result(e tools.ChildEnd) childResult {
	return childResult{ID: e.ID, Status: e.Status, Answer: e.Answer, Detail: e.Detail, PromptTokens: e.PromptTokens, CompletionTokens: e.CompletionTokens}
}

// Wait is tasks.wait.
type Wait struct {
	r *reader
	treeTool
}

func (*Wait) Name() string { return NameWait }
func (*Wait) Description() string {
	return "Wait for child tasks you spawned to end (mode all, the default, or any) and get each one's status, answer and usage. " +
		"A timeout is not a failure: the result lists the children still running."
}
func (*Wait) InputSchema() json.RawMessage {
	return schema(obj{"type": "object", "additionalProperties": false, "required": []string{"ids"}, "properties": obj{
		"ids":     obj{"type": "array", "items": taskID, "minItems": 1, "maxItems": 64, "description": "Ids of your child tasks."},
		"mode":    obj{"type": "string", "enum": []string{"all", "any"}},
		"timeout": timeoutSchema,
	}})
}
func (*Wait) ResultSchema() json.RawMessage {
	return schema(obj{"type": "object", "required": []string{"ended"}})
}

type waitInput struct {
	IDs     []string `json:"ids"`
	Mode    string   `json:"mode"`
	Timeout *float64 `json:"timeout"`
}

type waitOutput struct {
	Ended        []childResult `json:"ended"`
	StillRunning []childResult `json:"still_running,omitempty"`
	TimedOut     bool          `json:"timed_out,omitempty"`
}

// Execute waits.
func (w *Wait) Execute(ctx context.Context, call tools.Call, _ tools.Emit) (json.RawMessage, error) {
	if call.Tree == nil {
		return nil, fmt.Errorf("%s: %w", NameWait, errNoTree)
	}
	var in waitInput
	if err := json.Unmarshal(call.Input, &in); err != nil {
		return nil, fmt.Errorf("%s: input: %w", NameWait, err)
	}
	ends, err := call.Tree.Wait(ctx, in.IDs, in.Mode == "any", timeout(in.Timeout))
	out := waitOutput{Ended: []childResult{}}
	switch {
	case err == nil:
	case errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil:
		out.TimedOut = true
	default:
		return nil, fmt.Errorf("%s: %w", NameWait, err)
	}
	done := make(map[string]bool)
	for _, e := range ends {
		out.Ended = append(out.Ended, result(e))
		done[e.ID] = true
	}
	for _, id := range in.IDs {
		if done[id] {
			continue
		}
		st := "running"
		if m, err := w.r.meta(call.Owner, id); err == nil {
			st = statusName(m.GetStatus())
		}
		out.StillRunning = append(out.StillRunning, childResult{ID: id, Status: st})
	}
	return json.Marshal(out)
}

// Send is tasks.send.
type Send struct{ treeTool }

func (*Send) Name() string { return NameSend }
func (*Send) Description() string {
	return "Send a message to your parent task, one of your child tasks or a sibling (a child of your parent). " +
		"It is delivered once, into the recipient's next model call (or its tasks.wait_message); a recipient that had finished runs again to read it. " +
		"A cancelled or failed recipient does not read it: the result says so."
}
func (*Send) InputSchema() json.RawMessage {
	return schema(obj{"type": "object", "additionalProperties": false, "required": []string{"to", "text"}, "properties": obj{
		"to":   obj{"type": "string", "minLength": 1, "maxLength": 64, "description": "The recipient's task id, or \"parent\" for your parent task."},
		"text": obj{"type": "string", "minLength": 1, "maxLength": MaxMessageBytes},
	}})
}
func (*Send) ResultSchema() json.RawMessage {
	return schema(obj{"type": "object", "required": []string{"sent"}})
}

// Execute sends.
func (*Send) Execute(ctx context.Context, call tools.Call, _ tools.Emit) (json.RawMessage, error) {
	if call.Tree == nil {
		return nil, fmt.Errorf("%s: %w", NameSend, errNoTree)
	}
	var in struct {
		To   string `json:"to"`
		Text string `json:"text"`
	}
	if err := json.Unmarshal(call.Input, &in); err != nil {
		return nil, fmt.Errorf("%s: input: %w", NameSend, err)
	}
	r, err := call.Tree.Send(ctx, in.To, in.Text)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", NameSend, err)
	}
	return json.Marshal(map[string]any{"sent": true, "to": r.ID, "relation": r.Relation, "status": r.Status, "read": r.Read, "note": r.Note})
}

// WaitMessage is tasks.wait_message.
type WaitMessage struct{ treeTool }

func (*WaitMessage) Name() string { return NameWaitMessage }
func (*WaitMessage) Description() string {
	return "Wait for messages from your parent, children or siblings that you have not seen yet, and return them. " +
		"A timeout is not a failure: the result says none came."
}
func (*WaitMessage) InputSchema() json.RawMessage {
	return schema(obj{"type": "object", "additionalProperties": false, "properties": obj{"timeout": timeoutSchema}})
}
func (*WaitMessage) ResultSchema() json.RawMessage {
	return schema(obj{"type": "object", "required": []string{"messages"}})
}

// Execute waits for messages.
func (*WaitMessage) Execute(ctx context.Context, call tools.Call, _ tools.Emit) (json.RawMessage, error) {
	if call.Tree == nil {
		return nil, fmt.Errorf("%s: %w", NameWaitMessage, errNoTree)
	}
	var in struct {
		Timeout *float64 `json:"timeout"`
	}
	if err := json.Unmarshal(call.Input, &in); err != nil {
		return nil, fmt.Errorf("%s: input: %w", NameWaitMessage, err)
	}
	wctx, cancel := context.WithTimeout(ctx, timeout(in.Timeout))
	defer cancel()
	ms, err := call.Tree.WaitMessages(wctx)
	out := map[string]any{"messages": []any{}}
	switch {
	case err == nil:
		list := make([]any, len(ms))
		for i, m := range ms {
			list[i] = map[string]string{"from": m.From, "text": m.Text}
		}
		out["messages"] = list
	case errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil:
		out["timed_out"] = true
	default:
		return nil, fmt.Errorf("%s: %w", NameWaitMessage, err)
	}
	return json.Marshal(out)
}
