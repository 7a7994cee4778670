package actors_test

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"lemo/actors/live"
	"lemo/api"
	"lemo/providers"
	"lemo/providers/fake"
	"lemo/tools/shell"
)

// TestLiveOutputMemory measures the daemon's heap and RSS while a command
// prints LEMO_LIVE_MEM_BYTES bytes (e.g. 1G) and its live result is held.
// It only reports figures (for docs/reliability.md); it runs when the
// variable is set:
//
//	LEMO_LIVE_MEM_BYTES=1G go test ./actors -run TestLiveOutputMemory -v
//
// LEMO_LIVE_MEM_CALLS=3 runs three such commands at once.
func TestLiveOutputMemory(t *testing.T) {
	size := os.Getenv("LEMO_LIVE_MEM_BYTES")
	if size == "" {
		t.Skip("set LEMO_LIVE_MEM_BYTES (e.g. 1G) to measure")
	}
	sh, err := shell.New(shell.Config{Policy: shell.Policy{Default: shell.Allow}, Environ: os.Environ(), MaxTimeout: 10 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	cmd := fmt.Sprintf(`{"command":"head -c %s /dev/zero | tr '\\0' a","timeout_seconds":600}`, size)
	calls := 1
	if n, err := strconv.Atoi(os.Getenv("LEMO_LIVE_MEM_CALLS")); err == nil && n > 0 {
		calls = n // run in parallel (up to tasks.max_parallel_tools)
	}
	var first []providers.ToolCall
	for i := range calls {
		first = append(first, providers.ToolCall{ID: fmt.Sprintf("p%d", i), Name: "shell_run", Arguments: []byte(cmd)})
	}
	lv, err := live.New(filepath.Join(t.TempDir(), "live"), live.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	h := newHarnessLive(t, fake.Sequence(
		fake.Turn{ToolCalls: first},
		fake.Turn{ToolCalls: []providers.ToolCall{call("p2", "test_block", "hold")}},
		fake.Turn{Text: "done"},
	), lv, nil, sh)
	base := memNow()
	var peak atomic.Uint64
	stop := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		tk := time.NewTicker(5 * time.Millisecond)
		defer tk.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tk.C:
				var ms runtime.MemStats
				runtime.ReadMemStats(&ms)
				if ms.HeapInuse > peak.Load() {
					peak.Store(ms.HeapInuse)
				}
			}
		}
	}()
	id := h.create("print a lot")
	eventually(t, "the second call running", func() error {
		if !h.blocks.isRunning("hold") {
			return errNotYet
		}
		return nil
	})
	close(stop)
	<-sampled
	held := memNow()
	u := lv.Usage()
	debug.FreeOSMemory()
	freed := memNow()
	h.blocks.release("hold")
	h.waitStatus(id, api.TaskStatus_TASK_STATUS_FINISHED)
	eventually(t, "live results released", func() error {
		if u := lv.Usage(); u.Results != 0 || u.HeapBytes != 0 {
			return fmt.Errorf("still held: %+v", u)
		}
		return nil
	})
	debug.FreeOSMemory()
	done := memNow()
	if f := os.Getenv("LEMO_LIVE_MEM_PROFILE"); f != "" {
		fh, err := os.Create(f)
		if err != nil {
			t.Fatal(err)
		}
		defer fh.Close()
		if err := pprof.WriteHeapProfile(fh); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("live results: %d MiB in memory, %d MiB spilled (defaults: %d MiB per call, %d MiB spill per call)", u.HeapBytes>>20, u.SpillBytes>>20, lv.Limits().CallBytes>>20, lv.Limits().SpillBytes>>20)
	t.Logf("%d call(s) printed %s each: peak HeapInuse %d MiB; held live result: HeapInuse %d MiB, RSS %d MiB (before: %d, %d); after FreeOSMemory: HeapInuse %d MiB, RSS %d MiB; finished: HeapInuse %d MiB, RSS %d MiB; VmHWM %d MiB",
		calls, size, peak.Load()>>20, held.heap>>20, held.rss>>20, base.heap>>20, base.rss>>20, freed.heap>>20, freed.rss>>20, done.heap>>20, done.rss>>20, done.hwm>>20)
}

type memFigures struct{ heap, rss, hwm uint64 }

func memNow() memFigures {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	f := memFigures{heap: ms.HeapInuse}
	if fh, err := os.Open("/proc/self/status"); err == nil {
		defer fh.Close()
		s := bufio.NewScanner(fh)
		for s.Scan() {
			k, v, _ := strings.Cut(s.Text(), ":")
			n, _ := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			switch k {
			case "VmRSS":
				f.rss = n << 10
			case "VmHWM":
				f.hwm = n << 10
			}
		}
	}
	return f
}
