package files

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path"
	"slices"
	"sort"
	"strings"

	"golang.org/x/sys/unix"
)

// errStop ends a walk early without an error.
var errStop = errors.New("stop walk")

// walker visits the tree beneath a folder, depth first in name order. It
// never follows symlinks: children are opened by single names relative to
// their parent's descriptor with O_NOFOLLOW, so the walk stays inside the
// folder it started from.
type walker struct {
	ctx       context.Context
	cfg       *Config
	visited   int
	truncated string // why the walk stopped early, "" when it did not
}

// visit is called for every entry; rel is the entry's path relative to the
// workspace.
type visitFunc func(dirfd int, name, rel string, st *unix.Stat_t) error

func (w *walker) walk(dir *os.File, rel string, depth int, fn visitFunc) error {
	names, complete, err := readNames(w.ctx, dir, w.cfg.MaxDirEntries)
	if err != nil {
		return err
	}
	if !complete {
		w.note(fmt.Sprintf("folder %s has more than %d entries; only the first %d (in directory order) were searched", rel, w.cfg.MaxDirEntries, w.cfg.MaxDirEntries))
	}
	sort.Strings(names)
	dfd := int(dir.Fd())
	for _, name := range names {
		if err := w.ctx.Err(); err != nil {
			return err
		}
		if w.visited >= w.cfg.MaxWalkEntries {
			w.note(fmt.Sprintf("stopped after visiting %d entries (the limit)", w.cfg.MaxWalkEntries))
			return errStop
		}
		w.visited++
		var st unix.Stat_t
		if err := unix.Fstatat(dfd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			continue // removed since it was listed
		}
		child := path.Join(rel, name)
		if err := fn(dfd, name, child, &st); err != nil {
			return err
		}
		if st.Mode&unix.S_IFMT != unix.S_IFDIR || slices.Contains(w.cfg.SkipDirs, name) {
			continue
		}
		if depth+1 > w.cfg.MaxDepth {
			w.note(fmt.Sprintf("folders deeper than %d levels were not searched", w.cfg.MaxDepth))
			continue
		}
		cfd, err := unix.Openat(dfd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != nil {
			continue // replaced by a symlink or removed since the lstat
		}
		cdir := os.NewFile(uintptr(cfd), child)
		err = w.walk(cdir, child, depth+1, fn)
		cdir.Close()
		if err != nil {
			return err
		}
	}
	return nil
}

func (w *walker) note(s string) {
	if w.truncated == "" {
		w.truncated = s
	}
}

// glob is a compiled find pattern: path.Match syntax per segment, "**"
// matching any number of folders. A pattern without "/" matches base names.
type glob struct {
	segs []string
	base bool
}

func compileGlob(pattern string) (*glob, error) {
	if pattern == "" {
		return nil, errors.New("empty pattern")
	}
	if strings.HasPrefix(pattern, "/") {
		return nil, errors.New("patterns are relative to the searched folder; drop the leading /")
	}
	g := &glob{base: !strings.Contains(pattern, "/")}
	for _, s := range strings.Split(pattern, "/") {
		if s == "" {
			continue
		}
		if s != "**" {
			if _, err := path.Match(s, ""); err != nil {
				return nil, fmt.Errorf("bad pattern segment %q: %w", s, err)
			}
		}
		g.segs = append(g.segs, s)
	}
	if len(g.segs) == 0 {
		return nil, errors.New("the pattern has no segments")
	}
	return g, nil
}

// match reports whether rel (relative to the searched folder) matches.
func (g *glob) match(rel string) bool {
	if g.base {
		ok, _ := path.Match(g.segs[0], path.Base(rel))
		return ok
	}
	names := strings.Split(rel, "/")
	// dp[j]: the pattern prefix processed so far matches names[:j].
	dp := make([]bool, len(names)+1)
	dp[0] = true
	for _, p := range g.segs {
		next := make([]bool, len(names)+1)
		for j := 0; j <= len(names); j++ {
			switch {
			case p == "**":
				next[j] = dp[j] || (j > 0 && next[j-1])
			case j > 0 && dp[j-1]:
				ok, _ := path.Match(p, names[j-1])
				next[j] = ok
			}
		}
		dp = next
	}
	return dp[len(names)]
}

type findInput struct {
	Pattern string `json:"pattern"`
	Path    string `json:"path"`
	Type    string `json:"type"`
	Limit   int    `json:"limit"`
}

type findMatch struct {
	Path string `json:"path"`
	Type string `json:"type"`
	Size *int64 `json:"size,omitempty"`
}

type findOutput struct {
	Path            string      `json:"path"`
	Pattern         string      `json:"pattern"`
	Matches         []findMatch `json:"matches"`
	Visited         int         `json:"visited"`
	Truncated       bool        `json:"truncated"`
	TruncatedReason string      `json:"truncated_reason,omitempty"`
	Excerpt         string      `json:"excerpt,omitempty"`
}

func (f *fileSystem) findTool() *op[findInput, findOutput] {
	return &op[findInput, findOutput]{
		fs:    f,
		name:  NameFind,
		reads: true,
		description: fmt.Sprintf("Find files and folders by name in the workspace. `pattern` is a glob: without a '/' it matches "+
			"base names (\"*.go\"); with one it matches paths relative to `path`, where ** matches any number of folders "+
			"(\"cmd/**/main.go\"). Symlinks are reported, never followed. At most %d matches; skips %v.", f.cfg.MaxResults, f.cfg.SkipDirs),
		input: schema(object([]string{"pattern"}, obj{
			"pattern": obj{"type": "string", "minLength": 1, "maxLength": 1024},
			"path":    pathProp("Folder to search, relative to the workspace. Default: the workspace."),
			"type":    obj{"enum": []string{"file", "dir", "any"}, "description": "Only files, only folders, or both (default)."},
			"limit":   obj{"type": "integer", "minimum": 1, "maximum": f.cfg.MaxResults},
		})),
		result: schema(object([]string{"path", "pattern", "matches", "visited", "truncated"}, obj{
			"path":    str,
			"pattern": str,
			"matches": obj{"type": "array", "items": object([]string{"path", "type"}, obj{
				"path": str,
				"type": obj{"enum": entryTypes},
				"size": nonNegInt,
			})},
			"visited":          nonNegInt,
			"truncated":        boolean,
			"truncated_reason": str,
			"excerpt":          excerptProp,
		})),
		run: f.find,
		shrink: func(o *findOutput, budget int) {
			n := len(o.Matches)
			o.Matches = shrinkSlice(o.Matches, budget, func(m findMatch) int { return len(m.Path) + 40 })
			o.Excerpt = fmt.Sprintf("matches shortened for history: %d of %d kept (first and last)", len(o.Matches), n)
		},
	}
}

func (f *fileSystem) find(ctx context.Context, r *root, in *findInput) (*findOutput, error) {
	rel, err := r.resolve(NameFind, in.Path)
	if err != nil {
		return nil, err
	}
	g, err := compileGlob(in.Pattern)
	if err != nil {
		return nil, fmt.Errorf("%s: pattern %q: %w", NameFind, in.Pattern, err)
	}
	limit := in.Limit
	if limit < 1 || limit > f.cfg.MaxResults {
		limit = f.cfg.MaxResults
	}
	fd, err := r.open(rel, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		return nil, pathErr(NameFind, in.Path, err)
	}
	dir := os.NewFile(uintptr(fd), rel)
	defer dir.Close()
	out := &findOutput{Path: rel, Pattern: in.Pattern, Matches: []findMatch{}}
	w := &walker{ctx: ctx, cfg: &f.cfg}
	prefix := rel + "/"
	if rel == "." {
		prefix = ""
	}
	err = w.walk(dir, rel, 0, func(_ int, _, p string, st *unix.Stat_t) error {
		t := fileType(st.Mode)
		switch {
		case in.Type == "file" && t != "file", in.Type == "dir" && t != "dir":
			return nil
		case !g.match(strings.TrimPrefix(p, prefix)):
			return nil
		}
		if len(out.Matches) == limit {
			w.note(fmt.Sprintf("stopped at %d matches (the limit)", limit))
			return errStop
		}
		m := findMatch{Path: p, Type: t}
		if t == "file" {
			size := st.Size
			m.Size = &size
		}
		out.Matches = append(out.Matches, m)
		return nil
	})
	if err != nil && !errors.Is(err, errStop) {
		return nil, pathErr(NameFind, in.Path, err)
	}
	out.Visited = w.visited
	out.Truncated, out.TruncatedReason = w.truncated != "", w.truncated
	return out, nil
}
