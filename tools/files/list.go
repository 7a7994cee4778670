package files

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"

	"golang.org/x/sys/unix"
)

type listInput struct {
	Path   string `json:"path"`
	Cursor string `json:"cursor"`
	Limit  int    `json:"limit"`
}

type listEntry struct {
	Name   string `json:"name"`
	Type   string `json:"type"`
	Size   *int64 `json:"size,omitempty"`
	Target string `json:"target,omitempty"`
}

type listOutput struct {
	Path       string      `json:"path"`
	Entries    []listEntry `json:"entries"`
	Total      int         `json:"total"`
	NextCursor string      `json:"next_cursor,omitempty"`
	Excerpt    string      `json:"excerpt,omitempty"`
}

var entryTypes = []string{"file", "dir", "symlink", "fifo", "socket", "device", "other"}

func (f *fileSystem) listTool() *op[listInput, listOutput] {
	def := min(200, f.cfg.MaxListEntries)
	return &op[listInput, listOutput]{
		fs:    f,
		name:  NameList,
		reads: true,
		description: fmt.Sprintf("List a folder in the workspace, sorted by name, one page at a time (default %d, at most %d "+
			"entries). Each entry has its type, a file's size and a symlink's target text. When next_cursor is present, "+
			"call again with cursor = next_cursor for the next page.", def, f.cfg.MaxListEntries),
		input: schema(object(nil, obj{
			"path":   pathProp("Folder path, relative to the workspace. Default: the workspace itself."),
			"cursor": obj{"type": "string", "maxLength": 1024, "description": "next_cursor from the previous page."},
			"limit":  obj{"type": "integer", "minimum": 1, "maximum": f.cfg.MaxListEntries},
		})),
		result: schema(object([]string{"path", "entries", "total"}, obj{
			"path": str,
			"entries": obj{"type": "array", "items": object([]string{"name", "type"}, obj{
				"name":   str,
				"type":   obj{"enum": entryTypes},
				"size":   nonNegInt,
				"target": str,
			})},
			"total":       nonNegInt,
			"next_cursor": str,
			"excerpt":     excerptProp,
		})),
		run: func(ctx context.Context, r *root, in *listInput) (*listOutput, error) {
			if in.Limit < 1 || in.Limit > f.cfg.MaxListEntries {
				in.Limit = def
			}
			return f.list(ctx, r, in)
		},
		shrink: func(o *listOutput, budget int) {
			n := len(o.Entries)
			o.Entries = shrinkSlice(o.Entries, budget, func(e listEntry) int { return len(e.Name) + len(e.Target) + 48 })
			o.Excerpt = fmt.Sprintf("entries shortened for history: %d of %d kept (first and last)", len(o.Entries), n)
		},
	}
}

func (f *fileSystem) list(ctx context.Context, r *root, in *listInput) (*listOutput, error) {
	rel, err := r.resolve(NameList, in.Path)
	if err != nil {
		return nil, err
	}
	var after string
	if in.Cursor != "" {
		b, err := base64.RawURLEncoding.DecodeString(in.Cursor)
		if err != nil {
			return nil, fmt.Errorf("%s %q: cursor %q is not one this tool returned", NameList, in.Path, in.Cursor)
		}
		after = string(b)
	}
	fd, err := r.open(rel, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		return nil, pathErr(NameList, in.Path, err)
	}
	dir := os.NewFile(uintptr(fd), rel)
	defer dir.Close()
	names, complete, err := readNames(ctx, dir, f.cfg.MaxDirEntries)
	if err != nil {
		return nil, pathErr(NameList, in.Path, err)
	}
	if !complete {
		return nil, &PathError{Op: NameList, Path: in.Path, Err: ErrTooLarge,
			Reason: fmt.Sprintf("the folder has more than %d entries; use files.find with a pattern", f.cfg.MaxDirEntries)}
	}
	sort.Strings(names)
	start := 0
	if after != "" {
		start = sort.Search(len(names), func(i int) bool { return names[i] > after })
	}
	out := &listOutput{Path: rel, Entries: []listEntry{}, Total: len(names)}
	for i := start; i < len(names); i++ {
		if len(out.Entries) == in.Limit {
			out.NextCursor = base64.RawURLEncoding.EncodeToString([]byte(out.Entries[len(out.Entries)-1].Name))
			break
		}
		var st unix.Stat_t
		if err := unix.Fstatat(fd, names[i], &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			continue // removed since it was listed
		}
		out.Entries = append(out.Entries, entryOf(fd, names[i], &st))
	}
	return out, nil
}

func entryOf(dirfd int, name string, st *unix.Stat_t) listEntry {
	e := listEntry{Name: name, Type: fileType(st.Mode)}
	switch e.Type {
	case "file":
		size := st.Size
		e.Size = &size
	case "symlink":
		// The link text only: it is not followed.
		if t, err := readlinkAt(dirfd, name); err == nil {
			e.Target = t
		}
	}
	return e
}

// readNames reads up to max names of dir; complete is false when there are
// more.
func readNames(ctx context.Context, dir *os.File, max int) (names []string, complete bool, err error) {
	for {
		if err := ctx.Err(); err != nil {
			return nil, false, err
		}
		batch, err := dir.Readdirnames(1024)
		names = append(names, batch...)
		if len(names) > max {
			return names[:max], false, nil
		}
		if errors.Is(err, io.EOF) {
			return names, true, nil
		}
		if err != nil {
			return nil, false, err
		}
	}
}

// shrinkSlice keeps the first and last items of s whose estimated sizes fit
// in budget bytes.
func shrinkSlice[T any](s []T, budget int, size func(T) int) []T {
	head, tail := 0, len(s)
	used := 0
	for head < tail {
		// Alternate: two from the head for one from the tail.
		next := head
		fromTail := (head+len(s)-tail)%3 == 2
		if fromTail {
			next = tail - 1
		}
		n := size(s[next])
		if used+n > budget {
			break
		}
		used += n
		if fromTail {
			tail--
		} else {
			head++
		}
	}
	out := append([]T{}, s[:head]...)
	return append(out, s[tail:]...)
}
