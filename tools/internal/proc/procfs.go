package proc

import (
	"bytes"
	"os"
	"strconv"
)

// Stat is what /proc/<pid>/stat says of a process.
type Stat struct {
	Pid  int
	PPid int // the parent
	Pgrp int // the process group
	// State is R (running), S (sleeping), D (disk sleep), T (stopped),
	// Z (zombie: dead, not yet reaped), X (dead), ...
	State byte
	// Start is when the process started, in ticks since boot (field 22;
	// 0 when the line ends before it). See Ticks.
	Start uint64
	// Flags are the kernel's PF_* flags of the process (field 9; 0 when
	// the line ends before it).
	Flags uint64
}

// pfKthread is the PF_KTHREAD flag: a kernel thread.
const pfKthread = 0x00200000

// Kernel reports a kernel thread: it has no environment, command line or
// user memory of its own.
func (s Stat) Kernel() bool { return s.Flags&pfKthread != 0 }

// Dead reports a process that has ended (a zombie not yet reaped, or one
// on its way out).
func (s Stat) Dead() bool { return s.State == 'Z' || s.State == 'X' }

// ParseStat parses a /proc/<pid>/stat line: "pid (comm) state ppid pgrp
// ... starttime ...". The command name may hold spaces and parentheses: it
// ends at the last ')'. The state is a letter.
func ParseStat(b []byte) (Stat, bool) {
	open := bytes.IndexByte(b, ' ')
	end := bytes.LastIndexByte(b, ')')
	if open <= 0 || end <= open+1 || !bytes.HasPrefix(b[open:], []byte(" (")) {
		return Stat{}, false
	}
	f := bytes.Fields(b[end+1:])
	if len(f) < 3 || len(f[0]) != 1 || !isLetter(f[0][0]) {
		return Stat{}, false
	}
	var s Stat
	var err error
	if s.Pid, err = atoi(b[:open]); err != nil {
		return Stat{}, false
	}
	if s.PPid, err = atoi(f[1]); err != nil {
		return Stat{}, false
	}
	if s.Pgrp, err = atoi(f[2]); err != nil {
		return Stat{}, false
	}
	s.State = f[0][0]
	if len(f) > 6 { // flags is field 9
		if s.Flags, err = strconv.ParseUint(string(f[6]), 10, 64); err != nil {
			return Stat{}, false
		}
	}
	if len(f) > 19 { // starttime is field 22; f[0] is field 3
		if s.Start, err = strconv.ParseUint(string(f[19]), 10, 64); err != nil {
			return Stat{}, false
		}
	}
	return s, true
}

// ticksPerSecond is USER_HZ, the unit of the times /proc reports: 100 on
// Linux, whatever the kernel's own tick rate.
const ticksPerSecond = 100

// Ticks returns the time since boot in the unit of Stat.Start (from
// /proc/uptime), rounded down: a process started after the call has a
// Start at least as large.
func Ticks() (uint64, error) {
	b, err := os.ReadFile("/proc/uptime")
	if err != nil {
		return 0, err
	}
	f := bytes.Fields(b)
	if len(f) == 0 {
		return 0, &os.PathError{Op: "parse", Path: "/proc/uptime", Err: os.ErrInvalid}
	}
	secs, err := strconv.ParseFloat(string(f[0]), 64)
	if err != nil {
		return 0, &os.PathError{Op: "parse", Path: "/proc/uptime", Err: err}
	}
	return uint64(secs * ticksPerSecond), nil
}

func isLetter(c byte) bool { return ('A' <= c && c <= 'Z') || ('a' <= c && c <= 'z') }

func atoi(b []byte) (int, error) { return strconv.Atoi(string(b)) }

// ReadStat reads the stat line of process pid.
func ReadStat(pid int) (Stat, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return Stat{}, err
	}
	s, ok := ParseStat(b)
	if !ok {
		return Stat{}, &os.PathError{Op: "parse", Path: "/proc/" + strconv.Itoa(pid) + "/stat", Err: os.ErrInvalid}
	}
	return s, nil
}

// Walk calls f with the stat of every process in /proc until f returns
// false. Processes that end meanwhile are skipped. The error is that of
// listing /proc.
func Walk(f func(Stat) bool) error {
	d, err := os.Open("/proc")
	if err != nil {
		return err
	}
	names, err := d.Readdirnames(-1)
	d.Close()
	if err != nil {
		return err
	}
	for _, n := range names {
		if n == "" || n[0] < '0' || n[0] > '9' {
			continue
		}
		b, err := os.ReadFile("/proc/" + n + "/stat")
		if err != nil {
			continue // ended meanwhile
		}
		s, ok := ParseStat(b)
		if !ok {
			continue
		}
		if !f(s) {
			return nil
		}
	}
	return nil
}

// LiveMembers reports whether group pgid has a member other than its
// leader (the child, reaped, or in namespaces its init: see
// Process.Close) that is not dead, from /proc; when /proc cannot be read
// every member counts as live.
func LiveMembers(pgid int) bool {
	found := false
	err := Walk(func(s Stat) bool {
		found = s.Pgrp == pgid && s.Pid != pgid && !s.Dead()
		return !found
	})
	return found || err != nil
}

// HasEnv reports whether the environment of process pid holds the entry kv
// ("NAME=value") exactly: the environment it was started with. It is false
// when that cannot be read (another user's process, a zombie, or one that
// ended).
func HasEnv(pid int, kv string) bool {
	has, _ := envHolds(pid, kv)
	return has
}

// envHolds is HasEnv, and tells whether the environment read empty. The
// kernel shows an empty environment for a process that has none (env -i),
// for a kernel thread, and for a process in the middle of an execve: from
// the moment its new image replaces the old until the new stack is set up,
// which on a busy machine can be caught right after a descendant called
// setsid and exec'd its program.
func envHolds(pid int, kv string) (has, empty bool) {
	env, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/environ")
	if err != nil {
		return false, false
	}
	if len(env) == 0 {
		return false, true
	}
	needle := []byte(kv)
	for e := range bytes.SplitSeq(env, []byte{0}) {
		if bytes.Equal(e, needle) {
			return true, false
		}
	}
	return false, false
}
