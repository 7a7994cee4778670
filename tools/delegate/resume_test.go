package delegate

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"lemo/tools"
)

// A finished session is continued in place by a new invocation that names
// its id: same file, same session id, the agent sees the earlier history.
func TestResumeContinuesTheSessionInPlace(t *testing.T) {
	r := newRig(t, nil)
	first := r.must(map[string]any{"prompt": "hello"}, runOpts{})
	files, _ := filepath.Glob(filepath.Join(r.dt.catalog.lemoDir, "*.jsonl"))
	if len(files) != 1 {
		t.Fatalf("files = %v", files)
	}
	before, _ := os.Stat(files[0])

	second := r.must(map[string]any{"prompt": "HISTORY please", "resume": first.SessionID}, runOpts{})
	if second.Status != StatusFinished || !second.Resumed || second.SessionID != first.SessionID || second.Invocation == first.Invocation {
		t.Fatalf("resumed result = %+v", second)
	}
	if second.FinalAnswer != "history: 3 messages before this answer" {
		t.Fatalf("the agent did not continue the session: %q", second.FinalAnswer)
	}
	after, _ := filepath.Glob(filepath.Join(r.dt.catalog.lemoDir, "*.jsonl"))
	if len(after) != 1 || after[0] != files[0] {
		t.Fatalf("files after resume = %v", after)
	}
	if fi, _ := os.Stat(files[0]); fi.Size() <= before.Size() {
		t.Fatalf("the session file did not grow: %d -> %d", before.Size(), fi.Size())
	}
	if rec, _ := r.dt.catalog.readRecord(first.SessionID); rec.Invocation != first.Invocation {
		t.Fatalf("the record changed: %+v", rec)
	}
	if st := r.lastState(); !st.Resumed || st.SessionID != first.SessionID {
		t.Fatalf("state = %+v", st)
	}
}

