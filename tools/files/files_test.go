package files

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"lemo/tools"
)

func TestConfigValidate(t *testing.T) {
	if _, err := New(Config{}); err != nil {
		t.Fatalf("New(Config{}) = %v; want the defaults", err)
	}
	_, err := New(Config{MaxReadBytes: -1, MaxResults: -5, RetainBytes: 100, SkipDirs: []string{"a/b"}, Protected: []string{"../x", "/abs", "."}})
	if err == nil {
		t.Fatal("New with bad fields succeeded")
	}
	for _, want := range []string{"MaxReadBytes", "MaxResults", "RetainBytes", "SkipDirs[0]", "Protected[0]", "Protected[1]", "Protected[2]"} {
		if !strings.Contains(err.Error(), "Config."+want) {
			t.Errorf("error %q does not name Config.%s", err, want)
		}
	}
	ts, err := New(DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tl := range ts {
		names = append(names, tl.Name())
		if tl.View() != View {
			t.Errorf("%s View() = %q, want %q", tl.Name(), tl.View(), View)
		}
	}
	if got, want := strings.Join(names, " "), "files.read files.write files.edit files.list files.find files.grep"; got != want {
		t.Errorf("tools = %s, want %s", got, want)
	}
}

func lines(n int) string {
	var b strings.Builder
	for i := 1; i <= n; i++ {
		fmt.Fprintf(&b, "line %d\n", i)
	}
	return b.String()
}

func TestRead(t *testing.T) {
	ws := t.TempDir()
	writeFile(t, filepath.Join(ws, "ten.txt"), lines(10))
	writeFile(t, filepath.Join(ws, "nonl.txt"), "a\nb")
	writeFile(t, filepath.Join(ws, "empty.txt"), "")
	writeFile(t, filepath.Join(ws, "long.txt"), "short\n"+strings.Repeat("é", 400)+"\nafter\n")
	cfg := DefaultConfig()
	cfg.MaxReadBytes = 256
	cfg.MaxReadLines = 100
	h := newHarness(t, ws, cfg, false)
	f := false

	tests := []struct {
		name string
		in   obj
		want readOutput
	}{
		{"whole", obj{"path": "nonl.txt"}, readOutput{Content: "     1\ta\n     2\tb", StartLine: 1, EndLine: 2, TotalLines: 2, TotalBytes: 3}},
		{"raw", obj{"path": "nonl.txt", "line_numbers": f}, readOutput{Content: "a\nb", StartLine: 1, EndLine: 2, TotalLines: 2, TotalBytes: 3}},
		{"window", obj{"path": "ten.txt", "offset": 3, "limit": 2, "line_numbers": f},
			readOutput{Content: "line 3\nline 4\n", StartLine: 3, EndLine: 4, TotalLines: 10, TotalBytes: 71, Truncated: true, NextOffset: 5}},
		{"tail", obj{"path": "ten.txt", "offset": 9, "line_numbers": f},
			readOutput{Content: "line 9\nline 10\n", StartLine: 9, EndLine: 10, TotalLines: 10, TotalBytes: 71}},
		{"past end", obj{"path": "ten.txt", "offset": 50}, readOutput{StartLine: 50, TotalLines: 10, TotalBytes: 71, Note: "offset 50 is past the end of the file (10 lines)"}},
		{"empty", obj{"path": "empty.txt"}, readOutput{StartLine: 1, Note: "the file is empty"}},
		// Line 2 does not fit in the rest of the byte budget: stop before it.
		{"byte budget", obj{"path": "long.txt", "line_numbers": f}, readOutput{Content: "short\n", StartLine: 1, EndLine: 1, TotalLines: 3, TotalBytes: 813, Truncated: true, NextOffset: 2}},
		// A single line over the budget: its head, cut on a rune boundary.
		{"long line", obj{"path": "long.txt", "offset": 2, "line_numbers": f}, readOutput{
			Content: strings.Repeat("é", 128) + " … [line 2 cut at the byte limit]\n", StartLine: 2, EndLine: 2, TotalLines: 3, TotalBytes: 813, Truncated: true, NextOffset: 3}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var got readOutput
			h.must(NameRead, tc.in, &got)
			b, _ := os.ReadFile(filepath.Join(ws, tc.in["path"].(string)))
			tc.want.Path, tc.want.Revision = tc.in["path"].(string), Revision(b)
			if got != tc.want {
				t.Errorf("read %v =\n%+v\nwant\n%+v", tc.in, got, tc.want)
			}
		})
	}
}

