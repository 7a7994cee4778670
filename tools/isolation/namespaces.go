package isolation

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// InitArg is the first argument with which an executable runs as the init
// of a tool process's namespaces: the daemon's main calls Main when it
// sees it, before anything else.
const InitArg = "__lemo-namespace-init"

// probeArg makes Main check that it runs as the init of new namespaces
// and exit.
const probeArg = "--probe"

// Namespaces starts tool processes in PID and mount namespaces of their
// own (and a user namespace that maps the daemon's user to itself when
// the daemon is not root), through a small init: the executable Init run
// with InitArg. Build it with Detect.
type Namespaces struct {
	// Init is the executable that runs as the namespaces' init: the
	// daemon's own binary, whose main calls Main.
	Init string
	// User says that a user namespace is created too (the daemon is not
	// root; its user and group map to themselves).
	User     bool
	uid, gid int
	// mnt is the daemon's mount namespace (/proc/self/ns/mnt): the init
	// refuses to touch the mounts in it.
	mnt string
	// Hide are folders (absolute, symbolic links resolved) the command
	// must not see: each is covered by an empty read-only folder, except
	// for the command's own working folder and Keep, which are mounted
	// back in their place (the daemon's data folder holds the token and
	// every Task's workspace).
	Hide []string
	// Keep are folders under Hide the command still needs (besides its
	// working folder).
	Keep []string
}

// With returns a copy of n that hides hide except keep (see Hide).
func (n *Namespaces) With(hide, keep []string) *Namespaces {
	c := *n
	c.Hide, c.Keep = append([]string(nil), hide...), append([]string(nil), keep...)
	return &c
}

// hideSpec is the init's argument that lists Hide and Keep ("-": none).
func (n *Namespaces) hideSpec() string {
	if len(n.Hide) == 0 {
		return "-"
	}
	b, _ := json.Marshal(hideSpec{Hide: n.Hide, Keep: n.Keep})
	return string(b)
}

type hideSpec struct {
	Hide []string `json:"hide"`
	Keep []string `json:"keep"`
}

// hidePaths covers each folder of spec.Hide with an empty read-only tmpfs
// and mounts back (bind) the working folder and spec.Keep where they are
// under one, then enters the working folder again through the new mounts
// (so that ".." no longer leads into what is hidden).
func hidePaths(spec string) error {
	if spec == "-" {
		return nil
	}
	var hs hideSpec
	if err := json.Unmarshal([]byte(spec), &hs); err != nil {
		return fmt.Errorf("hide %q: %w", spec, err)
	}
	cwd, err := os.Getwd()
	if err != nil {
		return err
	}
	under := func(p, dir string) bool { return p == dir || strings.HasPrefix(p, strings.TrimSuffix(dir, "/")+"/") }
	var keeps []string
	for _, k := range append(hs.Keep, cwd) {
		for _, h := range hs.Hide {
			if under(k, h) && k != h {
				keeps = append(keeps, filepath.Clean(k))
				break
			}
		}
	}
	// A kept folder inside another is kept with it.
	slices.Sort(keeps)
	keeps = slices.Compact(keeps)
	keeps = slices.DeleteFunc(keeps, func(k string) bool {
		for _, o := range keeps {
			if o != k && under(k, o) {
				return true
			}
		}
		return false
	})
	fds := make([]int, 0, len(keeps))
	var found []string
	for _, k := range keeps {
		fd, err := unix.Open(k, unix.O_PATH|unix.O_CLOEXEC, 0)
		if errors.Is(err, unix.ENOENT) {
			continue // nothing to keep
		}
		if err != nil {
			return fmt.Errorf("keep %s: %w", k, err)
		}
		defer unix.Close(fd)
		fds, found = append(fds, fd), append(found, k)
	}
	keeps = found
	for _, h := range hs.Hide {
		if err := unix.Mount("tmpfs", h, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "mode=0755,size=64k"); err != nil {
			return fmt.Errorf("hide %s: %w", h, err)
		}
	}
	for i, k := range keeps {
		if err := os.MkdirAll(k, 0o755); err != nil {
			return fmt.Errorf("keep %s: %w", k, err)
		}
		if err := unix.Mount("/proc/self/fd/"+strconv.Itoa(fds[i]), k, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
			return fmt.Errorf("keep %s: %w", k, err)
		}
	}
	for _, h := range hs.Hide {
		if err := unix.Mount("", h, "", unix.MS_REMOUNT|unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV, ""); err != nil {
			return fmt.Errorf("hide %s read-only: %w", h, err)
		}
	}
	return os.Chdir(cwd)
}

