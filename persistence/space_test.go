package persistence

import (
	"context"
	"encoding/hex"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"lemo/api"
	"lemo/internal/testwait"
)

// The floor can change while appends and checks run (a SIGHUP reload):
// above the free space it refuses, at 0 it allows.
func TestSetMinFreeBytes(t *testing.T) {
	dd, err := OpenDataDir(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer dd.Close()
	s, err := Open(dd, Options{Log: zerolog.Nop(), MemTableSize: 4 << 20, BlockCacheSize: 4 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.CheckSpace(); err != nil {
		t.Fatalf("CheckSpace without a floor: %v", err)
	}
	free, err := s.FreeSpace()
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for i := 0; i < 4; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := 0; j < 200; j++ {
				_ = s.CheckSpace()
			}
		}()
	}
	s.SetMinFreeBytes(free + 1<<40)
	wg.Wait()
	if err := s.CheckSpace(); !errors.Is(err, ErrNoSpace) {
		t.Fatalf("CheckSpace with a floor above the free space = %v, want ErrNoSpace", err)
	}
	s.SetMinFreeBytes(0)
	if err := s.CheckSpace(); err != nil {
		t.Fatalf("CheckSpace after the floor was lifted: %v", err)
	}
}

// Size reports the disk space the store takes, and it grows with appends.
func TestSize(t *testing.T) {
	st := openTest(t, t.TempDir())
	before := st.Size()
	if before <= 0 {
		t.Fatalf("Size() of a new store = %d, want > 0", before)
	}
	task := NewTaskID(t0)
	mustAppend(t, st, task, created(task, "alice"))
	// 12 MiB: more than the memtable, whose log is allocated in advance
	// (appends into it take no new space), so a new log and a table follow.
	// Random text: tables are compressed.
	rnd := rand.New(rand.NewPCG(1, 2))
	for seq := uint64(2); seq <= 193; seq++ {
		b := make([]byte, 32<<10)
		for i := range b {
			b[i] = byte(rnd.Uint32())
		}
		mustAppend(t, st, task, msg(task, seq, hex.EncodeToString(b))) // 64 KiB
	}
	if after := st.Size(); after < before+1<<20 {
		t.Fatalf("Size() after appending 12 MiB = %d, before %d: want at least 1 MiB more", after, before)
	}
}

// lowDisk is an injectable free-space reading: what the filesystem would
// report, given that the reserve file (when it exists) is part of the used
// space.
type lowDisk struct {
	free    atomic.Int64 // free beside the reserve
	reserve string
	size    int64
}

func (d *lowDisk) read(string) (int64, error) {
	free := d.free.Load()
	if _, err := os.Stat(d.reserve); err != nil {
		free += d.size // released: its space is free
	}
	return free, nil
}

// openLow opens a store with an 8 MiB memtable whose free space disk
// reports.
func openLow(t *testing.T, disk *lowDisk) (*testStore, string) {
	t.Helper()
	dir := t.TempDir()
	dd, err := OpenDataDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	disk.reserve, disk.size = dd.Join(reserveFile), reserveFactor*8<<20
	st, err := Open(dd, Options{Log: zerolog.Nop(), MemTableSize: 8 << 20, BlockCacheSize: 8 << 20, FreeBytes: disk.read, DiskPoll: time.Millisecond})
	if err != nil {
		_ = dd.Close()
		t.Fatalf("Open: %v", err)
	}
	ts := &testStore{Store: st, dd: dd}
	t.Cleanup(func() {
		_ = st.Close()
		_ = dd.Close()
	})
	return ts, dir
}

// waitFor polls cond until it holds or 10s pass.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	testwait.UntilTrue(t, 10*time.Second, what, cond)
}

