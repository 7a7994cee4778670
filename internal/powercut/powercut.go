// Package powercut is a FUSE filesystem for tests that loses what a power cut
// loses. It serves the tree of a backing folder; every change to it is held in
// memory until it is made durable, and Cut drops every change that is not.
//
// The model is that of a journaling filesystem (ext4, xfs) whose data is not
// journaled:
//   - file data becomes durable only when that file is synced (fsync,
//     fdatasync, or msync of a shared mapping, which reaches the filesystem as
//     writes of the dirty pages followed by fsync);
//   - namespace changes (create, mkdir, rename, unlink, rmdir) and file sizes
//     are journaled: they become durable, in order, at the next sync of any
//     file or folder, as a journal commit makes them durable. Data that was not
//     synced reads as zeros after a cut, even where its file's size survived.
//
// Durable state is the backing folder itself: a commit applies the journal to
// it and a file sync writes the file's dirty pages into it. After a cut the
// folder holds exactly what survived, and a new Mount serves it.
//
// The process that uses the files must not be the one serving them: a page
// fault on a mapped file blocks its thread until the server answers, and the
// Go runtime can stop the world meanwhile. Tests run the store in a child
// process. Mounting needs root and /dev/fuse (go-fuse mounts directly, with no
// helper binary).
//
// Lifecycle:
//  0. The test calls InPrivateMounts, so that its mounts are its own.
//  1. Mount(backing, mountpoint) serves backing at mountpoint.
//  2. The child process uses files under mountpoint.
//  3. Cut drops every change that was not durable; every later operation fails
//     with EIO.
//  4. The test kills the child and calls Unmount; the backing folder holds
//     what a power cut at step 3 would have left.
package powercut

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

const (
	pageSize        = 4096
	renameNoReplace = 0x1 // RENAME_NOREPLACE
)

// Stats counts what the filesystem did since it was mounted.
type Stats struct {
	// Syncs is the number of file and folder syncs; Commits the journal
	// commits that applied at least one change.
	Syncs, Commits int
	// PagesSynced is the number of dirty pages written to the backing
	// folder; PagesDropped and OpsDropped what a cut discarded.
	PagesSynced, PagesDropped, OpsDropped int
}

// FS is a mounted powercut filesystem.
type FS struct {
	backing string
	server  *fuse.Server

	mu      sync.Mutex
	cut     bool
	journal []op
	files   map[*file]struct{}
	stats   Stats
}

type opKind int

const (
	opCreate opKind = iota
	opMkdir
	opRemove
	opRename
)

// op is one journaled namespace change; paths are relative to the root.
type op struct {
	kind     opKind
	path, to string
	file     *file // opCreate
}

// Mount serves the backing folder at mountpoint (both must exist).
func Mount(backing, mountpoint string) (*FS, error) {
	abs, err := filepath.Abs(backing)
	if err != nil {
		return nil, err
	}
	p := &FS{backing: abs, files: make(map[*file]struct{})}
	root := &dir{pfs: p}
	zero := time.Duration(0)
	server, err := fs.Mount(mountpoint, root, &fs.Options{
		// The kernel's caches stay coherent: every change goes through it.
		EntryTimeout: &zero,
		AttrTimeout:  &zero,
		MountOptions: fuse.MountOptions{
			DirectMountStrict: true,
			FsName:            "powercut",
			Name:              "powercut",
			DisableXAttrs:     true,
			MaxWrite:          1 << 20,
		},
	})
	if err != nil {
		return nil, fmt.Errorf("mount powercut on %s: %w", mountpoint, err)
	}
	p.server = server
	return p, nil
}

// Cut drops every change that is not durable. Operations that started before
// it finish on the old state; every operation after it fails with EIO.
func (p *FS) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cut {
		return
	}
	p.cut = true
	p.stats.OpsDropped += len(p.journal)
	p.journal = nil
	for f := range p.files {
		p.stats.PagesDropped += len(f.dirty)
		f.dirty = nil
		if f.back != nil {
			_ = f.back.Close()
			f.back = nil
		}
	}
}

// Unmount unmounts the filesystem; the processes using it must have exited.
// An unmount without a Cut first makes nothing more durable.
func (p *FS) Unmount() error {
	p.Cut()
	return p.server.Unmount()
}

