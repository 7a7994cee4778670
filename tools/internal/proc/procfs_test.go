package proc

import (
	"fmt"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"
)

func TestParseStat(t *testing.T) {
	for _, c := range []struct {
		line string
		want Stat
		ok   bool
	}{
		{"42 (sleep) S 7 42 42 0 -1 4194304 ...", Stat{Pid: 42, PPid: 7, Pgrp: 42, State: 'S', Flags: 4194304}, true},
		{"2 (kthreadd) S 0 0 0 0 -1 2129984 ...", Stat{Pid: 2, State: 'S', Flags: 2129984}, true},
		{"42 (x) S 7 42 42 0 -1 flags", Stat{}, false},
		{"9 (a) b) (c S 1 2 ...) Z 3 4 5", Stat{Pid: 9, PPid: 3, Pgrp: 4, State: 'Z'}, true},
		{"9 (with space) R 3 4", Stat{Pid: 9, PPid: 3, Pgrp: 4, State: 'R'}, true},
		{"9 () X 0 0", Stat{Pid: 9, State: 'X'}, true},
		{"9 (x) S 3", Stat{}, false},
		{"9 (x) SS 3 4", Stat{}, false},
		{"9 (x) S three 4", Stat{}, false},
		{"9 (x) S 3 four", Stat{}, false},
		{"nine (x) S 3 4", Stat{}, false},
		{"9 x S 3 4", Stat{}, false},
		{"9 (x S 3 4", Stat{}, false},
		{"(x) S 3 4", Stat{}, false},
		{"", Stat{}, false},
		{"9 )( S 3 4", Stat{}, false},
		{"9 (x) ) 3 4", Stat{}, false},
		{"9 (x) \x00 3 4", Stat{}, false},
		{"42 (sleep) S 7 42 42 0 -1 4194304 100 0 0 0 1 2 0 0 20 0 1 0 123456 8192 100", Stat{Pid: 42, PPid: 7, Pgrp: 42, State: 'S', Start: 123456, Flags: 4194304}, true},
		{"42 (sleep) S 7 42 42 0 -1 4194304 100 0 0 0 1 2 0 0 20 0 1 0 soon 8192", Stat{}, false},
	} {
		got, ok := ParseStat([]byte(c.line))
		if got != c.want || ok != c.ok {
			t.Errorf("ParseStat(%q) = %+v, %v; want %+v, %v", c.line, got, ok, c.want, c.ok)
		}
	}
}

// Kernel threads are told by PF_KTHREAD in the flags; this process is not
// one.
func TestKernel(t *testing.T) {
	if !(Stat{Flags: 2129984}).Kernel() || (Stat{Flags: 4194304}).Kernel() {
		t.Error("Kernel does not read PF_KTHREAD (0x00200000)")
	}
	self, err := ReadStat(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if self.Kernel() || self.Flags == 0 {
		t.Errorf("this process: %+v, want flags without PF_KTHREAD", self)
	}
}

func FuzzParseStat(f *testing.F) {
	f.Add("42 (sleep) S 7 42 42 0", "x) (y", byte('S'))
	f.Add("", "", byte(0))
	f.Fuzz(func(t *testing.T, line, comm string, state byte) {
		if s, ok := ParseStat([]byte(line)); ok && !isLetter(s.State) {
			t.Fatalf("ParseStat(%q) = %+v: the state is not a letter", line, s)
		}
		// A well-formed line with any command name parses back.
		if !isLetter(state) {
			return
		}
		want := Stat{Pid: 123, PPid: 45, Pgrp: 67, State: state}
		b := fmt.Appendf(nil, "%d (%s) %c %d %d 0 -1", want.Pid, comm, want.State, want.PPid, want.Pgrp)
		if got, ok := ParseStat(b); !ok || got != want {
			t.Fatalf("ParseStat(%q) = %+v, %v; want %+v", b, got, ok, want)
		}
	})
}

// Ticks is the clock of Stat.Start: this process started before now, and
// a child started after a reading has a Start at least as large.
func TestTicks(t *testing.T) {
	before, err := Ticks()
	if err != nil {
		t.Fatal(err)
	}
	me, err := ReadStat(os.Getpid())
	if err != nil || me.Start == 0 || me.Start > before {
		t.Fatalf("this process started at %d (%v); Ticks = %d", me.Start, err, before)
	}
	p, err := Start(exec.Command("sleep", "10"))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Terminate(time.Second)
	child, err := ReadStat(p.Pid())
	if err != nil || child.Start < p.Since() || p.Since() < before {
		t.Fatalf("child started at %d (%v); Since = %d, Ticks before = %d", child.Start, err, p.Since(), before)
	}
}

func TestWalkFindsThisProcess(t *testing.T) {
	var me Stat
	if err := Walk(func(s Stat) bool {
		if s.Pid == os.Getpid() {
			me = s
			return false
		}
		return true
	}); err != nil {
		t.Fatal(err)
	}
	if me.PPid != os.Getppid() || me.Pgrp != syscall.Getpgrp() || me.Dead() {
		t.Errorf("this process in /proc: %+v; want parent %d, group %d", me, os.Getppid(), syscall.Getpgrp())
	}
	if !LiveMembers(syscall.Getpgrp()) {
		t.Error("LiveMembers of this process's group = false")
	}
	// The state letter moves between running and sleeping from one read
	// to the next; the rest does not.
	if s, err := ReadStat(os.Getpid()); err != nil || s.Pid != me.Pid || s.PPid != me.PPid || s.Pgrp != me.Pgrp || s.Dead() {
		t.Errorf("ReadStat = %+v, %v; want %+v (any live state)", s, err, me)
	}
	if ps, err := Processes(func(s Stat) bool { return s.Pid == os.Getpid() }); err != nil || len(ps) != 0 {
		t.Errorf("Processes lists this process: %+v, %v", ps, err)
	}
}
