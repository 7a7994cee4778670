// Package delegate provides the delegate tools: delegate.run drives an
// external coding agent, pi (npm @mariozechner/pi-coding-agent, on Node) or
// omp (npm @oh-my-pi/pi-coding-agent, on Bun), over its RPC mode (JSON
// lines on stdin and stdout), and delegate.sessions lists the calling
// Task's sessions that a later run can continue. The delegate is a tool,
// not an engine: Lemo's Tasks stay native, and one run of the agent is one
// (long) tool call of a Task, with live state.
//
// Protocol. Records end with a line feed and only there (LineReader); they
// may be far longer than 64 KiB, up to Config.MaxLineBytes (a longer one is
// skipped and counted). Every command carries an id and is matched with its
// response by id; the agents' id-less rejections of unknown commands are
// matched by command name when exactly one such command waits. Unknown
// event types are ignored; records that are not JSON objects with a
// "type" are counted as protocol errors. omp's "ready" frame and its
// second, failing response to an accepted prompt are understood; frames
// over 1 MiB are left to omp's own v1 shrinking (Lemo does not negotiate
// protocol v2).
//
// Processes. One run starts one agent process as a session (tools.Session)
// under Call.Sessions: a child actor of the call, never restarted. The
// session is the only owner of the agent's stdin; when the session ends
// for any reason it closes stdin (both agents exit on EOF), waits
// Config.ExitGrace, sends SIGTERM to the agent's process group, waits
// Config.KillGrace, sends SIGKILL, reaps the agent and then stops every
// live descendant: members of the group and processes carrying the run's
// DELEGATE_INVOCATION variable (pi runs its bash tool detached, in a
// session of its own). The agent is started with Pdeathsig from a locked OS
// thread, so a daemon killed outright takes it along. With
// Config.Namespaces (tools/isolation) the agent runs under an init in PID
// and mount namespaces of its own: it sees only its own processes, the
// init is killed once the sweep is done (whatever is left is counted as
// stragglers), and its detached descendants die with a daemon killed
// outright too; without namespaces they survive it, and carry
// Config.RunTag and their call so that the next start stops them. The process
// machinery is tools/internal/proc's; the stdin-EOF protocol and the sweep
// by DELEGATE_INVOCATION are this package's. A relaunch is
// never automatic: continuing a session is a new run with a new invocation
// id that names the session id ("resume").
//
// Environment. The agent gets an allow-list of the daemon's environment
// (PATH, HOME, locale, proxies, CA settings, PI_*/OMP_*/BUN_*/XDG_*
// variables) minus names that look secret, plus Config.PassEnv (the
// provider settings it needs) and Config.SetEnv; never a LEMO_* variable.
// It runs in the Task's workspace (symlinks resolved); callers cannot name
// any other path: resume takes a session id.
//
// Sessions. New history goes into Lemo's private folder Config.Dir/<kind>
// (flat, mode 0700, created before every spawn) and Lemo notes in
// Config.Dir/records which Task created which session. Discovery (Catalog)
// reads that folder and the agent's default session folders (pi:
// $PI_CODING_AGENT_DIR or ~/.pi/agent, then sessions/<cwd>/; omp:
// ~/.omp/agent/sessions/<cwd>/) without changing anything. A Task sees only
// the sessions it created (others read as not found); operator surfaces use
// Scope{All: true}. Resume takes the folder of the matched discovery entry
// (never a caller's path or a path inside a session file), checks that the
// session was started in this Task's workspace (the agents continue in the
// session's recorded folder), and lets the agent continue the file in
// place (pi --session <file>, omp --resume <file>). Lemo never writes,
// locks or migrates the agent's own files; within the daemon one session
// runs in at most one invocation at a time.
//
// Control. Clients steer a running call through the daemon's generic steer
// command (SteerSchema: {"kind": "steer"|"follow_up"|"abort", "message"}).
// Steering addresses the run, so it waits until the agent accepted the
// prompt (an abort sent while the agent starts aborts the run, not
// nothing). Each is acknowledged only after the agent's correlated success
// response; an agent error is a rejection (*AgentError); no answer within
// Config.CommandTimeout is ErrOutcomeUnknown and is never retried; a
// closed or crashed session answers ErrClosed. A cancelled call returns at
// once and its session closes the agent's stdin: pi drops a turn in flight
// on EOF (omp aborts and saves it).
//
// Approvals and the UI sub-protocol. With Config.Approval "ask", pi loads
// Lemo's extension (extension/lemo-approvals.js, written into
// Config.Dir/extension; it asks a confirm dialog before every tool call but
// read, grep, find and ls) and omp runs with --approval-mode always-ask
// (select dialogs with Approve and Deny). Each such dialog becomes a Lemo
// approval (Call.Approvals) on a goroutine of its own, so the session keeps
// serving the agent; the answer goes back as extension_ui_response. When
// the agent abandons a dialog (omp's "cancel", the tool call ending, or the
// run ending) or the session ends, the pending approval is cancelled. Every
// other blocking dialog is declined ("cancelled": true); host tool calls
// and host URI requests are rejected with an error; fire-and-forget
// requests are ignored (notify texts are shown live).
//
// Trust. Everything from the agent is untrusted: texts are cleaned (Clean:
// no terminal escapes, control or bidi characters, valid UTF-8) and bounded
// (Bound: head and tail) before they enter a state update or the result,
// and the tool is tools.Untrusted, so the model sees its output marked.
//
// Failures. An agent that cannot start, does not answer get_state within
// Config.StartTimeout, or ends before a session exists makes the call fail
// (with its exit status and the end of its stderr). Once a session exists
// the call returns a result: status failed (the agent crashed, refused the
// prompt, or its model failed), aborted, timed_out or finished, so the
// model always learns the session id it can resume.
//
// Live state and result. Agent events (messages and streamed text, tool
// executions, compaction, retries, queue changes, approvals, usage) are
// projected into state updates (StateSchema) at most every
// Config.StateInterval while events come in, else every 5 s. The result,
// which is also what is retained, holds the invocation and session ids,
// the status (finished, aborted, failed, timed_out), the final answer
// (get_last_assistant_text, bounded by Config.AnswerBytes), a bounded
// summary (counts, the last 20 tool executions, approvals, usage) and how
// the process exited. A run is over at an agent_end that omp marks
// terminal and that pi does not follow with auto_retry_start (Lemo asks
// get_last_assistant_text and looks again when the answer arrives).
//
// Lifecycle:
//  1. cmd/lemo builds a Config (Dir: <data>/delegate, Environ: os.Environ())
//     and calls New, which validates it, creates the folders and writes the
//     pi extension; it registers Tools.List() in the tools.Registry.
//  2. A call of delegate.run resolves "resume" in the Task's scope, starts
//     the agent as the call's session and asks get_state (the readiness
//     probe: pi has no ready frame), records a new session, sends the
//     prompt and projects events until the run is over, the run timeout
//     aborts it, or the call is cancelled.
//  3. Steering inputs go to the agent and are answered as described above;
//     approval dialogs become Lemo approvals.
//  4. At the end the run closes the agent's stdin (the session stops the
//     agent and its descendants), waits for it, and returns the result.
//  5. The runtime persists Retain(output, input): the whole bounded result.
//
// Example:
//
//	dt, err := delegate.New(delegate.Config{
//		Kind: delegate.KindPi, Binary: "/opt/pi/node_modules/.bin/pi",
//		Args: []string{"--model", "openrouter/qwen/qwen3-coder"},
//		Dir: filepath.Join(dataDir, "delegate"), Environ: os.Environ(),
//		PassEnv: []string{"OPENROUTER_API_KEY"},
//	})
//	if err != nil { ... }
//	for _, t := range dt.List() { reg.Register(t) }
//	// delegate.run {"prompt": "Make the tests in ./parser pass"}
//	// steer: {"kind": "steer", "message": "only touch parser.go"}
//	// later: delegate.run {"prompt": "Now add a benchmark", "resume": "<session_id>"}
package delegate