// Stats returns the counters.
func (p *FS) Stats() Stats {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stats
}

// commit applies the journal to the backing folder. p.mu is held.
func (p *FS) commit() syscall.Errno {
	if len(p.journal) > 0 {
		p.stats.Commits++
	}
	for _, o := range p.journal {
		path := filepath.Join(p.backing, o.path)
		var err error
		switch o.kind {
		case opCreate:
			o.file.back, err = os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o600)
		case opMkdir:
			err = os.Mkdir(path, 0o700)
		case opRemove:
			err = os.Remove(path)
		case opRename:
			err = os.Rename(path, filepath.Join(p.backing, o.to))
		}
		if err != nil {
			// The live tree allowed it, so the backing folder must: it
			// is not ours alone, or a bug.
			p.journal = nil
			return syscall.EIO
		}
	}
	p.journal = nil
	for f := range p.files {
		if f.back == nil {
			continue
		}
		if f.zeroFrom < math.MaxInt64 {
			if err := f.back.Truncate(f.zeroFrom); err != nil {
				return syscall.EIO
			}
			f.zeroFrom = math.MaxInt64
		}
		if f.durableSize != f.size {
			if err := f.back.Truncate(f.size); err != nil {
				return syscall.EIO
			}
			f.durableSize = f.size
		}
	}
	return 0
}

func (p *FS) path(n *fs.Inode, name string) string {
	return filepath.Join(n.Path(nil), name)
}

// dir is a folder.
type dir struct {
	fs.Inode
	pfs *FS
}

var (
	_ fs.NodeOnAdder   = (*dir)(nil)
	_ fs.NodeCreater   = (*dir)(nil)
	_ fs.NodeMkdirer   = (*dir)(nil)
	_ fs.NodeUnlinker  = (*dir)(nil)
	_ fs.NodeRmdirer   = (*dir)(nil)
	_ fs.NodeRenamer   = (*dir)(nil)
	_ fs.NodeFsyncer   = (*dir)(nil)
	_ fs.NodeGetattrer = (*dir)(nil)
	_ fs.NodeSetattrer = (*dir)(nil)
	_ fs.NodeStatfser  = (*dir)(nil)
)

// OnAdd loads the backing tree when the root is mounted.
func (d *dir) OnAdd(ctx context.Context) {
	if d.IsRoot() {
		d.pfs.mu.Lock()
		defer d.pfs.mu.Unlock()
		if err := d.load(ctx, d.pfs.backing); err != nil {
			// Nothing is served: every operation fails.
			d.pfs.cut = true
		}
	}
}

func (d *dir) load(ctx context.Context, path string) error {
	entries, err := os.ReadDir(path)
	if err != nil {
		return err
	}
	for _, e := range entries {
		full := filepath.Join(path, e.Name())
		switch {
		case e.IsDir():
			sub := &dir{pfs: d.pfs}
			d.AddChild(e.Name(), d.NewPersistentInode(ctx, sub, fs.StableAttr{Mode: syscall.S_IFDIR}), false)
			if err := sub.load(ctx, full); err != nil {
				return err
			}
		case e.Type().IsRegular():
			back, err := os.OpenFile(full, os.O_RDWR, 0)
			if err != nil {
				return err
			}
			fi, err := back.Stat()
			if err != nil {
				_ = back.Close()
				return err
			}
			f := &file{pfs: d.pfs, back: back, size: fi.Size(), durableSize: fi.Size(), zeroFrom: math.MaxInt64}
			d.pfs.files[f] = struct{}{}
			d.AddChild(e.Name(), d.NewPersistentInode(ctx, f, fs.StableAttr{Mode: syscall.S_IFREG}), false)
		default:
			return fmt.Errorf("powercut: %s is neither a file nor a folder", full)
		}
	}
	return nil
}

func (d *dir) Create(ctx context.Context, name string, flags, mode uint32, out *fuse.EntryOut) (*fs.Inode, fs.FileHandle, uint32, syscall.Errno) {
	p := d.pfs
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cut {
		return nil, nil, 0, syscall.EIO
	}
	f := &file{pfs: p, zeroFrom: math.MaxInt64}
	p.files[f] = struct{}{}
	p.journal = append(p.journal, op{kind: opCreate, path: p.path(&d.Inode, name), file: f})
	f.attr(&out.Attr)
	return d.NewPersistentInode(ctx, f, fs.StableAttr{Mode: syscall.S_IFREG}), nil, fuse.FOPEN_KEEP_CACHE, 0
}

