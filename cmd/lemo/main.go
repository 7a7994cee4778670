// Command lemo is the Lemo daemon and its command-line client.
//
//	lemo serve [--config FILE] [--data DIR]   run the daemon (SIGHUP re-reads the configuration)
//	lemo doctor [--config FILE] [--data DIR]  check what the daemon needs and say how to fix it
//	lemo run "request" [--model M]            create a Task and stream it
//	lemo tasks | attach | send | pause | continue | cancel | budget | tools | models
//	lemo approvals | approve | deny | steer
//	lemo console                              the live inspection console
//	lemo version                              print version information
//
// main only wires: configuration, the store, providers, tools and the actor
// tree are constructed here and nowhere else.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"lemo/client"
	"lemo/tools/isolation"
)

// exitError carries a process exit status.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

// usageError is a command-line mistake: exit status 2.
func usageError(format string, args ...any) error {
	return &exitError{code: 2, err: fmt.Errorf(format, args...)}
}

func main() {
	// The init of a tool process's namespaces (tools/isolation): the
	// daemon runs its own binary as that, before anything else.
	if len(os.Args) > 1 && os.Args[1] == isolation.InitArg {
		os.Exit(isolation.Main(os.Args[2:]))
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	if err != nil {
		reportError(os.Stderr, os.Args[1:], err)
		var ee *exitError
		if errors.As(err, &ee) {
			os.Exit(ee.code)
		}
		os.Exit(1)
	}
}

const usage = `Lemo runs LLM agents as a supervised actor tree.

Usage:
  lemo serve [--config FILE] [--data DIR]   run the daemon (SIGTERM stops it, SIGHUP reloads)
  lemo doctor [--config FILE] [--data DIR]  check the data folder, tokens, providers, delegate
  lemo run "request" [-m MODEL] [-w DIR]     create a Task working here (or in DIR) and stream it
  lemo tasks                                list Tasks
  lemo attach <id> [--from SEQ]             show a Task's history and follow it
  lemo send <id> "message" [--no-follow]    send a follow-up message and follow the reply
  lemo pause|continue|cancel <id>           control a Task
  lemo budget <id> --add-tokens N|--add-cost USD|--add-time D   raise a Task's budget
  lemo approvals                            list calls waiting for approval
  lemo approve|deny <approval id>           decide one (approve --always: also later calls of that kind)
  lemo steer <id> <call id> <json>          steer a running tool call
  lemo sessions [--task ID]                 list the delegate agent's sessions
  lemo console                              live actor tree and Tasks, with actions
  lemo tools                                list the tools and their Views
  lemo models                               list the models of every provider
  lemo version                              print version information
  lemo certs [--hosts H1,H2] [--name NAME]  make a CA and TLS certificates (remote clients)

Client commands find a local daemon through its data folder (--data, else
$LEMO_DATA, else $XDG_DATA_HOME/lemo, else ~/.local/share/lemo); --addr and
--token (or LEMO_ADDR, LEMO_TOKEN) override. Every command but serve takes --json. A Task <id> may be any unique
beginning or end of it (as the console shows it), and so may the task part of an
approval id (<task id>.<call id>).

Run "lemo help <command>" (or "lemo <command> -h") for a command's flags.
`

// run dispatches a subcommand.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return usageError("no command given")
	}
	switch args[0] {
	case "serve":
		return serve(ctx, args[1:], stdout, stderr)
	case "version":
		return version(args[1:], stdout, stderr)
	case "certs":
		return certs(args[1:], stdout, stderr)
	case "doctor":
		return doctor(ctx, args[1:], stdout, stderr)
	case "run":
		return runTask(ctx, args[1:], os.Stdin, stdout, stderr)
	case "tasks":
		return listTasks(ctx, args[1:], stdout, stderr)
	case "attach":
		return attach(ctx, args[1:], stdout, stderr)
	case "pause", "continue", "cancel":
		return control(ctx, args[0], args[1:], stdout, stderr)
	case "budget":
		return raiseBudget(ctx, args[1:], stdout, stderr)
	case "send":
		return send(ctx, args[1:], os.Stdin, stdout, stderr)
	case "tools":
		return listTools(ctx, args[1:], stdout, stderr)
	case "models":
		return listModels(ctx, args[1:], stdout, stderr)
	case "approvals":
		return listApprovals(ctx, args[1:], stdout, stderr)
	case "approve", "deny":
		return resolve(ctx, args[0], args[1:], stdout, stderr)
	case "steer":
		return steer(ctx, args[1:], stdout, stderr)
	case "sessions":
		return listSessions(ctx, args[1:], stdout, stderr)
	case "console":
		return consoleCmd(ctx, args[1:], stdout, stderr)
	case "help", "-h", "--help":
		if len(args) > 1 && args[0] == "help" && args[1] != "help" {
			// lemo help run is lemo run -h, on stdout.
			return run(ctx, []string{args[1], "-h"}, stdout, stdout)
		}
		fmt.Fprint(stdout, usage)
		return nil
	}
	fmt.Fprint(stderr, usage)
	return usageError("unknown command %q", args[0])
}

// wantsJSON reports whether the command line asks for JSON (--json).
func wantsJSON(args []string) bool {
	for _, a := range args {
		switch a {
		case "--json", "-json", "--json=true", "-json=true":
			return true
		case "--":
			return false
		}
	}
	return false
}

// reportError prints a command's error: as one JSON object
// {"code": ..., "message": ...} with --json (docs/json.md), else as text.
func reportError(w io.Writer, args []string, err error) {
	if !wantsJSON(args) {
		fmt.Fprintln(w, "lemo:", err)
		return
	}
	b, _ := json.Marshal(struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	}{errorCode(err), err.Error()})
	fmt.Fprintln(w, string(b))
}

// errorCode is the stable code of an error for scripts (docs/json.md).
func errorCode(err error) string {
	var ce *client.Error
	var ee *exitError
	var te *taskEndError
	switch {
	case errors.As(err, &te):
		return te.code
	case errors.As(err, &ce):
		return client.CodeName(ce.Code)
	case errors.Is(err, client.ErrNotFound):
		return "not_found"
	case errors.Is(err, client.ErrNotRunning):
		return "not_running"
	case errors.Is(err, client.ErrUnauthenticated):
		return "unauthenticated"
	case errors.Is(err, client.ErrDisconnected):
		return "disconnected"
	case errors.As(err, &ee) && ee.code == 2:
		return "usage"
	}
	return "error"
}
