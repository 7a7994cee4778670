package memory

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"go.uber.org/goleak"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"lemo/api"
	"lemo/persistence"
)

func TestMain(m *testing.M) {
	if os.Getenv(crashHelperEnv) != "" {
		crashHelper()
		return
	}
	code := m.Run()
	closeBenchCorpora() // benchmarks share stores across runs
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintf(os.Stderr, "goleak: %v\n", err)
			code = 1
		}
	}
	os.Exit(code)
}

var t0 = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

// env is a store and a memory over it in a temporary folder.
type env struct {
	t   testing.TB
	dir string
	dd  *persistence.DataDir
	st  *persistence.Store
	mem *Memory
	opt Options

	mu   sync.Mutex
	seqs map[string]uint64
}

func newEnv(t testing.TB, opt Options) *env {
	t.Helper()
	e := &env{t: t, dir: t.TempDir(), opt: opt, seqs: make(map[string]uint64)}
	e.open()
	t.Cleanup(e.close)
	return e
}

func (e *env) open() {
	e.t.Helper()
	var err error
	if e.dd, err = persistence.OpenDataDir(e.dir); err != nil {
		e.t.Fatal(err)
	}
	if e.st, err = persistence.Open(e.dd, persistence.Options{Log: zerolog.Nop(), MemTableSize: 8 << 20, BlockCacheSize: 8 << 20}); err != nil {
		e.t.Fatal(err)
	}
	if e.opt.IndexInterval == 0 {
		e.opt.IndexInterval = time.Hour
		e.opt.manual = true // tests flush explicitly
	}
	if e.mem, err = Open(context.Background(), e.st, e.opt); err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) close() {
	if e.mem == nil {
		return
	}
	_ = e.mem.Close()
	_ = e.st.Close()
	_ = e.dd.Close()
	e.mem = nil
}

func (e *env) restart() {
	e.t.Helper()
	e.close()
	e.open()
}

// task creates a Task of owner and returns its id.
func (e *env) task(owner string, at time.Time) string {
	e.t.Helper()
	id := persistence.NewTaskID(at)
	e.add(owner, id, at, &api.TaskCreated{Owner: owner, Model: "fake/m"})
	return id
}

// add appends bodies to a Task at time at (one event per second after it),
// with the memory's postings, and returns the first seq.
func (e *env) add(owner, task string, at time.Time, bodies ...proto.Message) uint64 {
	e.t.Helper()
	e.mu.Lock()
	first := e.seqs[task] + 1
	e.seqs[task] += uint64(len(bodies))
	e.mu.Unlock()
	evs := make([]*api.Event, len(bodies))
	for i, b := range bodies {
		evs[i] = api.NewEvent(task, first+uint64(i), timestamppb.New(at.Add(time.Duration(i)*time.Second)), b)
	}
	if _, err := e.st.Append(context.Background(), persistence.Append{TaskID: task, Events: evs, Extra: e.mem.Postings(owner, evs)}); err != nil {
		e.t.Fatalf("append: %v", err)
	}
	return first
}

func (e *env) flush() {
	e.t.Helper()
	if err := e.mem.Flush(context.Background()); err != nil {
		e.t.Fatalf("Flush: %v", err)
	}
}

func (e *env) search(q Query) []Hit {
	e.t.Helper()
	hits, err := e.mem.Search(context.Background(), q)
	if err != nil {
		e.t.Fatalf("Search(%q): %v", q.Text, err)
	}
	return hits
}

// counts returns the number of live segments and pending documents of owner.
func (e *env) counts(owner string) (segs, pending int) {
	e.t.Helper()
	e.loaded()
	err := e.st.View(func(v *persistence.Snapshot) error {
		s, err := e.mem.liveSegments(v, owner)
		if err != nil {
			return err
		}
		p, err := e.mem.pendingDocs(v, owner, 0)
		segs, pending = len(s), len(p)
		return err
	})
	if err != nil {
		e.t.Fatal(err)
	}
	return segs, pending
}

func user(text string) *api.UserMessage { return &api.UserMessage{Text: text} }

func assistant(text string) *api.AssistantMessage { return &api.AssistantMessage{Text: text} }

func result(call, out string) *api.ToolResult {
	return &api.ToolResult{CallId: call, Retained: true, RetainedOutput: []byte(out), OutputBytes: uint64(len(out))}
}

// loaded waits for the indexer's first step (the pending documents are
// known to the memory once it ran), as queries do.
func (e *env) loaded() {
	e.t.Helper()
	if err := e.mem.waitLoaded(context.Background()); err != nil {
		e.t.Fatal(err)
	}
}
