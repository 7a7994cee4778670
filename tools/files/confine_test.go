package files

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

func TestCleanPath(t *testing.T) {
	tests := []struct {
		p, want, rule string
	}{
		{p: "a/b", want: "a/b"},
		{p: "./a//b/", want: "a/b"},
		{p: "", want: "."},
		{p: ".", want: "."},
		{p: "/ws/proj", want: "."},
		{p: "/ws/proj/", want: "."},
		{p: "/ws/proj/a/./b", want: "a/b"},
		{p: "..", rule: RuleParent},
		{p: "a/../b", rule: RuleParent},
		{p: "a/..", rule: RuleParent},
		{p: "/ws/proj/../proj/a", rule: RuleParent},
		{p: "/ws/proj-evil/a", rule: RuleAbsolute},
		{p: "/ws/pro", rule: RuleAbsolute},
		{p: "/ws", rule: RuleAbsolute},
		{p: "/etc/passwd", rule: RuleAbsolute},
		{p: "/proc/self/root/etc/passwd", rule: RuleAbsolute},
		{p: "a\x00b", rule: RuleNUL},
		{p: strings.Repeat("a", MaxPathBytes+1), rule: RuleTooLong},
		// Encodings and look-alikes are plain names, not parents.
		{p: "%2e%2e/x", want: "%2e%2e/x"},
		{p: "\uff0e\uff0e/x", want: "\uff0e\uff0e/x"},
		{p: "..\u2215x", want: "..\u2215x"},
		{p: `..\x`, want: `..\x`},
		{p: "...", want: "..."},
		{p: "~/x", want: "~/x"},
	}
	for _, tc := range tests {
		got, err := cleanPath("/ws/proj", tc.p)
		if tc.rule != "" {
			var pe *PathError
			if !errors.As(err, &pe) || pe.Rule != tc.rule || !errors.Is(err, ErrRefused) {
				t.Errorf("cleanPath(%q) = %q, %v; want refusal by rule %s", tc.p, got, err, tc.rule)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("cleanPath(%q) = %q, %v; want %q", tc.p, got, err, tc.want)
		}
	}
}

// TestConfinementCorpus runs every escape we know of through the tools and
// checks each is refused by the rule we expect, that no output or error
// carries the secret, and that nothing outside the workspace changed.
func TestConfinementCorpus(t *testing.T) {
	resolvers(t, func(t *testing.T, walk bool) {
		tr := makeTree(t)
		if err := unix.Mkfifo(filepath.Join(tr.ws, "fifo"), 0o644); err != nil {
			t.Fatal(err)
		}
		before := tr.snapshot(t)
		h := newHarness(t, tr.ws, DefaultConfig(), walk)
		outside := filepath.Join(tr.base, "outside")

		refused := func(rule string) func(error) string {
			return func(err error) string {
				var pe *PathError
				if !errors.As(err, &pe) || !errors.Is(err, ErrRefused) {
					return "want a refusal, got " + errString(err)
				}
				if rule != "" && pe.Rule != rule {
					return "want rule " + rule + ", got " + pe.Rule + ": " + err.Error()
				}
				return ""
			}
		}
		notExist := func(err error) string {
			if !errors.Is(err, fs.ErrNotExist) {
				return "want not-exist, got " + errString(err)
			}
			return ""
		}
		wantOK := func(err error) string {
			if err != nil {
				return "want success, got " + err.Error()
			}
			return ""
		}
		notRegular := func(err error) string {
			if !errors.Is(err, ErrNotRegular) {
				return "want not-a-regular-file, got " + errString(err)
			}
			return ""
		}
		// Symlinks into /proc are absolute: openat2 says EXDEV, the walk
		// refuses absolute targets too. Either rule is a refusal.
		anyRefusal := refused("")

		rd := func(p string) (string, any) { return NameRead, obj{"path": p} }
		wr := func(p string) (string, any) { return NameWrite, obj{"path": p, "content": "pwned"} }
		ls := func(p string) (string, any) { return NameList, obj{"path": p} }
		fd := func(p string) (string, any) { return NameFind, obj{"path": p, "pattern": "*"} }
		gr := func(p string) (string, any) { return NameGrep, obj{"path": p, "pattern": "SECRET"} }
		ed := func(p string) (string, any) {
			return NameEdit, obj{"path": p, "old_text": "SECRET", "new_text": "x", "revision": Revision([]byte(tr.secret))}
		}

		tests := []struct {
			name  string
			call  func(string) (string, any)
			path  string
			check func(error) string
		}{
			{"dotdot", rd, "../outside/secret.txt", refused(RuleParent)},
			{"dotdot inside", rd, "sub/../../outside/secret.txt", refused(RuleParent)},
			{"dotdot harmless", rd, "sub/../inside.txt", refused(RuleParent)},
			{"absolute outside", rd, filepath.Join(outside, "secret.txt"), refused(RuleAbsolute)},
			{"absolute inside", rd, filepath.Join(tr.ws, "inside.txt"), wantOK},
			{"sibling prefix", rd, tr.ws + "-evil/secret.txt", refused(RuleAbsolute)},
			{"sibling prefix dotdot", rd, tr.ws + "/../ws-evil/secret.txt", refused(RuleParent)},
			{"symlink to outside file", rd, "link-out-file", refused(RuleEscape)},
			{"symlink to outside dir", rd, "link-out/secret.txt", refused(RuleEscape)},
			{"absolute symlink", rd, "link-abs", refused(RuleEscape)},
			{"absolute symlink dir", rd, "link-abs-dir/secret.txt", refused(RuleEscape)},
			{"symlink to parent", rd, "link-parent/outside/secret.txt", refused(RuleEscape)},
			{"symlink to parent workspace", rd, "link-parent/ws/inside.txt", refused(RuleEscape)},
			{"symlink to root", rd, "link-root/etc/passwd", refused(RuleEscape)},
			{"nested symlink out", rd, "sub/deep-out/secret.txt", refused(RuleEscape)},
			{"symlink to sibling", rd, "evil-sib/secret.txt", refused(RuleEscape)},
			{"symlink to /proc/self/root", rd, "link-proc/etc/passwd", anyRefusal},
			{"symlink to /proc/self/cwd", rd, "link-cwd/inside.txt", anyRefusal},
			{"/proc/self/root", rd, "/proc/self/root" + filepath.Join(outside, "secret.txt"), refused(RuleAbsolute)},
			{"/proc/self/cwd", rd, "/proc/self/cwd/x", refused(RuleAbsolute)},
			{"symlink loop", rd, "link-loop", refused(RuleMagicLink)},
			{"hardlink to outside", rd, "hard", refused(RuleHardlink)},
			{"nul byte", rd, "inside.txt\x00../outside/secret.txt", refused(RuleNUL)},
			{"percent-encoded dotdot", rd, "%2e%2e/outside/secret.txt", notExist},
			{"fullwidth dots", rd, "\uff0e\uff0e/outside/secret.txt", notExist},
			{"division slash", rd, "..\u2215outside\u2215secret.txt", notExist},
			{"backslashes", rd, `..\outside\secret.txt`, notExist},
			{"symlink inside", rd, "link-in/file.txt", wantOK},
			{"symlink inside file", rd, "link-in-file", wantOK},
			{"fifo is not opened", rd, "fifo", notRegular},
			{"workspace itself", rd, ".", notRegular},

			{"write dotdot", wr, "../outside/new.txt", refused(RuleParent)},
			{"write absolute outside", wr, filepath.Join(outside, "new.txt"), refused(RuleAbsolute)},
			{"write sibling prefix", wr, tr.ws + "-evil/new.txt", refused(RuleAbsolute)},
			{"write through dir symlink", wr, "link-out/new.txt", refused(RuleEscape)},
			{"write mkdir through dir symlink", wr, "link-out/a/b/new.txt", refused(RuleEscape)},
			{"write through parent symlink", wr, "link-parent/outside/new.txt", refused(RuleEscape)},
			{"write through /proc symlink", wr, "link-proc" + outside + "/new.txt", anyRefusal},
			{"write symlink to outside file", wr, "link-out-file", refused(RuleSymlink)},
			{"write dangling symlink out", wr, "link-dangling-out", refused(RuleSymlink)},
			{"write symlink inside", wr, "link-in-file", refused(RuleSymlink)},
			{"write hardlink", wr, "hard", refused(RuleHardlink)},
			{"write nul", wr, "new\x00.txt", refused(RuleNUL)},
			{"write protected", wr, ".git/hooks/pre-commit", refused(RuleProtected)},
			{"write fifo", wr, "fifo", notRegular},
			{"write inside", wr, "new/deep/file.txt", wantOK},
			{"write through inside symlink", wr, "link-in/new.txt", wantOK},

			{"edit hardlink", ed, "hard", refused(RuleHardlink)},
			{"edit symlink out", ed, "link-out-file", refused(RuleSymlink)},
			{"edit through dir symlink", ed, "link-out/secret.txt", refused(RuleEscape)},

			{"list dotdot", ls, "..", refused(RuleParent)},
			{"list absolute", ls, "/", refused(RuleAbsolute)},
			{"list symlink out", ls, "link-out", refused(RuleEscape)},
			{"list symlink parent", ls, "link-parent", refused(RuleEscape)},
			{"list symlink root", ls, "link-root", refused(RuleEscape)},
			{"list /proc symlink", ls, "link-proc", anyRefusal},
			{"list symlink inside", ls, "link-in", wantOK},
			{"list workspace", ls, "", wantOK},

			{"find symlink out", fd, "link-out", refused(RuleEscape)},
			{"find workspace", fd, ".", wantOK},
			{"grep symlink out", gr, "link-out", refused(RuleEscape)},
			{"grep outside file", gr, "link-out-file", refused(RuleEscape)},
			{"grep hardlink", gr, "hard", refused(RuleHardlink)},
			{"grep workspace", gr, ".", wantOK},
		}
		for _, tc := range tests {
			t.Run(tc.name, func(t *testing.T) {
				name, in := tc.call(tc.path)
				out, err := h.call(name, in)
				if msg := tc.check(err); msg != "" {
					t.Errorf("%s %q: %s", name, tc.path, msg)
				}
				if err != nil {
					var pe *PathError
					if errors.As(err, &pe) && (pe.Op != name || pe.Path != tc.path) {
						t.Errorf("error %q names op %q path %q; want %q %q", err, pe.Op, pe.Path, name, tc.path)
					}
				}
				if strings.Contains(string(out), tr.secret) || (err != nil && strings.Contains(err.Error(), tr.secret)) {
					t.Errorf("%s %q leaked the secret: %s %v", name, tc.path, out, err)
				}
			})
		}
		if after := tr.snapshot(t); after != before {
			t.Errorf("the tree outside the workspace changed:\nbefore:\n%s\nafter:\n%s", before, after)
		}
		// find and grep over the whole workspace never report what is behind
		// the links.
		var fo findOutput
		h.must(NameFind, obj{"pattern": "secret.txt"}, &fo)
		if len(fo.Matches) != 0 {
			t.Errorf("find secret.txt = %+v; want no matches (links are not followed)", fo.Matches)
		}
		var gro grepOutput
		h.must(NameGrep, obj{"pattern": "SECRET"}, &gro)
		if len(gro.Matches) != 0 || gro.Skipped.Hardlinked != 1 {
			t.Errorf("grep SECRET = %+v; want no matches and the hardlink skipped", gro)
		}
	})
}

func errString(err error) string {
	if err == nil {
		return "success"
	}
	return err.Error()
}

// TestProcMagicLinks uses /proc/self as the workspace: its "root", "cwd" and
// "fd/N" entries are magic links, which must not be followed.
func TestProcMagicLinks(t *testing.T) {
	resolvers(t, func(t *testing.T, walk bool) {
		h := newHarness(t, "/proc/self", DefaultConfig(), walk)
		for _, p := range []string{"root/etc/hostname", "cwd/helpers_test.go", "exe", "fd/0", "root"} {
			_, err := h.call(NameRead, obj{"path": p})
			if !errors.Is(err, ErrRefused) {
				t.Errorf("read /proc/self/%s: %v; want a refusal", p, err)
			}
		}
		for _, p := range []string{"root", "cwd"} {
			_, err := h.call(NameList, obj{"path": p})
			if !errors.Is(err, ErrRefused) {
				t.Errorf("list /proc/self/%s: %v; want a refusal", p, err)
			}
		}
	})
}

// TestSymlinkSwapRace flips names between inside and outside targets while
// the tools read them in a loop: a tool that checks a path and then opens it
// would sometimes read the secret.
func TestSymlinkSwapRace(t *testing.T) {
	resolvers(t, func(t *testing.T, walk bool) {
		tr := makeTree(t)
		ws := tr.ws
		writeFile(t, filepath.Join(ws, "real", "x.txt"), "inside\n")
		writeFile(t, filepath.Join(tr.base, "outside", "x.txt"), tr.secret)
		symlink(t, "../outside", filepath.Join(ws, "swap-dir"))
		symlink(t, "inside.txt", filepath.Join(ws, "flip"))
		h := newHarness(t, ws, DefaultConfig(), walk)

		ctx, cancel := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			targets := []string{"inside.txt", "../outside/secret.txt", filepath.Join(tr.base, "outside", "secret.txt")}
			for i := 0; ctx.Err() == nil; i++ {
				// Atomically swap the directory "real" with the symlink
				// "swap-dir", and re-point "flip".
				_ = unix.Renameat2(unix.AT_FDCWD, filepath.Join(ws, "real"), unix.AT_FDCWD, filepath.Join(ws, "swap-dir"), unix.RENAME_EXCHANGE)
				tmp := filepath.Join(ws, ".flip-tmp")
				_ = os.Remove(tmp)
				if os.Symlink(targets[i%len(targets)], tmp) == nil {
					_ = os.Rename(tmp, filepath.Join(ws, "flip"))
				}
			}
		}()
		defer func() { cancel(); wg.Wait() }()

		var ok, refusedN, other int
		deadline := time.Now().Add(20 * time.Second)
		for i := 0; i < 4000 || ok < 50 || refusedN < 50; i++ {
			if time.Now().After(deadline) {
				t.Fatalf("after %d reads: %d succeeded, %d refused; the race did not happen often enough", i, ok, refusedN)
			}
			var name string
			var in any
			switch i % 3 {
			case 0:
				name, in = NameRead, obj{"path": "flip"}
			case 1:
				name, in = NameRead, obj{"path": "real/x.txt"}
			default:
				name, in = NameList, obj{"path": "real"}
			}
			out, err := h.call(name, in)
			if strings.Contains(string(out), tr.secret) || strings.Contains(errString(err), tr.secret) {
				t.Fatalf("%s %v read outside content after %d calls: %s", name, in, i, out)
			}
			if name == NameList && err == nil && strings.Contains(string(out), "secret.txt") {
				t.Fatalf("list %v listed the outside folder: %s", in, out)
			}
			switch {
			case err == nil:
				ok++
			case errors.Is(err, ErrRefused):
				refusedN++
			default:
				other++ // not found mid-swap
			}
		}
		t.Logf("%d reads succeeded, %d refused, %d failed otherwise", ok, refusedN, other)
	})
}

