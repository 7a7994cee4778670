package tests

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"lemo/actors"
	"lemo/api"
	"lemo/client"
	"lemo/persistence"
	"lemo/providers"
	"lemo/providers/fake"
	"lemo/tools"
	"lemo/tools/isolation"
)

// mountTmpfs mounts a tmpfs of size bytes for the test, or skips (outside
// CI) when the machine does not allow it.
func mountTmpfs(t *testing.T, size string) string {
	t.Helper()
	dir := t.TempDir()
	out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+size, "tmpfs", dir).CombinedOutput()
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("mount tmpfs: %v\n%s", err, out)
		}
		t.Skipf("cannot mount a tmpfs here (needs root): %v %s", err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", dir).CombinedOutput(); err != nil {
			t.Errorf("umount: %v\n%s", err, out)
		}
	})
	return dir
}

// fill writes a file of n MiB.
func fill(t *testing.T, path string, n int) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	chunk := make([]byte, 1<<20)
	for i := 0; i < n; i++ {
		if _, err := f.Write(chunk); err != nil {
			t.Fatalf("fill: %v", err)
		}
	}
}

// On a small filesystem, the daemon refuses new work below its free-space
// floor, and nothing it acknowledged is lost.
func TestFreeSpaceGuard(t *testing.T) {
	mnt := mountTmpfs(t, "160m")
	data := filepath.Join(mnt, "data")
	open := func() (*persistence.DataDir, *persistence.Store) {
		dd, err := persistence.OpenDataDir(data)
		if err != nil {
			t.Fatal(err)
		}
		st, err := persistence.Open(dd, persistence.Options{Log: zerolog.Nop(), MemTableSize: 8 << 20, BlockCacheSize: 8 << 20, MinFreeBytes: 48 << 20})
		if err != nil {
			t.Fatal(err)
		}
		return dd, st
	}
	dd, st := open()
	reg := providers.NewRegistry()
	if err := reg.Register(fake.NewScripted("fake", fake.NewScriptedModel("echo", 8192, fake.Echo()))); err != nil {
		t.Fatal(err)
	}
	d, err := actors.Start(context.Background(), actors.Deps{Store: st, Providers: reg, Tools: tools.NewRegistry(), Log: zerolog.Nop()}, actors.Options{WorkspaceRoot: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	ip := &inProcess{t: t, d: d, st: st}
	first := ip.run("fake/echo", "before the disk fills", api.TaskStatus_TASK_STATUS_FINISHED)

	free, err := st.FreeSpace()
	if err != nil {
		t.Fatal(err)
	}
	fill(t, filepath.Join(mnt, "filler"), int(free>>20)-40) // leave ~40 MiB, below the 48 MiB floor
	// The guard reads the filesystem at most once a second; poll.
	for i := 0; i < 300 && st.CheckSpace() == nil; i++ {
		waitABit()
	}
	_, err = d.CreateTask(ctx, actors.Operator, actors.CreateTask{Request: "after", Model: "fake/echo"})
	if !errors.Is(err, actors.ErrNoSpace) {
		t.Fatalf("CreateTask below the floor: err = %v, want ErrNoSpace", err)
	}
	if _, err := d.SendMessage(ctx, actors.Operator, first[0].GetTaskId(), "more"); !errors.Is(err, actors.ErrNoSpace) {
		t.Fatalf("SendMessage below the floor: err = %v, want ErrNoSpace", err)
	}
	if err := os.Remove(filepath.Join(mnt, "filler")); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 300 && st.CheckSpace() != nil; i++ {
		waitABit()
	}
	second := ip.run("fake/echo", "after the space came back", api.TaskStatus_TASK_STATUS_FINISHED)
	if err := d.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	_ = st.Close()
	_ = dd.Close()

	dd, st = open()
	defer dd.Close()
	defer st.Close()
	for _, want := range [][]*api.Event{first, second} {
		got, err := st.ReadEvents(want[0].GetTaskId(), 1, 0)
		if err != nil || len(got) < len(want) {
			t.Fatalf("after reopening, task %s has %d events (%v), want %d", want[0].GetTaskId(), len(got), err, len(want))
		}
	}
}

// freeMiB returns the free space of the filesystem holding dir, in MiB.
func freeMiB(t *testing.T, dir string) int {
	t.Helper()
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		t.Fatal(err)
	}
	return int(st.Bavail * uint64(st.Bsize) >> 20)
}

// The same guard under lemo serve on a small filesystem, with a Task
// appending while the floor is crossed: new Tasks and messages are refused
// with an error that says why, the running Task goes on, and after a kill
// -9 and a restart every event read before is there, byte for byte.
func TestFreeSpaceGuardUnderServe(t *testing.T) {
	const floor = 64 // MiB
	mnt := mountTmpfs(t, "256m")
	data := filepath.Join(mnt, "data")
	cfg := writeConfig(t, fmt.Sprintf("storage:\n  min_free_mib: %d\ntasks:\n  max_cycles: 1000000\n", floor))
	d := serveRemote(t, data, "--config", cfg)
	c := d.connect(t, "")
	ctx := context.Background()
	if out, code := cli(t, data, "run", "--model", "fake/echo", "before the disk fills"); code != 0 {
		t.Fatalf("lemo run above the floor: exit %d\n%s", code, out)
	}
	m, err := c.CreateTask(ctx, client.CreateTask{Request: "loop", Model: "fake/loop"})
	if err != nil {
		t.Fatal(err)
	}
	loop := m.GetTaskId()
	waitTask(t, c, loop, "progress", func(m *api.TaskMeta) bool { return m.GetLastSeq() > 10 })

	// Leave floor-16 MiB free (below the floor) while the loop appends.
	filler := filepath.Join(mnt, "filler")
	fill(t, filler, freeMiB(t, mnt)-(floor-16))
	refused := func(out string) bool {
		return strings.Contains(out, "free space") && strings.Contains(out, "below the floor")
	}
	eventually(t, 30*time.Second, func() error {
		if out, code := cli(t, data, "run", "--model", "fake/echo", "after the disk filled"); code == 0 || !refused(out) {
			return fmt.Errorf("lemo run below the floor: exit %d, want a refusal that names the free space:\n%s", code, out)
		}
		return nil
	})
	if _, err := c.CreateTask(ctx, client.CreateTask{Request: "after", Model: "fake/echo"}); err == nil || !refused(err.Error()) {
		t.Fatalf("CreateTask below the floor: %v, want a refusal that names the free space", err)
	}
	if out, code := cli(t, data, "send", loop, "more"); code == 0 || !refused(out) {
		t.Fatalf("lemo send below the floor: exit %d\n%s", code, out)
	}
	// Running work is not refused: the loop goes on below the floor.
	below, err := c.Task(ctx, loop)
	if err != nil {
		t.Fatal(err)
	}
	waitTask(t, c, loop, "progress below the floor", func(m *api.TaskMeta) bool { return m.GetLastSeq() > below.GetLastSeq()+10 })

	// Everything a client could read (acknowledged, committed) survives a
	// kill -9 while the loop is still appending.
	tasks, _, err := c.ListTasks(ctx, "", 0)
	// (lemo run may have made a Task before the guard, which reads the
	// filesystem at most once a second, saw the filler.)
	if err != nil || len(tasks) < 2 {
		t.Fatalf("ListTasks: %d tasks (%v), want at least 2", len(tasks), err)
	}
	before := map[string][]*api.Event{}
	for _, tm := range tasks {
		if before[tm.GetTaskId()], err = c.ReadHistory(ctx, tm.GetTaskId(), 1); err != nil {
			t.Fatal(err)
		}
	}
	_ = c.Close()
	d.kill()

	d = serveRemote(t, data, "--config", cfg)
	c = d.connect(t, "")
	verifyHistories(t, c, before, nil) // every event read before the kill, intact
	waitTask(t, c, loop, "paused (interrupted)", statusIs(api.TaskStatus_TASK_STATUS_PAUSED))
	// Still below the floor after the restart: refused; then space is
	// freed and new work is accepted again.
	if out, code := cli(t, data, "run", "--model", "fake/echo", "still full"); code == 0 || !refused(out) {
		t.Fatalf("lemo run below the floor after the restart: exit %d\n%s", code, out)
	}
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, func() error {
		if out, code := cli(t, data, "run", "--model", "fake/echo", "space came back"); code != 0 || !strings.Contains(out, "echo: space came back") {
			return fmt.Errorf("lemo run after freeing space: exit %d\n%s", code, out)
		}
		return nil
	})
	d.stop()
}

