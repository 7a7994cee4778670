package files

import (
	"encoding/json"
	"strings"
	"testing"
)

// FuzzConfinement runs arbitrary paths through every files tool in a
// workspace surrounded by a secret and full of symlinks, hard links and
// /proc links that lead out, with both resolvers. "@WS" and "@BASE" in a
// path are replaced by the workspace and its parent folder. Nothing outside
// the workspace may be read (the secret never appears in an output or
// error) or changed (the outside tree is identical afterwards), outputs
// match their schemas, and nothing panics.
func FuzzConfinement(f *testing.F) {
	seeds := []string{
		"inside.txt", "../outside/secret.txt", "@BASE/outside/secret.txt", "@WS-evil/secret.txt",
		"@WS/../outside/secret.txt", "@WS/inside.txt", "link-out/secret.txt", "link-out-file", "link-abs",
		"link-abs-dir/secret.txt", "link-parent/outside/secret.txt", "link-root/etc/passwd", "link-proc/etc/passwd",
		"link-cwd", "/proc/self/root@BASE/outside/secret.txt", "/proc/self/cwd", "sub/deep-out/secret.txt",
		"link-loop", "hard", "evil-sib/secret.txt", "inside.txt\x00../x", "%2e%2e/outside", "\uff0e\uff0e/outside",
		"link-in/file.txt", "link-dangling-out", "new/dir/file", "link-in/../../outside/secret.txt", "", ".", "/",
		"link-out/dir/secret.txt", "link-in/x/y/z",
	}
	for i, s := range seeds {
		f.Add(s, uint8(i), "content")
	}
	f.Fuzz(func(t *testing.T, p string, op uint8, content string) {
		tr := makeTree(t)
		before := tr.snapshot(t)
		p = strings.ReplaceAll(strings.ReplaceAll(p, "@WS", tr.ws), "@BASE", tr.base)
		h := newHarness(t, tr.ws, DefaultConfig(), op&0x80 != 0)

		var name string
		var in obj
		switch op % 7 {
		case 0:
			name, in = NameRead, obj{"path": p}
		case 1:
			name, in = NameWrite, obj{"path": p, "content": content}
		case 2:
			name, in = NameList, obj{"path": p}
		case 3:
			name, in = NameEdit, obj{"path": p, "old_text": "SECRET", "new_text": content, "revision": Revision([]byte(tr.secret))}
		case 4:
			name, in = NameFind, obj{"path": p, "pattern": "*"}
		case 5:
			name, in = NameGrep, obj{"path": p, "pattern": "SECRET"}
		default:
			name, in = NameRead, obj{"path": p, "offset": int(op%5) + 1, "line_numbers": op%2 == 0}
		}
		rt, _ := h.reg.Get(name)
		raw, _ := json.Marshal(in)
		if rt.ValidateInput(raw) != nil {
			return // the runtime would refuse this input before Execute
		}
		out, err := h.call(name, in)
		if strings.Contains(string(out), tr.secret) || (err != nil && strings.Contains(err.Error(), tr.secret)) {
			t.Fatalf("%s %q read outside the workspace: %s %v", name, p, out, err)
		}
		if after := tr.snapshot(t); after != before {
			t.Fatalf("%s %q changed the tree outside the workspace:\nbefore:\n%s\nafter:\n%s", name, p, before, after)
		}
	})
}
