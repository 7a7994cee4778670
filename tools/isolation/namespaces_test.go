package isolation

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"lemo/tools/internal/proc"
)

// namespaces detects namespaces with this test binary as the init; it
// skips where the kernel refuses them, except under CI=true.
func namespaces(t *testing.T) *Namespaces {
	t.Helper()
	ns, err := Detect(os.Args[0])
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("namespaces for tool processes: %v (CI must allow them)", err)
		}
		t.Skipf("namespaces for tool processes are not allowed here: %v", err)
	}
	return ns
}

// run starts script in namespaces and returns the process and a reader
// of its output.
func run(t *testing.T, ns *Namespaces, script string) (*proc.Process, *os.File) {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("/bin/sh", "-c", script)
	cmd.Stdout, cmd.Stderr = w, w
	cmd.Env = []string{"PATH=" + os.Getenv("PATH")}
	p, err := proc.StartIn(cmd, ns, ReadStatus)
	w.Close()
	if err != nil {
		r.Close()
		t.Fatalf("StartIn: %v", err)
	}
	t.Cleanup(func() {
		r.Close()
		if !p.WaitFor(0) {
			p.Terminate(0)
		}
		p.Close()
	})
	return p, r
}

// A command in namespaces sees its own processes only: it is pid 2 under
// the init, and /proc lists nothing else (the test process among them).
func TestNamespacesHideOtherProcesses(t *testing.T) {
	ns := namespaces(t)
	p, out := run(t, ns, `echo self $$; for f in /proc/[0-9]*; do echo proc ${f#/proc/}; done; cat /proc/1/cmdline | tr '\0' ' '`)
	b, _ := io.ReadAll(out)
	<-p.Done()
	if code, sig, ok := p.Exit(); !ok || code != 0 || sig != "" {
		t.Fatalf("Exit = %d %q %v, want 0; output %s", code, sig, ok, b)
	}
	got := string(b)
	var self int
	fmt.Sscanf(got, "self %d", &self)
	var procs []string
	for _, l := range strings.Split(got, "\n") {
		if p, ok := strings.CutPrefix(l, "proc "); ok {
			procs = append(procs, p)
		}
	}
	if self <= 1 || strings.Join(procs, " ") != "1 "+strconv.Itoa(self) {
		t.Fatalf("the command saw:\n%s\nwant only itself and the init (pid 1) in /proc", got)
	}
	if !strings.Contains(got, InitArg) {
		t.Fatalf("pid 1 is not the init:\n%s", got)
	}
	if n := p.Close(); n != 0 {
		t.Errorf("Close = %d, want 0: nothing was left", n)
	}
}

// How the command ended comes through the init: an exit status, a
// signal; Terminate stops one that ignores SIGTERM with SIGKILL.
func TestNamespacesExitStatus(t *testing.T) {
	ns := namespaces(t)
	for _, tc := range []struct {
		script string
		code   int
		sig    string
	}{
		{"exit 3", 3, ""},
		{"kill -TERM $$", -1, "SIGTERM"},
		{"exec /no/such/program", 127, ""},
	} {
		p, _ := run(t, ns, tc.script)
		<-p.Done()
		if code, sig, ok := p.Exit(); !ok || code != tc.code || sig != tc.sig {
			t.Errorf("%q: Exit = %d %q %v, want %d %q", tc.script, code, sig, ok, tc.code, tc.sig)
		}
	}
	p, out := run(t, ns, "trap '' TERM; echo ready; while :; do sleep 1; done")
	line := make([]byte, 6)
	if _, err := io.ReadFull(out, line); err != nil || string(line) != "ready\n" {
		t.Fatalf("first line %q, %v", line, err)
	}
	if killed := p.Terminate(50 * time.Millisecond); !killed {
		t.Error("Terminate did not need SIGKILL for a command that ignores SIGTERM")
	}
	if code, sig, _ := p.Exit(); code != -1 || sig != "SIGKILL" {
		t.Errorf("after Terminate: Exit = %d %q, want -1 SIGKILL", code, sig)
	}
}

// What a command leaves behind in another session, without any tag,
// ends with the namespace: Close kills the init and counts it.
func TestNamespacesCloseStopsEscapees(t *testing.T) {
	ns := namespaces(t)
	p, out := run(t, ns, "setsid sleep 1000 </dev/null >/dev/null 2>&1 & echo $!")
	b, _ := io.ReadAll(out)
	<-p.Done()
	// The escapee's pid as the daemon sees it: the namespace's sleep.
	var escapee int
	if err := proc.Walk(func(s proc.Stat) bool {
		if s.PPid == p.Pid() && proc.Mentions(s.Pid, "sleep 1000") {
			escapee = s.Pid
		}
		return escapee == 0
	}); err != nil || escapee == 0 {
		t.Fatalf("no escapee under the init %d (output %q): %v", p.Pid(), b, err)
	}
	if killed, leftover := proc.StopGroup(p.Pid(), time.Time{}, time.Second); killed || leftover {
		t.Errorf("StopGroup = %v, %v: the escapee left the group, the init does not count", killed, leftover)
	}
	if n := p.Close(); n != 1 {
		t.Errorf("Close = %d, want 1 (the escapee)", n)
	}
	if st, err := proc.ReadStat(escapee); err == nil && !st.Dead() {
		t.Fatalf("the escapee %d survived Close: %+v", escapee, st)
	}
	if err := p.Wait(); err == nil {
		t.Error("the init was not killed")
	}
}

