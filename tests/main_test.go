package tests

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// lemoBin is the binary under test, built once by TestMain.
var lemoBin string

// lemoBinEnv names a binary already built by the parent test process, for
// a test that runs again in a child (powercut.InPrivateMounts).
const lemoBinEnv = "LEMO_E2E_LEMO_BIN"

func TestMain(m *testing.M) {
	if os.Getenv(stepsModelEnv) != "" {
		serveStepsModel()
		return
	}
	if bin := os.Getenv(lemoBinEnv); bin != "" {
		lemoBin = bin
		os.Exit(m.Run())
	}
	dir, err := os.MkdirTemp("", "lemo-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	// Tests run the binary as other users too (as nobody, to prove a folder
	// it cannot read is refused).
	if err := os.Chmod(dir, 0o755); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	lemoBin = filepath.Join(dir, "lemo")
	build := exec.Command("go", "build", "-o", lemoBin, "../cmd/lemo")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "build lemo:", err)
		os.Exit(1)
	}
	code := m.Run()
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

// daemon is a running lemo serve.
type daemon struct {
	t    testing.TB
	cmd  *exec.Cmd
	data string
	mu   sync.Mutex
	log  bytes.Buffer
	done chan struct{}
	err  error
	// ready is closed when the daemon logs that it serves.
	ready chan struct{}
}

// cleanEnv is the environment of the processes under test: the test's own
// without LEMO_* and provider variables, plus extra.
func cleanEnv(extra ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(name, "LEMO_") || strings.HasPrefix(name, "OLLAMA_") || strings.HasSuffix(name, "_API_KEY") {
			continue
		}
		env = append(env, kv)
	}
	return append(env, extra...)
}

// startDaemon runs lemo serve on data and waits until it serves. The
// remote API listens on a free port (127.0.0.1:0) unless args name
// --listen, so that daemons of concurrent tests never collide; clients find
// it through the data folder's daemon.json.
func startDaemon(t testing.TB, data string, args ...string) *daemon {
	t.Helper()
	d := launchDaemon(t, lemoBin, data, args...)
	d.waitServing()
	return d
}

// waitServing waits until the daemon serves; it fails the test if the
// daemon exits first or takes longer than 30s.
func (d *daemon) waitServing() {
	d.t.Helper()
	select {
	case <-d.ready:
	case <-d.done:
		d.t.Fatalf("lemo serve exited before serving: %v\n%s", d.err, d.logs())
	case <-time.After(30 * time.Second):
		d.t.Fatalf("lemo serve did not start within 30s:\n%s", d.logs())
	}
}

// launchDaemon starts bin serve on data without waiting for it, with the
// demo models on and no local Ollama; ready is closed once it serves.
// Its Tasks start with every tool (tools.initial "*"), as the demo models
// call them without loading them first; tool discovery, the default, is
// tested with launchDaemonEnv.
func launchDaemon(t testing.TB, bin, data string, args ...string) *daemon {
	t.Helper()
	return launchDaemonEnv(t, bin, data, []string{"LEMO_FAKE_ENABLED=true", "LEMO_OLLAMA_DISABLED=true", "LEMO_TOOLS_INITIAL=*"}, args...)
}

// launchDaemonEnv is launchDaemon with env (and not the demo settings)
// added to the clean environment.
func launchDaemonEnv(t testing.TB, bin, data string, env []string, args ...string) *daemon {
	t.Helper()
	return launchDaemonAs(t, nil, bin, data, env, args...)
}

// launchDaemonAs is launchDaemonEnv as the user cred (nil: this process's).
func launchDaemonAs(t testing.TB, cred *syscall.Credential, bin, data string, env []string, args ...string) *daemon {
	t.Helper()
	d := &daemon{t: t, data: data, done: make(chan struct{}), ready: make(chan struct{})}
	if !slices.Contains(args, "--listen") {
		args = append([]string{"--listen", "127.0.0.1:0"}, args...)
	}
	d.cmd = exec.Command(bin, append([]string{"serve", "--data", data}, args...)...)
	// The log is read from stderr, also under a config (the example one)
	// that sends it to stdout.
	d.cmd.Env = cleanEnv(append([]string{"LEMO_LOG_FORMAT=json", "LEMO_LOG_OUTPUT=stderr"}, env...)...)
	if cred != nil {
		d.cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	}
	stderr, err := d.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := d.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		once := sync.Once{}
		for sc.Scan() {
			line := sc.Text()
			d.mu.Lock()
			d.log.WriteString(line + "\n")
			d.mu.Unlock()
			if strings.Contains(line, "lemo is serving") {
				once.Do(func() { close(d.ready) })
			}
		}
		_, _ = io.Copy(io.Discard, stderr)
		d.err = d.cmd.Wait()
		close(d.done)
	}()
	t.Cleanup(func() { d.kill() })
	return d
}

func (d *daemon) logs() string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.log.String()
}

// stop sends SIGINT and waits for a clean exit.
func (d *daemon) stop() {
	d.t.Helper()
	d.stopWith(syscall.SIGINT)
}

// stopWith sends sig (SIGINT or SIGTERM) and waits for an exit with status
// 0.
func (d *daemon) stopWith(sig syscall.Signal) {
	d.t.Helper()
	_ = d.cmd.Process.Signal(sig)
	select {
	case <-d.done:
	case <-time.After(60 * time.Second):
		d.kill()
		d.t.Fatalf("lemo serve did not stop within 60s:\n%s", d.logs())
	}
	if d.err != nil {
		d.t.Fatalf("lemo serve exited with %v:\n%s", d.err, d.logs())
	}
}

// kill sends SIGKILL and waits.
func (d *daemon) kill() {
	select {
	case <-d.done:
		return
	default:
	}
	_ = d.cmd.Process.Signal(syscall.SIGKILL)
	<-d.done
}

// privateUnlessNamed is args with --private-workspace added to a lemo run
// that names no workspace: the tests run in the checkout's tests folder,
// which their daemons grant no Task (a refused current folder is an
// error), and a Task of a test works in a folder of its own.
func privateUnlessNamed(args []string) []string {
	if len(args) == 0 || args[0] != "run" {
		return args
	}
	for _, a := range args[1:] {
		name, _, _ := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if strings.HasPrefix(a, "-") && (name == "w" || name == "workspace" || name == "private-workspace") {
			return args
		}
	}
	return append([]string{"run", "--private-workspace"}, args[1:]...)
}

// lemo runs the binary to completion and returns its output and exit code
// (a lemo run without a workspace: see privateUnlessNamed).
func lemo(t testing.TB, env []string, args ...string) (string, int) {
	t.Helper()
	cmd := exec.Command(lemoBin, privateUnlessNamed(args)...)
	cmd.Env = env
	out, err := cmd.CombinedOutput()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("run lemo %v: %v", args, err)
	}
	return string(out), code
}

// snapshot describes every file under dir: name, size, mode and mtime.
func snapshot(t testing.TB, dir string) string {
	t.Helper()
	var b strings.Builder
	err := filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		fmt.Fprintf(&b, "%s %d %v %d\n", p, fi.Size(), fi.Mode(), fi.ModTime().UnixNano())
		return nil
	})
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	return b.String()
}

// waitABit pauses between polls of a condition with a deadline.
func waitABit() { time.Sleep(10 * time.Millisecond) }
