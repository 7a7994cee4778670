// Package shell provides the shell.run tool: non-interactive shell commands
// run in the Task's workspace under a process-group lifecycle, with output
// caps, a scrubbed environment and an approval policy (tools.Approver).
//
// Processes. Each command runs as `Config.Shell -c command` in the workspace
// folder, with stdin on /dev/null, in its own process group (Setpgid), with
// Pdeathsig SIGKILL set from an OS thread that stays locked until the shell
// is reaped, so that a daemon killed outright takes the shell with it. On
// cancellation or timeout the whole group gets SIGTERM (cmd.Cancel), then
// SIGKILL after Config.KillGrace (cmd.WaitDelay bounds the wait for the
// shell). When the shell exits by itself, processes it left in its group
// (`sleep 1000 &`, a grandchild holding stdout) get the same SIGTERM then
// SIGKILL: a run never leaves processes behind in its group, and the result
// says so (background_killed). The shell is always reaped; members that are
// children of the daemon (when it is a child subreaper) are reaped too;
// zombies of another parent are dead and are not waited for. The pipes are
// read by the package (not os/exec), so Wait never blocks on a grandchild.
// Every command's environment carries its run's id (RunTagVariable): when
// the run ends, processes that left the group (setsid) but kept that
// environment are found in /proc and stopped the same way. One that also
// dropped the variable and holds the output open is given KillGrace and
// then no longer read. With Config.Namespaces (tools/isolation) the shell
// runs under an init in PID and mount namespaces of its own: it sees only
// its own processes, and once the run's clean-up is done the init is
// killed, which ends whatever is left, also what left the session and
// dropped the variable (counted as background_killed), and the whole
// namespace dies with a daemon killed with SIGKILL. Without namespaces
// such processes outlive the run; every command also carries
// Config.RunTag and its call, so that the daemon's next start stops what a
// daemon killed outright left behind.
// The process machinery (groups, Pdeathsig, escalation, reaping, the
// environment rules) is tools/internal/proc's; the policy is this package's.
//
// Output. The result is the live output. Its "stdout" and "stderr" are what
// the model should be shown: each stream whole when it has at most
// ModelHeadBytes+ModelTailBytes bytes (default 8+8 KiB, so 32 KiB for both
// streams), else its head and tail around a marker that states the omitted
// and total byte counts; "truncated" says so. The whole output (stdout
// and stderr) streams into the call's live output (tools.Call.Live), which
// the daemon bounds in memory and spills to a private file beyond that; it
// is dropped when the result holds it all, and otherwise the note names the
// tasks.read_block call that reads it (and how many bytes were beyond the
// spill limit). The result itself never holds the whole output. Retain
// keeps the result within
// RetainBytes (default 8 KiB), shortening stdout and stderr to head and tail
// and saying so in "excerpt". Exit code (-1 when a signal ended the shell,
// named in "signal"), duration, timeout, timed_out and killed (SIGKILL was
// needed) are always reported. Output is text: invalid UTF-8 reads as U+FFFD.
//
// State. While a command runs, state updates (StateSchema) are emitted at
// most every StateInterval (default 250ms) when its output grew, and every
// 5s otherwise: phase (started, running, terminating), pid (also the process
// group id), elapsed time, byte counts and the last line. The first one is
// emitted as soon as the process has started.
//
// Environment. Children start from Config.Environ (the package never reads
// the daemon's environment itself) minus every LEMO_* variable and every
// variable whose name contains KEY, SECRET, TOKEN, PASSWORD, PASSWD or
// CREDENTIAL (any case); PassEnv re-admits names, DropEnv removes more.
//
// Policy. See Policy: deny rules win, then ask, then allow, then the
// default (ask). Command lines are parsed with mvdan.cc/sh's bash parser
// and every command they would run is checked; deny and ask rules are also
// matched against the raw text, and a command that cannot be analysed (or
// where bash reads the text differently) fails closed. Execute refuses a
// denied command itself too. TestPolicyAgainstBash and FuzzPolicyAgainstBash
// check the allow path against what bash itself runs.
//
// Lifecycle:
//  1. cmd/lemo builds a Config from the config file (Environ: os.Environ())
//     and calls New, which validates it and scrubs the environment once.
//  2. It registers the Tool in the tools.Registry.
//  3. For each call the runtime asks Approval(input): allow runs it, ask
//     waits for a person (Approval.Deadline = ApprovalTimeout), deny refuses.
//  4. Execute starts the shell, emits state updates, stops the group on
//     timeout or cancellation, reaps and drains, and returns the result
//     (ctx.Err() when cancelled).
//  5. The runtime persists Retain(output, input).
//
// Example:
//
//	cfg := shell.DefaultConfig()
//	cfg.Environ = os.Environ()
//	cfg.Policy = shell.Policy{Deny: []string{"rm -rf", "git push --force"}, Allow: []string{"go test", "ls"}}
//	t, err := shell.New(cfg)
//	if err != nil { ... }
//	if err := reg.Register(t); err != nil { ... }
//	// shell.run {"command": "go test ./...", "timeout_seconds": 300}
package shell
