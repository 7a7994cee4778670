package files

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"strings"

	"golang.org/x/sys/unix"
)

type writeInput struct {
	Path     string  `json:"path"`
	Content  string  `json:"content"`
	Revision *string `json:"revision"`
}

type writeOutput struct {
	Path     string `json:"path"`
	Revision string `json:"revision"`
	Bytes    int    `json:"bytes"`
	Created  bool   `json:"created"`
}

type editInput struct {
	Path       string `json:"path"`
	OldText    string `json:"old_text"`
	NewText    string `json:"new_text"`
	Revision   string `json:"revision"`
	ReplaceAll bool   `json:"replace_all"`
}

type editOutput struct {
	Path         string `json:"path"`
	Revision     string `json:"revision"`
	Replacements int    `json:"replacements"`
	FirstLine    int    `json:"first_line"`
	Bytes        int    `json:"bytes"`
}

func (f *fileSystem) writeTool() *op[writeInput, writeOutput] {
	return &op[writeInput, writeOutput]{
		fs:   f,
		name: NameWrite,
		description: fmt.Sprintf("Create or overwrite a file in the workspace with the given content (at most %d bytes), creating "+
			"missing parent folders. The file is replaced atomically. Pass `revision` (from files.read) to overwrite only if "+
			"the file is unchanged since you read it. Returns the new revision.", f.cfg.MaxFileBytes),
		input: schema(object([]string{"path", "content"}, obj{
			"path":     pathProp("File path, relative to the workspace."),
			"content":  obj{"type": "string", "maxLength": f.cfg.MaxFileBytes, "description": "The whole new content."},
			"revision": revisionProp,
		})),
		result: schema(object([]string{"path", "revision", "bytes", "created"}, obj{
			"path":     str,
			"revision": revisionProp,
			"bytes":    nonNegInt,
			"created":  boolean,
		})),
		run: f.write,
	}
}

func (f *fileSystem) editTool() *op[editInput, editOutput] {
	return &op[editInput, editOutput]{
		fs:   f,
		name: NameEdit,
		description: "Replace exact text in a file in the workspace. old_text must occur exactly once (or set replace_all) " +
			"and match the file byte for byte, without files.read's line-number prefixes. revision must be the revision " +
			"files.read (or the last files.write/files.edit) returned: an edit of a file that changed since is refused; " +
			"read it again. Returns the new revision.",
		input: schema(object([]string{"path", "old_text", "new_text", "revision"}, obj{
			"path":        pathProp("File path, relative to the workspace."),
			"old_text":    obj{"type": "string", "minLength": 1, "description": "Exact text to replace."},
			"new_text":    obj{"type": "string", "description": "Replacement text."},
			"revision":    revisionProp,
			"replace_all": obj{"type": "boolean", "description": "Replace every occurrence instead of requiring exactly one. Default false."},
		})),
		result: schema(object([]string{"path", "revision", "replacements", "first_line", "bytes"}, obj{
			"path":         str,
			"revision":     revisionProp,
			"replacements": obj{"type": "integer", "minimum": 1},
			"first_line":   obj{"type": "integer", "minimum": 1},
			"bytes":        nonNegInt,
		})),
		run: f.edit,
	}
}

// target is the directory entry a write or edit replaces.
type target struct {
	dir    *os.File // the parent directory, opened beneath the workspace
	dirID  fileID
	name   string
	exists bool
	st     unix.Stat_t // of the existing file (lstat)
}

func (t *target) close() { t.dir.Close() }

