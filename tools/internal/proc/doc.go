// Package proc is the process machinery shared by the tools that run child
// processes (tools/shell, tools/delegate): the scrubbed environment a child
// gets, starting it in a process group of its own that dies with the daemon,
// stopping such a group (SIGTERM, a grace period, SIGKILL, reaping), and
// reading /proc. What to run, which variables a tool allows, how it talks to
// its child and which descendants it hunts down stay with the tool.
//
// Environment. Env builds a child's environment from the daemon's:
// malformed entries and every LEMO_* variable (the daemon's own, any case)
// never pass; names that contain KEY, SECRET, TOKEN, PASSWORD, PASSWD or
// CREDENTIAL (any case) are removed unless EnvRules.Pass admits them;
// EnvRules adds a drop list (it wins over Pass), an allow-list and further
// secret words. The package never reads the daemon's environment itself.
//
// Starting. Start starts an exec.Cmd in a process group of its own (Setpgid;
// the group id is the child's pid) with Pdeathsig SIGKILL. Pdeathsig fires
// when the OS thread that created the child ends, not the process
// (golang/go#27505), and the Go runtime ends a thread whenever a goroutine
// that locked it returns; so Start forks from a goroutine that locks its
// thread and keeps it until it has reaped the child. A daemon killed
// outright (SIGKILL) then takes its children along; their own children are
// not covered (they need a cgroup, or a sweep: see Escalate).
//
// Namespaces. StartIn starts the child as the init of namespaces of its
// own (isolation.Namespaces wraps the command): Done then closes when the
// command ended, as the init reports it on a pipe, and Process.Exit says
// how; the init lives on while other processes of its namespace do, and
// Process.Close kills it, which ends them all. The group's leader (the
// child, or the init) never counts as a straggler of StopGroup or Sweep.
// StopTagged stops every process carrying a tag whenever it started (the
// data folder's run tag, at a daemon's start) and reports each with its
// command name and call (CallVariable).
//
// Stopping. Process.Terminate stops a child that is still running: SIGTERM
// to its group, a grace period, SIGKILL to the group, and the wait until it
// was reaped. StopGroup stops what a reaped child left in its group (a
// background job, a grandchild holding a pipe) the same way and reaps
// those members that are children of the daemon (when it is a child
// subreaper). Escalate is that sequence for any set of processes; Sweep
// applies it to a group and to every process whose environment carries a
// tag the tool set for its child, which finds descendants that left the
// group (setsid). Shell and delegate both sweep when a run ends.
//
// /proc. Walk reads the stat line (ParseStat) of every process; HasEnv
// looks for an exact entry in a process's environment, which finds
// descendants that left the group but kept a variable set for them.
//
// Tests. Processes, Survivors and Zombies list processes (other than the
// caller) from /proc with a match such as InGroup, WithEnv or Mentions, so
// that tests can prove that nothing a tool started outlived it.
//
// Lifecycle:
//  1. Build the child's environment once: env := proc.Env(environ, rules).
//  2. Prepare an exec.Cmd (path, args, Dir, Env, pipes; optionally Cancel
//     with SignalGroup and WaitDelay) and call Start. Do not call cmd.Wait:
//     the Process reaps the child.
//  3. Wait for Process.Done (or WaitFor a deadline); a child that exits on
//     stdin EOF is asked to by closing its stdin first.
//  4. If it does not end in time, Terminate it. Once it was reaped, StopGroup
//     its group, or Escalate over your own sweep.
//  5. Read how it ended with p.Exit(); with namespaces, p.Close() last.
//
// Example:
//
//	env := proc.Env(os.Environ(), proc.EnvRules{Pass: proc.Names([]string{"OPENAI_API_KEY"})})
//	cmd := exec.Command("/bin/sh", "-c", "make test")
//	cmd.Env, cmd.Dir = env, workspace
//	p, err := proc.Start(cmd)
//	if err != nil { ... }
//	killed := false
//	if !p.WaitFor(10 * time.Minute) {
//		killed = p.Terminate(2 * time.Second)
//	}
//	_, leftover := proc.StopGroup(p.Pid(), time.Time{}, 2*time.Second)
//	code, signal, _ := p.Exit()
package proc