// Below the headroom every ordinary append is refused before Badger is
// asked to write (nothing is written); a reserve append releases the
// reserve and is accepted while a flush fits; once space is back the
// reserve is allocated again and appends are accepted.
func TestAppendRefusedWhenDiskFull(t *testing.T) {
	const mib = 1 << 20
	disk := &lowDisk{}
	disk.free.Store(1 << 40)
	st, dir := openLow(t, disk)
	reserve := filepath.Join(dir, reserveFile)
	if fi, err := os.Stat(reserve); err != nil || fi.Size() != 16*mib {
		t.Fatalf("reserve file after Open: %v, %v; want 16 MiB", fi, err)
	}
	var states []DiskState
	var mu sync.Mutex
	st.WatchDisk(func(s DiskState) { mu.Lock(); states = append(states, s); mu.Unlock() })
	task := NewTaskID(t0)
	mustAppend(t, st, task, created(task, "alice"))

	disk.free.Store(24*mib - 1) // below the 24 MiB headroom
	_, err := st.Append(context.Background(), Append{TaskID: task, Events: []*api.Event{msg(task, 2, "refused")}})
	if !errors.Is(err, ErrDiskFull) {
		t.Fatalf("Append below the headroom: err = %v, want ErrDiskFull", err)
	}
	if !st.DiskFull() {
		t.Fatal("DiskFull() = false after a refused append")
	}
	if err := st.CheckSpace(); !errors.Is(err, ErrNoSpace) || !errors.Is(err, ErrDiskFull) {
		t.Fatalf("CheckSpace when full = %v, want ErrNoSpace and ErrDiskFull", err)
	}
	if m, err := st.Meta(task); err != nil || m.GetLastSeq() != 1 {
		t.Fatalf("after the refused append: last seq %d (%v), want 1", m.GetLastSeq(), err)
	}
	if err := st.UpdateIndex([]KV{{Key: IndexFormatKey(), Value: []byte("x")}}); !errors.Is(err, ErrDiskFull) {
		t.Fatalf("UpdateIndex below the headroom: err = %v, want ErrDiskFull", err)
	}
	if _, err := os.Stat(reserve); err != nil {
		t.Fatalf("the reserve was released by an ordinary append: %v", err)
	}

	// A reserve append: 0 free beside the reserve, which is released.
	disk.free.Store(0)
	if _, err := st.Append(context.Background(), Append{TaskID: task, Events: []*api.Event{msg(task, 2, "pause")}, Reserve: true}); err != nil {
		t.Fatalf("reserve append with the reserve to release: %v", err)
	}
	if _, err := os.Stat(reserve); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("reserve file after a reserve append on a full disk: %v, want it released", err)
	}
	// Nothing left, not even the reserve: refused too.
	disk.free.Store(-16 * mib)
	if _, err := st.Append(context.Background(), Append{TaskID: task, Events: []*api.Event{msg(task, 3, "pause")}, Reserve: true}); !errors.Is(err, ErrDiskFull) {
		t.Fatalf("reserve append with no space at all: err = %v, want ErrDiskFull", err)
	}
	// Space back, but not enough for the reserve, the headroom and a
	// memtable: still full.
	disk.free.Store(32*mib - 1) // reading: 48 MiB - 1
	if _, err := st.Append(context.Background(), Append{TaskID: task, Events: []*api.Event{msg(task, 3, "refused")}}); !errors.Is(err, ErrDiskFull) || !st.DiskFull() {
		t.Fatalf("Append below headroom + reserve + a memtable: %v, want still ErrDiskFull", err)
	}
	disk.free.Store(32 * mib) // reading 48 MiB: reserve 16, headroom 24, a memtable 8
	waitFor(t, "full state ends once space is back", func() bool { return !st.DiskFull() })
	if fi, err := os.Stat(reserve); err != nil || fi.Size() != 16*mib {
		t.Fatalf("reserve file after recovery: %v, %v; want 16 MiB again", fi, err)
	}
	mustAppend(t, st, task, msg(task, 3, "after"))
	mu.Lock()
	defer mu.Unlock()
	if len(states) != 3 || states[0].Full || !states[1].Full || states[2].Full {
		t.Fatalf("WatchDisk saw %+v, want normal, full, normal", states)
	}
}

// allocated returns the bytes allocated to a file.
func allocated(t *testing.T, path string) int64 {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Sys().(*syscall.Stat_t).Blocks * 512
}

// Every memtable log is allocated (not sparse) up to what Badger writes
// into it, also the ones Badger creates when a memtable fills: appends
// into it never need new space, so a full disk cannot fault them.
func TestMemtableLogsAllocated(t *testing.T) {
	st := openTest(t, t.TempDir())
	dir := st.space.dir
	want := int64(8<<20) * walPreallocNum / walPreallocDen
	if got := allocated(t, filepath.Join(dir, "00001.mem")); got < want {
		t.Fatalf("00001.mem after Open: %d bytes allocated, want %d", got, want)
	}
	task := NewTaskID(t0)
	mustAppend(t, st, task, created(task, "alice"))
	text := strings.Repeat("0123456789abcdef", 16<<10) // 256 KiB
	seq := uint64(2)
	for ; seq < 50; seq++ { // 12 MiB: at least one new memtable
		mustAppend(t, st, task, msg(task, seq, text))
	}
	mustAppend(t, st, task, msg(task, seq, "next batch"))
	if _, err := os.Stat(filepath.Join(dir, "00002.mem")); err != nil {
		t.Fatalf("no second memtable log after 12 MiB: %v", err)
	}
	if got := allocated(t, filepath.Join(dir, "00002.mem")); got < want {
		t.Fatalf("00002.mem: %d bytes allocated, want %d", got, want)
	}
}

