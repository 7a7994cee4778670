package shell

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"time"

	"lemo/excerpt"
	"lemo/tools"
)

// Name is the tool's name; View is its client View id.
const (
	Name = "shell.run"
	View = "shell"
)

// ErrDenied is wrapped by Execute's error when the policy denies the
// command (the runtime normally refuses it earlier through Approval).
var ErrDenied = errors.New("shell: command denied by policy")

// MaxCommandBytes is the longest command accepted.
const MaxCommandBytes = maxAnalyseBytes

// Tool runs shell commands. It implements tools.Tool and tools.Approver.
type Tool struct {
	cfg    Config
	rules  *rules
	env    []string
	input  json.RawMessage
	state  json.RawMessage
	result json.RawMessage
	// desc is the description, formatted once (a Task's every model call
	// asks for it).
	desc string
}

var (
	_ tools.Tool     = (*Tool)(nil)
	_ tools.Approver = (*Tool)(nil)
)

// New validates cfg and returns the shell tool.
func New(cfg Config) (*Tool, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	cfg.fill()
	t := &Tool{cfg: cfg, rules: compileRules(cfg.Policy), env: scrubEnv(cfg.Environ, cfg.PassEnv, cfg.DropEnv), desc: description(&cfg)}
	t.input = mustJSON(object([]string{"command"}, obj{
		"command": obj{"type": "string", "minLength": 1, "maxLength": MaxCommandBytes,
			"description": "The command line, run as `sh -c <command>` in the workspace."},
		"timeout_seconds": obj{"type": "number", "exclusiveMinimum": 0, "maximum": cfg.MaxTimeout.Seconds(),
			"description": fmt.Sprintf("Stop the command after this many seconds. Default %v.", cfg.DefaultTimeout.Seconds())},
	}))
	t.state = mustJSON(object([]string{"phase", "pid", "elapsed_ms", "stdout_bytes", "stderr_bytes", "last_line"}, obj{
		"phase":        obj{"enum": []string{PhaseStarted, PhaseRunning, PhaseTerminating}},
		"pid":          obj{"type": "integer", "minimum": 1},
		"elapsed_ms":   nonNeg,
		"stdout_bytes": nonNeg,
		"stderr_bytes": nonNeg,
		"last_line":    obj{"type": "string", "maxLength": lastLineMax},
	}))
	t.result = mustJSON(object([]string{"exit_code", "timed_out", "killed", "background_killed", "duration_ms", "timeout_ms",
		"stdout", "stderr", "stdout_bytes", "stderr_bytes", "truncated"}, obj{
		"exit_code":         obj{"type": "integer", "minimum": -1, "description": "-1 when the shell was ended by a signal."},
		"signal":            obj{"type": "string", "pattern": "^SIG[A-Z0-9+-]+$"},
		"timed_out":         obj{"type": "boolean"},
		"killed":            obj{"type": "boolean", "description": "SIGKILL was needed."},
		"background_killed": obj{"type": "boolean", "description": "Processes still running when the shell exited were stopped."},
		"duration_ms":       nonNeg,
		"timeout_ms":        nonNeg,
		"stdout":            obj{"type": "string"},
		"stderr":            obj{"type": "string"},
		"stdout_bytes":      nonNeg,
		"stderr_bytes":      nonNeg,
		"truncated":         obj{"type": "boolean", "description": "stdout or stderr above is a head-and-tail excerpt."},
		"note":              obj{"type": "string"},
		"excerpt":           obj{"type": "string"},
	}))
	return t, nil
}

type obj = map[string]any

var nonNeg = obj{"type": "integer", "minimum": 0}

func object(required []string, props obj) obj {
	return obj{"type": "object", "additionalProperties": false, "required": required, "properties": props}
}

func mustJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err) // literal schemas: a failure is a programming error
	}
	return b
}

// Name returns "shell.run".
func (t *Tool) Name() string { return Name }

// Description tells the model what the tool does.
func (t *Tool) Description() string { return t.desc }

