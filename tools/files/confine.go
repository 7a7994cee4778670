package files

import (
	"errors"
	"fmt"
	"io/fs"
	"path"
	"strings"
	"sync"

	"golang.org/x/sys/unix"
)

// Sentinel errors, matched with errors.Is. Every refusal is a *PathError
// wrapping one of them and naming the path and the rule.
var (
	// ErrRefused marks a path refused by a confinement rule: it leaves the
	// workspace, goes through a /proc magic link, holds a NUL byte, names a
	// hard-linked file, a protected path, or (for writes) a symlink.
	ErrRefused = errors.New("files: path refused")
	// ErrNotRegular marks a path that is not a regular file (a directory,
	// device, FIFO or socket) where one is needed, or not a directory where
	// one is needed.
	ErrNotRegular = errors.New("files: wrong file type")
	// ErrBinary marks a file that looks binary (a NUL byte or invalid UTF-8
	// near the start).
	ErrBinary = errors.New("files: binary file")
	// ErrTooLarge marks a file or content above a configured limit.
	ErrTooLarge = errors.New("files: too large")
	// ErrStale marks an edit or write whose expected revision is not the
	// file's current revision.
	ErrStale = errors.New("files: stale revision")
	// ErrNoMatch marks an edit whose old text does not occur in the file.
	ErrNoMatch = errors.New("files: old text not found")
	// ErrAmbiguous marks an edit whose old text occurs more than once.
	ErrAmbiguous = errors.New("files: old text is ambiguous")
)

// Rule names used in PathError.Rule.
const (
	RuleNUL       = "no-nul"       // the path holds a NUL byte
	RuleParent    = "no-parent"    // the path has a ".." component
	RuleAbsolute  = "inside-only"  // an absolute path outside the workspace
	RuleEscape    = "beneath-only" // resolution left the workspace (symlink or race)
	RuleMagicLink = "no-magiclink" // a /proc magic link or a symlink loop
	RuleHardlink  = "single-link"  // the file has more than one hard link
	RuleSymlink   = "no-symlink"   // write or edit of a name that is a symlink
	RuleProtected = "protected"    // a protected path (Config.Protected)
	RuleTooLong   = "max-length"   // the path is longer than MaxPathBytes
)

// MaxPathBytes is the longest path accepted.
const MaxPathBytes = 4096

// PathError is a failed operation on one path. Its message names the
// operation, the path as given and the reason; Rule names the confinement
// rule for refusals.
type PathError struct {
	Op     string // tool name, e.g. "files.read"
	Path   string // the path as the caller gave it
	Rule   string // confinement rule, "" when the error is not a refusal
	Reason string
	Err    error
}

func (e *PathError) Error() string {
	if e.Rule != "" {
		return fmt.Sprintf("%s %q: refused (rule %s): %s", e.Op, e.Path, e.Rule, e.Reason)
	}
	return fmt.Sprintf("%s %q: %s", e.Op, e.Path, e.Reason)
}

func (e *PathError) Unwrap() error { return e.Err }

func refuse(op, p, rule, reason string) *PathError {
	return &PathError{Op: op, Path: p, Rule: rule, Reason: reason, Err: ErrRefused}
}

