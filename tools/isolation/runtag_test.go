package isolation

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A data folder has one run tag, however it is named (relative, through a
// symbolic link); another folder has another, so daemons on different
// folders never stop each other's processes.
func TestRunTag(t *testing.T) {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a"), filepath.Join(dir, "b")
	for _, d := range []string{a, b} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	link := filepath.Join(dir, "link")
	if err := os.Symlink(a, link); err != nil {
		t.Fatal(err)
	}
	t.Chdir(dir)
	tag := func(p string) string {
		t.Helper()
		s, err := RunTag(p)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	ta := tag(a)
	if !strings.HasPrefix(ta, "LEMO_RUN_TAG=") || len(ta) != len("LEMO_RUN_TAG=")+24 {
		t.Fatalf("RunTag(%s) = %q, want LEMO_RUN_TAG=<24 hex digits>", a, ta)
	}
	for _, same := range []string{"a", "./a/", link} {
		if got := tag(same); got != ta {
			t.Errorf("RunTag(%s) = %q, want %q (the same folder)", same, got, ta)
		}
	}
	if tb := tag(b); tb == ta {
		t.Errorf("RunTag(%s) = RunTag(%s) = %q: two folders share a tag", a, b, ta)
	}
}
