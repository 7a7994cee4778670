package files

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"regexp"
	"strings"

	"golang.org/x/sys/unix"

	"lemo/excerpt"
)

type grepInput struct {
	Pattern         string `json:"pattern"`
	Path            string `json:"path"`
	Glob            string `json:"glob"`
	CaseInsensitive bool   `json:"case_insensitive"`
	Limit           int    `json:"limit"`
}

type grepMatch struct {
	Path string `json:"path"`
	Line int    `json:"line"`
	Text string `json:"text"`
}

type grepSkipped struct {
	Binary     int `json:"binary"`
	Large      int `json:"large"`
	Hardlinked int `json:"hardlinked"`
	Unreadable int `json:"unreadable"`
}

type grepOutput struct {
	Pattern         string      `json:"pattern"`
	Path            string      `json:"path"`
	Matches         []grepMatch `json:"matches"`
	FilesScanned    int         `json:"files_scanned"`
	FilesMatched    int         `json:"files_matched"`
	Skipped         grepSkipped `json:"skipped"`
	Truncated       bool        `json:"truncated"`
	TruncatedReason string      `json:"truncated_reason,omitempty"`
	Excerpt         string      `json:"excerpt,omitempty"`
}

func (f *fileSystem) grepTool() *op[grepInput, grepOutput] {
	c := f.cfg
	return &op[grepInput, grepOutput]{
		fs:    f,
		name:  NameGrep,
		reads: true,
		description: fmt.Sprintf("Search file contents in the workspace with a regular expression (Go RE2 syntax, matched per "+
			"line). `path` is a folder (searched recursively, symlinks not followed, %v skipped) or one file; `glob` "+
			"limits the files searched (files.find syntax). Returns at most %d matching lines (each cut to %d bytes, %d "+
			"bytes in all) with paths and line numbers. Binary files and files over %d bytes are skipped and counted.",
			c.SkipDirs, c.MaxResults, c.MaxGrepLineBytes, c.MaxGrepBytes, c.MaxGrepFileBytes),
		input: schema(object([]string{"pattern"}, obj{
			"pattern":          obj{"type": "string", "minLength": 1, "maxLength": 4096},
			"path":             pathProp("Folder or file to search, relative to the workspace. Default: the workspace."),
			"glob":             obj{"type": "string", "maxLength": 1024, "description": "Only search files matching this glob, e.g. \"*.go\"."},
			"case_insensitive": boolean,
			"limit":            obj{"type": "integer", "minimum": 1, "maximum": c.MaxResults},
		})),
		result: schema(object([]string{"pattern", "path", "matches", "files_scanned", "files_matched", "skipped", "truncated"}, obj{
			"pattern": str,
			"path":    str,
			"matches": obj{"type": "array", "items": object([]string{"path", "line", "text"}, obj{
				"path": str,
				"line": obj{"type": "integer", "minimum": 1},
				"text": str,
			})},
			"files_scanned": nonNegInt,
			"files_matched": nonNegInt,
			"skipped": object([]string{"binary", "large", "hardlinked", "unreadable"}, obj{
				"binary": nonNegInt, "large": nonNegInt, "hardlinked": nonNegInt, "unreadable": nonNegInt,
			}),
			"truncated":        boolean,
			"truncated_reason": str,
			"excerpt":          excerptProp,
		})),
		run: f.grep,
		shrink: func(o *grepOutput, budget int) {
			n := len(o.Matches)
			o.Matches = shrinkSlice(o.Matches, budget, func(m grepMatch) int { return len(m.Path) + len(m.Text) + 40 })
			o.Excerpt = fmt.Sprintf("matches shortened for history: %d of %d kept (first and last)", len(o.Matches), n)
		},
	}
}

type grepper struct {
	cfg     *Config
	re      *regexp.Regexp
	limit   int
	out     *grepOutput
	bytes   int
	stopped string
}

