package config

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestWorkspaceGrants(t *testing.T) {
	dir := t.TempDir()
	data := filepath.Join(dir, "data") // not made yet: the first start
	src := filepath.Join(dir, "src")
	ops := filepath.Join(dir, "ops")
	for _, d := range []string{src, ops} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(dir, filepath.Join(src, "up")); err != nil {
		t.Fatal(err)
	}

	c := Default()
	c.Data = data
	if errs := c.ApplyEnv([]string{"LEMO_WORKSPACES_GRANTS=alice=" + src + ", *=" + ops}); len(errs) > 0 {
		t.Fatalf("ApplyEnv: %v", errs)
	}
	if errs := c.Validate(); len(errs) > 0 {
		t.Fatalf("Validate: %v", errs)
	}
	got := c.Workspaces.Parsed()
	if len(got) != 2 || got[0] != (Grant{Owner: "alice", Root: src}) || got[1] != (Grant{Owner: "*", Root: ops}) {
		t.Fatalf("Parsed() = %+v", got)
	}

	c.Workspaces.Grants = []string{
		"alice=" + src,                     // fine
		src,                                // no owner
		"bad owner=" + src,                 // owner
		"alice=rel/dir",                    // relative
		"alice=" + filepath.Join(dir, "x"), // missing
		"alice=" + file,                    // a file
		"alice=" + dir,                     // contains the data folder
		"*=" + filepath.Join(src, "up"),    // a symlink to a folder containing it
		"alice=/",                          // contains it
	}
	if err := os.Mkdir(data, 0o700); err != nil {
		t.Fatal(err)
	}
	c.Workspaces.Grants = append(c.Workspaces.Grants, "alice="+data, "alice="+filepath.Join(data, "."))
	errs := c.Validate()
	joined := Join(errs).Error()
	for i, want := range map[int]string{
		1: "want OWNER=/absolute/folder", 2: "owner \"bad owner\"", 3: "want an absolute path", 4: "want an existing folder",
		5: "not a folder", 6: "contains the data folder", 7: "contains the data folder", 8: "contains the data folder",
		9: "is the data folder", 10: "is the data folder",
	} {
		if !strings.Contains(joined, fmt.Sprintf("workspaces.grants[%d]: ", i)) || !strings.Contains(joined, want) {
			t.Errorf("problems lack workspaces.grants[%d] (%s):\n%s", i, want, joined)
		}
	}
	if len(errs) != 10 || strings.Contains(joined, "grants[0]") {
		t.Errorf("got %d problems, want 10 (grants[0] is fine):\n%s", len(errs), joined)
	}
	c.Workspaces.Grants = []string{"alice=" + filepath.Join(data, "workspaces")}
	if err := os.Mkdir(filepath.Join(data, "workspaces"), 0o700); err != nil {
		t.Fatal(err)
	}
	if errs := c.Validate(); len(errs) != 1 || !strings.Contains(errs[0].Error(), "is inside the data folder") {
		t.Errorf("a grant inside the data folder: %v", errs)
	}
}
