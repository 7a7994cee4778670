package memory

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"lemo/api"
	"lemo/persistence"
)

const (
	crashHelperEnv = "LEMO_MEMORY_CRASH_HELPER"
	crashDirEnv    = "LEMO_MEMORY_CRASH_DIR"
)

// crashHelper runs in a child process: 4 goroutines each create a Task and
// append user messages with their postings (every 5th also records a fact),
// while the indexer builds and merges segments every few milliseconds. It
// prints "ack <task> <seq>" and "fact <task> <id>" after each durable write,
// until it is killed.
func crashHelper() {
	fail := func(err error) {
		fmt.Println("error", err)
		os.Exit(2)
	}
	dd, err := persistence.OpenDataDir(os.Getenv(crashDirEnv))
	if err != nil {
		fail(err)
	}
	st, err := persistence.Open(dd, persistence.Options{Log: zerolog.Nop(), MemTableSize: 8 << 20})
	if err != nil {
		fail(err)
	}
	mem, err := Open(context.Background(), st, Options{SegmentDocs: 8, MergeFactor: 3, IndexInterval: 2 * time.Millisecond})
	if err != nil {
		fail(err)
	}
	var mu sync.Mutex
	for g := 0; g < 4; g++ {
		go func() {
			task := persistence.NewTaskID(time.Now())
			for seq := uint64(1); ; seq++ {
				var body proto.Message = user(fmt.Sprintf("message %s %s", uniq(task, seq), strings.Repeat("filler words ", 20)))
				if seq == 1 {
					body = &api.TaskCreated{Owner: "o"}
				}
				ev := api.NewEvent(task, seq, timestamppb.Now(), body)
				evs := []*api.Event{ev}
				if _, err := st.Append(context.Background(), persistence.Append{TaskID: task, Events: evs, Extra: mem.Postings("o", evs)}); err != nil {
					fail(err)
				}
				mu.Lock()
				fmt.Printf("ack %s %d\n", task, seq)
				mu.Unlock()
				if seq%5 == 0 {
					id, err := mem.RecordFact(context.Background(), "o", task, "c1", FactInput{Content: "fact f" + uniq(task, seq)[1:] + " recorded", Method: "test"})
					if err != nil {
						fail(err)
					}
					mu.Lock()
					fmt.Printf("fact %s %s\n", task, id)
					mu.Unlock()
				}
			}
		}()
	}
	select {}
}

// uniq is a term that names one event.
func uniq(task string, seq uint64) string {
	return fmt.Sprintf("u%sx%d", strings.ToLower(task[len(task)-8:]), seq)
}

// TestKill9DuringIndexing kills a process with SIGKILL while it appends
// indexed events, records facts and builds and merges segments, 8 times on
// one store, and checks after each kill that the index holds exactly what
// history holds: every indexable event and fact once, nothing else, and
// that a search finds each of them.
func TestKill9DuringIndexing(t *testing.T) {
	if testing.Short() {
		t.Skip("kill -9 loop skipped in -short mode")
	}
	dir := t.TempDir()
	acked := make(map[string]uint64)
	facts := make(map[string]string) // fact id -> task
	for iter := 0; iter < 8; iter++ {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), crashHelperEnv+"=1", crashDirEnv+"="+dir)
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		cmd.Stderr = os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		killAt := 60 + iter*45
		sc := bufio.NewScanner(stdout)
		n := 0
		record := func(line string) {
			f := strings.Fields(line)
			switch {
			case len(f) == 3 && f[0] == "ack":
				var seq uint64
				fmt.Sscan(f[2], &seq)
				acked[f[1]] = max(acked[f[1]], seq)
			case len(f) == 3 && f[0] == "fact":
				facts[f[2]] = f[1]
			}
		}
		for sc.Scan() {
			line := sc.Text()
			if strings.HasPrefix(line, "error") {
				t.Fatalf("helper: %s", line)
			}
			record(line)
			if n++; n == killAt {
				if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
					t.Fatal(err)
				}
				break
			}
		}
		rest, _ := io.ReadAll(stdout)
		for _, line := range strings.Split(string(rest), "\n") {
			record(line)
		}
		_ = cmd.Wait()
		verifyIndex(t, dir, acked, facts)
	}
}

