package persistence

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// ErrNoSpace: the data folder's filesystem is below its free-space floor.
var ErrNoSpace = errors.New("persistence: not enough free space")

// spaceGuard reads the free space of the store's filesystem at most once per
// interval.
type spaceGuard struct {
	dir string
	// floor may change while the daemon runs (SetMinFreeBytes).
	floor    atomic.Int64
	interval time.Duration

	mu      sync.Mutex
	checked time.Time
	free    int64
	err     error
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

func (g *spaceGuard) check() (int64, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if time.Since(g.checked) < g.interval && !g.checked.IsZero() {
		return g.free, g.err
	}
	g.free, g.err = freeBytes(g.dir)
	g.checked = time.Now()
	return g.free, g.err
}

// FreeSpace returns the bytes free on the store's filesystem (read at most
// once a second).
func (s *Store) FreeSpace() (int64, error) { return s.space.check() }

// CheckSpace returns an error wrapping ErrNoSpace when the store's
// filesystem is below the configured floor (Options.MinFreeBytes); nil when
// it is above or no floor is set. New work is refused on it; appends of
// running work are not, so nothing acknowledged is lost.
func (s *Store) CheckSpace() error {
	floor := s.space.floor.Load()
	if floor <= 0 {
		return nil
	}
	free, err := s.space.check()
	if err != nil {
		return err
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