func (d *dir) Mkdir(ctx context.Context, name string, mode uint32, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	p := d.pfs
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cut {
		return nil, syscall.EIO
	}
	p.journal = append(p.journal, op{kind: opMkdir, path: p.path(&d.Inode, name)})
	out.Attr.Mode = syscall.S_IFDIR | 0o700
	return d.NewPersistentInode(ctx, &dir{pfs: p}, fs.StableAttr{Mode: syscall.S_IFDIR}), 0
}

func (d *dir) Unlink(ctx context.Context, name string) syscall.Errno {
	return d.remove(name)
}

func (d *dir) Rmdir(ctx context.Context, name string) syscall.Errno {
	if ch := d.GetChild(name); ch != nil && len(ch.Children()) > 0 {
		return syscall.ENOTEMPTY
	}
	return d.remove(name)
}

func (d *dir) remove(name string) syscall.Errno {
	p := d.pfs
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cut {
		return syscall.EIO
	}
	if d.GetChild(name) == nil {
		return syscall.ENOENT
	}
	p.journal = append(p.journal, op{kind: opRemove, path: p.path(&d.Inode, name)})
	return 0
}

func (d *dir) Rename(ctx context.Context, name string, newParent fs.InodeEmbedder, newName string, flags uint32) syscall.Errno {
	p := d.pfs
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cut {
		return syscall.EIO
	}
	if flags&^uint32(renameNoReplace) != 0 {
		return syscall.ENOTSUP
	}
	if flags&renameNoReplace != 0 && newParent.EmbeddedInode().GetChild(newName) != nil {
		return syscall.EEXIST
	}
	p.journal = append(p.journal, op{kind: opRename, path: p.path(&d.Inode, name), to: p.path(newParent.EmbeddedInode(), newName)})
	return 0
}

// Fsync of a folder commits the journal.
func (d *dir) Fsync(ctx context.Context, fh fs.FileHandle, flags uint32) syscall.Errno {
	p := d.pfs
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cut {
		return syscall.EIO
	}
	p.stats.Syncs++
	return p.commit()
}

func (d *dir) Getattr(ctx context.Context, fh fs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	out.Mode = syscall.S_IFDIR | 0o700
	return 0
}

func (d *dir) Setattr(ctx context.Context, fh fs.FileHandle, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	out.Mode = syscall.S_IFDIR | 0o700
	return 0
}

func (d *dir) Statfs(ctx context.Context, out *fuse.StatfsOut) syscall.Errno {
	var st syscall.Statfs_t
	if err := syscall.Statfs(d.pfs.backing, &st); err != nil {
		return fs.ToErrno(err)
	}
	out.FromStatfsT(&st)
	return 0
}

// file is a regular file: its durable content in the backing file, its
// unsynced writes in dirty pages.
type file struct {
	fs.Inode
	pfs *FS

	// back is the backing file; nil until the file's creation is
	// committed, and after a cut.
	back *os.File
	// size is the live size, durableSize the backing file's.
	size, durableSize int64
	// zeroFrom is where a shrinking truncate cut the live file: backing
	// data from there on is not part of it. MaxInt64 when none.
	zeroFrom int64
	dirty    map[int64][]byte // page index -> page
}

var (
	_ fs.NodeOpener    = (*file)(nil)
	_ fs.NodeReader    = (*file)(nil)
	_ fs.NodeWriter    = (*file)(nil)
	_ fs.NodeFsyncer   = (*file)(nil)
	_ fs.NodeFlusher   = (*file)(nil)
	_ fs.NodeGetattrer = (*file)(nil)
	_ fs.NodeSetattrer = (*file)(nil)
)

func (f *file) attr(out *fuse.Attr) {
	out.Mode = syscall.S_IFREG | 0o600
	out.Size = uint64(f.size)
	out.Blocks = (uint64(f.size) + 511) / 512
	out.Nlink = 1
}

func (f *file) Open(ctx context.Context, flags uint32) (fs.FileHandle, uint32, syscall.Errno) {
	f.pfs.mu.Lock()
	defer f.pfs.mu.Unlock()
	if f.pfs.cut {
		return nil, 0, syscall.EIO
	}
	return nil, fuse.FOPEN_KEEP_CACHE, 0
}

