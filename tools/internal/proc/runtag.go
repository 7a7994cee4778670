package proc

import (
	"bytes"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// The variables every tool process carries, set by the tool after the
// environment was scrubbed (Env drops any LEMO_* variable a child would
// otherwise inherit, so a daemon started by a tool tags its own children
// only with its own tags).
const (
	// RunTagVariable holds the data folder's run tag (see
	// isolation.RunTag): it finds, at the next start, the processes a
	// daemon killed outright left behind.
	RunTagVariable = "LEMO_RUN_TAG"
	// CallVariable holds "<task id>/<call id>" of the call that started
	// the process, so that what is stopped at a start can be recorded
	// with the call.
	CallVariable = "LEMO_RUN_CALL"
)

// CallEntry is the CallVariable entry of a call ("NAME=value").
func CallEntry(taskID, callID string) string { return CallVariable + "=" + taskID + "/" + callID }

// Tagged is a live process found carrying a tag.
type Tagged struct {
	Pid int
	// Command is its command name (/proc/<pid>/comm).
	Command string
	// Call is the value of its CallVariable ("" when it has none).
	Call string
}

// StopTagged stops every live process other than this one whose
// environment holds tag ("NAME=value"; "" finds nothing): SIGTERM to each
// (and to the groups they lead), up to grace for them to end, then SIGKILL
// (Escalate). It returns what it found, read before anything was sent.
// Unlike Sweep it looks at every process, whenever it started: it is meant
// for a daemon's start, when no tool of its own runs yet.
func StopTagged(tag string, grace time.Duration) []Tagged {
	if tag == "" {
		return nil
	}
	var found []Tagged
	self := os.Getpid()
	_ = Walk(func(s Stat) bool {
		if s.Pid == self || s.Dead() || s.Kernel() {
			return true
		}
		env, err := os.ReadFile("/proc/" + strconv.Itoa(s.Pid) + "/environ")
		if err != nil {
			return true
		}
		t := Tagged{Pid: s.Pid}
		has := false
		for e := range bytes.SplitSeq(env, []byte{0}) {
			switch {
			case string(e) == tag:
				has = true
			case bytes.HasPrefix(e, []byte(CallVariable+"=")):
				t.Call = string(e[len(CallVariable)+1:])
			}
		}
		if has {
			comm, _ := os.ReadFile("/proc/" + strconv.Itoa(s.Pid) + "/comm")
			t.Command = strings.TrimSpace(string(comm))
			found = append(found, t)
		}
		return true
	})
	if len(found) == 0 {
		return nil
	}
	const noGroup = -1 // no process is in it: only the tag finds
	signal := func(sig syscall.Signal) { signalAll(stragglers(noGroup, tag, 0), sig) }
	gone := func() bool { return len(stragglers(noGroup, tag, 0)) == 0 }
	Escalate(signal, gone, time.Time{}, grace)
	return found
}
