package tests

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"lemo/api"
	"lemo/client"
	"lemo/tools/isolation"
)

// taggedProcs lists the live processes whose environment holds tag, with
// their command lines.
func taggedProcs(tag string) map[int]string {
	out := map[int]string{}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if procDead(pid) {
			continue
		}
		env, err := os.ReadFile("/proc/" + e.Name() + "/environ")
		if err != nil || !bytes.Contains(append(append([]byte{0}, env...), 0), []byte("\x00"+tag+"\x00")) {
			continue
		}
		cl, _ := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		out[pid] = strings.TrimSpace(string(bytes.ReplaceAll(cl, []byte{0}, []byte{' '})))
	}
	return out
}

// procDead reports a process that is gone, or dead and not yet reaped.
func procDead(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	i := bytes.LastIndexByte(b, ')')
	return i < 0 || i+2 >= len(b) || b[i+2] == 'Z' || b[i+2] == 'X'
}

// procSession is the session id of a process (field 6 of its stat line).
func procSession(pid int) int {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	i := bytes.LastIndexByte(b, ')')
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 4 {
		return 0
	}
	sid, _ := strconv.Atoi(f[3])
	return sid
}

// A shell command started a grandchild in a session of its own (setsid)
// when the daemon was killed with SIGKILL: the grandchild outlived it. The
// next start stops it before it serves, and the call's outcome-unknown
// record names it. Namespaces are off here: they would have taken the
// grandchild along with the daemon already (see
// TestToolNamespaceDiesWithTheDaemon).
func TestLeftoversStoppedAtStart(t *testing.T) {
	data := filepath.Join(t.TempDir(), "data")
	cfg := writeConfig(t, "tools:\n  namespaces: off\n  shell:\n    approval: allow\n")
	d := serveRemote(t, data, "--config", cfg)
	c := d.connect(t, "")
	tag, err := isolation.RunTag(data)
	if err != nil {
		t.Fatal(err)
	}
	m, err := c.CreateTask(context.Background(), client.CreateTask{Request: "setsid sleep 1000 & sleep 1000", Model: "fake/shell"})
	if err != nil {
		t.Fatal(err)
	}
	grandchild := setsidGrandchild(t, tag)
	d.kill()
	if procDead(grandchild) {
		t.Fatalf("the setsid grandchild %d died with the daemon: nothing for the start to stop", grandchild)
	}

	d2 := serveRemote(t, data, "--config", cfg)
	if !procDead(grandchild) {
		t.Fatalf("the daemon serves while the grandchild %d of the killed one still runs", grandchild)
	}
	if left := taggedProcs(tag); len(left) != 0 {
		t.Fatalf("processes with the run tag survived the start: %v", left)
	}
	logs := d2.logs()
	stoppedAt, servingAt := strings.Index(logs, `"pid":`+strconv.Itoa(grandchild)+`,`), strings.Index(logs, "lemo is serving")
	if stoppedAt < 0 || !strings.Contains(logs, "stopped a tool process left running by the previous daemon") || stoppedAt > servingAt {
		t.Errorf("the log does not say that %d was stopped before serving:\n%s", grandchild, logs)
	}
	c2 := d2.connect(t, "")
	calls, _ := toolCalls(t, c2, m.GetTaskId())
	if len(calls) != 1 || calls[0].failed == nil {
		t.Fatalf("calls %+v, want one failed shell.run", calls)
	}
	f := calls[0].failed
	want := fmt.Sprintf("pid %d (sleep)", grandchild)
	if f.GetKind() != api.ToolFailureKind_TOOL_FAILURE_KIND_OUTCOME_UNKNOWN || !strings.Contains(f.GetMessage(), "processes still running at the restart were stopped:") || !strings.Contains(f.GetMessage(), want) {
		t.Fatalf("the call's record: %v %q, want outcome unknown naming %s", f.GetKind(), f.GetMessage(), want)
	}
	t.Logf("recorded: %s", f.GetMessage())
}

// With namespaces (tools.namespaces auto, where the kernel allows them), a
// setsid grandchild of a shell command dies with a daemon killed outright:
// the command's init dies with the daemon, and the namespace with it.
func TestToolNamespaceDiesWithTheDaemon(t *testing.T) {
	data := filepath.Join(t.TempDir(), "data")
	cfg := writeConfig(t, "tools:\n  shell:\n    approval: allow\n")
	d := serveRemote(t, data, "--config", cfg)
	needNamespaces(t, d.daemon)
	c := d.connect(t, "")
	tag, err := isolation.RunTag(data)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreateTask(context.Background(), client.CreateTask{Request: "setsid sleep 1000 & sleep 1000", Model: "fake/shell"}); err != nil {
		t.Fatal(err)
	}
	setsidGrandchild(t, tag)
	d.kill()
	eventually(t, 10*time.Second, func() error {
		if left := taggedProcs(tag); len(left) != 0 {
			return fmt.Errorf("processes of the killed daemon's tool still run: %v", left)
		}
		return nil
	})
}

// setsidGrandchild waits for the grandchild that "setsid sleep 1000 &"
// starts (sleep in a session it leads, carrying tag) and kills it at the
// test's end.
func setsidGrandchild(t *testing.T, tag string) int {
	t.Helper()
	var grandchild int
	eventually(t, 30*time.Second, func() error {
		for pid, cl := range taggedProcs(tag) {
			if cl == "sleep 1000" && procSession(pid) == pid {
				grandchild = pid
				return nil
			}
		}
		return fmt.Errorf("no setsid sleep carries the run tag yet: %v", taggedProcs(tag))
	})
	t.Cleanup(func() { _ = syscall.Kill(grandchild, syscall.SIGKILL) })
	return grandchild
}

// needNamespaces skips unless the daemon runs tool processes in
// namespaces of their own, except under CI=true, where it fails.
func needNamespaces(t *testing.T, d *daemon) {
	t.Helper()
	if !strings.Contains(d.logs(), "tool processes run in namespaces of their own") {
		if os.Getenv("CI") == "true" {
			t.Fatalf("the daemon runs tool processes without namespaces (CI must allow them):\n%s", d.logs())
		}
		t.Skipf("the daemon runs tool processes without namespaces here:\n%s", d.logs())
	}
}