// cleanPath turns a caller's path into a clean slash-separated path relative
// to workspace ("." for the workspace itself). It refuses NUL bytes, ".."
// components and absolute paths outside workspace. It is purely lexical: the
// kernel enforces the rest when the path is opened beneath the workspace.
func cleanPath(workspace, p string) (string, error) {
	if strings.IndexByte(p, 0) >= 0 {
		return "", refuse("", p, RuleNUL, "the path contains a NUL byte")
	}
	if len(p) > MaxPathBytes {
		return "", refuse("", p, RuleTooLong, fmt.Sprintf("the path is %d bytes; at most %d are allowed", len(p), MaxPathBytes))
	}
	for _, c := range strings.Split(p, "/") {
		if c == ".." {
			return "", refuse("", p, RuleParent, `".." components are not allowed; give a path inside the workspace`)
		}
	}
	if strings.HasPrefix(p, "/") {
		ws := path.Clean(workspace)
		cp := path.Clean(p)
		switch {
		case cp == ws:
			return ".", nil
		case ws == "/":
			p = cp[1:]
		case strings.HasPrefix(cp, ws+"/"):
			p = cp[len(ws)+1:]
		default:
			return "", refuse("", p, RuleAbsolute, fmt.Sprintf("absolute paths must be inside the workspace %s; use a path relative to it", ws))
		}
	}
	var parts []string
	for _, c := range strings.Split(p, "/") {
		if c == "" || c == "." {
			continue
		}
		parts = append(parts, c)
	}
	if len(parts) == 0 {
		return ".", nil
	}
	return strings.Join(parts, "/"), nil
}

// hasOpenat2 reports whether openat2(2) with RESOLVE_BENEATH works here. It
// is probed once.
var hasOpenat2 = sync.OnceValue(func() bool {
	fd, err := unix.Openat2(unix.AT_FDCWD, ".", &unix.OpenHow{
		Flags:   unix.O_PATH | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_MAGICLINKS,
	})
	if err != nil {
		return false
	}
	unix.Close(fd)
	return true
})

// root is the workspace of one call, held open as a directory descriptor.
// Every path is opened relative to it so that nothing outside can be
// reached, whatever the path string says and whatever changes on disk
// while it is resolved.
type root struct {
	fd   int
	dir  string
	id   fileID
	walk bool // resolve with openat per component instead of openat2
}

type fileID struct{ dev, ino uint64 }

func idOf(st *unix.Stat_t) fileID { return fileID{uint64(st.Dev), uint64(st.Ino)} }

func openRoot(workspace string, walk bool) (*root, error) {
	if workspace == "" || !path.IsAbs(workspace) {
		return nil, fmt.Errorf("files: workspace %q: want an absolute folder path", workspace)
	}
	fd, err := unix.Open(workspace, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("files: open workspace %s: %w", workspace, err)
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("files: stat workspace %s: %w", workspace, err)
	}
	return &root{fd: fd, dir: path.Clean(workspace), id: idOf(&st), walk: walk || !hasOpenat2()}, nil
}

func (r *root) close() { unix.Close(r.fd) }

// open opens rel (a cleanPath result) beneath the workspace. Symlinks are
// followed only while they stay beneath it; absolute symlinks, ".." above
// the workspace and /proc magic links fail (EXDEV, ELOOP).
func (r *root) open(rel string, flags int, mode uint32) (int, error) {
	if r.walk {
		return r.walkOpen(rel, flags, mode)
	}
	how := unix.OpenHow{
		Flags:   uint64(flags | unix.O_CLOEXEC),
		Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_MAGICLINKS,
	}
	if flags&unix.O_CREAT != 0 {
		how.Mode = uint64(mode)
	}
	for tries := 0; ; tries++ {
		fd, err := unix.Openat2(r.fd, rel, &how)
		// EAGAIN: the kernel saw a rename or mount race during resolution
		// and refused to guess; try again a few times.
		if (err == unix.EAGAIN && tries < 32) || err == unix.EINTR {
			continue
		}
		return fd, err
	}
}

// maxSymlinks bounds symlink expansions in one walkOpen, like the kernel's
// limit of 40.
const maxSymlinks = 40

