package persistence

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"lemo/api"
)

const (
	crashHelperEnv = "LEMO_PERSISTENCE_CRASH_HELPER"
	crashDirEnv    = "LEMO_PERSISTENCE_CRASH_DIR"
)

// crashHelper runs in a child process: it appends to 8 new Tasks
// concurrently and prints "ack <task> <seq>" after each acknowledged append,
// until it is killed.
func crashHelper() {
	dd, err := OpenDataDir(os.Getenv(crashDirEnv))
	if err != nil {
		fmt.Println("error", err)
		os.Exit(2)
	}
	st, err := Open(dd, Options{Log: zerolog.Nop(), MemTableSize: 8 << 20})
	if err != nil {
		fmt.Println("error", err)
		os.Exit(2)
	}
	var mu sync.Mutex
	for g := 0; g < 8; g++ {
		go func() {
			task := NewTaskID(time.Now())
			for seq := uint64(1); ; seq++ {
				e := msg(task, seq, strings.Repeat("x", 200))
				if seq == 1 {
					e = created(task, "o")
				}
				if _, err := st.Append(context.Background(), Append{TaskID: task, Events: []*api.Event{e}}); err != nil {
					mu.Lock()
					fmt.Println("error", err)
					mu.Unlock()
					os.Exit(2)
				}
				mu.Lock()
				// Unbuffered: the line reaches the pipe before the next append.
				fmt.Printf("ack %s %d\n", task, seq)
				mu.Unlock()
			}
		}()
	}
	select {}
}

// TestKill9KeepsAcknowledgedAppends kills a process with SIGKILL while it
// appends, 20 times on one store, and checks after each kill that every
// acknowledged event is there and that every Task's log is contiguous.
func TestKill9KeepsAcknowledgedAppends(t *testing.T) {
	if testing.Short() {
		t.Skip("kill -9 loop skipped in -short mode")
	}
	dir := t.TempDir()
	acked := make(map[string]uint64) // task -> highest acknowledged seq
	for iter := 0; iter < 20; iter++ {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), crashHelperEnv+"=1", crashDirEnv+"="+dir)
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		cmd.Stderr = os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		// Kill after a varying number of acknowledgements, while the
		// helper's goroutines have appends in flight.
		killAt := 50 + iter*37
		sc := bufio.NewScanner(stdout)
		n := 0
		for sc.Scan() {
			line := sc.Text()
			if strings.HasPrefix(line, "error") {
				t.Fatalf("helper: %s", line)
			}
			f := strings.Fields(line)
			if len(f) != 3 || f[0] != "ack" {
				t.Fatalf("helper printed %q", line)
			}
			seq, _ := strconv.ParseUint(f[2], 10, 64)
			if seq > acked[f[1]] {
				acked[f[1]] = seq
			}
			if n++; n == killAt {
				if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
					t.Fatal(err)
				}
				break
			}
		}
		// Acks printed before the kill landed are acknowledged too.
		rest, _ := io.ReadAll(stdout)
		for _, line := range strings.Split(string(rest), "\n") {
			f := strings.Fields(line)
			if len(f) == 3 && f[0] == "ack" {
				seq, _ := strconv.ParseUint(f[2], 10, 64)
				if seq > acked[f[1]] {
					acked[f[1]] = seq
				}
			}
		}
		_ = cmd.Wait()
		verifyAcked(t, dir, acked)
	}
}

func verifyAcked(t *testing.T, dir string, acked map[string]uint64) {
	t.Helper()
	st := openTest(t, dir)
	defer closeTest(t, st)
	for task, want := range acked {
		m, err := st.Meta(task)
		if err != nil {
			t.Fatalf("task %s: acknowledged up to seq %d but meta: %v", task, want, err)
		}
		var next uint64 = 1
		err = st.Events(task, 1, 0, func(ev *api.Event) error {
			if ev.GetSeq() != next {
				return fmt.Errorf("seq %d where %d was expected", ev.GetSeq(), next)
			}
			next++
			return nil
		})
		if err != nil {
			t.Fatalf("task %s: %v", task, err)
		}
		if got := next - 1; got < want || got != m.GetLastSeq() {
			t.Fatalf("task %s: %d events stored, meta last seq %d, %d acknowledged", task, got, m.GetLastSeq(), want)
		}
	}
}