// openTarget resolves the parent of rel (creating it when mkdir is set) and
// checks that it is not protected.
func (f *fileSystem) openTarget(op, p string, r *root, rel string, mkdir bool) (*target, error) {
	if rel == "." {
		return nil, &PathError{Op: op, Path: p, Reason: "is the workspace folder; name a file", Err: ErrNotRegular}
	}
	if err := f.checkProtectedName(op, p, rel); err != nil {
		return nil, err
	}
	dir, name := path.Split(rel)
	dir = strings.TrimSuffix(dir, "/")
	if dir == "" {
		dir = "."
	}
	var dfd int
	var err error
	if mkdir {
		dfd, err = r.mkdirAll(dir, func(parent int) error { return f.checkProtectedDir(op, p, r, parent) })
	} else {
		dfd, err = r.open(dir, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	}
	if err != nil {
		return nil, pathErr(op, p, err)
	}
	t := &target{dir: os.NewFile(uintptr(dfd), dir), name: name}
	var dst unix.Stat_t
	if err := unix.Fstat(dfd, &dst); err != nil {
		t.close()
		return nil, pathErr(op, p, err)
	}
	t.dirID = idOf(&dst)
	if err := f.checkProtectedDir(op, p, r, dfd); err != nil {
		t.close()
		return nil, err
	}
	return t, nil
}

// stat lstat's the target name (call it holding the entry's lock) and
// refuses symlinks, non-regular files, hard-linked and protected files.
func (f *fileSystem) stat(op, p string, r *root, t *target) error {
	switch err := unix.Fstatat(int(t.dir.Fd()), t.name, &t.st, unix.AT_SYMLINK_NOFOLLOW); {
	case errors.Is(err, unix.ENOENT):
		return nil
	case err != nil:
		return pathErr(op, p, err)
	}
	t.exists = true
	if t.st.Mode&unix.S_IFMT == unix.S_IFLNK {
		return refuse(op, p, RuleSymlink, "the name is a symlink; write to the path it points to instead")
	}
	if err := checkRegular(op, p, &t.st, false); err != nil {
		if errors.Is(err, ErrRefused) {
			return refuse(op, p, RuleHardlink, fmt.Sprintf("the file has %d hard links; writing would change a file that may also be outside the workspace", t.st.Nlink))
		}
		return err
	}
	for _, id := range f.protectedIDs(r) {
		if id == idOf(&t.st) {
			return refuse(op, p, RuleProtected, "the file is protected from changes")
		}
	}
	return nil
}

// readCurrent reads the existing target (bounded by MaxFileBytes) through a
// descriptor that does not follow symlinks.
func (f *fileSystem) readCurrent(ctx context.Context, op, p string, t *target) ([]byte, error) {
	fd, err := unix.Openat(int(t.dir.Fd()), t.name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, pathErr(op, p, err)
	}
	file := os.NewFile(uintptr(fd), t.name)
	defer file.Close()
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, pathErr(op, p, err)
	}
	if idOf(&st) != idOf(&t.st) {
		return nil, &PathError{Op: op, Path: p, Reason: "the file was replaced while it was being opened; read it again", Err: ErrStale}
	}
	if err := checkRegular(op, p, &st, false); err != nil {
		return nil, err
	}
	max := int64(f.cfg.MaxFileBytes)
	if st.Size > max {
		return nil, &PathError{Op: op, Path: p, Reason: fmt.Sprintf("the file is %d bytes; at most %d can be edited", st.Size, max), Err: ErrTooLarge}
	}
	b, err := io.ReadAll(io.LimitReader(ctxReader{ctx, file}, max+1))
	if err != nil {
		return nil, pathErr(op, p, err)
	}
	if int64(len(b)) > max {
		return nil, &PathError{Op: op, Path: p, Reason: fmt.Sprintf("the file grew past %d bytes while it was read", max), Err: ErrTooLarge}
	}
	return b, nil
}

func (f *fileSystem) write(ctx context.Context, r *root, in *writeInput) (*writeOutput, error) {
	rel, err := r.resolve(NameWrite, in.Path)
	if err != nil {
		return nil, err
	}
	if len(in.Content) > f.cfg.MaxFileBytes {
		return nil, &PathError{Op: NameWrite, Path: in.Path, Reason: fmt.Sprintf("content is %d bytes; at most %d can be written", len(in.Content), f.cfg.MaxFileBytes), Err: ErrTooLarge}
	}
	t, err := f.openTarget(NameWrite, in.Path, r, rel, true)
	if err != nil {
		return nil, err
	}
	defer t.close()
	defer f.lock(t.dirID, t.name)()
	if err := f.stat(NameWrite, in.Path, r, t); err != nil {
		return nil, err
	}
	if in.Revision != nil {
		if !t.exists {
			return nil, &PathError{Op: NameWrite, Path: in.Path, Reason: fmt.Sprintf("revision %s was expected but the file does not exist", *in.Revision), Err: ErrStale}
		}
		cur, err := f.readCurrent(ctx, NameWrite, in.Path, t)
		if err != nil {
			return nil, err
		}
		if rev := Revision(cur); rev != *in.Revision {
			return nil, staleErr(NameWrite, in.Path, *in.Revision, rev)
		}
	}
	content := []byte(in.Content)
	if err := f.replace(ctx, NameWrite, in.Path, t, content); err != nil {
		return nil, err
	}
	return &writeOutput{Path: rel, Revision: Revision(content), Bytes: len(content), Created: !t.exists}, nil
}