// walkOpen is the fallback for kernels without openat2: it resolves rel one
// component at a time with O_NOFOLLOW, expands relative symlinks itself,
// keeps a stack of directory descriptors for "..", and refuses absolute
// symlinks and any ".." above the workspace. It never lets the kernel follow
// a symlink, so a symlink swapped in during resolution cannot lead out.
// (Unlike openat2 it cannot notice a directory being moved out of the
// workspace while it is being walked.)
func (r *root) walkOpen(rel string, flags int, mode uint32) (int, error) {
	stack := []int{r.fd}
	defer func() {
		for _, fd := range stack[1:] {
			unix.Close(fd)
		}
	}()
	comps := splitComps(rel)
	links := 0
	for len(comps) > 0 {
		c := comps[0]
		comps = comps[1:]
		switch c {
		case "", ".":
			continue
		case "..":
			if len(stack) == 1 {
				return -1, unix.EXDEV
			}
			unix.Close(stack[len(stack)-1])
			stack = stack[:len(stack)-1]
			continue
		}
		cur := stack[len(stack)-1]
		if len(comps) == 0 {
			fd, err := unix.Openat(cur, c, flags|unix.O_NOFOLLOW|unix.O_CLOEXEC, mode)
			if err == nil && flags&unix.O_PATH == 0 {
				return fd, nil
			}
			if err == nil {
				// O_PATH|O_NOFOLLOW opens a symlink itself.
				var st unix.Stat_t
				if err := unix.Fstat(fd, &st); err != nil {
					unix.Close(fd)
					return -1, err
				}
				if st.Mode&unix.S_IFMT != unix.S_IFLNK {
					return fd, nil
				}
				unix.Close(fd)
			} else if !isSymlinkAt(cur, c) {
				return -1, err
			}
		} else {
			fd, err := unix.Openat(cur, c, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
			if err != nil {
				return -1, err
			}
			var st unix.Stat_t
			if err := unix.Fstat(fd, &st); err != nil {
				unix.Close(fd)
				return -1, err
			}
			switch st.Mode & unix.S_IFMT {
			case unix.S_IFDIR:
				stack = append(stack, fd)
				continue
			case unix.S_IFLNK:
				unix.Close(fd)
			default:
				unix.Close(fd)
				return -1, unix.ENOTDIR
			}
		}
		// c is a symlink: splice its target into the remaining path. In
		// procfs a symlink may be a magic link ("fd/0", "root") whose text
		// is not where it leads: refuse them all.
		links++
		if links > maxSymlinks || onProcfs(cur) {
			return -1, unix.ELOOP
		}
		target, err := readlinkAt(cur, c)
		if err != nil {
			return -1, err
		}
		if strings.HasPrefix(target, "/") {
			return -1, unix.EXDEV
		}
		comps = append(splitComps(target), comps...)
	}
	// The path ended at a directory on the stack ("." or "a/..").
	return unix.Openat(stack[len(stack)-1], ".", flags|unix.O_CLOEXEC, mode)
}

func splitComps(p string) []string {
	var out []string
	for _, c := range strings.Split(p, "/") {
		if c != "" && c != "." {
			out = append(out, c)
		}
	}
	return out
}

func onProcfs(dirfd int) bool {
	var sfs unix.Statfs_t
	return unix.Fstatfs(dirfd, &sfs) != nil || sfs.Type == unix.PROC_SUPER_MAGIC
}

func isSymlinkAt(dirfd int, name string) bool {
	var st unix.Stat_t
	return unix.Fstatat(dirfd, name, &st, unix.AT_SYMLINK_NOFOLLOW) == nil && st.Mode&unix.S_IFMT == unix.S_IFLNK
}

func readlinkAt(dirfd int, name string) (string, error) {
	for size := 256; size <= 1<<16; size *= 4 {
		buf := make([]byte, size)
		n, err := unix.Readlinkat(dirfd, name, buf)
		if err != nil {
			return "", err
		}
		if n < size {
			return string(buf[:n]), nil
		}
	}
	return "", unix.ENAMETOOLONG
}

// pathErr turns an error from resolving or opening a path into a PathError
// that names the rule it broke, or the plain failure.
func pathErr(op, p string, err error) error {
	var pe *PathError
	if errors.As(err, &pe) {
		pe.Op, pe.Path = op, p
		return pe
	}
	switch {
	case errors.Is(err, unix.EXDEV):
		return refuse(op, p, RuleEscape, "it resolves outside the workspace (through a symlink, or the tree changed while it was resolved)")
	case errors.Is(err, unix.ELOOP):
		return refuse(op, p, RuleMagicLink, "it goes through a /proc magic link, a symlink loop or too many symlinks")
	case errors.Is(err, unix.ENOENT):
		return &PathError{Op: op, Path: p, Reason: "no such file or directory", Err: fs.ErrNotExist}
	case errors.Is(err, unix.ENOTDIR):
		return &PathError{Op: op, Path: p, Reason: "a component of the path is not a directory", Err: ErrNotRegular}
	case errors.Is(err, unix.EISDIR):
		return &PathError{Op: op, Path: p, Reason: "is a directory", Err: ErrNotRegular}
	case errors.Is(err, unix.ENAMETOOLONG):
		return refuse(op, p, RuleTooLong, "a name in the path is too long")
	case errors.Is(err, unix.EACCES), errors.Is(err, unix.EPERM):
		return &PathError{Op: op, Path: p, Reason: "permission denied", Err: fs.ErrPermission}
	}
	return &PathError{Op: op, Path: p, Reason: err.Error(), Err: err}
}

// resolve validates p for op and returns its clean relative form.
func (r *root) resolve(op, p string) (string, error) {
	rel, err := cleanPath(r.dir, p)
	if err != nil {
		return "", pathErr(op, p, err)
	}
	return rel, nil
}

func fileType(mode uint32) string {
	switch mode & unix.S_IFMT {
	case unix.S_IFREG:
		return "file"
	case unix.S_IFDIR:
		return "dir"
	case unix.S_IFLNK:
		return "symlink"
	case unix.S_IFIFO:
		return "fifo"
	case unix.S_IFSOCK:
		return "socket"
	case unix.S_IFCHR, unix.S_IFBLK:
		return "device"
	}
	return "other"
}

// openRegular opens rel for reading after checking, without opening it for
// I/O, that it is a regular file (so FIFOs and devices are never opened) and
// has one link (unless hardlinks are allowed). The second open must reach the
// same file or the call is refused as a race.
func (r *root) openRegular(op, p, rel string, allowHardlinks bool) (int, *unix.Stat_t, error) {
	pfd, err := r.open(rel, unix.O_PATH, 0)
	if err != nil {
		return -1, nil, pathErr(op, p, err)
	}
	var st unix.Stat_t
	err = unix.Fstat(pfd, &st)
	unix.Close(pfd)
	if err != nil {
		return -1, nil, pathErr(op, p, err)
	}
	if err := checkRegular(op, p, &st, allowHardlinks); err != nil {
		return -1, nil, err
	}
	fd, err := r.open(rel, unix.O_RDONLY|unix.O_NOCTTY|unix.O_NONBLOCK, 0)
	if err != nil {
		return -1, nil, pathErr(op, p, err)
	}
	var st2 unix.Stat_t
	if err := unix.Fstat(fd, &st2); err != nil {
		unix.Close(fd)
		return -1, nil, pathErr(op, p, err)
	}
	if idOf(&st2) != idOf(&st) {
		unix.Close(fd)
		return -1, nil, refuse(op, p, RuleEscape, "the file was replaced while it was being opened; try again")
	}
	if err := checkRegular(op, p, &st2, allowHardlinks); err != nil {
		unix.Close(fd)
		return -1, nil, err
	}
	return fd, &st2, nil
}

func checkRegular(op, p string, st *unix.Stat_t, allowHardlinks bool) error {
	if t := st.Mode & unix.S_IFMT; t != unix.S_IFREG {
		if t == unix.S_IFDIR {
			return &PathError{Op: op, Path: p, Reason: "is a directory; use files.list", Err: ErrNotRegular}
		}
		return &PathError{Op: op, Path: p, Reason: fmt.Sprintf("is a %s, not a regular file", fileType(st.Mode)), Err: ErrNotRegular}
	}
	if st.Nlink > 1 && !allowHardlinks {
		return refuse(op, p, RuleHardlink, fmt.Sprintf("the file has %d hard links; another name of it may be outside the workspace", st.Nlink))
	}
	return nil
}