func (f *fileSystem) grep(ctx context.Context, r *root, in *grepInput) (*grepOutput, error) {
	rel, err := r.resolve(NameGrep, in.Path)
	if err != nil {
		return nil, err
	}
	expr := in.Pattern
	if in.CaseInsensitive {
		expr = "(?i)" + expr
	}
	re, err := regexp.Compile(expr)
	if err != nil {
		return nil, fmt.Errorf("%s: pattern %q: %w", NameGrep, in.Pattern, err)
	}
	var g *glob
	if in.Glob != "" {
		if g, err = compileGlob(in.Glob); err != nil {
			return nil, fmt.Errorf("%s: glob %q: %w", NameGrep, in.Glob, err)
		}
	}
	limit := in.Limit
	if limit < 1 || limit > f.cfg.MaxResults {
		limit = f.cfg.MaxResults
	}
	gr := &grepper{cfg: &f.cfg, re: re, limit: limit,
		out: &grepOutput{Pattern: in.Pattern, Path: rel, Matches: []grepMatch{}}}

	pfd, err := r.open(rel, unix.O_PATH, 0)
	if err != nil {
		return nil, pathErr(NameGrep, in.Path, err)
	}
	var st unix.Stat_t
	err = unix.Fstat(pfd, &st)
	unix.Close(pfd)
	if err != nil {
		return nil, pathErr(NameGrep, in.Path, err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR {
		// One file: refusals are errors here, not skips.
		fd, _, err := r.openRegular(NameGrep, in.Path, rel, f.cfg.AllowHardlinkReads)
		if err != nil {
			return nil, err
		}
		file := os.NewFile(uintptr(fd), rel)
		defer file.Close()
		if err := gr.file(ctx, file, rel); err != nil && !errors.Is(err, errStop) {
			return nil, pathErr(NameGrep, in.Path, err)
		}
		gr.finish()
		return gr.out, nil
	}
	fd, err := r.open(rel, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		return nil, pathErr(NameGrep, in.Path, err)
	}
	dir := os.NewFile(uintptr(fd), rel)
	defer dir.Close()
	w := &walker{ctx: ctx, cfg: &f.cfg}
	prefix := rel + "/"
	if rel == "." {
		prefix = ""
	}
	err = w.walk(dir, rel, 0, func(dirfd int, name, p string, st *unix.Stat_t) error {
		if st.Mode&unix.S_IFMT != unix.S_IFREG || (g != nil && !g.match(strings.TrimPrefix(p, prefix))) {
			return nil
		}
		if st.Nlink > 1 && !f.cfg.AllowHardlinkReads {
			gr.out.Skipped.Hardlinked++
			return nil
		}
		if st.Size > int64(f.cfg.MaxGrepFileBytes) {
			gr.out.Skipped.Large++
			return nil
		}
		cfd, err := unix.Openat(dirfd, name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
		if err != nil {
			gr.out.Skipped.Unreadable++
			return nil
		}
		file := os.NewFile(uintptr(cfd), p)
		defer file.Close()
		// Check again on the open descriptor: the entry may have been
		// swapped since the walk's lstat.
		var fst unix.Stat_t
		if err := unix.Fstat(cfd, &fst); err != nil || fst.Mode&unix.S_IFMT != unix.S_IFREG {
			gr.out.Skipped.Unreadable++
			return nil
		}
		if fst.Nlink > 1 && !f.cfg.AllowHardlinkReads {
			gr.out.Skipped.Hardlinked++
			return nil
		}
		return gr.file(ctx, file, p)
	})
	if err != nil && !errors.Is(err, errStop) {
		return nil, pathErr(NameGrep, in.Path, err)
	}
	if w.truncated != "" && gr.stopped == "" {
		gr.stopped = w.truncated
	}
	gr.finish()
	return gr.out, nil
}

func (g *grepper) finish() {
	g.out.Truncated, g.out.TruncatedReason = g.stopped != "", g.stopped
}

// file searches one open regular file, line by line.
func (g *grepper) file(ctx context.Context, file *os.File, rel string) error {
	max := int64(g.cfg.MaxGrepFileBytes)
	b, err := io.ReadAll(io.LimitReader(ctxReader{ctx, file}, max+1))
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		g.out.Skipped.Unreadable++
		return nil
	}
	if int64(len(b)) > max {
		g.out.Skipped.Large++
		return nil
	}
	if looksBinary(b[:min(len(b), binarySniff)], len(b) <= binarySniff) {
		g.out.Skipped.Binary++
		return nil
	}
	g.out.FilesScanned++
	matched := false
	for n := 1; len(b) > 0; n++ {
		line := b
		if i := bytes.IndexByte(b, '\n'); i >= 0 {
			line, b = b[:i], b[i+1:]
		} else {
			b = nil
		}
		if !g.re.Match(line) {
			continue
		}
		if len(g.out.Matches) == g.limit {
			g.stopped = fmt.Sprintf("stopped at %d matches (the limit)", g.limit)
			return errStop
		}
		text := string(line)
		if len(text) > g.cfg.MaxGrepLineBytes {
			text = excerpt.Head(text, g.cfg.MaxGrepLineBytes) + " …"
		}
		if g.bytes+len(text) > g.cfg.MaxGrepBytes {
			g.stopped = fmt.Sprintf("stopped at %d bytes of matched text (the limit)", g.cfg.MaxGrepBytes)
			return errStop
		}
		g.bytes += len(text)
		if !matched {
			matched = true
			g.out.FilesMatched++
		}
		g.out.Matches = append(g.out.Matches, grepMatch{Path: path.Clean(rel), Line: n, Text: text})
	}
	return nil
}
