package isolation

import (
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// envHardenHelper makes the test binary open a descriptor without
// close-on-exec, call Harden (unless the value is "off"), report whether
// it is dumpable and list the descriptors a child inherits.
const envHardenHelper = "ISOLATION_TEST_HARDEN"

func runHardenHelper(mode string) {
	fd, err := syscall.Open("/dev/null", syscall.O_RDONLY, 0) // no O_CLOEXEC
	if err != nil {
		fmt.Println("open:", err)
		os.Exit(2)
	}
	if mode != "off" {
		if err := Harden(); err != nil {
			fmt.Println(err)
			os.Exit(2)
		}
	}
	d, err := Dumpable()
	if err != nil {
		fmt.Println(err)
		os.Exit(2)
	}
	// A child waits on stdin while its descriptors are listed.
	child := exec.Command("/bin/sh", "-c", "read _")
	stdin, err := child.StdinPipe()
	if err == nil {
		err = child.Start()
	}
	if err != nil {
		fmt.Println(err)
		os.Exit(2)
	}
	// Until the child has executed the shell it is a copy of this process
	// with every descriptor, close-on-exec ones too (Go's own exec pipe
	// among them): list them once its command line is the shell's.
	pid := child.Process.Pid
	for deadline := time.Now().Add(10 * time.Second); ; {
		cl, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		if strings.Contains(string(cl), "read _") {
			break
		}
		if time.Now().After(deadline) {
			fmt.Println("the child did not execute the shell")
			os.Exit(2)
		}
		time.Sleep(time.Millisecond) // polling /proc
	}
	entries, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	stdin.Close()
	_ = child.Wait()
	if err != nil {
		fmt.Println(err)
		os.Exit(2)
	}
	var fds []string
	for _, e := range entries {
		fds = append(fds, e.Name())
	}
	out := strings.Join(fds, " ")
	fmt.Printf("opened %d dumpable %v child fds %s\n", fd, d, out)
}

// After Harden the process is not dumpable and a child inherits no
// descriptor above stderr, even one this process opened without
// close-on-exec (as one inherited from its parent would be).
func TestHarden(t *testing.T) {
	for _, mode := range []string{"on", "off"} {
		cmd := exec.Command(os.Args[0], "-test.run", "^$")
		cmd.Env = append(os.Environ(), envHardenHelper+"="+mode)
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("helper %s: %v: %s", mode, err, out)
		}
		var fd int
		var dumpable bool
		var fds string
		if _, err := fmt.Sscanf(string(out), "opened %d dumpable %t child fds", &fd, &dumpable); err != nil {
			t.Fatalf("helper %s: %q: %v", mode, out, err)
		}
		_, fds, _ = strings.Cut(strings.TrimSpace(string(out)), "child fds ")
		inherited := slices.Contains(strings.Fields(fds), fmt.Sprint(fd))
		if mode == "on" && (dumpable || fds != "0 1 2") {
			t.Errorf("after Harden: dumpable %v, a child inherits descriptors %q; want false and 0 1 2", dumpable, fds)
		}
		// Without Harden the same helper shows what it guards against.
		if mode == "off" && (!dumpable || !inherited) {
			t.Errorf("without Harden: dumpable %v, a child inherits %q; want true and descriptor %d among them", dumpable, fds, fd)
		}
	}
}