func description(cfg *Config) string {
	return fmt.Sprintf("Run a non-interactive shell command (`sh -c`) in the workspace folder. stdin is empty; nothing can "+
		"prompt. The command is stopped after timeout_seconds (default %v s, at most %v s); processes it leaves running "+
		"in the background are stopped when it exits. Returns the exit code and stdout and stderr, each shown as its "+
		"first %d and last %d bytes when longer, with the total byte counts. Secrets are not in the environment. Some "+
		"commands need a person's approval first, and some are refused by policy.",
		cfg.DefaultTimeout.Seconds(), cfg.MaxTimeout.Seconds(), cfg.ModelHeadBytes, cfg.ModelTailBytes)
}

// InputSchema: {"command": string, "timeout_seconds"?: number}.
func (t *Tool) InputSchema() json.RawMessage { return t.input }

// StateSchema: phase, pid, elapsed_ms, byte counts and the last line.
func (t *Tool) StateSchema() json.RawMessage { return t.state }

// ResultSchema: exit status, timing and the model's view of the output.
func (t *Tool) ResultSchema() json.RawMessage { return t.result }

// View returns "shell".
func (t *Tool) View() string { return View }

// UsesWorkspace: commands run in the workspace.
func (t *Tool) UsesWorkspace() bool { return true }

type input struct {
	Command        string   `json:"command"`
	TimeoutSeconds *float64 `json:"timeout_seconds"`
}

// Result is the output of one run. Stdout and Stderr are what the model is
// shown (head and tail when longer than the configured bounds); when they
// are excerpts, the whole output is the call's live output (tools.Call.Live),
// kept beside the result while the Task holds it.
type Result struct {
	ExitCode         int    `json:"exit_code"`
	Signal           string `json:"signal,omitempty"`
	TimedOut         bool   `json:"timed_out"`
	Killed           bool   `json:"killed"`
	BackgroundKilled bool   `json:"background_killed"`
	DurationMS       int64  `json:"duration_ms"`
	TimeoutMS        int64  `json:"timeout_ms"`
	Stdout           string `json:"stdout"`
	Stderr           string `json:"stderr"`
	StdoutBytes      int64  `json:"stdout_bytes"`
	StderrBytes      int64  `json:"stderr_bytes"`
	Truncated        bool   `json:"truncated"`
	Note             string `json:"note,omitempty"`
	Excerpt          string `json:"excerpt,omitempty"`
}

// Check returns the policy's verdict on a command line.
func (t *Tool) Check(command string) Verdict { return t.rules.check(command) }

// Approval applies the policy to a call's input.
func (t *Tool) Approval(raw json.RawMessage) tools.Approval {
	var in input
	if err := json.Unmarshal(raw, &in); err != nil {
		return tools.Approval{Deny: true, Reason: "the input is not a shell.run input: " + err.Error()}
	}
	v := t.Check(in.Command)
	switch v.Decision {
	case Allow:
		return tools.Approval{Reason: v.Reason}
	case Deny:
		return tools.Approval{Deny: true, Reason: v.Reason}
	}
	return tools.Approval{Required: true, Reason: v.Reason, Deadline: t.cfg.ApprovalTimeout}
}

// ApprovalScope is what a person's "always allow for this Task" covers:
// this exact command line (not other commands, whatever their first word).
func (t *Tool) ApprovalScope(raw json.RawMessage) string {
	var in input
	if err := json.Unmarshal(raw, &in); err != nil || in.Command == "" {
		// Only the same unreadable input (which the policy denies anyway).
		return "input: " + string(raw)
	}
	return "command: " + in.Command
}