// Detect reports whether tool processes can run in namespaces of their
// own here, by starting init (the daemon's own executable) as such an
// init once: the Namespaces to use, or nil and why not (the kernel or its
// configuration refuses unprivileged user namespaces, a seccomp or
// AppArmor profile forbids them, /proc cannot be mounted, ...).
func Detect(init string) (*Namespaces, error) {
	mnt, err := os.Readlink("/proc/self/ns/mnt")
	if err != nil {
		return nil, fmt.Errorf("isolation: this process's mount namespace: %w", err)
	}
	n := &Namespaces{Init: init, User: os.Getuid() != 0, uid: os.Getuid(), gid: os.Getgid(), mnt: mnt}
	cmd := exec.Command(init, InitArg, mnt, n.ids(), "-", probeArg)
	cmd.SysProcAttr = n.sysProcAttr()
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("isolation: namespaces for tool processes (%s): %w: %s", n.kind(), err, strings.TrimSpace(out.String()))
	}
	return n, nil
}

// String says which namespaces tool processes get.
func (n *Namespaces) String() string { return n.kind() }

func (n *Namespaces) kind() string {
	if n.User {
		return "user, pid and mount namespaces"
	}
	return "pid and mount namespaces"
}

func (n *Namespaces) sysProcAttr() *syscall.SysProcAttr {
	a := &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWPID | syscall.CLONE_NEWNS}
	if n.User {
		a.Cloneflags |= syscall.CLONE_NEWUSER
		// The init keeps these capabilities of its user namespace across
		// its exec (it is not root there) to map its user and group and
		// mount /proc; it drops them before starting the command. It maps
		// itself: the daemon cannot write a child's uid_map, since the
		// child of a non-dumpable process is not dumpable either until it
		// execs (see Harden).
		a.AmbientCaps = []uintptr{unix.CAP_SYS_ADMIN, unix.CAP_SETUID, unix.CAP_SETGID}
	}
	return a
}

// ids is the init's argument that says which user and group to map to
// themselves ("uid:gid"), or "-" for none.
func (n *Namespaces) ids() string {
	if !n.User {
		return "-"
	}
	return strconv.Itoa(n.uid) + ":" + strconv.Itoa(n.gid)
}

// mapIDs maps the user and group ids ("uid:gid") of the init's user
// namespace to themselves ("-": there is none).
func mapIDs(ids string) error {
	if ids == "-" {
		return nil
	}
	uid, gid, ok := strings.Cut(ids, ":")
	if _, err := strconv.Atoi(uid); err != nil || !ok {
		return fmt.Errorf("ids %q: want uid:gid", ids)
	}
	if _, err := strconv.Atoi(gid); err != nil {
		return fmt.Errorf("ids %q: want uid:gid", ids)
	}
	for _, w := range []struct{ file, text string }{
		{"/proc/self/setgroups", "deny"},
		{"/proc/self/uid_map", uid + " " + uid + " 1\n"},
		{"/proc/self/gid_map", gid + " " + gid + " 1\n"},
	} {
		if err := os.WriteFile(w.file, []byte(w.text), 0); err != nil {
			return fmt.Errorf("map the user namespace: %w", err)
		}
	}
	return nil
}

// Wrap changes cmd so that it starts the init in new namespaces, which
// runs what cmd ran and writes how it ended to status (the write end of a
// pipe; it becomes one of cmd's ExtraFiles). cmd keeps its Dir, Env and
// standard streams; its SysProcAttr gets the namespace flags (other
// fields are kept). A cmd whose lookup failed (cmd.Err) is left alone.
func (n *Namespaces) Wrap(cmd *exec.Cmd, status *os.File) {
	if cmd.Err != nil {
		return
	}
	fd := 3 + len(cmd.ExtraFiles)
	cmd.ExtraFiles = append(cmd.ExtraFiles, status)
	args := append([]string{n.Init, InitArg, n.mnt, n.ids(), n.hideSpec(), strconv.Itoa(fd), cmd.Path}, cmd.Args...)
	cmd.Path, cmd.Args = n.Init, args
	a := n.sysProcAttr()
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = a
		return
	}
	cmd.SysProcAttr.Cloneflags |= a.Cloneflags
	cmd.SysProcAttr.AmbientCaps = append(cmd.SysProcAttr.AmbientCaps, a.AmbientCaps...)
}

// ParseStatus reads how the command ended from what the init wrote on
// its status pipe: "exit <code>" or "signal <number>". ok is false when
// the init ended without saying (it was killed).
func ParseStatus(line string) (code int, sig syscall.Signal, ok bool) {
	kind, num, found := strings.Cut(strings.TrimSpace(line), " ")
	v, err := strconv.Atoi(num)
	if !found || err != nil || v < 0 {
		return 0, 0, false
	}
	switch kind {
	case "exit":
		return v, 0, true
	case "signal":
		return -1, syscall.Signal(v), v > 0
	}
	return 0, 0, false
}

// ReadStatus reads the init's status line from r (ParseStatus).
func ReadStatus(r *os.File) (code int, sig syscall.Signal, ok bool) {
	line, err := bufio.NewReader(r).ReadString('\n')
	if err != nil {
		return 0, 0, false
	}
	return ParseStatus(line)
}