func staleErr(op, p, want, got string) error {
	return &PathError{Op: op, Path: p, Err: ErrStale,
		Reason: fmt.Sprintf("the file changed since revision %s was read (it is now %s); read it again", want, got)}
}

func (f *fileSystem) edit(ctx context.Context, r *root, in *editInput) (*editOutput, error) {
	rel, err := r.resolve(NameEdit, in.Path)
	if err != nil {
		return nil, err
	}
	t, err := f.openTarget(NameEdit, in.Path, r, rel, false)
	if err != nil {
		return nil, err
	}
	defer t.close()
	defer f.lock(t.dirID, t.name)()
	if err := f.stat(NameEdit, in.Path, r, t); err != nil {
		return nil, err
	}
	if !t.exists {
		return nil, pathErr(NameEdit, in.Path, unix.ENOENT)
	}
	cur, err := f.readCurrent(ctx, NameEdit, in.Path, t)
	if err != nil {
		return nil, err
	}
	if rev := Revision(cur); rev != in.Revision {
		return nil, staleErr(NameEdit, in.Path, in.Revision, rev)
	}
	if looksBinary(cur[:min(len(cur), binarySniff)], len(cur) <= binarySniff) {
		return nil, &PathError{Op: NameEdit, Path: in.Path, Reason: "looks like a binary file; files.edit changes text only", Err: ErrBinary}
	}
	old := []byte(in.OldText)
	n := bytes.Count(cur, old)
	first := bytes.Index(cur, old)
	switch {
	case n == 0:
		return nil, &PathError{Op: NameEdit, Path: in.Path, Err: ErrNoMatch,
			Reason: "old_text does not occur in the file; copy it exactly (without line-number prefixes) from files.read"}
	case n > 1 && !in.ReplaceAll:
		return nil, &PathError{Op: NameEdit, Path: in.Path, Err: ErrAmbiguous,
			Reason: fmt.Sprintf("old_text occurs %d times (lines %s); add surrounding text to make it unique, or set replace_all", n, occurrenceLines(cur, old, 10))}
	}
	var next []byte
	if in.ReplaceAll {
		next = bytes.ReplaceAll(cur, old, []byte(in.NewText))
	} else {
		next = bytes.Replace(cur, old, []byte(in.NewText), 1)
	}
	if len(next) > f.cfg.MaxFileBytes {
		return nil, &PathError{Op: NameEdit, Path: in.Path, Reason: fmt.Sprintf("the edited file would be %d bytes; at most %d are allowed", len(next), f.cfg.MaxFileBytes), Err: ErrTooLarge}
	}
	// Refuse if the file changed on disk (outside this process) since it
	// was read above.
	var now unix.Stat_t
	if err := unix.Fstatat(int(t.dir.Fd()), t.name, &now, unix.AT_SYMLINK_NOFOLLOW); err != nil || idOf(&now) != idOf(&t.st) || now.Size != int64(len(cur)) || now.Mtim != t.st.Mtim {
		return nil, &PathError{Op: NameEdit, Path: in.Path, Reason: "the file changed while it was being edited; read it again", Err: ErrStale}
	}
	if err := f.replace(ctx, NameEdit, in.Path, t, next); err != nil {
		return nil, err
	}
	return &editOutput{Path: rel, Revision: Revision(next), Replacements: n, FirstLine: 1 + bytes.Count(cur[:first], []byte{'\n'}), Bytes: len(next)}, nil
}

func occurrenceLines(b, sub []byte, max int) string {
	var lines []string
	line, pos := 1, 0
	for len(lines) < max {
		i := bytes.Index(b[pos:], sub)
		if i < 0 {
			break
		}
		line += bytes.Count(b[pos:pos+i], []byte{'\n'})
		lines = append(lines, fmt.Sprint(line))
		line += bytes.Count(sub, []byte{'\n'})
		pos += i + len(sub)
	}
	return strings.Join(lines, ", ")
}

