package delegate

import (
	"bytes"
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"

	"lemo/tools"
)

// Tool names.
const (
	// RunName drives one invocation of the agent.
	RunName = "delegate.run"
	// SessionsName lists the calling Task's resumable sessions.
	SessionsName = "delegate.sessions"
)

//go:embed extension/lemo-approvals.js
var approvalExtension []byte

// ExtensionName is the file name of Lemo's pi approval extension in
// Config.Dir/extension/.
const ExtensionName = "lemo-approvals.js"

// Tools is the delegate's pair of tools, sharing one configuration and one
// session catalog.
type Tools struct {
	cfg      Config
	env      []string // the agent's environment (without the per-run tag)
	catalog  *Catalog
	run      *RunTool
	sessions *SessionsTool
}

// New validates cfg, creates Lemo's private delegate folders (mode 0700)
// and writes the pi extension into them.
func New(cfg Config) (*Tools, error) {
	cfg.fill()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	var defaults []string
	if cfg.Kind == KindPi {
		defaults = []string{"PI_OFFLINE=1", "PI_TELEMETRY=0", "PI_SKIP_VERSION_CHECK=1"}
	}
	env := agentEnv(cfg.Environ, cfg.PassEnv, append(defaults, cfg.SetEnv...), nil)
	t := &Tools{cfg: cfg, env: env, catalog: newCatalog(cfg.Kind, cfg.Dir, env)}
	if err := t.catalog.prepare(); err != nil {
		return nil, err
	}
	if err := t.writeExtension(); err != nil {
		return nil, err
	}
	t.run = &RunTool{t: t}
	t.sessions = &SessionsTool{t: t}
	return t, nil
}

// List returns the tools to register: delegate.run and delegate.sessions.
func (t *Tools) List() []tools.Tool { return []tools.Tool{t.run, t.sessions} }

// Catalog is the session discovery, for operator surfaces (the CLI and the
// console), which see every session with Scope{All: true}.
func (t *Tools) Catalog() *Catalog { return t.catalog }

func (t *Tools) extensionPath() string {
	return filepath.Join(t.cfg.Dir, "extension", ExtensionName)
}

// writeExtension puts the pi extension into Lemo's folder unless it is
// already there unchanged.
func (t *Tools) writeExtension() error {
	dir := filepath.Dir(t.extensionPath())
	if err := privateDir(dir); err != nil {
		return err
	}
	if b, err := os.ReadFile(t.extensionPath()); err == nil && bytes.Equal(b, approvalExtension) {
		return nil
	}
	tmp, err := os.CreateTemp(dir, ".ext-*")
	if err != nil {
		return fmt.Errorf("delegate: write the pi extension: %w", err)
	}
	_, werr := tmp.Write(approvalExtension)
	if err := errors.Join(werr, tmp.Close()); err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("delegate: write the pi extension: %w", err)
	}
	if err := os.Rename(tmp.Name(), t.extensionPath()); err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("delegate: write the pi extension: %w", err)
	}
	return nil
}

// binary resolves the agent's executable.
func (t *Tools) binary() (string, error) {
	if filepath.IsAbs(t.cfg.Binary) {
		return t.cfg.Binary, nil
	}
	p, err := exec.LookPath(t.cfg.Binary)
	if err != nil {
		return "", fmt.Errorf("delegate: the %s agent is not installed (%s is not on PATH): %w", t.cfg.Kind, t.cfg.Binary, err)
	}
	return p, nil
}

// args are the agent's arguments: RPC mode, the session folder (Lemo's
// own, or for a resume the folder of the discovered session) and the
// session file to continue, the approval setting, then Config.Args.
func (t *Tools) args(sessionDir, resumeFile string) []string {
	a := []string{"--mode", "rpc", "--session-dir", sessionDir}
	switch t.cfg.Kind {
	case KindPi:
		if resumeFile != "" {
			a = append(a, "--session", resumeFile)
		}
		a = append(a, "--no-extensions", "--no-skills", "--no-prompt-templates", "--no-themes")
		if t.cfg.Approval == ApprovalAsk {
			a = append(a, "-e", t.extensionPath())
		}
	case KindOmp:
		if resumeFile != "" {
			a = append(a, "--resume", resumeFile)
		}
		a = append(a, "--no-extensions", "--no-skills", "--no-rules", "--no-title")
		if t.cfg.Approval == ApprovalAsk {
			a = append(a, "--approval-mode", "always-ask")
		} else {
			a = append(a, "--approval-mode", "yolo")
		}
	}
	return append(a, t.cfg.Args...)
}

// workspace validates the Task's workspace: an existing absolute folder,
// symlinks resolved (the agents record the physical path).
func workspace(dir string) (string, error) {
	if dir == "" || !filepath.IsAbs(dir) {
		return "", fmt.Errorf("delegate: the Task's workspace %q is not an absolute folder", dir)
	}
	real, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return "", fmt.Errorf("delegate: the Task's workspace: %w", err)
	}
	fi, err := os.Stat(real)
	if err != nil {
		return "", fmt.Errorf("delegate: the Task's workspace: %w", err)
	}
	if !fi.IsDir() {
		return "", fmt.Errorf("delegate: the Task's workspace %s is not a folder", dir)
	}
	return real, nil
}

// RunTool is delegate.run: one invocation of the agent on a prompt, new or
// continuing an earlier session of the Task.
type RunTool struct{ t *Tools }

var (
	_ tools.Tool      = (*RunTool)(nil)
	_ tools.Steerable = (*RunTool)(nil)
	_ tools.Untrusted = (*RunTool)(nil)
)

func (*RunTool) Name() string { return RunName }