// Execute runs the command in call.Workspace.
func (t *Tool) Execute(ctx context.Context, call tools.Call, emit tools.Emit) (json.RawMessage, error) {
	var in input
	if err := json.Unmarshal(call.Input, &in); err != nil {
		return nil, fmt.Errorf("%s: input: %w", Name, err)
	}
	if v := t.Check(in.Command); v.Decision == Deny {
		return nil, fmt.Errorf("%w: %s", ErrDenied, v.Reason)
	}
	if call.Workspace == "" || !path.IsAbs(call.Workspace) {
		return nil, fmt.Errorf("%s: workspace %q: want an absolute folder path", Name, call.Workspace)
	}
	timeout := t.cfg.DefaultTimeout
	if in.TimeoutSeconds != nil {
		timeout = min(time.Duration(*in.TimeoutSeconds*float64(time.Second)), t.cfg.MaxTimeout)
		if timeout <= 0 {
			return nil, fmt.Errorf("%s: timeout_seconds %v: want a positive number", Name, *in.TimeoutSeconds)
		}
	}
	res, err := t.run(ctx, in.Command, call.Workspace, t.tags(call), timeout, emit, call.Live)
	if err != nil {
		if call.Live != nil {
			call.Live.Discard()
		}
		return nil, err
	}
	out := Result{
		ExitCode:         res.exitCode,
		Signal:           res.signal,
		TimedOut:         res.timedOut,
		Killed:           res.killed,
		BackgroundKilled: res.background,
		DurationMS:       res.duration.Milliseconds(),
		TimeoutMS:        timeout.Milliseconds(),
		StdoutBytes:      res.stdout.bytes(),
		StderrBytes:      res.stderr.bytes(),
	}
	var cutOut, cutErr bool
	out.Stdout, cutOut = res.stdout.view()
	out.Stderr, cutErr = res.stderr.view()
	out.Truncated = cutOut || cutErr
	if call.Live != nil {
		switch st := call.Live.Stats(); {
		case !out.Truncated:
			call.Live.Discard() // the result holds it all
		case st.DroppedBytes > 0:
			why := "beyond the daemon's spill limit"
			if st.SpillError != "" {
				why = "not kept: " + st.SpillError
			}
			out.Note = fmt.Sprintf("the whole output can be read with tasks.read_block {\"task\":%q,\"call_id\":%q,\"part\":\"result\"} while this task holds it, except the last %d bytes, %s (stdout and stderr above still end with the true tail)",
				call.TaskID, call.CallID, st.DroppedBytes, why)
		default:
			out.Note = fmt.Sprintf("the whole output can be read with tasks.read_block {\"task\":%q,\"call_id\":%q,\"part\":\"result\"} while this task holds it", call.TaskID, call.CallID)
		}
	}
	if res.outputHeld {
		out.Note = join(out.Note, "a process that left the command's process group kept the output open; it was not waited for")
	}
	if res.timedOut {
		out.Note = join(out.Note, fmt.Sprintf("the command was stopped after its %v timeout", timeout))
	}
	return json.Marshal(&out)
}

func join(a, b string) string {
	if a == "" {
		return b
	}
	return a + "; " + b
}

// Retain keeps the exit status, counts and a bounded excerpt of stdout and
// stderr (at most RetainBytes of JSON).
func (t *Tool) Retain(output, _ json.RawMessage) json.RawMessage {
	var r Result
	if err := json.Unmarshal(output, &r); err != nil {
		return nil
	}
	if len(output) <= t.cfg.RetainBytes {
		return output
	}
	var b []byte
	var err error
	so, se := r.Stdout, r.Stderr
	for budget := t.cfg.RetainBytes - 512; budget > 64; budget = budget * 3 / 4 {
		room := budget - min(len(r.Note), 256)
		// Split the room between the streams; a short one gives the rest
		// to the other.
		errRoom := min(len(se), room/2)
		outRoom := room - errRoom
		if len(so) < outRoom {
			errRoom = min(len(se), room-len(so))
		}
		r.Stdout = excerpt.Ends(so, outRoom/2, outRoom/2)
		r.Stderr = excerpt.Ends(se, errRoom/2, errRoom/2)
		if len(r.Note) > 256 {
			r.Note = r.Note[:256]
		}
		r.Excerpt = fmt.Sprintf("shortened for history: %d of %d stdout and %d of %d stderr bytes kept (head and tail)",
			len(r.Stdout), r.StdoutBytes, len(r.Stderr), r.StderrBytes)
		if b, err = json.Marshal(&r); err == nil && len(b) <= t.cfg.RetainBytes {
			return b
		}
	}
	return nil
}