func TestReadBinaryAndTypes(t *testing.T) {
	ws := t.TempDir()
	writeFile(t, filepath.Join(ws, "bin"), "ELF\x00\x01\x02")
	writeFile(t, filepath.Join(ws, "latin1"), "caf\xe9\n")
	writeFile(t, filepath.Join(ws, "late-nul"), strings.Repeat("a", 9000)+"\x00")
	h := newHarness(t, ws, DefaultConfig(), false)
	for _, p := range []string{"bin", "latin1"} {
		_, err := h.call(NameRead, obj{"path": p})
		if !errors.Is(err, ErrBinary) || !strings.Contains(err.Error(), p) {
			t.Errorf("read %s: %v; want ErrBinary naming the path", p, err)
		}
	}
	if _, err := h.call(NameRead, obj{"path": "late-nul", "limit": 1}); err != nil {
		t.Errorf("read of a text file with a NUL after 8 KiB: %v", err)
	}
	if _, err := h.call(NameRead, obj{"path": "missing"}); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("read missing: %v; want not exist", err)
	}
	if _, err := h.call(NameRead, obj{"path": "."}); !errors.Is(err, ErrNotRegular) {
		t.Errorf("read .: %v; want ErrNotRegular", err)
	}
}

func TestWriteAndEdit(t *testing.T) {
	ws := t.TempDir()
	h := newHarness(t, ws, DefaultConfig(), false)

	var w writeOutput
	h.must(NameWrite, obj{"path": "a/b/c.go", "content": "package c\n\nfunc f() {}\nfunc g() {}\n"}, &w)
	if !w.Created || w.Path != "a/b/c.go" || w.Revision != Revision([]byte("package c\n\nfunc f() {}\nfunc g() {}\n")) {
		t.Fatalf("write = %+v", w)
	}
	if err := os.Chmod(filepath.Join(ws, "a/b/c.go"), 0o755); err != nil {
		t.Fatal(err)
	}
	var r readOutput
	h.must(NameRead, obj{"path": "a/b/c.go"}, &r)
	if r.Revision != w.Revision {
		t.Fatalf("read revision %s != write revision %s", r.Revision, w.Revision)
	}

	stale := Revision([]byte("something else"))
	edit := func(old, new, rev string, all bool) (editOutput, error) {
		raw, err := h.call(NameEdit, obj{"path": "a/b/c.go", "old_text": old, "new_text": new, "revision": rev, "replace_all": all})
		var e editOutput
		if err == nil {
			_ = json.Unmarshal(raw, &e)
		}
		return e, err
	}
	if _, err := edit("func f", "func F", stale, false); !errors.Is(err, ErrStale) || !strings.Contains(err.Error(), "read it again") {
		t.Errorf("stale edit: %v; want ErrStale", err)
	}
	if _, err := edit("func h", "func H", r.Revision, false); !errors.Is(err, ErrNoMatch) {
		t.Errorf("absent old text: %v; want ErrNoMatch", err)
	}
	if _, err := edit("func", "fn", r.Revision, false); !errors.Is(err, ErrAmbiguous) || !strings.Contains(err.Error(), "2 times (lines 3, 4)") {
		t.Errorf("ambiguous old text: %v; want ErrAmbiguous naming lines 3, 4", err)
	}
	e, err := edit("func g", "func G", r.Revision, false)
	if err != nil || e.Replacements != 1 || e.FirstLine != 4 {
		t.Fatalf("edit = %+v, %v", e, err)
	}
	// The old revision is stale now; the new one works.
	if _, err := edit("func f", "func F", r.Revision, false); !errors.Is(err, ErrStale) {
		t.Errorf("edit with the pre-edit revision: %v; want ErrStale", err)
	}
	e, err = edit("func", "fn", e.Revision, true)
	if err != nil || e.Replacements != 2 {
		t.Fatalf("replace_all = %+v, %v", e, err)
	}
	b, _ := os.ReadFile(filepath.Join(ws, "a/b/c.go"))
	if got, want := string(b), "package c\n\nfn f() {}\nfn G() {}\n"; got != want {
		t.Errorf("file = %q, want %q", got, want)
	}
	if e.Revision != Revision(b) {
		t.Errorf("edit revision %s is not the file's %s", e.Revision, Revision(b))
	}
	if info, _ := os.Stat(filepath.Join(ws, "a/b/c.go")); info.Mode().Perm() != 0o755 {
		t.Errorf("mode after edit = %v, want 0755 kept", info.Mode().Perm())
	}

	// write with a revision: only over the content that was read.
	if _, err := h.call(NameWrite, obj{"path": "a/b/c.go", "content": "x", "revision": r.Revision}); !errors.Is(err, ErrStale) {
		t.Errorf("write with a stale revision: %v; want ErrStale", err)
	}
	if _, err := h.call(NameWrite, obj{"path": "new.txt", "content": "x", "revision": r.Revision}); !errors.Is(err, ErrStale) {
		t.Errorf("write of a missing file with a revision: %v; want ErrStale", err)
	}
	h.must(NameWrite, obj{"path": "a/b/c.go", "content": "y", "revision": e.Revision}, &w)
	if w.Created {
		t.Errorf("overwrite reported created")
	}
	// No temporary files are left behind.
	ents, _ := os.ReadDir(filepath.Join(ws, "a/b"))
	if len(ents) != 1 {
		t.Errorf("a/b has %d entries, want 1 (no temporary files)", len(ents))
	}
	if _, err := h.call(NameEdit, obj{"path": "missing.go", "old_text": "a", "new_text": "b", "revision": stale}); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("edit of a missing file: %v; want not exist", err)
	}
	if _, err := h.call(NameWrite, obj{"path": "a", "content": "x"}); !errors.Is(err, ErrNotRegular) {
		t.Errorf("write over a folder: %v; want ErrNotRegular", err)
	}
}

