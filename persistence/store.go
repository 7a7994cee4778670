package persistence

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/dgraph-io/badger/v4"
	"github.com/rs/zerolog"

	"lemo/logging"
)

// Data folder layout.
const (
	lockFile   = "lock"
	formatFile = "FORMAT"
	storeDir   = "store"
	// formatText identifies a Lemo data folder and its layout version.
	formatText = "lemo data folder, format 1\n"
	// storeFormat is the value of the format key inside the store. Format
	// 2 added the children index (c/); a store of format 1 is upgraded
	// when opened for writing (upgradeFormat1). Format 3 leaves the Task
	// and seq out of an event's record and writes a Task's metadata as a
	// checkpoint (saveMeta): a store of format 2 is one of format 3 (its
	// records are whole, its metadata current) and is marked so when
	// opened for writing, after which a lemo of format 2, which would
	// read stale metadata, refuses it.
	storeFormat = "lemo-store-3"
	// storeFormat2 is the format before checkpointed metadata.
	storeFormat2 = "lemo-store-2"
	// badgerMagic makes Badger refuse stores written with another layout.
	badgerMagic = 0x4c31 // "L1"
)

// DataDir is a locked data folder.
type DataDir struct {
	path string
	lock *os.File
}

// Path returns the folder's path.
func (d *DataDir) Path() string { return d.path }

// Join returns a path inside the folder.
func (d *DataDir) Join(elem ...string) string {
	return filepath.Join(append([]string{d.path}, elem...)...)
}

// OpenDataDir creates the folder if it does not exist, takes its lock and
// checks its format marker. A folder that exists but cannot be read, a
// folder that is a file, a folder of another format and a folder locked by
// another process are errors, and in those cases nothing is changed on disk.
func OpenDataDir(path string) (*DataDir, error) {
	if path == "" {
		return nil, fmt.Errorf("%w: empty data folder path", ErrInvalid)
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("data folder %s: %w", path, err)
	}
	fi, err := os.Stat(abs)
	switch {
	case errors.Is(err, os.ErrNotExist):
		if err := os.MkdirAll(abs, 0o700); err != nil {
			return nil, fmt.Errorf("create data folder %s: %w", abs, err)
		}
	case err != nil:
		return nil, fmt.Errorf("data folder %s cannot be read: %w", abs, err)
	case !fi.IsDir():
		return nil, fmt.Errorf("data folder %s is not a folder", abs)
	}
	// Reading the folder first proves it is readable before anything is
	// created in it.
	entries, err := os.ReadDir(abs)
	if err != nil {
		return nil, fmt.Errorf("data folder %s cannot be read: %w", abs, err)
	}
	marker, err := os.ReadFile(filepath.Join(abs, formatFile))
	switch {
	case errors.Is(err, os.ErrNotExist):
		if len(entries) > 0 && !onlyLock(entries) {
			return nil, fmt.Errorf("data folder %s is not empty and has no %s marker: refusing to use a folder Lemo did not create (choose an empty or new folder)", abs, formatFile)
		}
	case err != nil:
		return nil, fmt.Errorf("data folder %s: read %s: %w", abs, formatFile, err)
	case string(marker) != formatText:
		return nil, fmt.Errorf("data folder %s has format %q, this lemo reads %q", abs, strings.TrimSpace(string(marker)), strings.TrimSpace(formatText))
	}
	lock, err := takeLock(filepath.Join(abs, lockFile))
	if err != nil {
		return nil, fmt.Errorf("data folder %s: %w", abs, err)
	}
	if marker == nil {
		if err := writeFileSync(filepath.Join(abs, formatFile), []byte(formatText), 0o600); err != nil {
			_ = lock.Close()
			return nil, fmt.Errorf("data folder %s: write %s: %w", abs, formatFile, err)
		}
	}
	return &DataDir{path: abs, lock: lock}, nil
}

func onlyLock(entries []os.DirEntry) bool {
	return len(entries) == 1 && entries[0].Name() == lockFile
}

