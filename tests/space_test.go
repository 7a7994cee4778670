package tests

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/rs/zerolog"

	"lemo/actors"
	"lemo/api"
	"lemo/persistence"
	"lemo/providers"
	"lemo/providers/fake"
	"lemo/tools"
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
