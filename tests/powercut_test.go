package tests

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"lemo/api"
	"lemo/client"
	"lemo/internal/powercut"
)

// A power cut under a real lemo serve while Tasks append, on a filesystem
// that keeps unsynced writes only in memory (internal/powercut): after
// each cut the daemon restarts on what survived, and every event a client
// received (events are published only once durable) is in the history
// with identical bytes, every history contiguous. LEMO_POWERCUT_SERVE_CUTS
// sets the number of cuts (make soak).
func TestPowerCutUnderServe(t *testing.T) {
	if testing.Short() {
		t.Skip("power-cut loop skipped in -short mode")
	}
	if os.Geteuid() != 0 {
		t.Skip("power-cut test: mounting FUSE needs root")
	}
	if _, err := os.Stat("/dev/fuse"); err != nil {
		t.Skipf("power-cut test: no /dev/fuse: %v", err)
	}
	// The test runs in a child with a private mount namespace (see
	// powercut.InPrivateMounts), which reuses the binary built here.
	if !powercut.InPrivateMounts(t, lemoBinEnv+"="+lemoBin) {
		return
	}
	cuts := 4
	if s := os.Getenv("LEMO_POWERCUT_SERVE_CUTS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			t.Fatalf("LEMO_POWERCUT_SERVE_CUTS=%q: want a positive number of cuts", s)
		}
		cuts = n
	}
	seed := time.Now().UnixNano()
	rng := rand.New(rand.NewPCG(uint64(seed), 11))
	t.Logf("seed %d, %d cuts", seed, cuts)
	backing, data := filepath.Join(t.TempDir(), "backing"), filepath.Join(t.TempDir(), "data")
	for _, d := range []string{backing, data} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	mount := func() *powercut.FS {
		t.Helper()
		p, err := powercut.Mount(backing, data)
		if err != nil {
			if os.Getenv("CI") == "true" {
				t.Fatalf("CI=true, root and /dev/fuse, but FUSE does not mount: %v", err)
			}
			t.Skipf("power-cut test: %v", err)
		}
		return p
	}
	cfg := writeConfig(t, "tasks:\n  max_cycles: 1000000\n")
	received := make(map[string][]*api.Event)
	created := make(map[string]uint64)
	var tasks []string
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	start := time.Now()

	for i := 0; i <= cuts; i++ {
		pfs := mount()
		unmounted := false
		t.Cleanup(func() {
			// After a failure: the daemon's own cleanup (registered
			// later, run first) has killed it.
			if !unmounted {
				pfs.Cut()
				_ = pfs.Unmount()
			}
		})
		d := serveRemote(t, data, "--config", cfg)
		cleanup := func() {
			if !unmounted {
				unmounted = true
				pfs.Cut()
				d.kill()
				if err := pfs.Unmount(); err != nil {
					t.Errorf("unmount: %v", err)
				}
			}
		}
		c := d.connect(t, "")
		verifyHistories(t, c, received, created)
		if i == cuts {
			d.stop()
			_ = c.Close()
			unmounted = true
			if err := pfs.Unmount(); err != nil {
				t.Fatal(err)
			}
			break
		}
		// The newest Tasks append (a client may hold only so many
		// subscriptions); every Task's history is checked after each cut.
		for _, id := range tasks[max(0, len(tasks)-6):] {
			if _, err := c.Continue(ctx, id, ""); err != nil && !errors.Is(err, client.ErrConflict) {
				cleanup()
				t.Fatalf("continue %s: %v", id, err)
			}
		}
		for k := 0; k < 2; k++ {
			m, err := c.CreateTask(ctx, client.CreateTask{Request: fmt.Sprintf("cut %d.%d", i, k), Model: "fake/loop"})
			if err != nil {
				cleanup()
				t.Fatal(err)
			}
			tasks = append(tasks, m.GetTaskId())
			created[m.GetTaskId()] = m.GetLastSeq()
		}
		target := 10 + rng.IntN(150)
		var mu sync.Mutex
		var wg sync.WaitGroup
		// The newest eight Tasks keep appending.
		reached, err := followFresh(t, ctx, c, tasks[max(0, len(tasks)-8):], received, &mu, target, &wg)
		if err != nil {
			cleanup()
			t.Fatal(err)
		}
		select {
		case <-reached:
		case <-time.After(60 * time.Second):
			cleanup()
			t.Fatalf("cut %d: the Tasks did not append %d events", i, target)
		}
		// The power goes: what was not synced is gone, then the daemon
		// with it. Events it publishes after the cut were synced before.
		pfs.Cut()
		d.kill()
		ended := make(chan struct{})
		go func() { wg.Wait(); close(ended) }()
		select {
		case <-ended:
		case <-time.After(30 * time.Second):
			cleanup()
			t.Fatalf("cut %d: the subscriptions did not end after the kill", i)
		}
		_ = c.Close()
		cleanup()
		if t.Failed() {
			return
		}
	}
	total := 0
	for _, evs := range received {
		total += len(evs)
	}
	t.Logf("%d cuts survived under lemo serve: %d Tasks, %d events received and found intact, %v per cut", cuts, len(tasks), total, (time.Since(start) / time.Duration(cuts+1)).Round(time.Millisecond))
}
