package config

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"lemo/internal/folders"
	"lemo/internal/names"
)

// Workspaces configures where Tasks may work. A Task works in a folder of
// its own under the data folder (workspaces/<task id>) unless its request
// names another: one granted here, to the owner whose token creates it (or
// to operator tokens), or a folder under it. The data folder, a folder
// inside it and one that contains it are never granted, and symlinks are
// resolved before any of these checks.
type Workspaces struct {
	Grants []string `yaml:"grants" env:"LEMO_WORKSPACES_GRANTS" help:"folders, besides each Task's own, that requests may name as a workspace (the folder or one under it): OWNER=/absolute/folder for that owner's tokens, *=/absolute/folder for operator tokens; never the data folder, inside it or containing it (comma-separated in the environment); empty: none"`
}

// maxGrants bounds workspaces.grants.
const maxGrants = 256

// Grant is one parsed entry of workspaces.grants.
type Grant struct {
	// Owner is an owner, or "*" for operator tokens.
	Owner string
	// Root is the granted folder, absolute.
	Root string
}

// ParseGrant parses "OWNER=/absolute/folder".
func ParseGrant(s string) (Grant, error) {
	owner, root, ok := strings.Cut(s, "=")
	switch {
	case !ok:
		return Grant{}, fmt.Errorf("%q: want OWNER=/absolute/folder (* as the owner for operator tokens)", s)
	case owner != "*" && !names.Owner(owner):
		return Grant{}, fmt.Errorf("%q: owner %q: want %s, or * for operator tokens", s, owner, names.OwnerForm)
	case !filepath.IsAbs(root):
		return Grant{}, fmt.Errorf("%q: folder %q: want an absolute path", s, root)
	}
	return Grant{Owner: owner, Root: filepath.Clean(root)}, nil
}

// Parsed returns the grants; entries that do not parse are left out
// (Problems reports them).
func (w *Workspaces) Parsed() []Grant {
	var out []Grant
	for _, s := range w.Grants {
		if g, err := ParseGrant(s); err == nil {
			out = append(out, g)
		}
	}
	return out
}

// Problems checks the workspaces keys against the data folder and returns
// every problem, located by position ("workspaces.grants[1]"): an entry
// that does not parse, a folder that does not exist, or one that is, is
// inside or contains the data folder once symlinks are resolved.
func (w *Workspaces) Problems(data string) []error {
	if len(w.Grants) > maxGrants {
		return []error{Problem{Where: "workspaces.grants", What: fmt.Sprintf("%d grants: at most %d are accepted", len(w.Grants), maxGrants)}}
	}
	var ps []error
	realData := resolveLoose(data)
	for i, s := range w.Grants {
		where := fmt.Sprintf("workspaces.grants[%d]", i)
		g, err := ParseGrant(s)
		if err != nil {
			ps = append(ps, Problem{Where: where, What: err.Error()})
			continue
		}
		real, err := filepath.EvalSymlinks(g.Root)
		if err == nil {
			var fi os.FileInfo
			if fi, err = os.Stat(real); err == nil && !fi.IsDir() {
				err = errors.New("not a folder")
			}
		}
		if err != nil {
			ps = append(ps, Problem{Where: where, What: fmt.Sprintf("%q: want an existing folder: %v", s, err)})
			continue
		}
		if rel := folders.Relation(real, realData); rel != "" {
			ps = append(ps, Problem{Where: where, What: fmt.Sprintf("%q: the folder %s the data folder %s (its store and tokens): grant folders apart from it", s, rel, realData)})
		}
	}
	return ps
}

// resolveLoose resolves the symlinks of p's longest existing part (the
// data folder may not exist before the first start).
func resolveLoose(p string) string {
	abs, err := filepath.Abs(p)
	if err != nil {
		return filepath.Clean(p)
	}
	if real, err := filepath.EvalSymlinks(abs); err == nil {
		return real
	}
	parent := filepath.Dir(abs)
	if parent == abs {
		return abs
	}
	return filepath.Join(resolveLoose(parent), filepath.Base(abs))
}
