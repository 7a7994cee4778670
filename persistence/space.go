package persistence

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/rs/zerolog"
	"golang.org/x/sys/unix"
)

// ErrNoSpace: the data folder's filesystem is below its free-space floor.
var ErrNoSpace = errors.New("persistence: not enough free space")

// ErrDiskFull: an append was refused because the data folder's filesystem
// is below the headroom the store keeps for itself; nothing was written.
// Badger writes through memory-mapped files and a write into a page the
// filesystem cannot back kills the process (SIGBUS), so the store stops
// appending before that: appends are accepted again once space is freed.
var ErrDiskFull = errors.New("persistence: disk full")

// Disk space the store keeps for Badger, in multiples of its memtable size
// M. Badger writes into memory-mapped files: its memtable log (WAL), the
// tables a memtable is flushed to and the tables compaction writes. A write
// into a page the filesystem cannot back is a SIGBUS, not an error. The
// store therefore
//   - allocates each memtable log up to walPrealloc (1.5·M) as soon as it
//     sees it (fallocate), so appends into it never need new space; it
//     does so only while a flush (M) still fits beside it, and refuses
//     ordinary appends while a log is not allocated;
//   - refuses ordinary appends while the free space is below
//     headroomFactor·M: the first transaction written into a new log
//     before it is allocated (≤ 0.2·M), that log's allocation (1.5·M) and
//     the flush of the full memtable (≤ M) fit in it;
//   - keeps a reserve file of reserveFactor·M, allocated, that it deletes
//     when the disk is full, so that the records pausing Tasks (Append.
//     Reserve) and a flush they may cause fit.
const (
	headroomFactor = 3
	reserveFactor  = 2
	// A reserve append needs the room of a flush and the first
	// transaction of a new log.
	reserveNeedNum, reserveNeedDen = 3, 2
	// walPrealloc bounds a memtable log: Badger rotates once the log
	// reaches M and a transaction holds at most 15% of M (plus per-entry
	// headers).
	walPreallocNum, walPreallocDen = 3, 2
)

// reserveFile is the reserve's name in the data folder.
const reserveFile = "space.reserve"

// DefaultDiskPoll is how often the store reads the free space while no
// append arrives, to notice a disk filling (and space coming back).
const DefaultDiskPoll = 50 * time.Millisecond

// DiskState is what the disk guard reports when it changes.
type DiskState struct {
	// Full: appends are refused (ErrDiskFull) until space is freed.
	Full bool
	// Free is the free space read, in bytes; Headroom the free space below
	// which appends are refused and Reserve the reserve file's size.
	Free, Headroom, Reserve int64
}

// freeBytes returns the bytes available to an unprivileged writer on the
// filesystem holding dir.
func freeBytes(dir string) (int64, error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return 0, fmt.Errorf("statfs %s: %w", dir, err)
	}
	return int64(st.Bavail) * int64(st.Bsize), nil
}

// diskGuard keeps the store off a full disk. The writer asks it before
// every batch (admit); a poller asks it while no batch comes; both see the
// same state under mu.
type diskGuard struct {
	dir         string // the store's folder
	fsDir       string // the data folder: its filesystem is read
	reservePath string
	memtable    int64
	headroom    int64
	reserve     int64
	need        int64 // what a reserve append needs
	read        func(dir string) (int64, error)
	log         zerolog.Logger
	// floor is the new-work floor (SetMinFreeBytes).
	floor atomic.Int64

	mu       sync.Mutex
	full     bool
	reserved bool // the reserve file is allocated
	walFid   int  // the highest memtable log allocated
	noAlloc  bool // the filesystem has no fallocate (warned once)
	watch    func(DiskState)
	lastErr  string

	// state mirrors full for readers that must not wait for mu.
	state atomic.Bool

	stop chan struct{}
	done chan struct{}
}

func newDiskGuard(dd *DataDir, dir string, memtable int64, read func(string) (int64, error), log zerolog.Logger) *diskGuard {
	if read == nil {
		read = freeBytes
	}
	return &diskGuard{
		dir:         dir,
		fsDir:       dd.Path(),
		reservePath: dd.Join(reserveFile),
		memtable:    memtable,
		headroom:    headroomFactor * memtable,
		reserve:     reserveFactor * memtable,
		need:        memtable * reserveNeedNum / reserveNeedDen,
		read:        read,
		log:         log,
	}
}