// TestWriteSwapRace writes through a name whose parent flips between a real
// folder and a symlink to outside: no write may land outside.
func TestWriteSwapRace(t *testing.T) {
	resolvers(t, func(t *testing.T, walk bool) {
		tr := makeTree(t)
		ws := tr.ws
		if err := os.MkdirAll(filepath.Join(ws, "real"), 0o755); err != nil {
			t.Fatal(err)
		}
		symlink(t, "../outside", filepath.Join(ws, "swap-dir"))
		before := tr.snapshot(t)
		h := newHarness(t, ws, DefaultConfig(), walk)
		ctx, cancel := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				_ = unix.Renameat2(unix.AT_FDCWD, filepath.Join(ws, "real"), unix.AT_FDCWD, filepath.Join(ws, "swap-dir"), unix.RENAME_EXCHANGE)
			}
		}()
		var ok, refusedN int
		deadline := time.Now().Add(20 * time.Second)
		for i := 0; i < 1000 || ok < 20 || refusedN < 20; i++ {
			if time.Now().After(deadline) {
				break
			}
			_, err := h.call(NameWrite, obj{"path": "real/new.txt", "content": "pwned"})
			switch {
			case err == nil:
				ok++
			case errors.Is(err, ErrRefused):
				refusedN++
			}
		}
		cancel()
		wg.Wait()
		t.Logf("%d writes succeeded, %d refused", ok, refusedN)
		if after := tr.snapshot(t); after != before {
			t.Fatalf("a write landed outside the workspace:\nbefore:\n%s\nafter:\n%s", before, after)
		}
	})
}