// replace writes content to a new temporary file in the target's directory
// and renames it over the name: readers never see a partial file, and the
// rename replaces the directory entry rather than writing through whatever
// the name pointed to. The existing file's mode and owner are kept.
func (f *fileSystem) replace(ctx context.Context, op, p string, t *target, content []byte) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	dfd := int(t.dir.Fd())
	var rnd [8]byte
	_, _ = rand.Read(rnd[:])
	tmp := ".lemo-" + hex.EncodeToString(rnd[:]) + ".tmp"
	mode := uint32(0o644)
	if t.exists {
		mode = t.st.Mode & 0o7777
	}
	fd, err := unix.Openat(dfd, tmp, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return pathErr(op, p, err)
	}
	file := os.NewFile(uintptr(fd), tmp)
	ok := false
	defer func() {
		if !ok {
			file.Close()
			_ = unix.Unlinkat(dfd, tmp, 0)
		}
	}()
	if _, err := file.Write(content); err != nil {
		return pathErr(op, p, err)
	}
	if t.exists {
		_ = unix.Fchown(fd, int(t.st.Uid), int(t.st.Gid)) // best effort: keeps the owner when allowed
	}
	if err := unix.Fchmod(fd, mode); err != nil {
		return pathErr(op, p, err)
	}
	if err := file.Sync(); err != nil {
		return pathErr(op, p, err)
	}
	if err := file.Close(); err != nil {
		return pathErr(op, p, err)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := unix.Renameat(dfd, tmp, dfd, t.name); err != nil {
		return pathErr(op, p, err)
	}
	ok = true
	_ = unix.Fsync(dfd) // make the rename durable; a failure leaves the file written
	return nil
}

// mkdirAll opens dir beneath the workspace as a directory, creating missing
// components one at a time inside already-resolved parents. check vets each
// parent before anything is created in it.
func (r *root) mkdirAll(dir string, check func(parent int) error) (int, error) {
	fd, err := r.open(dir, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if err == nil || !errors.Is(err, unix.ENOENT) {
		return fd, err
	}
	cur, err := r.open(".", unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		return -1, err
	}
	prefix := ""
	for _, c := range splitComps(dir) {
		prefix = path.Join(prefix, c)
		next, err := r.open(prefix, unix.O_RDONLY|unix.O_DIRECTORY, 0)
		if errors.Is(err, unix.ENOENT) {
			if err := check(cur); err != nil {
				unix.Close(cur)
				return -1, err
			}
			if err := unix.Mkdirat(cur, c, 0o755); err != nil && !errors.Is(err, unix.EEXIST) {
				unix.Close(cur)
				return -1, err
			}
			next, err = r.open(prefix, unix.O_RDONLY|unix.O_DIRECTORY, 0)
		}
		unix.Close(cur)
		if err != nil {
			return -1, err
		}
		cur = next
	}
	return cur, nil
}

// checkProtectedName refuses rel when it is, or is beneath, a protected
// path as written.
func (f *fileSystem) checkProtectedName(op, p, rel string) error {
	for _, prot := range f.cfg.Protected {
		pr, err := cleanPath("/", prot)
		if err != nil {
			continue
		}
		if rel == pr || strings.HasPrefix(rel, pr+"/") {
			return refuse(op, p, RuleProtected, fmt.Sprintf("%s is protected from changes", pr))
		}
	}
	return nil
}

// protectedIDs returns the identities of the protected paths that exist.
func (f *fileSystem) protectedIDs(r *root) []fileID {
	var ids []fileID
	for _, prot := range f.cfg.Protected {
		pr, err := cleanPath("/", prot)
		if err != nil {
			continue
		}
		fd, err := r.open(pr, unix.O_PATH, 0)
		if err != nil {
			continue
		}
		var st unix.Stat_t
		if unix.Fstat(fd, &st) == nil {
			ids = append(ids, idOf(&st))
		}
		unix.Close(fd)
	}
	return ids
}

// checkProtectedDir walks up from dirfd to the workspace root and refuses
// when it passes a protected directory (reached through another name, for
// example a symlink) or never reaches the root (defence in depth: the
// resolvers already keep dirfd beneath it).
func (f *fileSystem) checkProtectedDir(op, p string, r *root, dirfd int) error {
	prot := f.protectedIDs(r)
	cur, err := unix.Openat(dirfd, ".", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return pathErr(op, p, err)
	}
	defer func() { unix.Close(cur) }()
	for range 4096 {
		var st unix.Stat_t
		if err := unix.Fstat(cur, &st); err != nil {
			return pathErr(op, p, err)
		}
		id := idOf(&st)
		for _, pid := range prot {
			if id == pid {
				return refuse(op, p, RuleProtected, "the folder is, or is inside, a protected path")
			}
		}
		if id == r.id {
			return nil
		}
		up, err := unix.Openat(cur, "..", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			return pathErr(op, p, err)
		}
		var ust unix.Stat_t
		if err := unix.Fstat(up, &ust); err != nil {
			unix.Close(up)
			return pathErr(op, p, err)
		}
		unix.Close(cur)
		cur = up
		if idOf(&ust) == id { // reached "/" without meeting the workspace
			break
		}
	}
	return refuse(op, p, RuleEscape, "the folder is not inside the workspace")
}
