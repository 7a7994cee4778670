package shell

import (
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"lemo/tools/internal/proc"
	"lemo/tools/isolation"
)

// Every command carries the data folder's run tag and its call, so that
// the daemon's next start can find and name what it left behind.
func TestCommandsCarryRunTagAndCall(t *testing.T) {
	cfg := testConfig(randomHex())
	cfg.RunTag = "LEMO_RUN_TAG=" + randomHex()
	h := newHarness(t, cfg)
	r := h.must(obj{"command": `echo "$LEMO_RUN_TAG|$LEMO_RUN_CALL"`})
	_, tag, _ := strings.Cut(cfg.RunTag, "=")
	// The harness numbers its calls: this is its first, c1.
	if want := tag + "|t/c1\n"; r.Stdout != want {
		t.Fatalf("stdout %q, want %q", r.Stdout, want)
	}
	cfg.RunTag = "no equals sign"
	if _, err := New(cfg); err == nil || !strings.Contains(err.Error(), "Config.RunTag") {
		t.Fatalf("New with a bad RunTag: %v, want an error naming Config.RunTag", err)
	}
}

// In namespaces a command sees only its own processes, and a process that
// left the session and dropped every tag, holding the output, is stopped
// when the run ends (reported as background_killed), not left running.
func TestNamespacesStopUntaggedEscapes(t *testing.T) {
	if _, err := exec.LookPath("setsid"); err != nil {
		t.Skip("setsid not installed")
	}
	ns, err := isolation.Detect(os.Args[0])
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("namespaces: %v (CI must allow them)", err)
		}
		t.Skipf("namespaces are not allowed here: %v", err)
	}
	cfg := testConfig(randomHex())
	cfg.Namespaces = ns
	h := newHarness(t, cfg)
	r := h.must(obj{"command": `ls -d /proc/[0-9]* | wc -l`})
	// The init, the shell, ls and wc.
	if n, err := strconv.Atoi(strings.TrimSpace(r.Stdout)); err != nil || n > 4 {
		t.Fatalf("the command sees %q processes, want its own only (at most 4)", r.Stdout)
	}
	mark := "SHELL_TEST_ESCAPE=" + randomHex()
	r = h.must(obj{"command": `env -u ` + RunTagVariable + ` ` + mark + ` setsid sleep 1000 & p=$!; while [ "$(cut -d' ' -f5 /proc/$p/stat)" = "$$" ]; do sleep 0.01; done; echo $p`})
	if ps, err := proc.Survivors(proc.WithEnv(mark)); err != nil || len(ps) > 0 {
		for _, p := range ps {
			_ = syscall.Kill(p.Pid, syscall.SIGKILL)
		}
		t.Fatalf("the escaped sleep survived the run: %+v, %v (result %+v)", ps, err, r)
	}
	if !r.BackgroundKilled || strings.Contains(r.Note, "kept the output open") {
		t.Errorf("result %+v; want background_killed, and the output not held", r)
	}
}