// admit answers, before Badger is asked to write, the requests of batch the
// disk cannot take (ErrDiskFull) and returns the others.
func (w *writer) admit(batch []*request) []*request {
	if w.guard == nil {
		return batch
	}
	wantReserve := false
	for _, r := range batch {
		wantReserve = wantReserve || r.reserve
	}
	v := w.guard.admit(wantReserve)
	if v.normal == nil && v.reserve == nil {
		return batch
	}
	kept := batch[:0]
	for _, r := range batch {
		err := v.normal
		if r.reserve {
			err = v.reserve
		}
		if err != nil {
			r.done <- result{err: err}
			continue
		}
		kept = append(kept, r)
	}
	return kept
}

// verdict is what the guard allows for one batch.
type verdict struct {
	normal, reserve error
}

// admit reads the free space and decides what the next batch may write:
// ordinary appends need the headroom, reserve appends (the records that
// pause Tasks) the room of a flush, for which the reserve is released.
// Memtable logs Badger created since the last call are allocated first.
func (g *diskGuard) admit(wantReserve bool) verdict {
	g.mu.Lock()
	defer g.mu.Unlock()
	free, err := g.evaluate()
	if err != nil {
		return verdict{normal: err, reserve: err}
	}
	if !g.full {
		return verdict{}
	}
	v := verdict{normal: g.fullError(free)}
	if wantReserve && free < g.need && g.reserved {
		g.releaseReserve()
		g.allocWAL()
		if free, err = g.read(g.fsDir); err != nil {
			return verdict{normal: err, reserve: err}
		}
	}
	if free < g.need {
		v.reserve = fmt.Errorf("%w: the data folder's filesystem has %d MiB free, less than the %d MiB the store needs to record even a pause (free space: the daemon resumes by itself)",
			ErrDiskFull, free>>20, g.need>>20)
	}
	return v
}

func (g *diskGuard) fullError(free int64) error {
	return fmt.Errorf("%w: the data folder's filesystem has %d MiB free, below the %d MiB the store keeps for itself; running Tasks pause and continue once space is freed",
		ErrDiskFull, free>>20, g.headroom>>20)
}

// evaluate allocates new memtable logs, reads the free space and moves
// between normal and full. Normal turns full below the headroom or when a
// log could not be allocated; full turns normal once the reserve is
// allocated again and the headroom plus one memtable is free beside it.
// Called with mu held.
func (g *diskGuard) evaluate() (int64, error) {
	walOK := g.allocWAL()
	free, err := g.read(g.fsDir)
	if err != nil {
		return 0, err
	}
	was := g.full
	switch {
	case !g.full && (free < g.headroom || !walOK):
		g.full = true
	case g.full && !walOK:
		// Stays full until the new memtable log is allocated.
	case !g.full && !g.reserved && free >= g.headroom+g.reserve+g.memtable:
		if err := g.allocReserve(); err != nil {
			g.warn("cannot allocate the disk reserve", err)
		} else if free, err = g.read(g.fsDir); err != nil {
			return 0, err
		}
	case g.full && g.reserved && free >= g.headroom+g.memtable:
		g.full = false
	case g.full && !g.reserved && free >= g.headroom+g.reserve+g.memtable:
		if err := g.allocReserve(); err != nil {
			g.warn("cannot allocate the disk reserve", err)
			break
		}
		g.full = false
		if free, err = g.read(g.fsDir); err != nil {
			return 0, err
		}
	}
	if g.full != was {
		g.state.Store(g.full)
		ev := g.log.Warn()
		msg := "the data folder's disk is full: appends are refused and running Tasks pause"
		if !g.full {
			ev = g.log.Info()
			msg = "disk space is back: appends are accepted again"
		}
		ev.Int64("free_mib", free>>20).Int64("headroom_mib", g.headroom>>20).Bool("reserve", g.reserved).Msg(msg)
		if g.watch != nil {
			g.watch(DiskState{Full: g.full, Free: free, Headroom: g.headroom, Reserve: g.reserve})
		}
	}
	return free, nil
}

// allocReserve allocates the reserve file. Called with mu held.
func (g *diskGuard) allocReserve() error {
	f, err := os.OpenFile(g.reservePath, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return err
	}
	err = unix.Fallocate(int(f.Fd()), 0, 0, g.reserve)
	if unsupported(err) {
		// The filesystem cannot allocate without writing: write zeros.
		err = writeZeros(f, g.reserve)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		_ = os.Remove(g.reservePath)
		return fmt.Errorf("allocate %s: %w", g.reservePath, err)
	}
	g.reserved = true
	return nil
}

