package delegate

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"lemo/tools"
)

// envDaemonHelper makes the test binary act as a daemon that runs one
// delegate call with the fake agent at that path, prints the agent's pid
// and waits to be killed (TestAgentDiesWithTheDaemon).
const envDaemonHelper = "DELEGATE_TEST_DAEMON_AGENT"

// The helper's folder and the mark for its agent.
const (
	envDaemonDir  = "DELEGATE_TEST_DAEMON_DIR"
	envDaemonMark = "DELEGATE_TEST_DAEMON_MARK"
)

func runDaemonHelper(bin string) {
	dir := os.Getenv(envDaemonDir)
	ws, _ := filepath.EvalSymlinks(dir)
	// The agent ignores stdin EOF and writes nothing (no SIGPIPE): only
	// Pdeathsig can end it.
	dt, err := New(Config{Binary: bin, Args: []string{"--fake-ignore-eof"}, Dir: filepath.Join(dir, "delegate"), Environ: os.Environ(),
		SetEnv: []string{markVar + "=" + os.Getenv(envDaemonMark)}})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	printed := false
	emit := func(s json.RawMessage) error {
		var st State
		_ = json.Unmarshal(s, &st)
		if st.PID != 0 && !printed {
			printed = true
			fmt.Printf("pid %d\n", st.PID)
		}
		return nil
	}
	host := &testHost{}
	_, err = dt.run.Execute(context.Background(), tools.Call{TaskID: "t", CallID: "c", Workspace: ws, Input: json.RawMessage(`{"prompt":"HANG"}`), Sessions: host}, emit)
	fmt.Fprintln(os.Stderr, "the run ended:", err)
	os.Exit(3)
}

// A daemon killed outright (SIGKILL, no clean-up) takes its agents along,
// even one that ignores stdin EOF: they are started with Pdeathsig from a
// thread that stays locked until they are reaped.
func TestAgentDiesWithTheDaemon(t *testing.T) {
	mark := randomHex()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), envDaemonHelper+"="+fakeAgentBin, envDaemonDir+"="+t.TempDir(), envDaemonMark+"="+mark)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	killed := false
	t.Cleanup(func() {
		if !killed {
			cmd.Process.Kill()
			cmd.Wait()
		}
	})
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "pid ") {
		t.Fatalf("helper said %q, %v", line, err)
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(strings.TrimPrefix(line, "pid ")))
	if ps := marked(t, mark); len(ps) != 1 || ps[0].Pid != pid {
		t.Fatalf("the agent %d is not running: %v", pid, marked(t, mark))
	}
	if err := cmd.Process.Signal(unix.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	killed = true
	eventually(t, 5*time.Second, "the agent to die with the daemon", func() error {
		if ps := marked(t, mark); len(ps) > 0 {
			return fmt.Errorf("alive: %+v", ps)
		}
		return nil
	})
}