func TestList(t *testing.T) {
	ws := t.TempDir()
	for i := range 25 {
		writeFile(t, filepath.Join(ws, fmt.Sprintf("f%02d", i)), strings.Repeat("x", i))
	}
	if err := os.Mkdir(filepath.Join(ws, "dir"), 0o755); err != nil {
		t.Fatal(err)
	}
	symlink(t, "../elsewhere", filepath.Join(ws, "link"))
	h := newHarness(t, ws, DefaultConfig(), false)
	var all []listEntry
	cursor := ""
	for page := 0; ; page++ {
		if page > 5 {
			t.Fatal("pagination does not end")
		}
		in := obj{"limit": 10}
		if cursor != "" {
			in["cursor"] = cursor
		}
		var out listOutput
		h.must(NameList, in, &out)
		if out.Total != 27 {
			t.Errorf("total = %d, want 27", out.Total)
		}
		all = append(all, out.Entries...)
		if out.NextCursor == "" {
			break
		}
		cursor = out.NextCursor
	}
	if len(all) != 27 {
		t.Fatalf("listed %d entries over all pages, want 27", len(all))
	}
	if all[0].Name != "dir" || all[0].Type != "dir" || all[1].Name != "f00" || *all[2].Size != 1 || all[26].Name != "link" || all[26].Type != "symlink" || all[26].Target != "../elsewhere" {
		t.Errorf("entries = %+v", all)
	}
	if _, err := h.call(NameList, obj{"cursor": "!!"}); err == nil {
		t.Error("a bad cursor was accepted")
	}
	if _, err := h.call(NameList, obj{"path": "f00"}); !errors.Is(err, ErrNotRegular) {
		t.Errorf("list of a file: %v; want ErrNotRegular", err)
	}
	cfg := DefaultConfig()
	cfg.MaxDirEntries = 10
	h = newHarness(t, ws, cfg, false)
	if _, err := h.call(NameList, obj{}); !errors.Is(err, ErrTooLarge) {
		t.Errorf("list over MaxDirEntries: %v; want ErrTooLarge", err)
	}
}

