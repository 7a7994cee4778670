package console

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/lipgloss"

	"lemo/api"
	"lemo/client"
)

// Terminal is where the console runs: its input and output (a terminal;
// nil takes the process's).
type Terminal struct {
	In  io.Reader
	Out io.Writer
}

// Run shows the console on term until the user quits or ctx ends. It
// reads the daemon's tools (for their Views) and the newest Tasks, follows
// every Task the token may see, and polls the actor tree.
func Run(ctx context.Context, b Backend, term Terminal, o Options) error {
	o.defaults()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	tools, err := b.Tools(ctx)
	if err != nil {
		return fmt.Errorf("console: list the tools: %w", err)
	}
	metas, err := listTasks(ctx, b, o.MaxTasks)
	if err != nil {
		return fmt.Errorf("console: list the tasks: %w", err)
	}
	inbox := make(chan item, o.Inbox)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		follow(ctx, b, metas, inbox)
	}()
	defer wg.Wait()
	defer cancel()

	opts := []tea.ProgramOption{tea.WithContext(ctx), tea.WithAltScreen(), tea.WithFPS(fps(o))}
	renderer := lipgloss.DefaultRenderer()
	if term.In != nil {
		opts = append(opts, tea.WithInput(term.In))
	}
	if term.Out != nil {
		opts = append(opts, tea.WithOutput(term.Out))
		renderer = lipgloss.NewRenderer(term.Out)
	}
	m := newModel(ctx, b, o, newStyles(renderer), inbox, tools, metas)
	_, err = tea.NewProgram(m, opts...).Run()
	if errors.Is(err, tea.ErrProgramKilled) && ctx.Err() != nil {
		return nil // the caller's context ended
	}
	return err
}

// fps is the renderer's frame rate: the model's.
func fps(o Options) int {
	return max(int(1e9/o.Frame.Nanoseconds()), 1)
}

// listTasks reads the newest Tasks (at most limit).
func listTasks(ctx context.Context, b Backend, limit int) ([]*api.TaskMeta, error) {
	var out []*api.TaskMeta
	before := ""
	for len(out) < limit {
		page, next, err := b.ListTasks(ctx, before, min(500, limit-len(out)))
		if err != nil {
			return nil, err
		}
		out = append(out, page...)
		if next == "" {
			break
		}
		before = next
	}
	return out, nil
}

// follow delivers every update of the Tasks the token may see into inbox,
// from right after the listed state of each listed Task, until ctx ends.
// A full inbox makes it wait (and the subscription fall behind and resume
// from where it was, if that lasts).
func follow(ctx context.Context, b Backend, metas []*api.TaskMeta, inbox chan<- item) {
	resume := make(map[string]uint64, len(metas))
	for _, m := range metas {
		resume[m.GetTaskId()] = m.GetLastSeq()
	}
	put := func(it item) error {
		select {
		case inbox <- it:
			return nil
		case <-ctx.Done():
			return client.ErrStopFollowing
		}
	}
	err := b.Follow(ctx, client.FollowOptions{Resume: resume, Notice: func(why string) { _ = put(item{notice: why}) }},
		func(u *api.Update) error { return put(item{u: u}) })
	if err != nil && ctx.Err() == nil {
		_ = put(item{notice: "the live view stopped: " + err.Error()})
	}
}
