package powercut

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"go.uber.org/goleak"
)

// mountTest mounts a powercut filesystem for the test, in a private mount
// namespace: it returns a nil FS in the parent, which has run the test in a
// child. It skips without root or /dev/fuse; under CI=true a machine that
// has them must run the test.
func mountTest(t *testing.T) (backing, mnt string, p *FS) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("powercut: mounting FUSE needs root")
	}
	if _, err := os.Stat("/dev/fuse"); err != nil {
		t.Skipf("powercut: no /dev/fuse: %v", err)
	}
	if !InPrivateMounts(t) {
		return "", "", nil
	}
	backing, mnt = t.TempDir(), t.TempDir()
	p, err := Mount(backing, mnt)
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("CI=true, root and /dev/fuse, but: %v", err)
		}
		t.Skipf("powercut: %v", err)
	}
	return backing, mnt, p
}

func writeFile(t *testing.T, path, data string, sync bool) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString(data); err != nil {
		t.Fatal(err)
	}
	if sync {
		if err := f.Sync(); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestCutKeepsOnlyWhatWasSynced checks the model: synced data survives,
// unsynced data reads as zeros once its file's size was committed, namespace
// changes survive only if a sync followed them.
func TestCutKeepsOnlyWhatWasSynced(t *testing.T) {
	backing, mnt, p := mountTest(t)
	if p == nil {
		return // ran in a private mount namespace
	}
	in := func(name string) string { return filepath.Join(mnt, name) }

	writeFile(t, in("synced"), "hello", true)
	writeFile(t, in("unsynced"), "world", false)
	if err := os.Mkdir(in("sub"), 0o700); err != nil {
		t.Fatal(err)
	}
	writeFile(t, in("sub/later"), "x", true) // commits unsynced's creation and size, and sub
	// The live view sees everything.
	if b, err := os.ReadFile(in("unsynced")); err != nil || string(b) != "world" {
		t.Fatalf("live read = %q, %v; want world", b, err)
	}
	if err := os.Rename(in("synced"), in("renamed")); err != nil {
		t.Fatal(err)
	}
	writeFile(t, in("gone"), "lost", false)
	// An overwrite of synced data, not synced.
	f, err := os.OpenFile(in("sub/later"), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte("y"), 0); err != nil {
		t.Fatal(err)
	}
	_ = f.Close()

	p.Cut()
	if _, err := os.ReadFile(in("sub/later")); !errors.Is(err, syscall.EIO) {
		t.Fatalf("read after the cut: %v, want EIO", err)
	}
	if err := p.Unmount(); err != nil {
		t.Fatal(err)
	}
	st := p.Stats()
	if st.PagesDropped == 0 || st.OpsDropped != 2 {
		t.Fatalf("stats %+v: want dropped pages and 2 dropped ops (rename, create)", st)
	}

	for _, c := range []struct {
		name string
		want []byte // nil: must not exist
	}{
		{"synced", []byte("hello")},
		{"renamed", nil},
		{"unsynced", make([]byte, 5)},
		{"sub/later", []byte("x")},
		{"gone", nil},
	} {
		b, err := os.ReadFile(filepath.Join(backing, c.name))
		switch {
		case c.want == nil && !errors.Is(err, os.ErrNotExist):
			t.Errorf("%s after the cut: %q, %v; want it absent", c.name, b, err)
		case c.want != nil && (err != nil || !bytes.Equal(b, c.want)):
			t.Errorf("%s after the cut: %q, %v; want %q", c.name, b, err, c.want)
		}
	}

	// A new mount serves what survived.
	p2, err := Mount(backing, mnt)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := p2.Unmount(); err != nil {
			t.Error(err)
		}
	}()
	if b, err := os.ReadFile(in("synced")); err != nil || string(b) != "hello" {
		t.Fatalf("remounted read = %q, %v; want hello", b, err)
	}
}

// TestTruncateHidesOldData checks that data beyond a shrinking truncate
// does not come back when the file grows again, before and after a sync.
func TestTruncateHidesOldData(t *testing.T) {
	backing, mnt, p := mountTest(t)
	if p == nil {
		return // ran in a private mount namespace
	}
	path := filepath.Join(mnt, "f")
	writeFile(t, path, "abcdefgh", true)
	if err := os.Truncate(path, 2); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(path, 6); err != nil {
		t.Fatal(err)
	}
	want := []byte("ab\x00\x00\x00\x00")
	if b, err := os.ReadFile(path); err != nil || !bytes.Equal(b, want) {
		t.Fatalf("live = %q, %v; want %q", b, err, want)
	}
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	_ = f.Close()
	if err := p.Unmount(); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(backing, "f")); err != nil || !bytes.Equal(b, want) {
		t.Fatalf("durable = %q, %v; want %q", b, err, want)
	}
}

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
