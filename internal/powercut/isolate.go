package powercut

import (
	"bytes"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"syscall"
	"testing"
)

const privateEnv = "LEMO_POWERCUT_PRIVATE_MOUNTS"

// InPrivateMounts runs the calling test again in a child process that has a
// mount namespace of its own, and returns false once it has reported the
// child's outcome (pass, skip or failure, with its output); in the child it
// returns true and the test goes on there. env is added to the child's
// environment.
//
// A mount made in the child is invisible to the rest of the machine. That
// matters: a process elsewhere that copies the mount table while the
// filesystem is mounted (unshare -m, a container, a sandbox) keeps it alive
// after the test unmounts it, and the server then waits forever for a
// connection that never ends. It needs root, as mounting FUSE does.
func InPrivateMounts(t testing.TB, env ...string) bool {
	t.Helper()
	if os.Getenv(privateEnv) == t.Name() {
		return true
	}
	cmd := exec.Command(os.Args[0], "-test.run=^"+regexp.QuoteMeta(t.Name())+"$", "-test.v", "-test.count=1")
	cmd.Env = append(append(os.Environ(), env...), privateEnv+"="+t.Name())
	// Go makes the child's mounts private (MS_REC|MS_PRIVATE on /) when it
	// unshares the mount namespace.
	cmd.SysProcAttr = &syscall.SysProcAttr{Unshareflags: syscall.CLONE_NEWNS}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	text := out.String()
	switch {
	case err != nil:
		t.Fatalf("in a private mount namespace: %v\n%s", err, text)
	case strings.Contains(text, "--- SKIP: "+t.Name()):
		t.Skipf("in a private mount namespace:\n%s", text)
	default:
		t.Logf("in a private mount namespace:\n%s", text)
	}
	return false
}
