package actors

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// resolveFolder returns the path of the folder it opened, without
// symlinks, however the path reaches it.
func TestResolveFolder(t *testing.T) {
	dir, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	target := filepath.Join(dir, "a", "b")
	must(os.MkdirAll(target, 0o700))
	must(os.Symlink(target, filepath.Join(dir, "abs")))
	must(os.Symlink("a/b", filepath.Join(dir, "rel")))
	must(os.Symlink(filepath.Join(dir, "rel"), filepath.Join(dir, "chain")))
	must(os.Symlink(filepath.Join(dir, "a"), filepath.Join(dir, "parent")))
	must(os.WriteFile(filepath.Join(dir, "file"), nil, 0o600))
	must(os.Symlink(filepath.Join(dir, "missing"), filepath.Join(dir, "dangling")))
	for in, want := range map[string]string{
		target:                            target,
		filepath.Join(dir, "abs"):         target,
		filepath.Join(dir, "rel"):         target,
		filepath.Join(dir, "chain"):       target,
		filepath.Join(dir, "parent", "b"): target,
		dir + "/abs/..":                   filepath.Join(dir, "a"), // ".." of the folder the link leads to
		dir + "/a/./b/":                   target,
	} {
		got, err := resolveFolder(in)
		if err != nil || got != want {
			t.Errorf("resolveFolder(%s) = %q, %v; want %q", in, got, err, want)
		}
	}
	for in, want := range map[string]string{
		filepath.Join(dir, "file"):     "not a folder",
		filepath.Join(dir, "missing"):  "want an existing folder",
		filepath.Join(dir, "dangling"): "want an existing folder",
	} {
		if _, err := resolveFolder(in); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("resolveFolder(%s) = %v, want %q", in, err, want)
		}
	}
}
