package delegate

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Errors of discovery and resume.
var (
	// ErrSessionNotFound: no resumable session has that id in the caller's
	// scope (a Task sees only its own sessions).
	ErrSessionNotFound = errors.New("delegate: no such session")
	// ErrSessionInUse: another invocation is running that session.
	ErrSessionInUse = errors.New("delegate: the session is in use by another invocation")
)

// Where a discovered session lives.
const (
	// SourceLemo is Lemo's private delegate session folder.
	SourceLemo = "lemo"
	// SourceAgent is one of the agent's own default session folders.
	SourceAgent = "agent"
)

// validSessionID is what Lemo accepts as a session id: the agents use
// UUIDs; no path separators, no dots.
var validSessionID = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_-]{0,127}$`)

// Entry is a resumable session found by discovery.
type Entry struct {
	ID     string `json:"session_id"`
	Kind   string `json:"kind"`
	Source string `json:"source"`
	// Path is the session file where discovery found it. Only operator
	// surfaces show it; resume derives the folder from it.
	Path string `json:"-"`
	// Cwd is the folder the session was started in (from its header).
	Cwd      string    `json:"cwd,omitempty"`
	Created  time.Time `json:"created,omitzero"`
	Modified time.Time `json:"modified"`
	Bytes    int64     `json:"bytes"`
	// FirstPrompt is the start of the session's first user message.
	FirstPrompt string `json:"first_prompt,omitempty"`
	// TaskID, Owner and Invocation say which Task created a session in
	// Lemo's folder (Lemo's own record; empty for the agent's folders).
	TaskID     string `json:"task_id,omitempty"`
	Owner      string `json:"owner,omitempty"`
	Invocation string `json:"invocation,omitempty"`
}

// Scope selects what a discovery sees.
type Scope struct {
	// TaskID limits discovery to the sessions that Task created.
	TaskID string
	// All shows every session, Lemo's and the agent's (operator surfaces:
	// the CLI and the console). It wins over TaskID.
	All bool
}

// Catalog discovers resumable sessions and keeps Lemo's records of which
// Task created which session. Discovery only reads: it never creates,
// changes, locks or migrates a session file. It is safe for concurrent
// use.
type Catalog struct {
	kind    string
	lemoDir string // flat: <dir>/<kind>
	records string // <dir>/records
	// agentDirs are the agent's default session folders: each holds one
	// sub-folder per working directory.
	agentDirs []string

	mu   sync.Mutex
	busy map[string]string // session id -> invocation running it
}

// record is Lemo's note of a session it created (in <dir>/records).
type record struct {
	SessionID  string    `json:"session_id"`
	Kind       string    `json:"kind"`
	File       string    `json:"file"` // base name in the Lemo folder
	TaskID     string    `json:"task_id"`
	Owner      string    `json:"owner"`
	CallID     string    `json:"call_id"`
	Invocation string    `json:"invocation"`
	Created    time.Time `json:"created"`
}

func newCatalog(kind, dir string, agentEnv []string) *Catalog {
	c := &Catalog{kind: kind, lemoDir: filepath.Join(dir, kind), records: filepath.Join(dir, "records"), busy: make(map[string]string)}
	home := lookupEnv(agentEnv, "HOME")
	switch kind {
	case KindPi:
		agentDir := lookupEnv(agentEnv, "PI_CODING_AGENT_DIR")
		if agentDir == "" && home != "" {
			agentDir = filepath.Join(home, ".pi", "agent")
		}
		if strings.HasPrefix(agentDir, "~/") && home != "" {
			agentDir = filepath.Join(home, agentDir[2:])
		}
		if filepath.IsAbs(agentDir) {
			c.agentDirs = append(c.agentDirs, filepath.Join(agentDir, "sessions"))
		}
	case KindOmp:
		if filepath.IsAbs(home) {
			c.agentDirs = append(c.agentDirs, filepath.Join(home, ".omp", "agent", "sessions"))
		}
	}
	return c
}

// Dir is Lemo's private session folder of this agent kind.
func (c *Catalog) Dir() string { return c.lemoDir }

// maxScan bounds the files one discovery reads.
const maxScan = 10000

// Discover lists the resumable sessions in scope, newest first.
func (c *Catalog) Discover(scope Scope) ([]Entry, error) {
	var out []Entry
	scanned := 0
	lemo, err := c.scanFolder(c.lemoDir, SourceLemo, &scanned)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("delegate: read %s: %w", c.lemoDir, err)
	}
	for _, e := range lemo {
		if rec, ok := c.readRecord(e.ID); ok && rec.File == filepath.Base(e.Path) {
			e.TaskID, e.Owner, e.Invocation = rec.TaskID, rec.Owner, rec.Invocation
		}
		if scope.All || (scope.TaskID != "" && e.TaskID == scope.TaskID) {
			out = append(out, e)
		}
	}
	if scope.All {
		for _, root := range c.agentDirs {
			buckets, err := os.ReadDir(root)
			if err != nil {
				continue // absent or unreadable: nothing to offer
			}
			for _, b := range buckets {
				if !b.IsDir() || scanned >= maxScan {
					continue
				}
				es, _ := c.scanFolder(filepath.Join(root, b.Name()), SourceAgent, &scanned)
				out = append(out, es...)
			}
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Modified.After(out[j].Modified) })
	return out, nil
}

// Find returns the session with id in scope. An id that exists only
// outside the scope reads as not found.
func (c *Catalog) Find(scope Scope, id string) (Entry, error) {
	if !validSessionID.MatchString(id) {
		return Entry{}, fmt.Errorf("%w: %q is not a session id", ErrSessionNotFound, Short(id, 64))
	}
	es, err := c.Discover(scope)
	if err != nil {
		return Entry{}, err
	}
	var found []Entry
	for _, e := range es {
		if e.ID == id {
			found = append(found, e)
		}
	}
	switch {
	case len(found) == 0:
		return Entry{}, fmt.Errorf("%w: %s", ErrSessionNotFound, id)
	case len(found) == 1 || found[0].Source == SourceLemo:
		for _, e := range found {
			if e.Source == SourceLemo {
				return e, nil
			}
		}
		return found[0], nil
	default:
		return Entry{}, fmt.Errorf("delegate: session id %s is ambiguous: %d session files carry it", id, len(found))
	}
}

// scanFolder reads the session headers of the *.jsonl files of one flat
// folder.
func (c *Catalog) scanFolder(dir, source string, scanned *int) ([]Entry, error) {
	des, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var out []Entry
	for _, de := range des {
		if *scanned >= maxScan {
			break
		}
		if !de.Type().IsRegular() || !strings.HasSuffix(de.Name(), ".jsonl") {
			continue // symlinks, folders (omp's artifacts) and the rest
		}
		*scanned++
		e, ok := readHeader(filepath.Join(dir, de.Name()))
		if !ok {
			continue
		}
		e.Kind, e.Source = c.kind, source
		out = append(out, e)
	}
	return out, nil
}

// headerWindow bounds what discovery reads of a session file.
const headerWindow = 64 << 10

// readHeader reads a session file's header (pi: the first line; omp: the
// line after the title slot) and the start of its first user message,
// without following symlinks or blocking on special files.
func readHeader(path string) (Entry, bool) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return Entry{}, false
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil || !fi.Mode().IsRegular() {
		return Entry{}, false
	}
	e := Entry{Path: path, Modified: fi.ModTime().UTC(), Bytes: fi.Size()}
	r := bufio.NewReaderSize(io.LimitReader(f, headerWindow), headerWindow)
	header := false
	for i := 0; ; i++ {
		line, err := r.ReadSlice('\n')
		if len(line) > 0 && bytes.HasPrefix(bytes.TrimSpace(line), []byte("{")) {
			if !header && i < 4 {
				header = parseHeader(line, &e)
			} else if header && e.FirstPrompt == "" {
				e.FirstPrompt = firstPrompt(line)
			}
		}
		if err != nil && !errors.Is(err, bufio.ErrBufferFull) {
			break
		}
		if header && e.FirstPrompt != "" {
			break
		}
	}
	return e, header
}

func parseHeader(line []byte, e *Entry) bool {
	var h struct {
		Type      string `json:"type"`
		ID        string `json:"id"`
		Cwd       string `json:"cwd"`
		Timestamp string `json:"timestamp"`
	}
	if json.Unmarshal(line, &h) != nil || h.Type != "session" || !validSessionID.MatchString(h.ID) {
		return false
	}
	e.ID = h.ID
	e.Cwd = Short(h.Cwd, 4096)
	if t, err := time.Parse(time.RFC3339Nano, h.Timestamp); err == nil {
		e.Created = t.UTC()
	}
	return true
}

func firstPrompt(line []byte) string {
	var m struct {
		Type    string `json:"type"`
		Message struct {
			Role    string          `json:"role"`
			Content json.RawMessage `json:"content"`
		} `json:"message"`
	}
	if json.Unmarshal(line, &m) != nil || m.Type != "message" || m.Message.Role != "user" {
		return ""
	}
	return Short(strings.Join(strings.Fields(contentText(m.Message.Content)), " "), 200)
}

func (c *Catalog) readRecord(id string) (record, bool) {
	if !validSessionID.MatchString(id) {
		return record{}, false
	}
	b, err := os.ReadFile(filepath.Join(c.records, id+".json"))
	if err != nil {
		return record{}, false
	}
	var r record
	if json.Unmarshal(b, &r) != nil || r.SessionID != id {
		return record{}, false
	}
	return r, true
}

// writeRecord notes which Task created a session (atomically, mode 0600).
func (c *Catalog) writeRecord(r record) error {
	if !validSessionID.MatchString(r.SessionID) {
		return fmt.Errorf("delegate: the agent reported session id %q, which Lemo does not accept", Short(r.SessionID, 64))
	}
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(c.records, ".record-*")
	if err != nil {
		return fmt.Errorf("delegate: record session %s: %w", r.SessionID, err)
	}
	_, werr := tmp.Write(append(b, '\n'))
	if err := errors.Join(werr, tmp.Sync(), tmp.Close()); err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("delegate: record session %s: %w", r.SessionID, err)
	}
	if err := os.Rename(tmp.Name(), filepath.Join(c.records, r.SessionID+".json")); err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("delegate: record session %s: %w", r.SessionID, err)
	}
	return nil
}

// acquire marks a session as run by invocation until release is called.
func (c *Catalog) acquire(id, invocation string) (release func(), err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if other, ok := c.busy[id]; ok {
		return nil, fmt.Errorf("%w: session %s is being continued by invocation %s", ErrSessionInUse, id, other)
	}
	c.busy[id] = invocation
	return func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		if c.busy[id] == invocation {
			delete(c.busy, id)
		}
	}, nil
}

// prepare creates Lemo's folders with mode 0700 (and narrows them to 0700
// if they were wider): the session folder and the records.
func (c *Catalog) prepare() error {
	for _, d := range []string{filepath.Dir(c.lemoDir), c.lemoDir, c.records} {
		if err := privateDir(d); err != nil {
			return err
		}
	}
	return nil
}

// privateDir makes sure dir exists as a folder with mode 0700.
func privateDir(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("delegate: create %s: %w", dir, err)
	}
	fi, err := os.Lstat(dir)
	if err != nil {
		return fmt.Errorf("delegate: %s: %w", dir, err)
	}
	if !fi.IsDir() {
		return fmt.Errorf("delegate: %s is not a folder", dir)
	}
	if fi.Mode().Perm() != 0o700 {
		if err := os.Chmod(dir, 0o700); err != nil {
			return fmt.Errorf("delegate: make %s private: %w", dir, err)
		}
	}
	return nil
}

// running reports whether an invocation is running the session now.
func (c *Catalog) running(id string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, ok := c.busy[id]
	return ok
}
