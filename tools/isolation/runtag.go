package isolation

import (
	"crypto/sha256"
	"encoding/hex"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"lemo/tools/internal/proc"
)

// RunTag is the run tag of the data folder dir ("LEMO_RUN_TAG=<hex>"):
// every tool process of a daemon on that folder carries it in its
// environment, so that the next daemon on the folder finds what a daemon
// killed outright left running (StopLeftovers). It is derived from the
// folder's absolute path with symbolic links resolved, so daemons on
// different folders never stop each other's processes.
func RunTag(dir string) (string, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	if r, err := filepath.EvalSymlinks(abs); err == nil {
		abs = r
	}
	sum := sha256.Sum256([]byte("lemo run tag\x00" + abs))
	return proc.RunTagVariable + "=" + hex.EncodeToString(sum[:12]), nil
}

// CallEntry is the environment entry ("NAME=value") that names the call a
// tool process was started for; a tool sets it with the run tag.
func CallEntry(taskID, callID string) string { return proc.CallEntry(taskID, callID) }

// Tags are the environment entries that tag the processes of a call: the
// run tag (RunTag) and the call (CallEntry); none when tag is "".
func Tags(tag, taskID, callID string) []string {
	if tag == "" {
		return nil
	}
	return []string{tag, CallEntry(taskID, callID)}
}

// ValidRunTag reports whether tag is "" or a "NAME=value" environment
// entry (no NUL), as a tool's configuration may give it.
func ValidRunTag(tag string) bool {
	k, _, ok := strings.Cut(tag, "=")
	return tag == "" || (ok && k != "" && strings.IndexByte(tag, 0) < 0)
}

// Start starts cmd (proc.StartIn) in the namespaces n, or as a plain child
// when n is nil (namespaces off or refused).
func Start(cmd *exec.Cmd, n *Namespaces) (*proc.Process, error) {
	var ns proc.Namespaces
	if n != nil {
		ns = n // not a typed nil in the interface
	}
	return proc.StartIn(cmd, ns, ReadStatus)
}

// Leftover is a process found running at a daemon's start with the data
// folder's run tag, and stopped.
type Leftover struct {
	Pid     int
	Command string // its command name
	// TaskID and CallID name the call that started it ("" when unknown).
	TaskID, CallID string
}

// StopLeftovers stops every process carrying tag (RunTag): SIGTERM, up to
// grace, then SIGKILL. Call it once at the daemon's start, once it holds
// the data folder and before recovery records the outcome of the calls
// that were running; it returns what it stopped.
func StopLeftovers(tag string, grace time.Duration) []Leftover {
	var out []Leftover
	for _, p := range proc.StopTagged(tag, grace) {
		l := Leftover{Pid: p.Pid, Command: p.Command}
		l.TaskID, l.CallID, _ = strings.Cut(p.Call, "/")
		out = append(out, l)
	}
	return out
}