func TestGlob(t *testing.T) {
	tests := []struct {
		pattern, path string
		want          bool
	}{
		{"*.go", "a/b/c.go", true},
		{"*.go", "c.go", true},
		{"*.go", "c.gox", false},
		{"a/*.go", "a/c.go", true},
		{"a/*.go", "a/b/c.go", false},
		{"**/*.go", "c.go", true},
		{"**/*.go", "a/b/c.go", true},
		{"a/**", "a/b/c", true},
		{"a/**", "a", true},
		{"a/**/c", "a/c", true},
		{"a/**/c", "a/x/y/c", true},
		{"a/**/c", "a/x/y/d", false},
		{"**/b/**", "a/b/c", true},
		{"**/**/**/z", "a/b/c/d/e/f/g/h/i/j/k/l/m/n/o/p/q/r/s/t/u/v/w/x/y", false},
	}
	for _, tc := range tests {
		g, err := compileGlob(tc.pattern)
		if err != nil {
			t.Fatalf("compileGlob(%q): %v", tc.pattern, err)
		}
		if got := g.match(tc.path); got != tc.want {
			t.Errorf("%q.match(%q) = %v, want %v", tc.pattern, tc.path, got, tc.want)
		}
	}
	for _, bad := range []string{"[", "/abs", "a/[x"} {
		if _, err := compileGlob(bad); err == nil {
			t.Errorf("compileGlob(%q) accepted a bad pattern", bad)
		}
	}
}

func TestFind(t *testing.T) {
	ws := t.TempDir()
	for _, p := range []string{"main.go", "cmd/lemo/main.go", "cmd/lemo/run.go", "docs/a.md", ".git/objects/x.go", "vendor/v/v.go"} {
		writeFile(t, filepath.Join(ws, p), "package x\n")
	}
	outside := t.TempDir()
	writeFile(t, filepath.Join(outside, "evil.go"), "x")
	symlink(t, outside, filepath.Join(ws, "out"))
	symlink(t, "cmd", filepath.Join(ws, "cmdlink"))
	h := newHarness(t, ws, DefaultConfig(), false)
	find := func(in obj) findOutput {
		t.Helper()
		var out findOutput
		h.must(NameFind, in, &out)
		return out
	}
	paths := func(o findOutput) string {
		var ps []string
		for _, m := range o.Matches {
			ps = append(ps, m.Path)
		}
		return strings.Join(ps, " ")
	}
	if got, want := paths(find(obj{"pattern": "*.go"})), "cmd/lemo/main.go cmd/lemo/run.go main.go vendor/v/v.go"; got != want {
		t.Errorf("find *.go = %s, want %s (.git skipped, links not followed)", got, want)
	}
	if got, want := paths(find(obj{"pattern": "lemo/*.go", "path": "cmd"})), "cmd/lemo/main.go cmd/lemo/run.go"; got != want {
		t.Errorf("find lemo/*.go in cmd = %s, want %s", got, want)
	}
	if got, want := paths(find(obj{"pattern": "*.go", "path": ".git"})), ".git/objects/x.go"; got != want {
		t.Errorf("find in .git by name = %s, want %s", got, want)
	}
	if got, want := paths(find(obj{"pattern": "*", "type": "dir"})), ".git cmd cmd/lemo docs vendor vendor/v"; got != want {
		t.Errorf("find dirs = %s, want %s (.git reported, not entered)", got, want)
	}
	if got, want := paths(find(obj{"pattern": "*link", "type": "any"})), "cmdlink"; got != want {
		t.Errorf("find *link = %s, want %s", got, want)
	}
	o := find(obj{"pattern": "*.go", "limit": 2})
	if len(o.Matches) != 2 || !o.Truncated || !strings.Contains(o.TruncatedReason, "2 matches") {
		t.Errorf("find with limit 2 = %+v; want 2 matches and a truncation reason", o)
	}
	cfg := DefaultConfig()
	cfg.MaxWalkEntries = 3
	h = newHarness(t, ws, cfg, false)
	var o2 findOutput
	h.must(NameFind, obj{"pattern": "*.go"}, &o2)
	if !o2.Truncated || o2.Visited != 3 {
		t.Errorf("find with MaxWalkEntries 3 = %+v; want truncated after 3", o2)
	}
	if _, err := h.call(NameFind, obj{"pattern": "["}); err == nil {
		t.Error("find accepted a bad pattern")
	}
}

