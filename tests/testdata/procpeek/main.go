// Command procpeek looks for secrets everywhere a tool process could read
// them: the environment, command line and memory of every process it can
// see in /proc, and every file descriptor it inherited. It prints what it
// found that starts with the prefix given as its argument and goes on
// with at least 24 of [a-z0-9-] (at most 20 findings),
// the descriptors its parent (the shell that runs it: run it as
// `procpeek PREFIX; exit`) inherited, and what it could read.
package main

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
)

const maxFindings = 20

var (
	prefix   []byte
	findings int
)

func find(where string, b []byte) {
	for i := 0; findings < maxFindings; {
		j := bytes.Index(b[i:], prefix)
		if j < 0 {
			return
		}
		start := i + j
		i = start + len(prefix)
		// A secret is the prefix and at least 24 of [a-z0-9-]; the
		// prefix alone (as on this program's command line) is not one.
		n := 0
		for k := i; k < len(b) && n < 24 && (b[k] == '-' || ('a' <= b[k] && b[k] <= 'z') || ('0' <= b[k] && b[k] <= '9')); k++ {
			n++
		}
		if n < 24 {
			continue
		}
		end := min(len(b), start+64)
		fmt.Printf("FOUND %s %q\n", where, b[start:end])
		findings++
	}
}

func main() {
	if len(os.Args) != 2 || os.Args[1] == "" {
		fmt.Fprintln(os.Stderr, "usage: procpeek PREFIX")
		os.Exit(2)
	}
	prefix = []byte(os.Args[1])
	self := os.Getpid()

	// The descriptors its parent (the shell that runs it) inherited; this
	// program's own include those its runtime opened.
	fdDir := "/proc/" + strconv.Itoa(os.Getppid()) + "/fd/"
	d, err := os.Open(fdDir)
	if err != nil {
		fmt.Println("ERROR", err)
		os.Exit(1)
	}
	names, _ := d.Readdirnames(-1)
	d.Close()
	slices.SortFunc(names, func(a, b string) int { x, _ := strconv.Atoi(a); y, _ := strconv.Atoi(b); return x - y })
	for _, n := range names {
		target, _ := os.Readlink(fdDir + n)
		fmt.Printf("FD %s %s\n", n, target)
		if fi, err := os.Stat(fdDir + n); err == nil && fi.Mode().IsRegular() {
			if b, err := os.ReadFile(fdDir + n); err == nil {
				find("fd "+n+" "+target, b)
			}
		}
	}
	fmt.Printf("FDS %s\n", strings.Join(names, ","))

	var pids, environs, cmdlines, maps int
	var memBytes int64
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self {
			continue
		}
		pids++
		dir := "/proc/" + e.Name() + "/"
		if b, err := os.ReadFile(dir + "environ"); err == nil {
			environs++
			find("environ of "+e.Name(), b)
		}
		if b, err := os.ReadFile(dir + "cmdline"); err == nil {
			cmdlines++
			find("cmdline of "+e.Name(), b)
		}
		n, ok := readMem(dir, "mem of "+e.Name())
		if ok {
			maps++
		}
		memBytes += n
	}
	fmt.Printf("SUMMARY pids=%d environ=%d cmdline=%d maps=%d mem_bytes=%d findings=%d\n", pids, environs, cmdlines, maps, memBytes, findings)
}

// readMem reads every readable mapping of a process through its mem file
// and reports how many bytes it read and whether its maps could be read.
func readMem(dir, where string) (int64, bool) {
	mf, err := os.Open(dir + "maps")
	if err != nil {
		return 0, false
	}
	defer mf.Close()
	mem, err := os.Open(dir + "mem")
	if err != nil {
		return 0, true
	}
	defer mem.Close()
	var total int64
	sc := bufio.NewScanner(mf)
	buf := make([]byte, 1<<20)
	for sc.Scan() && findings < maxFindings {
		f := strings.Fields(sc.Text())
		if len(f) < 2 || f[1][0] != 'r' || (len(f) > 5 && f[5] == "[vvar]") {
			continue
		}
		lo, hi, ok := strings.Cut(f[0], "-")
		if !ok {
			continue
		}
		start, err1 := strconv.ParseUint(lo, 16, 64)
		end, err2 := strconv.ParseUint(hi, 16, 64)
		if err1 != nil || err2 != nil {
			continue
		}
		for off := start; off < end; {
			n, err := mem.ReadAt(buf[:min(uint64(len(buf)), end-off)], int64(off))
			if n > 0 {
				total += int64(n)
				// A secret split across two reads is missed; the reads
				// overlap by the prefix's length plus the 64 bytes shown
				// to keep that from happening.
				find(where, buf[:n])
			}
			if err != nil || n == 0 {
				break
			}
			step := uint64(n)
			if off+step < end && step > uint64(len(prefix)+64) {
				step -= uint64(len(prefix) + 64)
			}
			off += step
		}
	}
	return total, true
}