func TestProtectedAliases(t *testing.T) {
	resolvers(t, func(t *testing.T, walk bool) {
		ws := t.TempDir()
		writeFile(t, filepath.Join(ws, ".git", "config"), "[core]\n")
		if err := os.Mkdir(filepath.Join(ws, ".git", "hooks"), 0o755); err != nil {
			t.Fatal(err)
		}
		symlink(t, ".git", filepath.Join(ws, "g"))
		symlink(t, ".git/hooks", filepath.Join(ws, "hooks"))
		cfg := DefaultConfig()
		cfg.Protected = append(cfg.Protected, "lemo.yaml")
		writeFile(t, filepath.Join(ws, "lemo.yaml"), "a: 1\n")
		h := newHarness(t, ws, cfg, walk)
		for _, p := range []string{".git/config", ".git/hooks/pre-commit", "g/hooks/pre-commit", "hooks/post-checkout", "g/config", "g/new/dir/x", ".git", "lemo.yaml", "./lemo.yaml"} {
			_, err := h.call(NameWrite, obj{"path": p, "content": "x"})
			var pe *PathError
			if !errors.As(err, &pe) || pe.Rule != RuleProtected {
				t.Errorf("write %s: %v; want a refusal by rule %s", p, err, RuleProtected)
			}
		}
		for _, dir := range []string{".git", ".git/hooks"} {
			ents, err := os.ReadDir(filepath.Join(ws, dir))
			if err != nil {
				t.Fatal(err)
			}
			if want := map[string]int{".git": 2, ".git/hooks": 0}[dir]; len(ents) != want {
				t.Errorf("%s has %d entries after refused writes; want %d", dir, len(ents), want)
			}
		}
		if b, _ := os.ReadFile(filepath.Join(ws, "lemo.yaml")); string(b) != "a: 1\n" {
			t.Errorf("lemo.yaml = %q after a refused write", b)
		}
		var rev readOutput
		h.must(NameRead, obj{"path": "g/config"}, &rev) // reading is allowed
		_, err := h.call(NameEdit, obj{"path": "g/config", "old_text": "core", "new_text": "x", "revision": rev.Revision})
		if !errors.Is(err, ErrRefused) {
			t.Errorf("edit g/config: %v; want refused", err)
		}
	})
}