func TestGrep(t *testing.T) {
	ws := t.TempDir()
	writeFile(t, filepath.Join(ws, "a.go"), "package a\n// TODO one\nfunc a() {}\n// todo two\n")
	writeFile(t, filepath.Join(ws, "sub/b.txt"), "TODO three\n"+strings.Repeat("x", 1000)+"TODO long\n")
	writeFile(t, filepath.Join(ws, "bin.dat"), "TODO\x00binary")
	writeFile(t, filepath.Join(ws, "big.txt"), "TODO "+strings.Repeat("y", 2000)+"\n")
	writeFile(t, filepath.Join(ws, ".git/x"), "TODO in git\n")
	outside := t.TempDir()
	writeFile(t, filepath.Join(outside, "o.txt"), "TODO outside\n")
	symlink(t, outside, filepath.Join(ws, "out"))
	cfg := DefaultConfig()
	cfg.MaxGrepFileBytes = 1500
	cfg.MaxGrepLineBytes = 20
	h := newHarness(t, ws, cfg, false)

	var o grepOutput
	h.must(NameGrep, obj{"pattern": "TODO"}, &o)
	want := []grepMatch{{"a.go", 2, "// TODO one"}, {"sub/b.txt", 1, "TODO three"}, {"sub/b.txt", 2, strings.Repeat("x", 20) + " …"}}
	if fmt.Sprint(o.Matches) != fmt.Sprint(want) {
		t.Errorf("matches = %v\nwant %v", o.Matches, want)
	}
	if o.Skipped.Binary != 1 || o.Skipped.Large != 1 || o.FilesScanned != 2 || o.FilesMatched != 2 || o.Truncated {
		t.Errorf("grep = %+v", o)
	}
	h.must(NameGrep, obj{"pattern": "todo", "case_insensitive": true, "glob": "*.go"}, &o)
	if len(o.Matches) != 2 || o.Matches[1].Line != 4 {
		t.Errorf("case-insensitive grep in *.go = %+v", o.Matches)
	}
	h.must(NameGrep, obj{"pattern": "TODO", "path": "a.go"}, &o)
	if len(o.Matches) != 1 || o.Matches[0].Path != "a.go" {
		t.Errorf("grep of one file = %+v", o.Matches)
	}
	h.must(NameGrep, obj{"pattern": "TODO", "limit": 1}, &o)
	if len(o.Matches) != 1 || !o.Truncated {
		t.Errorf("grep limit 1 = %+v", o)
	}
	cfg.MaxGrepBytes = 15
	h = newHarness(t, ws, cfg, false)
	h.must(NameGrep, obj{"pattern": "TODO"}, &o)
	if len(o.Matches) != 1 || !o.Truncated || !strings.Contains(o.TruncatedReason, "bytes") {
		t.Errorf("grep over MaxGrepBytes = %+v", o)
	}
	if _, err := h.call(NameGrep, obj{"pattern": "("}); err == nil {
		t.Error("grep accepted a bad regexp")
	}
}

