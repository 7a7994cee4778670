package proc

import (
	"bytes"
	"os"
	"strconv"
	"strings"
)

// The functions in this file are for tests: they prove that nothing a tool
// started outlived it.

// Proc is a process found in /proc by Processes, Survivors or Zombies.
type Proc struct {
	Stat
	// Cmdline is its command line, arguments separated by spaces (empty
	// for a zombie).
	Cmdline string
}

// Processes lists the processes other than this one, in any state, for
// which match reports true (every one when match is nil).
func Processes(match func(Stat) bool) ([]Proc, error) {
	self := os.Getpid()
	var out []Proc
	err := Walk(func(s Stat) bool {
		if s.Pid != self && (match == nil || match(s)) {
			cl, _ := os.ReadFile("/proc/" + strconv.Itoa(s.Pid) + "/cmdline")
			out = append(out, Proc{Stat: s, Cmdline: strings.TrimSpace(string(bytes.ReplaceAll(cl, []byte{0}, []byte{' '})))})
		}
		return true
	})
	return out, err
}

// Survivors lists the live processes (not dead: see Stat.Dead) other than
// this one for which match reports true (every one when match is nil).
func Survivors(match func(Stat) bool) ([]Proc, error) {
	return Processes(func(s Stat) bool { return !s.Dead() && (match == nil || match(s)) })
}

// Zombies lists the zombie children of this process (its own to reap) for
// which match reports true (every one when match is nil).
func Zombies(match func(Stat) bool) ([]Proc, error) {
	self := os.Getpid()
	return Processes(func(s Stat) bool { return s.State == 'Z' && s.PPid == self && (match == nil || match(s)) })
}

// InGroup matches the members of the given process groups.
func InGroup(pgids ...int) func(Stat) bool {
	return func(s Stat) bool {
		for _, g := range pgids {
			if s.Pgrp == g {
				return true
			}
		}
		return false
	}
}

// WithEnv matches the processes whose environment holds the entry kv
// ("NAME=value") exactly (HasEnv).
func WithEnv(kv string) func(Stat) bool {
	return func(s Stat) bool { return HasEnv(s.Pid, kv) }
}

// Mentions reports whether text occurs in the environment or the command
// line (arguments separated by spaces) of process pid (false for one that cannot be read, and for an
// empty text).
func Mentions(pid int, text string) bool {
	if text == "" {
		return false
	}
	dir := "/proc/" + strconv.Itoa(pid) + "/"
	if env, err := os.ReadFile(dir + "environ"); err == nil && bytes.Contains(env, []byte(text)) {
		return true
	}
	cl, err := os.ReadFile(dir + "cmdline")
	return err == nil && bytes.Contains(bytes.ReplaceAll(cl, []byte{0}, []byte{' '}), []byte(text))
}
