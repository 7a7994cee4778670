package proc

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"testing"
	"time"

	"go.uber.org/goleak"
	"golang.org/x/sys/unix"

	"lemo/internal/testwait"
)

// Helper modes of the test binary, chosen by its environment.
const (
	// envDaemon makes it a daemon that starts `sleep 1000` with this
	// marker in its environment, prints the sleep's pid and waits to be
	// killed (TestChildDiesWithDaemon).
	envDaemon = "PROCTEST_DAEMON_MARK"
	// envSubreaper makes it a child subreaper (TestStopGroupAsSubreaper).
	envSubreaper = "PROCTEST_SUBREAPER"
)

func TestMain(m *testing.M) {
	if mark := os.Getenv(envDaemon); mark != "" {
		runDaemon(mark)
		return
	}
	if os.Getenv(envSubreaper) == "1" {
		if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
			fmt.Fprintln(os.Stderr, "prctl(PR_SET_CHILD_SUBREAPER):", err)
			os.Exit(2)
		}
	}
	goleak.VerifyTestMain(m)
}

func runDaemon(mark string) {
	cmd := exec.Command("sleep", "1000")
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), markVar + "=" + mark}
	p, err := Start(cmd)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	fmt.Printf("pid %d\n", p.Pid())
	<-p.Done()
	fmt.Fprintln(os.Stderr, "the child ended before the daemon")
	os.Exit(3)
}

// markVar is set in the environment of the children the tests start.
const markVar = "PROCTEST_MARK"

func randomHex() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// command returns `sh -c script` carrying a fresh mark, and the mark's
// entry; it fails the test if a process with the mark is alive at its end.
func command(t *testing.T, script string) (*exec.Cmd, string) {
	t.Helper()
	kv := markVar + "=" + randomHex()
	cmd := exec.Command("/bin/sh", "-c", script)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), kv}
	t.Cleanup(func() {
		ps, err := Survivors(WithEnv(kv))
		if err != nil {
			t.Error(err)
		}
		for _, p := range ps {
			_ = unix.Kill(p.Pid, unix.SIGKILL)
		}
		if len(ps) > 0 {
			t.Errorf("processes survived: %+v", ps)
		}
	})
	return cmd, kv
}

// start starts script with Start; the child is terminated at the end of
// the test if it still runs.
func start(t *testing.T, script string) (*Process, string) {
	t.Helper()
	cmd, kv := command(t, script)
	p, err := Start(cmd)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() {
		if !p.WaitFor(0) {
			p.Terminate(0)
		}
		StopGroup(p.Pid(), time.Now(), 0)
	})
	return p, kv
}

// eventually polls f until it returns nil or d passes.
func eventually(t *testing.T, d time.Duration, f func() error) {
	t.Helper()
	testwait.Until(t, d, "the condition", f)
}

// waitGroupSize waits until group pgid has n live members.
func waitGroupSize(t *testing.T, pgid, n int) {
	t.Helper()
	eventually(t, 5*time.Second, func() error {
		ps, err := Survivors(InGroup(pgid))
		if err != nil || len(ps) != n {
			return fmt.Errorf("group %d has %d live members (%v), want %d", pgid, len(ps), err, n)
		}
		return nil
	})
}