func (f *file) Getattr(ctx context.Context, fh fs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	f.pfs.mu.Lock()
	defer f.pfs.mu.Unlock()
	if f.pfs.cut {
		return syscall.EIO
	}
	f.attr(&out.Attr)
	return 0
}

func (f *file) Setattr(ctx context.Context, fh fs.FileHandle, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	f.pfs.mu.Lock()
	defer f.pfs.mu.Unlock()
	if f.pfs.cut {
		return syscall.EIO
	}
	if sz, ok := in.GetSize(); ok {
		f.truncate(int64(sz))
	}
	f.attr(&out.Attr)
	return 0
}

func (f *file) truncate(n int64) {
	if n < f.size {
		for pg, b := range f.dirty {
			switch start := pg * pageSize; {
			case start >= n:
				delete(f.dirty, pg)
			case start+pageSize > n:
				clear(b[n-start:])
			}
		}
		f.zeroFrom = min(f.zeroFrom, n)
	}
	f.size = n
}

func (f *file) Flush(ctx context.Context, fh fs.FileHandle) syscall.Errno { return 0 }

func (f *file) Read(ctx context.Context, fh fs.FileHandle, dest []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	f.pfs.mu.Lock()
	defer f.pfs.mu.Unlock()
	if f.pfs.cut {
		return nil, syscall.EIO
	}
	n, err := f.readAt(dest, off)
	if err != nil {
		return nil, syscall.EIO
	}
	return fuse.ReadResultData(dest[:n]), 0
}

// readAt reads the live content.
func (f *file) readAt(dest []byte, off int64) (int, error) {
	if off >= f.size {
		return 0, nil
	}
	n := int(min(int64(len(dest)), f.size-off))
	for i := 0; i < n; {
		pos := off + int64(i)
		pg, po := pos/pageSize, int(pos%pageSize)
		chunk := min(pageSize-po, n-i)
		if b, ok := f.dirty[pg]; ok {
			copy(dest[i:i+chunk], b[po:po+chunk])
		} else if f.back == nil || pos >= f.zeroFrom {
			clear(dest[i : i+chunk])
		} else {
			chunk = int(min(int64(chunk), f.zeroFrom-pos))
			m, err := f.back.ReadAt(dest[i:i+chunk], pos)
			if err != nil && !errors.Is(err, io.EOF) {
				return 0, err
			}
			clear(dest[i+m : i+chunk])
		}
		i += chunk
	}
	return n, nil
}

func (f *file) Write(ctx context.Context, fh fs.FileHandle, data []byte, off int64) (uint32, syscall.Errno) {
	f.pfs.mu.Lock()
	defer f.pfs.mu.Unlock()
	if f.pfs.cut {
		return 0, syscall.EIO
	}
	if f.dirty == nil {
		f.dirty = make(map[int64][]byte)
	}
	for i := 0; i < len(data); {
		pos := off + int64(i)
		pg, po := pos/pageSize, int(pos%pageSize)
		b, ok := f.dirty[pg]
		if !ok {
			b = make([]byte, pageSize)
			if _, err := f.readAt(b, pg*pageSize); err != nil {
				return 0, syscall.EIO
			}
			f.dirty[pg] = b
		}
		i += copy(b[po:], data[i:])
	}
	f.size = max(f.size, off+int64(len(data)))
	return uint32(len(data)), 0
}

// Fsync commits the journal, then writes the file's dirty pages to the
// backing file.
func (f *file) Fsync(ctx context.Context, fh fs.FileHandle, flags uint32) syscall.Errno {
	p := f.pfs
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cut {
		return syscall.EIO
	}
	p.stats.Syncs++
	if errno := p.commit(); errno != 0 {
		return errno
	}
	if f.back == nil { // unlinked before its creation was committed
		f.dirty = nil
		return 0
	}
	for pg, b := range f.dirty {
		start := pg * pageSize
		if n := min(int64(pageSize), f.size-start); n > 0 {
			if _, err := f.back.WriteAt(b[:n], start); err != nil {
				return syscall.EIO
			}
		}
		p.stats.PagesSynced++
	}
	f.dirty = nil
	return 0
}