// Main runs the init of a tool process's namespaces, with the arguments
// after InitArg: the daemon's mount namespace (the init refuses to run in
// it), the user and group to map in its user namespace ("uid:gid", "-"
// without one), the folders to hide (JSON of Hide and Keep, "-" for none),
// the status descriptor, the command's path and its argv.
// It mounts a private /proc (so the command sees only its own
// namespace's processes), starts the command with its own environment,
// folder and standard streams, reaps every process of the namespace,
// writes how the command ended to the status descriptor as soon as it
// did, and returns once no process is left in the namespace (the kernel
// kills them all when the init ends: SIGKILL to the init is SIGKILL to
// every process of the namespace). It returns the command's exit status
// (128+n for a signal). Call it first in main: os.Exit(Main(args)).
func Main(args []string) int {
	// The init ignores every signal (the group's SIGTERM reaches the
	// command directly); Go's default action would end it, and with it
	// the namespace. Handlers do not survive exec: the command gets the
	// default dispositions.
	sigs := make(chan os.Signal, 64)
	signal.Notify(sigs)
	go func() {
		for range sigs {
		}
	}()
	// Only the first process of a new PID namespace (which Wrap creates
	// with a new mount namespace) may touch the mounts: run any other way,
	// the init would change the caller's.
	if os.Getpid() != 1 {
		fmt.Fprintf(os.Stderr, "lemo namespace init: pid %d, want 1: not started in namespaces of its own (this is the daemon's internal command)\n", os.Getpid())
		return 125
	}
	// The first argument is the daemon's mount namespace, which must not
	// be this one; the second the ids to map.
	if len(args) < 4 {
		fmt.Fprintf(os.Stderr, "lemo namespace init: want the daemon's mount namespace, the ids to map, the folders to hide and more, got %q\n", args)
		return 125
	}
	if own, err := os.Readlink("/proc/self/ns/mnt"); err != nil || own == args[0] {
		fmt.Fprintf(os.Stderr, "lemo namespace init: not started in a mount namespace of its own (%s, %v)\n", own, err)
		return 125
	}
	if err := mapIDs(args[1]); err != nil {
		fmt.Fprintf(os.Stderr, "lemo namespace init: %v\n", err)
		return 125
	}
	hide := args[2]
	args = args[3:]
	if err := mountProc(); err != nil {
		fmt.Fprintf(os.Stderr, "lemo namespace init: %v\n", err)
		return 125
	}
	if err := hidePaths(hide); err != nil {
		fmt.Fprintf(os.Stderr, "lemo namespace init: %v\n", err)
		return 125
	}
	if len(args) == 1 && args[0] == probeArg {
		if b, err := os.ReadFile("/proc/1/cmdline"); err != nil || !bytes.Contains(b, []byte(InitArg)) {
			fmt.Fprintf(os.Stderr, "lemo namespace init: /proc is not the namespace's own (%v)\n", err)
			return 125
		}
		return 0
	}
	if len(args) < 3 {
		fmt.Fprintf(os.Stderr, "lemo namespace init: want the status descriptor, the command's path and its arguments, got %q\n", args)
		return 125
	}
	fd, err := strconv.Atoi(args[0])
	if err != nil || fd < 3 {
		fmt.Fprintf(os.Stderr, "lemo namespace init: status descriptor %q: want a number above 2\n", args[0])
		return 125
	}
	syscall.CloseOnExec(fd)
	status := os.NewFile(uintptr(fd), "status")
	// The command gets no capability (CAP_SYS_ADMIN was raised for the
	// mount only).
	_ = unix.Prctl(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)
	pid, err := syscall.ForkExec(args[1], args[2:], &syscall.ProcAttr{Env: os.Environ(), Files: []uintptr{0, 1, 2}})
	if err != nil {
		fmt.Fprintf(os.Stderr, "lemo: start %s: %v\n", args[1], err)
		fmt.Fprintf(status, "exit 127\n")
		return 127
	}
	// The init holds no end of the command's streams: its reader sees
	// their end when the command's processes are done with them.
	if null, err := os.OpenFile(os.DevNull, os.O_RDWR, 0); err == nil {
		for fd := 0; fd <= 2; fd++ {
			_ = unix.Dup2(int(null.Fd()), fd)
		}
		null.Close()
	}
	code := 0
	for {
		var ws syscall.WaitStatus
		wpid, err := syscall.Wait4(-1, &ws, 0, nil)
		if errors.Is(err, syscall.EINTR) {
			continue
		}
		if err != nil {
			return code // ECHILD: no process is left in the namespace
		}
		if wpid != pid {
			continue
		}
		if ws.Signaled() {
			fmt.Fprintf(status, "signal %d\n", int(ws.Signal()))
			code = 128 + int(ws.Signal())
		} else {
			fmt.Fprintf(status, "exit %d\n", ws.ExitStatus())
			code = ws.ExitStatus()
		}
		status.Close()
	}
}

// mountProc makes the mounts of the new mount namespace private (nothing
// done here reaches the daemon's namespace) and mounts a /proc that shows
// the new PID namespace only.
func mountProc() error {
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("make the mounts private: %w", err)
	}
	if err := unix.Mount("proc", "/proc", "proc", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
		return fmt.Errorf("mount /proc: %w", err)
	}
	return nil
}