func takeLock(path string) (*os.File, error) {
	// O_CREATE on an existing file changes nothing; the second daemon
	// leaves the folder as it found it.
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open lock file: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		_ = f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("%w: another lemo daemon is using it", ErrLocked)
		}
		return nil, fmt.Errorf("lock: %w", err)
	}
	return f, nil
}

// Close releases the lock.
func (d *DataDir) Close() error {
	if d.lock == nil {
		return nil
	}
	err := d.lock.Close()
	d.lock = nil
	return err
}

func writeFileSync(path string, data []byte, mode os.FileMode) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, mode)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		_ = f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}

// Options tunes the store. The zero value is the production setting.
type Options struct {
	Log zerolog.Logger
	// MemTableSize is Badger's memtable size; 0 means 8 MiB. Values below
	// 8 MiB are raised to 8 MiB, the least that holds a record of the
	// largest size. The disk space the store keeps for itself scales with
	// it (see ErrDiskFull): 1.5× for the memtable log, 3× headroom and 2×
	// reserve.
	MemTableSize int64
	// BlockCacheSize is Badger's block cache; 0 means 8 MiB
	// (defaultBlockCache).
	BlockCacheSize int64
	// MaxBatch bounds the appends one commit groups; 0 means 256.
	MaxBatch int
	// MetaCacheSize bounds the writer's cache of Task metadata; 0 means 4096.
	MetaCacheSize int
	// ReadOnly opens the store for inspection only (no writer).
	ReadOnly bool
	// MinFreeBytes is the free-space floor CheckSpace enforces; 0 disables
	// it.
	MinFreeBytes int64
	// FreeBytes reads the free space of the filesystem holding a folder;
	// nil reads it with statfs. Tests inject low readings with it.
	FreeBytes func(dir string) (int64, error)
	// DiskPoll is how often the free space is read while no append comes;
	// 0 means DefaultDiskPoll.
	DiskPoll time.Duration
	// OnCommit, when set, is called after every commit with the number of
	// appends and events it acknowledged and how long the oldest waited;
	// it must be cheap (it runs on the writer's goroutine).
	OnCommit func(appends, events int, wait time.Duration)
	// OnAck, when set, is called for every append acknowledged with how
	// long it waited from its submission to its durable acknowledgement;
	// it must be cheap (it runs on the writer's goroutine).
	OnAck func(wait time.Duration)

	// unsyncedWrites opens Badger with SyncWrites off. Only the power-loss
	// test sets it, as its negative control: it proves the test notices
	// acknowledged writes that were never synced.
	unsyncedWrites bool
}

// MaxEventBytes is the largest encoded event the store accepts. It keeps
// every record below Badger's value threshold, on the WAL path whose sync
// errors are reported.
const MaxEventBytes = 768 << 10

// valueThreshold is Badger's value threshold: a value this large would go
// to the value log, a sparse memory mapping a full disk would fault, so
// extra and index values are refused from it on (events stop earlier).
const valueThreshold = 1 << 20

// Store is the daemon's embedded store.
type Store struct {
	db    *badger.DB
	log   zerolog.Logger
	w     *writer
	space *diskGuard
	// statuses counts Tasks by status, kept by the writer.
	statuses statusCounts
	// noChildIndex: a store of format 1 opened read-only, which has no
	// children index yet (Children and Tree refuse it).
	noChildIndex bool

	closeOnce sync.Once
	closeErr  error
}

