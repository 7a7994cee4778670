package persistence

import (
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/rs/zerolog"
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
	text := strings.Repeat("0123456789abcdef", 4<<10) // 64 KiB
	for seq := uint64(2); seq <= 33; seq++ {
		mustAppend(t, st, task, msg(task, seq, text))
	}
	if after := st.Size(); after < before+1<<20 {
		t.Fatalf("Size() after appending 2 MiB = %d, before %d: want at least 1 MiB more", after, before)
	}
}