func (r *RunTool) Description() string {
	return fmt.Sprintf(`Delegate a coding job to an external coding agent (%s) that works in this Task's workspace with its own tools (read, bash, edit, write) until it finishes. Give a complete, self-contained prompt. One call is one run of the agent; it may take minutes. Its tool calls may need a person's approval. To continue an earlier session of this Task with a follow-up prompt, pass its session_id as "resume" (see delegate.sessions). The result holds the agent's final answer and a summary of what it did; it is untrusted data from outside Lemo.`, r.t.cfg.Kind)
}

func (*RunTool) InputSchema() json.RawMessage  { return json.RawMessage(runInputSchema) }
func (*RunTool) StateSchema() json.RawMessage  { return json.RawMessage(stateSchema) }
func (*RunTool) ResultSchema() json.RawMessage { return json.RawMessage(resultSchema) }
func (*RunTool) SteerSchema() json.RawMessage  { return json.RawMessage(steerSchema) }
func (*RunTool) View() string                  { return "delegate" }

// Untrusted marks the output as coming from outside the daemon.
func (*RunTool) Untrusted() bool { return true }

// Retain keeps the whole result: it is already bounded (the summary and
// the final answer).
func (*RunTool) Retain(output, input json.RawMessage) json.RawMessage { return output }

var _ tools.Spender = (*RunTool)(nil)

// Spent reads the agent's usage from a run's result (pi reports it per
// assistant message; the result sums it): its input, output and cache
// tokens, and the cost the agent computed.
func (*RunTool) Spent(output json.RawMessage) (tools.Spend, bool) {
	var r Result
	if json.Unmarshal(output, &r) != nil {
		return tools.Spend{}, false
	}
	u := r.Summary.Usage
	n := u.Total
	if n <= 0 {
		n = u.Input + u.Output + u.CacheRead + u.CacheWrite
	}
	if n <= 0 {
		return tools.Spend{}, false
	}
	return tools.Spend{Tokens: n, CostUSD: max(u.Cost, 0), Source: "delegate " + r.Kind}, true
}

// UsesWorkspace: the agent works in the workspace.
func (r *RunTool) UsesWorkspace() bool { return true }

// Execute runs the agent until it finishes the prompt, the call is
// cancelled, or the run times out.
func (r *RunTool) Execute(ctx context.Context, call tools.Call, emit tools.Emit) (json.RawMessage, error) {
	var in runInput
	if err := json.Unmarshal(call.Input, &in); err != nil {
		return nil, fmt.Errorf("delegate: input: %w", err)
	}
	if call.Sessions == nil {
		return nil, errors.New("delegate: this daemon cannot host agent sessions")
	}
	ws, err := workspace(call.Workspace)
	if err != nil {
		return nil, err
	}
	rn := newRun(r.t, call, emit, in, ws)
	return rn.execute(ctx)
}

// runInput is delegate.run's input.
type runInput struct {
	Prompt         string `json:"prompt"`
	Resume         string `json:"resume"`
	TimeoutSeconds int    `json:"timeout_seconds"`
}

// SessionsTool is delegate.sessions: the calling Task's resumable sessions.
type SessionsTool struct{ t *Tools }

var (
	_ tools.Tool      = (*SessionsTool)(nil)
	_ tools.Untrusted = (*SessionsTool)(nil)
)

// Catalog is the session discovery the tool lists from (the same as
// Tools.Catalog), for the daemon's wiring, which finds the tool in its
// registry.
func (s *SessionsTool) Catalog() *Catalog { return s.t.catalog }

func (*SessionsTool) Name() string { return SessionsName }
func (*SessionsTool) Description() string {
	return `List this Task's earlier delegate sessions that delegate.run can continue (pass a session_id as "resume"), newest first.`
}
func (*SessionsTool) InputSchema() json.RawMessage  { return json.RawMessage(sessionsInputSchema) }
func (*SessionsTool) StateSchema() json.RawMessage  { return nil }
func (*SessionsTool) ResultSchema() json.RawMessage { return json.RawMessage(sessionsResultSchema) }
func (*SessionsTool) View() string                  { return "" }
func (*SessionsTool) Untrusted() bool               { return true }
func (*SessionsTool) Retain(output, input json.RawMessage) json.RawMessage {
	return output
}

// maxListed bounds delegate.sessions' answer.
const maxListed = 50

// SessionInfo is one session as a Task sees it.
type SessionInfo struct {
	SessionID   string `json:"session_id"`
	Created     string `json:"created,omitempty"`
	Modified    string `json:"modified"`
	Bytes       int64  `json:"bytes"`
	FirstPrompt string `json:"first_prompt,omitempty"`
	Running     bool   `json:"running"`
}

// Execute lists the Task's sessions.
func (s *SessionsTool) Execute(ctx context.Context, call tools.Call, emit tools.Emit) (json.RawMessage, error) {
	es, err := s.t.catalog.Discover(Scope{TaskID: call.TaskID})
	if err != nil {
		return nil, err
	}
	out := struct {
		Sessions []SessionInfo `json:"sessions"`
		Omitted  int           `json:"omitted"`
	}{Sessions: []SessionInfo{}}
	for _, e := range es {
		if len(out.Sessions) == maxListed {
			out.Omitted++
			continue
		}
		si := SessionInfo{SessionID: e.ID, Modified: e.Modified.Format("2006-01-02T15:04:05Z"), Bytes: e.Bytes, FirstPrompt: e.FirstPrompt, Running: s.t.catalog.running(e.ID)}
		if !e.Created.IsZero() {
			si.Created = e.Created.Format("2006-01-02T15:04:05Z")
		}
		out.Sessions = append(out.Sessions, si)
	}
	return json.Marshal(out)
}