// Open opens (or creates) the store inside dd.
func Open(dd *DataDir, opt Options) (*Store, error) {
	dir := dd.Join(storeDir)
	fi, err := os.Stat(dir)
	fresh := errors.Is(err, os.ErrNotExist)
	switch {
	case err != nil && !fresh:
		return nil, fmt.Errorf("store %s: %w", dir, err)
	case !fresh && !fi.IsDir():
		return nil, fmt.Errorf("store %s is not a folder", dir)
	case fresh && opt.ReadOnly:
		return nil, fmt.Errorf("store %s: %w", dir, ErrNotFound)
	}
	if !fresh {
		entries, err := os.ReadDir(dir)
		if err != nil {
			return nil, fmt.Errorf("store %s cannot be read: %w", dir, err)
		}
		if len(entries) == 0 {
			fresh = true
		}
	}
	if fresh && hasHistoryMarker(dd) {
		return nil, fmt.Errorf("store %s is missing or empty but this data folder held a store: refusing to start fresh over lost history (restore the store, or use a new data folder)", dir)
	}
	memtable := max(orDefault(opt.MemTableSize, defaultMemTable), 8<<20)
	space := newDiskGuard(dd, dir, memtable, opt.FreeBytes, opt.Log)
	if !opt.ReadOnly {
		if err := space.prepareOpen(); err != nil {
			return nil, fmt.Errorf("open store %s: %w", dir, err)
		}
	}
	bo := badger.DefaultOptions(dir).
		WithSyncWrites(!opt.unsyncedWrites).
		WithLogger(logging.NewPrintf(opt.Log, "badger")).
		WithValueThreshold(valueThreshold).
		WithExternalMagic(badgerMagic).
		WithVerifyValueChecksum(true).
		WithReadOnly(opt.ReadOnly).
		WithMetricsEnabled(false).
		WithMemTableSize(memtable).
		WithBlockCacheSize(orDefault(opt.BlockCacheSize, defaultBlockCache)).
		WithIndexCacheSize(16 << 20).
		WithBaseTableSize(baseTableSize).
		WithNumVersionsToKeep(1)
	db, err := badger.Open(bo)
	if err != nil {
		// Badger flattens the chain of this error (y.Wrapf), so its text
		// is what tells.
		if opt.ReadOnly && strings.Contains(err.Error(), badger.ErrTruncateNeeded.Error()) {
			return nil, fmt.Errorf("open store %s: %w (%v)", dir, ErrNeedsRecovery, err)
		}
		return nil, fmt.Errorf("open store %s: %w", dir, err)
	}
	s := &Store{db: db, log: opt.Log, space: space}
	s.space.floor.Store(opt.MinFreeBytes)
	if err := s.checkFormat(fresh, opt.ReadOnly); err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("store %s: %w", dir, err)
	}
	if fresh {
		if err := writeFileSync(dd.Join(historyMarker), []byte(storeFormat+"\n"), 0o600); err != nil {
			_ = db.Close()
			return nil, fmt.Errorf("store %s: %w", dir, err)
		}
	}
	if err := s.countStatuses(); err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("store %s: count tasks by status: %w", dir, err)
	}
	if !opt.ReadOnly {
		if err := space.started(cmp.Or(opt.DiskPoll, DefaultDiskPoll)); err != nil {
			_ = db.Close()
			return nil, fmt.Errorf("store %s: %w", dir, err)
		}
		s.w = newWriter(db, opt, &s.statuses)
		s.w.guard = space
	}
	return s, nil
}

// defaultMemTable is Badger's memtable size unless Options say otherwise:
// the least the store accepts (see MemTableSize), not Badger's 64 MiB,
// because the disk space the store keeps for itself is a multiple of it
// (6.5×: 52 MiB here, 416 MiB at 64 MiB) and Lemo's records are small: it
// costs a memtable flush every 8 MiB of history.
const defaultMemTable = 8 << 20

// defaultBlockCache is Badger's block cache unless Options say otherwise.
// It holds the decompressed blocks of the store's tables; the memory keeps
// its own caches of what recall reads most (decoded index blocks, rows,
// texts: memory.Options), so a larger one mostly held the daemon's resident
// memory: at 64 MiB the daemon's peak RSS was 15-20 MB higher after a few
// seconds of 50 Tasks at work, for no CPU or recall latency measured
// (BenchmarkSteps, BenchmarkRecall100K).
const defaultBlockCache = 8 << 20