// releaseReserve deletes the reserve file, giving its space to the store.
// Called with mu held.
func (g *diskGuard) releaseReserve() {
	if err := os.Remove(g.reservePath); err != nil && !errors.Is(err, os.ErrNotExist) {
		g.warn("cannot release the disk reserve", err)
		return
	}
	g.reserved = false
	g.log.Warn().Int64("reserve_mib", g.reserve>>20).Msg("released the disk reserve to record the pause of running Tasks")
}

// allocWAL allocates the memtable logs Badger created since the last call
// (it numbers them in sequence), as long as the flush of a memtable still
// fits beside them. It reports whether every log is allocated. Called with
// mu held.
func (g *diskGuard) allocWAL() bool {
	for {
		p := filepath.Join(g.dir, fmt.Sprintf("%05d.mem", g.walFid+1))
		if _, err := os.Stat(p); err != nil {
			return true
		}
		free, err := g.read(g.fsDir)
		if err != nil || free < g.walSize()+g.memtable {
			return false
		}
		if err := g.allocFile(p, g.walSize()); err != nil {
			if errors.Is(err, os.ErrNotExist) { // flushed and deleted meanwhile
				g.walFid++
				continue
			}
			g.warn("cannot allocate a memtable log", err)
			return false
		}
		g.walFid++
	}
}

// walSize is how much of a memtable log is allocated.
func (g *diskGuard) walSize() int64 { return g.memtable * walPreallocNum / walPreallocDen }

// allocFile allocates the first n bytes of an existing file (at most its
// size), so that writes through a mapping of them need no new space.
func (g *diskGuard) allocFile(path string, n int64) error {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	n = min(n, fi.Size())
	if n <= 0 {
		return nil
	}
	err = unix.Fallocate(int(f.Fd()), unix.FALLOC_FL_KEEP_SIZE, 0, n)
	if unsupported(err) {
		// Badger writes this file through its mapping, so it cannot be
		// filled with zeros here: the guard's free-space checks alone
		// stand between the log and a full disk on such a filesystem.
		if !g.noAlloc {
			g.noAlloc = true
			g.log.Warn().Err(err).Msg("the data folder's filesystem cannot preallocate the store's logs: the disk guard relies on free-space checks alone, and a disk filled by something else between two checks can still stop the daemon")
		}
		return nil
	}
	if err != nil {
		return fmt.Errorf("allocate %s: %w", path, err)
	}
	return nil
}

// unsupported reports whether err says the filesystem has no fallocate.
func unsupported(err error) bool {
	return errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, unix.ENOSYS)
}

// writeZeros fills the first n bytes of f with zeros, allocating them on a
// filesystem without fallocate.
func writeZeros(f *os.File, n int64) error {
	zeros := make([]byte, 1<<20)
	for off := int64(0); off < n; off += int64(len(zeros)) {
		chunk := zeros[:min(int64(len(zeros)), n-off)]
		if _, err := f.WriteAt(chunk, off); err != nil {
			return err
		}
	}
	return nil
}

// prepareOpen runs before Badger opens the store: it allocates the logs
// Badger will replay and write into, and refuses to open when not even the
// reserve's space lets Badger flush them (it would fault).
func (g *diskGuard) prepareOpen() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	_, err := os.Stat(g.reservePath)
	g.reserved = err == nil
	for {
		entries, err := os.ReadDir(g.dir)
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
		var failed error
		for _, e := range entries {
			fid, err := strconv.Atoi(strings.TrimSuffix(e.Name(), ".mem"))
			if err != nil || !strings.HasSuffix(e.Name(), ".mem") {
				continue
			}
			if err := g.allocFile(filepath.Join(g.dir, e.Name()), g.walSize()); err != nil {
				failed = err
			}
			g.walFid = max(g.walFid, fid)
		}
		free, err := g.read(g.fsDir)
		if err != nil {
			return err
		}
		if failed == nil && free >= g.need {
			return nil
		}
		if g.reserved {
			g.releaseReserve()
			if !g.reserved {
				continue
			}
		}
		why := ""
		if failed != nil {
			why = fmt.Sprintf(" (%v)", failed)
		}
		return fmt.Errorf("%w: the data folder's filesystem has %d MiB free; the store needs at least %d MiB to open safely (Badger faults on a full disk): free space on it%s",
			ErrDiskFull, free>>20, g.need>>20, why)
	}
}