// A full disk does not kill the daemon (Badger writes through memory-mapped
// files: before, a shell filling the filesystem the store shares faulted it
// with SIGBUS, and again at every restart). lemo serve runs on a 128 MiB
// tmpfs holding its data folder and the Tasks' workspaces; the disk is
// filled every way a Task can: by a shell command's output, by files.write
// (many Tasks, each its file), and by many Tasks recording facts
// (memory.record) until the store's own growth reaches the headroom, and by
// a shell command while many Tasks append. Each
// time the daemon stays up, the Tasks concerned pause with reason
// disk_full, and once the filler is deleted they continue by themselves
// (and finish). At the end everything read before a kill -9 is there after
// the restart.
func TestDiskFullUnderServe(t *testing.T) {
	mnt := mountTmpfs(t, "128m")
	data := filepath.Join(mnt, "data")
	cfg := writeConfig(t, "storage:\n  min_free_mib: 0\ntasks:\n  max_cycles: 1000000\n  max_parallel_tools: 1\ntools:\n  shell:\n    approval: allow\n")
	d := serveRemote(t, data, "--config", cfg)
	c := d.connect(t, "")
	ctx := context.Background()
	const headroom = 24 // MiB: 3 memtables of 8 MiB
	diskPaused := func(m *api.TaskMeta) bool {
		return m.GetStatus() == api.TaskStatus_TASK_STATUS_PAUSED && m.GetPauseReason() == api.PauseReason_PAUSE_REASON_DISK_FULL
	}
	alive := func(when string) {
		t.Helper()
		if !d.alive() {
			t.Fatalf("lemo serve died %s: %v\n%s", when, d.err, d.logs())
		}
	}
	// The lowest free space, sampled every millisecond (a figure for the
	// docs; the checks are the Tasks' states and the daemon's life).
	var lowestKiB atomic.Int64
	lowestKiB.Store(1 << 40)
	stopSampling := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stopSampling:
				return
			case <-tick.C:
				var st syscall.Statfs_t
				if syscall.Statfs(mnt, &st) == nil {
					if kib := int64(st.Bavail) * st.Bsize >> 10; kib < lowestKiB.Load() {
						lowestKiB.Store(kib)
					}
				}
			}
		}
	}()
	t.Cleanup(func() {
		select {
		case <-stopSampling:
		default:
			close(stopSampling)
		}
		<-sampled
	})
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("lemo serve's log:\n%s", d.logs())
		}
	})
	lowest := freeMiB(t, mnt)
	t.Logf("after start: %d MiB free of 128", lowest)
	create := func(model, request string) string {
		t.Helper()
		m, err := c.CreateTask(ctx, client.CreateTask{Request: request, Model: model})
		if err != nil {
			t.Fatalf("CreateTask(%s): %v\n%s", model, err, d.logs())
		}
		return m.GetTaskId()
	}
	// recovered deletes the filler and waits for every Task to go on,
	// returning how long that took.
	recovered := func(filler string, ids []string, cond func(string, *api.TaskMeta) bool) time.Duration {
		t.Helper()
		start := time.Now()
		if err := os.Remove(filler); err != nil {
			t.Fatal(err)
		}
		for _, id := range ids {
			waitTask(t, c, id, "continued once space was back", func(m *api.TaskMeta) bool { return cond(id, m) })
		}
		return time.Since(start)
	}
	finished := func(_ string, m *api.TaskMeta) bool { return m.GetStatus() == api.TaskStatus_TASK_STATUS_FINISHED }

	// 1. A shell command writes until the disk is full.
	shell := create("fake/shell", "head -c 200M /dev/zero > big; echo wrote")
	waitTask(t, c, shell, "paused: disk full (shell)", diskPaused)
	alive("after a shell command filled the disk")
	lowest = min(lowest, freeMiB(t, mnt))
	// A restart on the full disk (before, Badger faulted again at every
	// start): the daemon serves, the Task stays paused for the disk.
	_ = c.Close()
	d.kill()
	d = serveRemote(t, data, "--config", cfg)
	c = d.connect(t, "")
	if !diskPausedTask(t, c, shell) {
		t.Fatalf("after a restart on the full disk the task is not paused for it\n%s", d.logs())
	}
	took := recovered(filepath.Join(data, "workspaces", shell, "big"), []string{shell}, finished)
	t.Logf("shell: filled to %d MiB free; finished %v after the filler was deleted", lowest, took)

	// 2. files.write, a file per Task, on a disk filled to just above the
	// headroom.
	filler := filepath.Join(mnt, "filler")
	fill(t, filler, freeMiB(t, mnt)-headroom-1)
	content := strings.Repeat("x", 100<<10) // the model's context holds it
	refusedNew := func(err error) bool { return err != nil && strings.Contains(err.Error(), "disk full") }
	var writers, paused []string
	for len(paused) == 0 {
		if len(writers) == 40 {
			t.Fatalf("40 files.write Tasks of 100 KiB did not fill the disk: %d MiB free\n%s", freeMiB(t, mnt), d.logs())
		}
		m, err := c.CreateTask(ctx, client.CreateTask{Request: fmt.Sprintf(`files.write {"path":"blob","content":%q}`, content), Model: "fake/call"})
		if refusedNew(err) {
			// The disk turned full between two Tasks (the store's own
			// growth took the last of the headroom): refused, not paused.
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		id := m.GetTaskId()
		writers = append(writers, id)
		if m := waitTask(t, c, id, "finished or paused", func(m *api.TaskMeta) bool { return finished(id, m) || diskPaused(m) }); diskPaused(m) {
			paused = append(paused, id)
		}
	}
	alive("after files.write filled the disk")
	lowest = min(lowest, freeMiB(t, mnt))
	if _, err := c.CreateTask(ctx, client.CreateTask{Request: "more", Model: "fake/echo"}); !refusedNew(err) {
		t.Fatalf("CreateTask on a full disk: %v, want a refusal that says the disk is full", err)
	}
	took = recovered(filler, paused, finished)
	t.Logf("files.write: %d Tasks, %d paused; finished %v after the filler was deleted", len(writers), len(paused), took)

	// 3. Many Tasks record facts (memory.record) until the store's own
	// growth reaches the headroom.
	fill(t, filler, freeMiB(t, mnt)-headroom-2)
	fact := strings.Repeat("the disk fills up with facts. ", 40) // 1.2 KiB
	var recorders []string
	for i := 0; i < 16; i++ {
		recorders = append(recorders, create("fake/repeat", fmt.Sprintf(`memory.record {"content":%q}`, fmt.Sprintf("%d: %s", i, fact))))
	}
	for _, id := range recorders {
		waitTask(t, c, id, "paused: disk full (memory.record)", diskPaused)
	}
	alive("after many Tasks filled the disk with facts")
	lowest = min(lowest, freeMiB(t, mnt))
	seqs := map[string]uint64{}
	for _, id := range recorders {
		m, err := c.Task(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		seqs[id] = m.GetLastSeq()
	}
	took = recovered(filler, recorders, func(id string, m *api.TaskMeta) bool {
		return m.GetStatus() == api.TaskStatus_TASK_STATUS_RUNNING && m.GetLastSeq() > seqs[id]+5
	})
	t.Logf("memory.record: 16 Tasks; all appending again %v after the filler was deleted", took)
	for _, id := range recorders {
		if _, err := c.Cancel(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	// 4. A shell command fills the disk while many Tasks append (their
	// memtable flushes and the fill race): all of them pause.
	var busy []string
	for i := 0; i < 8; i++ {
		busy = append(busy, create("fake/repeat", fmt.Sprintf(`memory.record {"content":%q}`, fmt.Sprintf("busy %d: %s", i, fact))))
	}
	for _, id := range busy {
		waitTask(t, c, id, "appending", func(m *api.TaskMeta) bool { return m.GetLastSeq() > 20 })
	}
	tag, err := isolation.RunTag(data)
	if err != nil {
		t.Fatal(err)
	}
	// reserveTaken: the filling command, still writing when the store
	// released its reserve for the first pause record, took it before it
	// was stopped. It is stopped all the same, and a pause that no longer
	// fits is recorded once space is freed (below), as a person freeing
	// space would see it. 12 MiB: what the store needs to record a pause
	// (1.5 memtables).
	reserveTaken := func() bool { return len(taggedProcs(tag)) == 0 && freeMiB(t, mnt) < 12 }
	filling := create("fake/shell", "head -c 200M /dev/zero > big; echo wrote")
	for _, id := range busy {
		waitTask(t, c, id, "paused: disk full, or stopped with no room to record it (shell while Tasks append)", func(m *api.TaskMeta) bool {
			return diskPaused(m) || reserveTaken()
		})
	}
	waitTask(t, c, filling, "paused: disk full, or stopped with no room to record it (shell while Tasks append)", func(m *api.TaskMeta) bool {
		return diskPaused(m) || reserveTaken()
	})
	alive("after a shell command filled the disk while Tasks appended")
	for _, id := range busy {
		m, err := c.Task(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		seqs[id] = m.GetLastSeq()
	}
	took = recovered(filepath.Join(data, "workspaces", filling, "big"), append([]string{filling}, busy...), func(id string, m *api.TaskMeta) bool {
		if id == filling {
			return finished(id, m)
		}
		return m.GetStatus() == api.TaskStatus_TASK_STATUS_RUNNING && m.GetLastSeq() > seqs[id]+5
	})
	t.Logf("shell while 8 Tasks append: all going on again %v after the filler was deleted", took)
	for _, id := range busy {
		if _, err := c.Cancel(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	recorders = append(append(recorders, busy...), filling)
	t.Logf("lowest free space: %d KiB sampled every millisecond, %d MiB once paused (headroom %d MiB)", lowestKiB.Load(), lowest, headroom)

	// Nothing acknowledged was lost: what a client read survives a kill -9.
	before := map[string][]*api.Event{}
	for _, id := range append(append([]string{shell}, writers...), recorders...) {
		evs, err := c.ReadHistory(ctx, id, 1)
		if err != nil {
			t.Fatal(err)
		}
		if err := contiguousFrom(evs, 1); err != nil {
			t.Fatalf("task %s: %v", id, err)
		}
		before[id] = evs
	}
	_ = c.Close()
	d.kill()
	d = serveRemote(t, data, "--config", cfg)
	c = d.connect(t, "")
	verifyHistories(t, c, before, nil) // every event read before the kill, intact
	d.stop()
}

// diskPausedTask reports whether a Task is paused for a full disk.
func diskPausedTask(t *testing.T, c *client.Conn, id string) bool {
	t.Helper()
	m, err := c.Task(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return m.GetStatus() == api.TaskStatus_TASK_STATUS_PAUSED && m.GetPauseReason() == api.PauseReason_PAUSE_REASON_DISK_FULL
}