// The init never touches the mounts of a process that did not start it
// in namespaces of its own.
func TestInitRefusesOutsideNamespaces(t *testing.T) {
	before := procMounts(t)
	mnt, err := os.Readlink("/proc/self/ns/mnt")
	if err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{mnt, "-", "-", probeArg}, {mnt, "-", "-", "3", "/bin/true", "true"}} {
		cmd := exec.Command(os.Args[0], append([]string{InitArg}, args...)...)
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		err := cmd.Run()
		if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 125 || !strings.Contains(out.String(), "not started in namespaces of its own") {
			t.Errorf("init %q outside namespaces: %v %s, want exit 125 saying so", args, err, out.String())
		}
	}
	// Started in a PID namespace but in the daemon's mount namespace.
	cmd := exec.Command(os.Args[0], InitArg, mnt, "-", "-", probeArg)
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWPID}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err == nil || !strings.Contains(out.String(), "not started in a mount namespace of its own") {
		t.Errorf("init in the daemon's mount namespace: %v %s, want a refusal", err, out.String())
	}
	if after := procMounts(t); after != before {
		t.Fatalf("/proc is mounted %d times, was %d: the init mounted in this namespace", after, before)
	}
}

// procMounts counts the mounts on /proc in this mount namespace.
func procMounts(t *testing.T) int {
	t.Helper()
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) > 4 && f[4] == "/proc" {
			n++
		}
	}
	return n
}

func TestParseStatus(t *testing.T) {
	for _, tc := range []struct {
		line string
		code int
		sig  syscall.Signal
		ok   bool
	}{
		{"exit 0\n", 0, 0, true},
		{"exit 3", 3, 0, true},
		{"signal 9\n", -1, syscall.SIGKILL, true},
		{"signal 0", -1, 0, false},
		{"exit -1", 0, 0, false},
		{"exit", 0, 0, false},
		{"", 0, 0, false},
		{"quit 1", 0, 0, false},
	} {
		code, sig, ok := ParseStatus(tc.line)
		if ok != tc.ok || (ok && (code != tc.code || sig != tc.sig)) {
			t.Errorf("ParseStatus(%q) = %d %v %v, want %d %v %v", tc.line, code, sig, ok, tc.code, tc.sig, tc.ok)
		}
	}
}

// A hidden folder shows empty and read-only to the command, except its
// working folder and the kept ones, which it reads and writes as before;
// ".." from its working folder leads into the empty cover.
func TestNamespacesHideFolders(t *testing.T) {
	base := namespaces(t)
	data := t.TempDir()
	for _, d := range []string{"ws/1", "ws/2", "keep"} {
		if err := os.MkdirAll(data+"/"+d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(data+"/token", []byte("SECRET-TOKEN"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(data+"/keep/kept", []byte("KEPT"), 0o600); err != nil {
		t.Fatal(err)
	}
	ns := base.With([]string{data}, []string{data + "/keep"})
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	script := `cat ../../token ` + data + `/token; ls ..; ls ` + data + `; cat ` + data + `/keep/kept; echo; echo written > here; touch ` + data + `/new && echo created; pwd`
	cmd := exec.Command("/bin/sh", "-c", script)
	cmd.Dir = data + "/ws/1"
	cmd.Stdout, cmd.Stderr = w, w
	p, err := proc.StartIn(cmd, ns, ReadStatus)
	w.Close()
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(r)
	<-p.Done()
	p.Close()
	got := string(b)
	t.Logf("the command saw:\n%s", got)
	if strings.Contains(got, "SECRET-TOKEN") || strings.Contains(got, "2\n") || strings.Contains(got, "created") {
		t.Errorf("the hidden folder showed through:\n%s", got)
	}
	if !strings.Contains(got, "KEPT") || !strings.Contains(got, data+"/ws/1\n") {
		t.Errorf("the kept folder or the working folder is missing:\n%s", got)
	}
	if b, err := os.ReadFile(data + "/ws/1/here"); err != nil || string(b) != "written\n" {
		t.Errorf("the command's write in its working folder: %q, %v", b, err)
	}
	if _, err := os.Stat(data + "/new"); err == nil {
		t.Error("the command created a file in the hidden folder")
	}
}