// A store is not opened on a disk so full that Badger would fault
// replaying and flushing its log: the error says what to free.
func TestOpenRefusedOnFullDisk(t *testing.T) {
	dir := t.TempDir()
	closeTest(t, openTest(t, dir))
	dd, err := OpenDataDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer dd.Close()
	full := func(string) (int64, error) { return 1 << 20, nil }
	_, err = Open(dd, Options{Log: zerolog.Nop(), MemTableSize: 8 << 20, FreeBytes: full})
	if !errors.Is(err, ErrDiskFull) || !strings.Contains(err.Error(), "free space") {
		t.Fatalf("Open on a full disk: %v, want ErrDiskFull saying to free space", err)
	}
	if _, err := os.Stat(dd.Join(reserveFile)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("reserve after a refused open: %v, want it released first", err)
	}
}

// BenchmarkFreeSpace measures the free-space reading every batch pays.
func BenchmarkFreeSpace(b *testing.B) {
	dir := b.TempDir()
	for b.Loop() {
		if _, err := freeBytes(dir); err != nil {
			b.Fatal(err)
		}
	}
}

// A store opened without its reserve (released when the disk filled) and
// without room to allocate it again starts full: a restart does not skip
// the hysteresis.
func TestOpenWithoutRoomForTheReserveStartsFull(t *testing.T) {
	const mib = 1 << 20
	disk := &lowDisk{}
	disk.free.Store(1 << 40)
	dir := t.TempDir()
	closeTest(t, openTest(t, dir))
	if err := os.Remove(filepath.Join(dir, reserveFile)); err != nil {
		t.Fatal(err)
	}
	dd, err := OpenDataDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	disk.reserve, disk.size = dd.Join(reserveFile), reserveFactor*8<<20
	disk.free.Store(40*mib - 1 - 16*mib) // reading 40 MiB - 1: room for the headroom, not for the reserve beside it
	st, err := Open(dd, Options{Log: zerolog.Nop(), MemTableSize: 8 << 20, FreeBytes: disk.read, DiskPoll: time.Millisecond})
	if err != nil {
		_ = dd.Close()
		t.Fatal(err)
	}
	ts := &testStore{Store: st, dd: dd}
	defer closeTest(t, ts)
	if !st.DiskFull() {
		t.Fatal("DiskFull() = false after opening without room for the reserve")
	}
	task := NewTaskID(t0)
	if _, err := st.Append(context.Background(), Append{TaskID: task, Events: []*api.Event{created(task, "alice")}}); !errors.Is(err, ErrDiskFull) {
		t.Fatalf("Append: %v, want ErrDiskFull", err)
	}
	disk.free.Store(32 * mib) // reading 48 MiB: reserve 16, headroom 24, a memtable 8
	waitFor(t, "full state ends once there is room for the reserve", func() bool { return !st.DiskFull() })
	mustAppend(t, ts, task, created(task, "alice"))
}

// Values that would go to Badger's value log (a sparse 2 GiB mapping the
// guard does not allocate) are refused: every record stays in the
// memtable log.
func TestLargeValuesRefused(t *testing.T) {
	st := openTest(t, t.TempDir())
	task := NewTaskID(t0)
	mustAppend(t, st, task, created(task, "o"))
	big := make([]byte, valueThreshold)
	_, err := st.Append(context.Background(), Append{TaskID: task, Events: []*api.Event{msg(task, 2, "x")}, Extra: []KV{{Key: []byte("x/big"), Value: big}}})
	if !errors.Is(err, ErrTooLarge) {
		t.Fatalf("Append with an extra value of %d bytes: %v, want ErrTooLarge", len(big), err)
	}
	if err := st.UpdateIndex([]KV{{Key: IndexFormatKey(), Value: big}}); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("UpdateIndex with a value of %d bytes: %v, want ErrTooLarge", len(big), err)
	}
	mustAppend(t, st, task, msg(task, 2, "small"))
}
