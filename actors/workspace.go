package actors

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"

	"lemo/internal/folders"
)

// ErrPermission: the caller may not do this (for example, name a
// workspace outside what the daemon grants it). The message says what is
// accepted.
var ErrPermission = errors.New("permission denied")

// OperatorGrant is the owner of a WorkspaceGrant that applies to operator
// callers (as "*" makes an operator in a tokens file).
const OperatorGrant = "*"

// WorkspaceGrant lets callers name a Task's workspace in Root or in a
// folder under it: the callers of owner Owner, or operator callers when
// Owner is OperatorGrant.
type WorkspaceGrant struct {
	Owner string
	Root  string
}

// WorkspacePolicy decides where a caller may put a Task's workspace. The
// daemon gives each Task a folder of its own under Root when the request
// names none; a request that names one is decided by Allow. Every path is
// absolute, clean and resolved (no symlinks), so that a decision about a
// path is a decision about the folder it names.
type WorkspacePolicy struct {
	// Data is the daemon's data folder (its store and token); "" when the
	// daemon has none (tests).
	Data string
	// Root is the daemon's workspace root, which holds the Tasks' own
	// folders; "" when the daemon has none.
	Root string
	// Grants are the roots callers may name workspaces under.
	Grants []WorkspaceGrant
}

// Allow decides whether c may name path (absolute, clean, its symlinks
// resolved) as a Task's workspace. It refuses the data folder, a folder
// inside it or one that contains it; the workspace root, a Task's folder
// in it or a folder that contains it; and anything that is not in a root
// granted to the caller. The error wraps ErrPermission and names the rule
// that refused the path and what is accepted.
func (p WorkspacePolicy) Allow(c Caller, path string) error {
	if rel := folders.Relation(path, p.Data); rel != "" {
		what := rel + " the daemon's data folder"
		return fmt.Errorf("%w: workspace %s %s (its store and tokens): a Task never works there; leave the workspace empty for a folder of its own", ErrPermission, path, what)
	}
	if rel := folders.Relation(path, p.Root); rel != "" {
		what := "is the daemon's workspace root"
		switch rel {
		case "is inside":
			what = "is inside the daemon's workspace root (another Task's folder)"
		case "contains":
			what = "contains the daemon's workspace root (every Task's folder)"
		}
		return fmt.Errorf("%w: workspace %s %s: leave the workspace empty and the daemon makes the Task a folder of its own there", ErrPermission, path, what)
	}
	var mine []string
	for _, g := range p.Grants {
		if g.Owner != c.Owner && (g.Owner != OperatorGrant || !c.Operator) {
			continue
		}
		if folders.Within(path, g.Root) {
			return nil
		}
		mine = append(mine, g.Root)
	}
	who := "owner " + c.Owner
	if c.Operator {
		who += " or to operators"
	}
	if len(mine) == 0 {
		return fmt.Errorf("%w: workspace %s: no folder is granted to %s (config workspaces.grants); leave the workspace empty for a folder of its own", ErrPermission, path, who)
	}
	return fmt.Errorf("%w: workspace %s is under no folder granted to %s: want %s or a folder under one of them (config workspaces.grants), or leave it empty for a folder of its own", ErrPermission, path, who, strings.Join(mine, ", "))
}

// InUse decides whether a Task may still use its workspace for a tool
// call, given where the recorded workspace leads now (path, resolved). A
// folder can be replaced by a symlink after the Task was created; so
// anything that now is, is inside or contains the data folder or the
// workspace root is refused, except the Task's own folder (the root's
// folder named by taskID). The error wraps ErrPermission.
func (p WorkspacePolicy) InUse(taskID, path string) error {
	if p.Root != "" && path == filepath.Join(p.Root, taskID) {
		return nil
	}
	if rel := folders.Relation(path, p.Data); rel != "" {
		return fmt.Errorf("%w: the Task's workspace now leads to %s, which %s the daemon's data folder (a folder was replaced, by a symlink for example, since the Task was created): the call does not run", ErrPermission, path, rel)
	}
	if rel := folders.Relation(path, p.Root); rel != "" {
		return fmt.Errorf("%w: the Task's workspace now leads to %s, which %s the daemon's workspace root (a folder was replaced, by a symlink for example, since the Task was created): the call does not run", ErrPermission, path, rel)
	}
	return nil
}