// baseTableSize is the size of the tables Badger's compactions write
// (Badger's default is 2 MiB). It also sizes, at twice it, the first buffer
// of the allocator a table builder takes, a memtable flush's included; the
// allocator doubles its next buffer until the table fits, and a builder holds
// each block twice (as written and Snappy's worst-case output), about 2.2
// times the table's uncompressed size. A flush of the 8 MiB memtable under
// BenchmarkSteps needs 13.2-14.9 MB: at 2 MiB that took 4+8+16 = 28 MiB of
// heap while the old and new memtables (10.4 MB each) were live too, at
// 1 MiB most flushes fit in 2+4+8 = 14 MiB (the largest take 30), and a
// compaction's builder needs about 6 MB (2+4 MiB) where it took 28 MiB.
// Badger keeps up to 8 builders' allocators for reuse, so they stay that
// size. The daemon's peak RSS at T=50 fell by about 10 MB (median of six
// runs 162 to 152 MB), CPU and disk per step unchanged (docs/performance.md).
const baseTableSize = 1 << 20

// historyMarker is written beside the store once it exists, so that a store
// that disappears is noticed instead of silently replaced.
const historyMarker = "store.created"

func hasHistoryMarker(dd *DataDir) bool {
	_, err := os.Stat(dd.Join(historyMarker))
	return err == nil
}

func orDefault(v, d int64) int64 {
	if v <= 0 {
		return d
	}
	return v
}

func (s *Store) checkFormat(fresh, readOnly bool) error {
	var have []byte
	err := s.db.View(func(txn *badger.Txn) error {
		it, err := txn.Get(formatKey)
		if err != nil {
			return err
		}
		have, err = it.ValueCopy(nil)
		return err
	})
	switch {
	case err == nil:
		if string(have) == storeFormat1 {
			if readOnly {
				// Inspection reads no index; the daemon upgrades the store
				// the next time it opens it.
				s.noChildIndex = true
				return nil
			}
			return s.upgradeFormat1()
		}
		if string(have) == storeFormat2 {
			if readOnly {
				return nil
			}
			return s.markFormat()
		}
		if !bytes.Equal(have, []byte(storeFormat)) {
			return fmt.Errorf("store format %q, this lemo reads %q", have, storeFormat)
		}
		return nil
	case errors.Is(err, badger.ErrKeyNotFound):
		if !fresh {
			return fmt.Errorf("store has no format record: not a Lemo store, or damaged")
		}
		if readOnly {
			return nil
		}
		return s.markFormat()
	default:
		return err
	}
}

// markFormat records that the store is of this lemo's format
// (storeFormat).
func (s *Store) markFormat() error {
	return s.db.Update(func(txn *badger.Txn) error { return txn.Set(formatKey, []byte(storeFormat)) })
}

// Close waits for queued appends, stops the writer and closes the store.
// It is safe to call more than once.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		if s.w != nil {
			s.w.close()
			if err := s.space.close(); err != nil {
				// Closing flushes the memtable into a new table, a write
				// the disk cannot back: Badger would fault. The log is
				// durable; the next open replays it.
				s.log.Error().Err(err).Msg("store left unclosed: the disk is full")
				s.closeErr = err
				return
			}
		}
		s.closeErr = s.db.Close()
	})
	return s.closeErr
}

// Size returns the disk space the store's files take, in bytes (allocated
// blocks: Badger preallocates its value log and memtable files sparsely).
// Badger's own DB.Size is kept by its metrics, which Lemo turns off, and is
// refreshed only once a minute.
func (s *Store) Size() int64 {
	var n int64
	_ = filepath.WalkDir(s.space.dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return nil
		}
		if fi, err := d.Info(); err == nil {
			if st, ok := fi.Sys().(*syscall.Stat_t); ok {
				n += st.Blocks * 512
			} else {
				n += fi.Size()
			}
		}
		return nil
	})
	return n
}
