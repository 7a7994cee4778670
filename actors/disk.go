package actors

import (
	"context"

	"lemo/api"
	"lemo/persistence"
)

// cmdResumeDiskFull continues a Task the full disk paused (space is back).
type cmdResumeDiskFull struct{}

// watchDisk connects the store's disk guard to the tree. When the disk
// turns full, every active Task is told: a running one stops its model call
// and tools at once and pauses (reason disk_full), before the store or its
// tools could fill the disk further. When space is back (and at start,
// when it is there), the Tasks the full disk paused are continued by
// resumeLoop. The guard's callback runs under the store's lock: it only
// sends.
func (d *Daemon) watchDisk() {
	e := d.env
	d.diskWake = make(chan struct{}, 1)
	ctx, cancel := context.WithCancel(context.Background())
	d.diskStop = cancel
	e.goroutine(func() { d.resumeLoop(ctx) })
	e.deps.Store.WatchDisk(func(s persistence.DiskState) {
		if s.Full {
			e.system.Root.Send(e.tasks, &diskFullNotice{})
			return
		}
		select {
		case d.diskWake <- struct{}{}:
		default: // a resume is already due
		}
	})
}

// unwatchDisk stops watching the disk and the resume loop.
func (d *Daemon) unwatchDisk() {
	d.env.deps.Store.WatchDisk(nil)
	if d.diskStop != nil {
		d.diskStop()
	}
}

// resumeLoop continues, each time space comes back, every Task the full
// disk paused.
func (d *Daemon) resumeLoop(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-d.diskWake:
		}
		metas, err := d.env.deps.Store.TasksWithStatus(api.TaskStatus_TASK_STATUS_PAUSED)
		if err != nil {
			d.env.log.Error().Err(err).Msg("disk space is back, but the paused tasks could not be listed")
			continue
		}
		n := 0
		for _, m := range metas {
			if m.GetPauseReason() != api.PauseReason_PAUSE_REASON_DISK_FULL {
				continue
			}
			if _, err := d.command(ctx, taskCommand{taskID: m.GetTaskId(), caller: Operator, cmd: &cmdResumeDiskFull{}}); err != nil {
				d.env.log.Warn().Err(err).Str("task", m.GetTaskId()).Msg("could not continue a task the full disk paused")
				continue
			}
			n++
		}
		if n > 0 {
			d.env.log.Info().Int("tasks", n).Msg("disk space is back: continued the tasks the full disk paused")
		}
	}
}