func TestHardlinks(t *testing.T) {
	ws := t.TempDir()
	writeFile(t, filepath.Join(ws, "a.txt"), "shared\n")
	if err := os.Link(filepath.Join(ws, "a.txt"), filepath.Join(ws, "b.txt")); err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, ws, DefaultConfig(), false)
	for _, c := range []struct {
		name string
		in   obj
	}{
		{NameRead, obj{"path": "a.txt"}},
		{NameWrite, obj{"path": "b.txt", "content": "x"}},
		{NameEdit, obj{"path": "a.txt", "old_text": "shared", "new_text": "x", "revision": Revision([]byte("shared\n"))}},
	} {
		_, err := h.call(c.name, c.in)
		var pe *PathError
		if !errors.As(err, &pe) || pe.Rule != RuleHardlink || !strings.Contains(err.Error(), "2 hard links") {
			t.Errorf("%s %v: %v; want refusal by rule %s saying why", c.name, c.in, err, RuleHardlink)
		}
	}
	cfg := DefaultConfig()
	cfg.AllowHardlinkReads = true
	h = newHarness(t, ws, cfg, false)
	var ro readOutput
	h.must(NameRead, obj{"path": "a.txt"}, &ro)
	if ro.Content != "     1\tshared\n" {
		t.Errorf("read with AllowHardlinkReads = %q", ro.Content)
	}
	if _, err := h.call(NameWrite, obj{"path": "b.txt", "content": "x"}); !errors.Is(err, ErrRefused) {
		t.Errorf("write of a hardlinked file with AllowHardlinkReads: %v; want refused", err)
	}
}

func TestWorkspaceMissing(t *testing.T) {
	h := newHarness(t, filepath.Join(t.TempDir(), "gone"), DefaultConfig(), false)
	if _, err := h.call(NameList, obj{}); !errors.Is(err, syscall.ENOENT) {
		t.Errorf("list in a missing workspace: %v; want ENOENT", err)
	}
	h = newHarness(t, "relative/ws", DefaultConfig(), false)
	if _, err := h.call(NameList, obj{}); err == nil || !strings.Contains(err.Error(), "absolute") {
		t.Errorf("list in a relative workspace: %v; want an error asking for an absolute path", err)
	}
}