// TestRetain checks that large results are kept as bounded excerpts that
// still match the result schema and say what was left out, while the live
// output has everything.
func TestRetain(t *testing.T) {
	ws := t.TempDir()
	writeFile(t, filepath.Join(ws, "big.txt"), lines(3000))
	writeFile(t, filepath.Join(ws, "small.txt"), "hello\n")
	for i := range 300 {
		writeFile(t, filepath.Join(ws, "d", fmt.Sprintf("file-%03d.txt", i)), "match me\n")
	}
	h := newHarness(t, ws, DefaultConfig(), false)
	limit := h.fs.cfg.RetainBytes
	for _, c := range []struct {
		name string
		in   obj
	}{
		{NameRead, obj{"path": "big.txt"}},
		{NameList, obj{"path": "d", "limit": 300}},
		{NameFind, obj{"pattern": "*.txt"}},
		{NameGrep, obj{"pattern": "match"}},
	} {
		out, err := h.call(c.name, c.in)
		if err != nil {
			t.Fatal(err)
		}
		rt, _ := h.reg.Get(c.name)
		in, _ := json.Marshal(c.in)
		kept := rt.Tool.Retain(out, in)
		if len(out) <= limit {
			t.Fatalf("%s output is only %d bytes; the test needs more than %d", c.name, len(out), limit)
		}
		if len(kept) > limit {
			t.Errorf("%s retained %d bytes, over %d", c.name, len(kept), limit)
		}
		var ex struct{ Excerpt string }
		_ = json.Unmarshal(kept, &ex)
		if !strings.Contains(ex.Excerpt, "kept") {
			t.Errorf("%s retained part does not say what was left out: %s", c.name, kept)
		}
		if string(rt.Tool.Retain(out, in)) != string(kept) {
			t.Errorf("%s Retain is not deterministic", c.name)
		}
	}
	var r readOutput
	raw, _ := h.call(NameRead, obj{"path": "big.txt"})
	_ = json.Unmarshal(raw, &r)
	if r.EndLine != 2000 || strings.Count(r.Content, "\n") != 2000 {
		t.Errorf("live read output has %d lines (end %d), want 2000", strings.Count(r.Content, "\n"), r.EndLine)
	}
	rt, _ := h.reg.Get(NameRead)
	raw, _ = h.call(NameRead, obj{"path": "small.txt"})
	if kept := rt.Tool.Retain(raw, nil); string(kept) != string(raw) {
		t.Errorf("small result retained as %s, want whole %s", kept, raw)
	}
}

func TestCancelled(t *testing.T) {
	ws := t.TempDir()
	for i := range 50 {
		writeFile(t, filepath.Join(ws, fmt.Sprintf("f%d", i)), "x\n")
	}
	h := newHarness(t, ws, DefaultConfig(), false)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for _, c := range []struct {
		name string
		in   obj
	}{{NameGrep, obj{"pattern": "x"}}, {NameFind, obj{"pattern": "*"}}, {NameRead, obj{"path": "f1"}}, {NameList, obj{}}} {
		if _, err := h.callCtx(ctx, c.name, c.in); !errors.Is(err, context.Canceled) {
			t.Errorf("%s with a cancelled context: %v; want context.Canceled", c.name, err)
		}
	}
}

// Reading, listing, finding and grepping only read; writing and editing
// act, so they never run before their start is durable.
func TestReadOnly(t *testing.T) {
	want := map[string]bool{NameRead: true, NameList: true, NameFind: true, NameGrep: true, NameWrite: false, NameEdit: false}
	for _, tl := range newFileSystem(Config{}).tools() {
		r, ok := tl.(tools.Reader)
		if !ok {
			t.Fatalf("%s: not a tools.Reader", tl.Name())
		}
		w, known := want[tl.Name()]
		if !known {
			t.Fatalf("%s: a tool this test does not know; say whether it only reads", tl.Name())
		}
		if wu, ok := tl.(tools.WorkspaceUser); !ok || !wu.UsesWorkspace() {
			t.Errorf("%s: not given the workspace (tools.WorkspaceUser)", tl.Name())
		}
		if got := r.ReadOnly(json.RawMessage(`{"path":"a"}`)); got != w {
			t.Errorf("%s: ReadOnly = %v, want %v", tl.Name(), got, w)
		}
	}
}
