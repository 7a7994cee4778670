package main

import (
	"context"
	"errors"
	"io"
	"os"

	"lemo/console"
)

// consoleCmd implements lemo console: the live inspection console.
func consoleCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	f := newClientFlags("console", "[flags]", "Show the daemon's live actor tree and its Tasks in the terminal, with the actions\n"+
		"pause, continue, cancel, approve, deny and stop one tool call (each confirmed).\n"+
		"The actor tree needs an operator token (the data folder's token is one); other\n"+
		"tokens see their Tasks. --json prints the actor tree once and exits.", stdout, stderr)
	o := console.Options{}
	f.fs.DurationVar(&o.Frame, "frame", 0, "least time between two frames (default 50ms: 20 frames a second)")
	f.fs.DurationVar(&o.Refresh, "refresh", 0, "how often the actor tree is read (default 1s)")
	if _, err := f.parse(args, 0, 0); err != nil {
		return helpOK(err)
	}
	if !f.json && (!isTerminal(os.Stdin) || !isTerminal(os.Stdout)) {
		return usageError("lemo console needs a terminal (use --json for the actor tree as JSON)")
	}
	c, err := f.connect(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	if f.json {
		tree, err := c.Inspect(ctx)
		if err != nil {
			return err
		}
		printJSON(stdout, tree)
		return nil
	}
	err = console.Run(ctx, c, console.Terminal{In: os.Stdin, Out: os.Stdout}, o)
	if errors.Is(err, context.Canceled) {
		return nil
	}
	return err
}
