package files

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"lemo/tools"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// harness runs the files tools the way the runtime does: it validates the
// input, executes, validates the output and the retained part against the
// result schema.
type harness struct {
	t   testing.TB
	ws  string
	fs  *fileSystem
	reg *tools.Registry
}

func newHarness(t testing.TB, ws string, cfg Config, walk bool) *harness {
	t.Helper()
	if err := cfg.validate(); err != nil {
		t.Fatalf("config: %v", err)
	}
	fsys := newFileSystem(cfg)
	fsys.walk = walk
	reg := tools.NewRegistry()
	for _, tl := range fsys.tools() {
		if err := reg.Register(tl); err != nil {
			t.Fatalf("Register(%s): %v", tl.Name(), err)
		}
	}
	return &harness{t: t, ws: ws, fs: fsys, reg: reg}
}

// call runs tool name with input (a value marshalled to JSON). Input that
// fails the schema is a test failure unless the test expects it.
func (h *harness) call(name string, input any) (json.RawMessage, error) {
	h.t.Helper()
	return h.callCtx(context.Background(), name, input)
}

func (h *harness) callCtx(ctx context.Context, name string, input any) (json.RawMessage, error) {
	h.t.Helper()
	rt, ok := h.reg.Get(name)
	if !ok {
		h.t.Fatalf("no tool %s", name)
	}
	in, err := json.Marshal(input)
	if err != nil {
		h.t.Fatal(err)
	}
	if err := rt.ValidateInput(in); err != nil {
		h.t.Fatalf("%s: input %s: %v", name, in, err)
	}
	out, err := rt.Tool.Execute(ctx, tools.Call{TaskID: "t1", CallID: "c1", Workspace: h.ws, Input: in}, func(json.RawMessage) error {
		h.t.Errorf("%s emitted a state update; it declares no state schema", name)
		return nil
	})
	if err != nil {
		return nil, err
	}
	if err := rt.ValidateOutput(out); err != nil {
		h.t.Fatalf("%s: output does not match its schema: %v\n%s", name, err, out)
	}
	kept := rt.Tool.Retain(out, in)
	if kept == nil {
		h.t.Fatalf("%s: Retain kept nothing of a %d-byte output", name, len(out))
	}
	if len(kept) > h.fs.cfg.RetainBytes && len(kept) != len(out) {
		h.t.Fatalf("%s: Retain kept %d bytes, over RetainBytes %d", name, len(kept), h.fs.cfg.RetainBytes)
	}
	if err := rt.ValidateOutput(kept); err != nil {
		h.t.Fatalf("%s: retained part does not match the result schema: %v\n%s", name, err, kept)
	}
	return out, nil
}

// must runs call and fails the test on error, decoding the output into out.
func (h *harness) must(name string, input any, out any) {
	h.t.Helper()
	raw, err := h.call(name, input)
	if err != nil {
		h.t.Fatalf("%s %v: %v", name, input, err)
	}
	if out != nil {
		if err := json.Unmarshal(raw, out); err != nil {
			h.t.Fatal(err)
		}
	}
}

func writeFile(t testing.TB, name, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(name, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func symlink(t testing.TB, target, name string) {
	t.Helper()
	if err := os.Symlink(target, name); err != nil {
		t.Fatal(err)
	}
}

// tree is a workspace with hostile neighbours:
//
//	base/outside/secret.txt      the secret
//	base/ws-evil/secret.txt      a sibling whose name extends the workspace's
//	base/ws/...                  the workspace, with links that lead out
type tree struct {
	base, ws, secret string
}

func makeTree(t testing.TB) tree {
	t.Helper()
	base := t.TempDir()
	tr := tree{base: base, ws: filepath.Join(base, "ws"), secret: "SECRET-" + randomHex(t)}
	writeFile(t, filepath.Join(base, "outside", "secret.txt"), tr.secret)
	writeFile(t, filepath.Join(base, "outside", "dir", "secret.txt"), tr.secret)
	writeFile(t, filepath.Join(base, "ws-evil", "secret.txt"), tr.secret)
	ws := tr.ws
	writeFile(t, filepath.Join(ws, "inside.txt"), "inside\n")
	writeFile(t, filepath.Join(ws, "sub", "file.txt"), "sub file\n")
	symlink(t, "sub", filepath.Join(ws, "link-in"))
	symlink(t, "inside.txt", filepath.Join(ws, "link-in-file"))
	symlink(t, "../outside", filepath.Join(ws, "link-out"))
	symlink(t, "../outside/secret.txt", filepath.Join(ws, "link-out-file"))
	symlink(t, filepath.Join(base, "outside", "secret.txt"), filepath.Join(ws, "link-abs"))
	symlink(t, filepath.Join(base, "outside"), filepath.Join(ws, "link-abs-dir"))
	symlink(t, "..", filepath.Join(ws, "link-parent"))
	symlink(t, "/", filepath.Join(ws, "link-root"))
	symlink(t, "/proc/self/root", filepath.Join(ws, "link-proc"))
	symlink(t, "/proc/self/cwd", filepath.Join(ws, "link-cwd"))
	symlink(t, "../../outside", filepath.Join(ws, "sub", "deep-out"))
	symlink(t, "link-loop", filepath.Join(ws, "link-loop"))
	symlink(t, "../ws-evil", filepath.Join(ws, "evil-sib"))
	symlink(t, "missing/../../outside/new.txt", filepath.Join(ws, "link-dangling-out"))
	if err := os.Link(filepath.Join(base, "outside", "secret.txt"), filepath.Join(ws, "hard")); err != nil {
		t.Fatal(err)
	}
	return tr
}

func randomHex(t testing.TB) string {
	t.Helper()
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// snapshot describes everything under base except the workspace: names,
// types, modes, link targets and content hashes.
func (tr tree) snapshot(t testing.TB) string {
	t.Helper()
	var lines []string
	err := filepath.WalkDir(tr.base, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p == tr.ws {
			return filepath.SkipDir
		}
		info, err := os.Lstat(p)
		if err != nil {
			return err
		}
		line := p + " " + info.Mode().String()
		switch {
		case info.Mode()&fs.ModeSymlink != 0:
			target, _ := os.Readlink(p)
			line += " -> " + target
		case info.Mode().IsRegular():
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			sum := sha256.Sum256(b)
			line += " " + hex.EncodeToString(sum[:])
		}
		lines = append(lines, line)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}

// resolvers runs f once with openat2 (when the kernel has it) and once with
// the openat walk.
func resolvers(t *testing.T, f func(t *testing.T, walk bool)) {
	t.Run("openat2", func(t *testing.T) {
		if !hasOpenat2() {
			t.Skip("openat2 is not available on this kernel")
		}
		f(t, false)
	})
	t.Run("walk", func(t *testing.T) { f(t, true) })
}
