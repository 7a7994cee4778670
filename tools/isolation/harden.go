package isolation

import (
	"fmt"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// Harden keeps the daemon's secrets from the processes it starts, in the
// daemon's own process: it makes the process non-dumpable (PR_SET_DUMPABLE
// 0: the kernel then lets only root, or a process with CAP_SYS_PTRACE,
// read its /proc environ, memory, maps and descriptors, or ptrace it), and
// marks every descriptor above stderr close-on-exec, so that none it
// inherited from whatever started it reaches a child (descriptors Go opens
// are close-on-exec already). Call it first thing in the daemon.
func Harden() error {
	if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
		return fmt.Errorf("isolation: prctl(PR_SET_DUMPABLE, 0): %w", err)
	}
	return closeOnExecAbove(2)
}

// Dumpable reports whether this process is dumpable (see Harden).
func Dumpable() (bool, error) {
	v, err := unix.PrctlRetInt(unix.PR_GET_DUMPABLE, 0, 0, 0, 0)
	return v != 0, err
}

// closeOnExecAbove marks the descriptors above fd close-on-exec:
// close_range(2) where the kernel has it (5.11), else one by one from
// /proc/self/fd.
func closeOnExecAbove(fd int) error {
	if err := unix.CloseRange(uint(fd+1), ^uint(0), unix.CLOSE_RANGE_CLOEXEC); err == nil {
		return nil
	}
	d, err := os.Open("/proc/self/fd")
	if err != nil {
		return fmt.Errorf("isolation: list descriptors: %w", err)
	}
	names, err := d.Readdirnames(-1)
	d.Close()
	if err != nil {
		return fmt.Errorf("isolation: list descriptors: %w", err)
	}
	for _, n := range names {
		i, err := strconv.Atoi(n)
		if err != nil || i <= fd {
			continue
		}
		if _, err := unix.FcntlInt(uintptr(i), unix.F_SETFD, unix.FD_CLOEXEC); err != nil && err != unix.EBADF {
			return fmt.Errorf("isolation: close-on-exec descriptor %d: %w", i, err)
		}
	}
	return nil
}