func TestResumeIsScopedToTheTask(t *testing.T) {
	r := newRig(t, nil)
	first := r.must(map[string]any{"prompt": "hello"}, runOpts{taskID: "task-1"})
	_, err := r.run(map[string]any{"prompt": "x", "resume": first.SessionID}, runOpts{taskID: "task-2"})
	if !errors.Is(err, ErrSessionNotFound) {
		t.Fatalf("foreign resume: err = %v, want ErrSessionNotFound", err)
	}
	_, err = r.run(map[string]any{"prompt": "x", "resume": "0000-no-such"}, runOpts{taskID: "task-1"})
	if !errors.Is(err, ErrSessionNotFound) {
		t.Fatalf("unknown resume: err = %v, want ErrSessionNotFound", err)
	}
	// Paths are not session ids.
	rt, _ := r.reg.Get(RunName)
	for _, bad := range []string{"../x", "/etc/passwd", "a/b", ".hidden", "x.jsonl"} {
		if err := rt.ValidateInput([]byte(fmt.Sprintf(`{"prompt":"x","resume":%q}`, bad))); err == nil {
			t.Errorf("resume %q accepted by the input schema", bad)
		}
		if _, err := r.dt.catalog.Find(Scope{All: true}, bad); !errors.Is(err, ErrSessionNotFound) {
			t.Errorf("Find(%q): err = %v", bad, err)
		}
	}
	// delegate.sessions lists only the Task's own.
	st, _ := r.reg.Get(SessionsName)
	for task, want := range map[string]int{"task-1": 1, "task-2": 0} {
		out, err := st.Tool.Execute(t.Context(), tools.Call{TaskID: task, Input: []byte(`{}`)}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := st.ValidateOutput(out); err != nil {
			t.Fatal(err)
		}
		if n := strings.Count(string(out), `"session_id"`); n != want {
			t.Fatalf("%s sees %d sessions: %s", task, n, out)
		}
		if want == 1 && (!strings.Contains(string(out), first.SessionID) || !strings.Contains(string(out), `"first_prompt":"hello"`)) {
			t.Fatalf("listing: %s", out)
		}
	}
}

func TestResumeElsewhereIsRefused(t *testing.T) {
	r := newRig(t, nil)
	first := r.must(map[string]any{"prompt": "hello"}, runOpts{})
	r.ws = t.TempDir()
	_, err := r.run(map[string]any{"prompt": "x", "resume": first.SessionID}, runOpts{})
	if err == nil || !strings.Contains(err.Error(), "another folder") {
		t.Fatalf("err = %v", err)
	}
}

func TestResumeOfASessionInUse(t *testing.T) {
	r := newRig(t, nil)
	first := r.must(map[string]any{"prompt": "hello"}, runOpts{})
	steer := make(chan tools.Steering, 1)
	r.reset()
	done := r.async(map[string]any{"prompt": "go SLOW", "resume": first.SessionID}, runOpts{steer: steer})
	eventually(t, 10*time.Second, "the resumed run", func() error {
		if !hasEvent(r.events(), func(e LiveEvent) bool { return e.Type == "text" }) {
			return errNotYet
		}
		return nil
	})
	if _, err := r.run(map[string]any{"prompt": "x", "resume": first.SessionID}, runOpts{}); !errors.Is(err, ErrSessionInUse) {
		t.Fatalf("second resume: err = %v, want ErrSessionInUse", err)
	}
	if err := waitAnswer(t, steerAsync(steer, `{"kind":"abort"}`), 10*time.Second); err != nil {
		t.Fatal(err)
	}
	if res := await(t, done); res.Status != StatusAborted {
		t.Fatalf("result = %+v", res)
	}
	if _, err := r.dt.catalog.acquire(first.SessionID, "again"); err != nil {
		t.Fatalf("the session stayed busy: %v", err)
	}
}

// snapshot fingerprints every file under dirs: path, mode, size, mtime,
// content.
func snapshot(t *testing.T, dirs ...string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, d := range dirs {
		_ = filepath.WalkDir(d, func(p string, de fs.DirEntry, err error) error {
			if err != nil {
				return nil
			}
			fi, err := os.Lstat(p)
			if err != nil {
				return nil
			}
			sum := ""
			if fi.Mode().IsRegular() {
				b, _ := os.ReadFile(p)
				sum = fmt.Sprintf("%x", sha256.Sum256(b))
			}
			out[p] = fmt.Sprintf("%v %d %v %s", fi.Mode(), fi.Size(), fi.ModTime().UnixNano(), sum)
			return nil
		})
	}
	return out
}

func writeSession(t *testing.T, dir, id, cwd string) string {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, "2026-01-01T00-00-00-000Z_"+id+".jsonl")
	body := fmt.Sprintf(`{"type":"session","version":3,"id":%q,"timestamp":"2026-01-01T00:00:00Z","cwd":%q}`+"\n"+
		`{"type":"message","id":"a1","message":{"role":"user","content":[{"type":"text","text":"fix the \u001b[31mbug"}]}}`+"\n", id, cwd)
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// Discovery reads Lemo's folder and the agent's default session folders,
// changes nothing, and shows the agent's own sessions to operators only.
func TestDiscovery(t *testing.T) {
	r := newRig(t, nil)
	mine := r.must(map[string]any{"prompt": "hello"}, runOpts{})
	home := lookupEnv(r.dt.env, "HOME")
	bucket := filepath.Join(home, ".pi", "agent", "sessions", "--work-proj--")
	own := writeSession(t, bucket, "0195-agent-own", "/srv/proj")
	// An omp-style file: a title slot first.
	omp := filepath.Join(bucket, "2026-01-02T00-00-00-000Z_0195-omp-style.jsonl")
	os.WriteFile(omp, []byte(`{"type":"title","v":1,"title":"t","pad":"   "}`+"\n"+`{"type":"session","version":3,"id":"0195-omp-style","cwd":"/w"}`+"\n"), 0o644)
	// What discovery must skip or survive: a symlink, a FIFO, garbage, a
	// header with a path-like id.
	os.Symlink(own, filepath.Join(bucket, "link.jsonl"))
	syscall.Mkfifo(filepath.Join(bucket, "fifo.jsonl"), 0o600)
	os.WriteFile(filepath.Join(bucket, "garbage.jsonl"), []byte("\x00\xffnot json\n"), 0o644)
	writeSession(t, bucket, "../../etc", "/x")
	before := snapshot(t, r.cfg.Dir, filepath.Join(home, ".pi"))

	all, err := r.dt.catalog.Discover(Scope{All: true})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]Entry{}
	for _, e := range all {
		got[e.ID] = e
	}
	if len(all) != 3 || got[mine.SessionID].Source != SourceLemo || got[mine.SessionID].TaskID != "task-1" ||
		got["0195-agent-own"].Source != SourceAgent || got["0195-agent-own"].Path != own || got["0195-omp-style"].Source != SourceAgent {
		t.Fatalf("Discover(all) = %+v", all)
	}
	if e := got["0195-agent-own"]; e.Cwd != "/srv/proj" || e.FirstPrompt != "fix the bug" || e.Created.IsZero() {
		t.Fatalf("entry = %+v", e)
	}
	task, _ := r.dt.catalog.Discover(Scope{TaskID: "task-1"})
	if len(task) != 1 || task[0].ID != mine.SessionID {
		t.Fatalf("Discover(task-1) = %+v", task)
	}
	if _, err := r.dt.catalog.Find(Scope{TaskID: "task-1"}, "0195-agent-own"); !errors.Is(err, ErrSessionNotFound) {
		t.Fatalf("a Task found the agent's own session: %v", err)
	}
	if e, err := r.dt.catalog.Find(Scope{All: true}, "0195-agent-own"); err != nil || e.Path != own {
		t.Fatalf("operator Find = %+v, %v", e, err)
	}
	if after := snapshot(t, r.cfg.Dir, filepath.Join(home, ".pi")); fmt.Sprint(after) != fmt.Sprint(before) {
		t.Fatalf("discovery changed files:\nbefore %v\nafter  %v", before, after)
	}
	// Two agent files with one id are ambiguous for an operator.
	writeSession(t, filepath.Join(home, ".pi", "agent", "sessions", "--other--"), "0195-agent-own", "/other")
	if _, err := r.dt.catalog.Find(Scope{All: true}, "0195-agent-own"); err == nil || !strings.Contains(err.Error(), "ambiguous") {
		t.Fatalf("ambiguous Find: %v", err)
	}
}

func TestPrivateFolders(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "delegate")
	if err := os.MkdirAll(filepath.Join(dir, "pi"), 0o755); err != nil {
		t.Fatal(err)
	}
	cfg := fakeConfig(t, "x")
	cfg.Dir = dir
	dt, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{dir, filepath.Join(dir, "pi"), filepath.Join(dir, "records"), filepath.Join(dir, "extension")} {
		if fi, err := os.Stat(d); err != nil || fi.Mode().Perm() != 0o700 {
			t.Errorf("%s: %v %v", d, fi.Mode(), err)
		}
	}
	b, err := os.ReadFile(dt.extensionPath())
	if err != nil || string(b) != string(approvalExtension) {
		t.Fatalf("extension: %v", err)
	}
}
