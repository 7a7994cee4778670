// Package isolation keeps the daemon's secrets and processes from the
// processes its tools start (tools/shell, tools/delegate), and finds what a
// daemon killed outright left running. tools/internal/proc starts and stops
// the processes; this package decides where they run and what they carry.
//
// The daemon. Harden makes the daemon non-dumpable (PR_SET_DUMPABLE 0) and
// marks every descriptor above stderr close-on-exec. The kernel then shows
// the daemon's /proc environ, memory, maps and descriptors only to root (to
// a process with CAP_SYS_PTRACE), so a tool running as the daemon's user
// cannot read the provider keys and tokens in its environment or memory,
// and a child inherits only the descriptors its tool gives it (stdin,
// stdout, stderr), never one the daemon inherited itself. The daemon's
// command line stays readable by every user: no flag of lemo serve takes a
// secret (keys and tokens come from the environment, files or the
// configuration file).
//
// Namespaces. Where the kernel allows it (Detect tries once), every tool
// process starts in PID and mount namespaces of its own (and, when the
// daemon is not root, a user namespace that maps the daemon's user and
// group to themselves), through an init: the daemon's own binary run with
// InitArg (Main). The init mounts a /proc of the new PID namespace, starts
// the command with its environment, folder and streams, reaps every
// process of the namespace and reports how the command ended on a pipe.
// So a tool process sees no process but those of its own call (not the
// daemon, not other calls), and nothing it starts outlives its call: the
// process group's SIGTERM and SIGKILL reach the command as before, and
// SIGKILL to the init (when the call's clean-up is done, or by Pdeathsig
// when the daemon dies, even by SIGKILL) ends every process of the
// namespace, also those that left the group and the session (setsid) and
// dropped every tag. Signals to the init alone are ignored. The init also
// covers the folders of Namespaces.Hide (the daemon's data folder: its
// token, daemon.json, the store, other Tasks' workspaces) with an empty
// read-only folder, and mounts back the command's working folder and the
// folders of Namespaces.Keep (the delegate's session folder) in their
// place.
//
// Run tag. Every tool process carries the data folder's run tag (RunTag:
// LEMO_RUN_TAG, derived from the folder's resolved path, so daemons on
// different folders never touch each other's processes) and its call
// (CallEntry: LEMO_RUN_CALL=<task>/<call>). At its start, holding the data
// folder and before recovery records the calls that were running as
// "outcome unknown", the daemon stops every process carrying the tag
// (StopLeftovers: SIGTERM, a grace period, SIGKILL); recovery names them on
// their call's record.
//
// Limits. What these promise, and what they do not:
//   - A tool process runs as the daemon's user: it can read every file
//     that user can outside the hidden folders (and, without namespaces,
//     inside them: the data folder's token file among them), unless a
//     policy keeps it out (the shell's approval rules). A configuration
//     file or tokens file outside the data folder stays readable.
//   - A root daemon's tools run as root: root may read a non-dumpable
//     process's memory (CAP_SYS_PTRACE) and can undo the mounts of its
//     namespace (unmount its /proc and see the machine's). Without
//     namespaces nothing hides a root daemon's secrets from its tools. Run
//     the daemon as an unprivileged user.
//   - Without namespaces (tools.namespaces off, or refused by the kernel,
//     a seccomp or AppArmor profile: the log and lemo doctor say so), a
//     tool process sees every process of the machine (not the daemon's
//     secrets), and a descendant that left its session and dropped the run
//     tag can outlive its call and a daemon killed outright.
//   - The run tag is an environment variable: a process that clears its
//     environment escapes the start's sweep (not the namespace).
//   - In a user namespace, set-user-ID programs (sudo) do not gain
//     privileges, and files of users other than the daemon's show as
//     owned by nobody.
//
// Lifecycle:
//  1. main calls Main first when os.Args[1] is InitArg.
//  2. lemo serve calls Harden first thing.
//  3. Once it holds the data folder: tag := RunTag(folder), then
//     StopLeftovers(tag, grace) before recovery, recording what it stopped.
//  4. ns, err := Detect(ownExecutable) (nil and why not when refused); the
//     tools get tag and ns in their Config and start every process with
//     proc.StartIn(cmd, ns, ReadStatus), with tag and CallEntry in its
//     environment, and call Process.Close after their clean-up.
//
// Example:
//
//	if len(os.Args) > 1 && os.Args[1] == isolation.InitArg {
//		os.Exit(isolation.Main(os.Args[2:]))
//	}
//	if err := isolation.Harden(); err != nil { ... }
//	tag, err := isolation.RunTag(dataDir)
//	stopped := isolation.StopLeftovers(tag, 10*time.Second)
//	self, _ := os.Executable()
//	ns, err := isolation.Detect(self) // log err: tools run without namespaces
//	sh, err := shell.New(shell.Config{RunTag: tag, Namespaces: ns, ...})
package isolation