// checkInUse resolves a Task's recorded workspace and decides by InUse. A
// workspace that no longer resolves is left to the tool, which fails when
// it needs the folder.
func (p WorkspacePolicy) checkInUse(taskID, workspace string) error {
	if workspace == "" || (p.Data == "" && p.Root == "") {
		return nil
	}
	real, err := resolveFolder(workspace)
	if err != nil {
		return nil
	}
	return p.InUse(taskID, real)
}

// checkGrant reports why a grant cannot be used (a root overlapping the
// data folder or the workspace root), or nil.
func (p WorkspacePolicy) checkGrant(g WorkspaceGrant) error {
	if rel := folders.Relation(g.Root, p.Data); rel != "" {
		return fmt.Errorf("workspace grant %s=%s: the folder %s the daemon's data folder %s: grant folders apart from it", g.Owner, g.Root, rel, p.Data)
	}
	if rel := folders.Relation(g.Root, p.Root); rel != "" {
		return fmt.Errorf("workspace grant %s=%s: the folder %s the daemon's workspace root %s: grant folders apart from it", g.Owner, g.Root, rel, p.Root)
	}
	return nil
}

// newWorkspacePolicy resolves the data folder, the workspace root (made
// when missing) and the granted roots, and checks the grants.
func newWorkspacePolicy(data, root string, grants []WorkspaceGrant) (WorkspacePolicy, error) {
	var p WorkspacePolicy
	var err error
	if data != "" {
		if p.Data, err = resolveFolder(data); err != nil {
			return p, fmt.Errorf("data folder: %w", err)
		}
	}
	if root != "" {
		if err := os.MkdirAll(root, 0o700); err != nil {
			return p, fmt.Errorf("workspace root: %w", err)
		}
		if p.Root, err = resolveFolder(root); err != nil {
			return p, fmt.Errorf("workspace root: %w", err)
		}
	}
	var problems []string
	for _, g := range grants {
		if g.Owner == "" {
			problems = append(problems, fmt.Sprintf("workspace grant of %s: no owner (want an owner, or %s for operators)", g.Root, OperatorGrant))
			continue
		}
		if !filepath.IsAbs(g.Root) {
			problems = append(problems, fmt.Sprintf("workspace grant %s=%s: want an absolute folder", g.Owner, g.Root))
			continue
		}
		r, err := resolveFolder(g.Root)
		if err != nil {
			problems = append(problems, fmt.Sprintf("workspace grant %s=%s: %v", g.Owner, g.Root, err))
			continue
		}
		rg := WorkspaceGrant{Owner: g.Owner, Root: r}
		if err := p.checkGrant(rg); err != nil {
			problems = append(problems, err.Error())
			continue
		}
		p.Grants = append(p.Grants, rg)
	}
	if len(problems) > 0 {
		return p, errors.New(strings.Join(problems, "; "))
	}
	return p, nil
}

// errChanged: a folder changed (a symlink swapped, a folder moved) while
// it was resolved.
var errChanged = errors.New("the folder changed while it was checked (a symlink or folder was replaced); try again")

// resolveFolder returns the absolute path, without symlinks, of the folder
// p names. The folder is opened first and the path is the one the kernel
// reports for what was opened (/proc/self/fd), checked to name that same
// folder still; so a symlink swapped between the resolution and the check
// cannot make the check judge one folder and the Task use another. Without
// /proc it resolves with filepath.EvalSymlinks and checks the result names
// the opened folder.
func resolveFolder(p string) (string, error) {
	fd, err := unix.Open(p, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		if errors.Is(err, unix.ENOTDIR) {
			return "", fmt.Errorf("%s is not a folder", p)
		}
		return "", fmt.Errorf("%s: want an existing folder: %w", p, err)
	}
	defer unix.Close(fd)
	var opened unix.Stat_t
	if err := unix.Fstat(fd, &opened); err != nil {
		return "", fmt.Errorf("%s: %w", p, err)
	}
	real, err := os.Readlink(fmt.Sprintf("/proc/self/fd/%d", fd))
	if err != nil || !filepath.IsAbs(real) {
		if real, err = filepath.EvalSymlinks(p); err != nil {
			return "", fmt.Errorf("%s: %w", p, err)
		}
		if real, err = filepath.Abs(real); err != nil {
			return "", fmt.Errorf("%s: %w", p, err)
		}
	}
	var now unix.Stat_t
	if err := unix.Stat(real, &now); err != nil || now.Dev != opened.Dev || now.Ino != opened.Ino {
		return "", fmt.Errorf("%s: %w", p, errChanged)
	}
	return filepath.Clean(real), nil
}