// started runs once Badger is open: it allocates the reserve when there is
// room for it beside the headroom, else starts full (the state the store was
// left in when it released its reserve: a restart is no way around the
// hysteresis), takes the first reading (allocating the log Badger created)
// and starts the poller.
func (g *diskGuard) started(poll time.Duration) error {
	g.mu.Lock()
	free, err := g.read(g.fsDir)
	if err == nil && !g.reserved && free >= g.headroom+g.reserve {
		if err := g.allocReserve(); err != nil {
			g.warn("cannot allocate the disk reserve", err)
		}
	}
	if err == nil {
		g.full = !g.reserved
		g.state.Store(g.full)
		_, err = g.evaluate()
	}
	g.mu.Unlock()
	if err != nil {
		return err
	}
	g.stop, g.done = make(chan struct{}), make(chan struct{})
	go g.poll(poll)
	return nil
}

// poll re-evaluates the disk every interval, so that a disk filled by
// something else than appends (a tool writing files) is noticed, and space
// coming back ends the full state, without an append.
func (g *diskGuard) poll(every time.Duration) {
	defer close(g.done)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-g.stop:
			return
		case <-t.C:
			g.mu.Lock()
			if _, err := g.evaluate(); err != nil {
				g.warn("cannot read the free space", err)
			}
			g.mu.Unlock()
		}
	}
}

// close stops the poller. It reports whether Badger may close (and flush
// its memtable): when the disk is full it first releases the reserve, and
// when even then a flush does not fit, closing would fault: the store is
// then left to the next start, which replays its durable log.
func (g *diskGuard) close() error {
	if g.stop != nil {
		close(g.stop)
		<-g.done
		g.stop = nil
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	free, err := g.read(g.fsDir)
	if err != nil || free >= g.need {
		return nil
	}
	if g.reserved {
		g.releaseReserve()
		if free, err = g.read(g.fsDir); err != nil || free >= g.need {
			return nil
		}
	}
	return fmt.Errorf("%w: %d MiB free, a memtable flush needs %d MiB: the store was not flushed; the next start replays its log", ErrDiskFull, free>>20, g.need>>20)
}

// warn logs err once until a different one comes.
func (g *diskGuard) warn(msg string, err error) {
	if s := err.Error(); s != g.lastErr {
		g.lastErr = s
		g.log.Warn().Err(err).Msg(msg)
	}
}

// FreeSpace returns the bytes free on the store's filesystem (not counting
// the reserve file, which is allocated).
func (s *Store) FreeSpace() (int64, error) { return s.space.read(s.space.fsDir) }

// DiskFull reports whether appends are refused because the disk is full.
func (s *Store) DiskFull() bool { return s.space.state.Load() }

// WatchDisk sets the function told when the disk guard changes between
// normal and full; it runs on the store's goroutines, so it must not block
// or call the store. It is called at once with the current state; nil
// stops the calls (none runs once WatchDisk returns).
func (s *Store) WatchDisk(fn func(DiskState)) {
	g := s.space
	g.mu.Lock()
	defer g.mu.Unlock()
	g.watch = fn
	if fn == nil {
		return
	}
	free, _ := g.read(g.fsDir)
	fn(DiskState{Full: g.full, Free: free, Headroom: g.headroom, Reserve: g.reserve})
}

// CheckSpace returns an error wrapping ErrNoSpace when the store's
// filesystem is below the configured floor (Options.MinFreeBytes), or the
// store refuses appends (then it wraps ErrDiskFull too); nil when it is
// above or no floor is set. New work is refused on it; appends of running
// work are not, so nothing acknowledged is lost.
func (s *Store) CheckSpace() error {
	full, floor := s.DiskFull(), s.space.floor.Load()
	if !full && floor <= 0 {
		return nil // nothing to check: no reading of the disk
	}
	free, err := s.FreeSpace()
	if err != nil {
		return err
	}
	if full {
		return fmt.Errorf("%w: %w: the data folder's filesystem has %d MiB free, below the %d MiB the store keeps for itself (free space)",
			ErrNoSpace, ErrDiskFull, free>>20, s.space.headroom>>20)
	}
	if free < floor {
		return fmt.Errorf("%w: the data folder's filesystem has %d MiB free, below the floor of %d MiB (free space, or lower storage.min_free_mib)",
			ErrNoSpace, free>>20, floor>>20)
	}
	return nil
}

// SetMinFreeBytes changes the free-space floor CheckSpace enforces (0
// disables it); safe while the store is in use.
func (s *Store) SetMinFreeBytes(n int64) { s.space.floor.Store(n) }