func verifyIndex(t *testing.T, dir string, acked map[string]uint64, facts map[string]string) {
	t.Helper()
	var log strings.Builder
	e := &env{t: t, dir: dir, opt: Options{IndexInterval: time.Hour, manual: true, Log: zerolog.New(&log)}, seqs: map[string]uint64{}}
	e.open()
	defer e.close()
	segs, pending := e.counts("o")
	t.Logf("after the kill: %d segments, %d pending documents; blocks of interrupted builds or merges found: %v",
		segs, pending, strings.Contains(log.String(), "interrupted index builds"))
	// What history holds: every user message, and every fact.
	want := make(map[string]string) // ref -> unique term
	var stored []string
	err := e.st.View(func(v *persistence.Snapshot) error {
		err := v.EachMeta(func(m *api.TaskMeta) error {
			if acked[m.GetTaskId()] > m.GetLastSeq() {
				return fmt.Errorf("task %s: acknowledged up to %d, history ends at %d", m.GetTaskId(), acked[m.GetTaskId()], m.GetLastSeq())
			}
			return v.Events(m.GetTaskId(), 1, 0, func(ev *api.Event) error {
				if ev.GetUserMessage() != nil {
					want[string(persistence.EventRef(ev.GetTaskId(), ev.GetSeq()))] = uniq(ev.GetTaskId(), ev.GetSeq())
				}
				return nil
			})
		})
		if err != nil {
			return err
		}
		return v.Scan(persistence.FactPrefix("o"), persistence.ScanOptions{}, func(k, val []byte) error {
			id := string(k[len(persistence.FactPrefix("o")):])
			f, err := readFact(v, "o", id)
			if err != nil {
				return err
			}
			want[string(persistence.FactRef(f.Task, id))] = strings.Fields(f.Content)[1]
			stored = append(stored, id)
			return nil
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	for id, task := range facts {
		if _, ok := want[string(persistence.FactRef(task, id))]; !ok {
			t.Fatalf("fact %s was acknowledged but is not in the store", id)
		}
	}
	got := e.indexedRefs("o")
	var missing, extra []string
	seen := make(map[string]int)
	for _, r := range got {
		seen[r]++
		if seen[r] == 2 {
			extra = append(extra, "duplicate "+r)
		}
		if _, ok := want[r]; !ok {
			extra = append(extra, r)
		}
	}
	for r := range want {
		if seen[r] == 0 {
			missing = append(missing, r)
		}
	}
	if len(missing) > 0 || len(extra) > 0 {
		t.Fatalf("index and history disagree: %d records in history, %d indexed; missing %q; extra %q", len(want), len(got), missing, extra)
	}
	// Search finds each record by its own term (a sample, to stay fast).
	refs := make([]string, 0, len(want))
	for r := range want {
		refs = append(refs, r)
	}
	sort.Strings(refs)
	for i := 0; i < len(refs); i += 1 + len(refs)/150 {
		hits := e.search(Query{Owner: "o", Text: want[refs[i]], Limit: 5})
		if len(hits) != 1 || hitRef(hits[0]) != refs[i] {
			t.Fatalf("search %q: %d hits, want exactly %s", want[refs[i]], len(hits), refs[i])
		}
	}
}

// indexedRefs lists every document of owner's index: the pending ones
// and the rows of every live segment.
func (e *env) indexedRefs(owner string) []string {
	e.t.Helper()
	e.loaded()
	var out []string
	err := e.st.View(func(v *persistence.Snapshot) error {
		pend, err := e.mem.pendingDocs(v, owner, 0)
		if err != nil {
			return err
		}
		for _, p := range pend {
			out = append(out, p.ref)
		}
		segs, err := e.mem.liveSegments(v, owner)
		if err != nil {
			return err
		}
		src := blockSource{v: v, cache: e.mem.cache}
		for _, s := range segs {
			n := 0
			for b := uint32(0); b < s.hdr.docBlocks; b++ {
				blk, err := src.get(owner, persistence.BlockDocs, s.hdr.seg, b)
				if err != nil {
					return err
				}
				rows, err := decodeDocRows(blk)
				if err != nil {
					return err
				}
				for _, r := range rows {
					out = append(out, r.ref)
				}
				n += len(rows)
			}
			if n != int(s.hdr.docs) {
				return fmt.Errorf("segment %d: %d rows for %d documents", s.hdr.seg, n, s.hdr.docs)
			}
		}
		return nil
	})
	if err != nil {
		e.t.Fatal(err)
	}
	return out
}
