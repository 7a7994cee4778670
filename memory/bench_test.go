package memory

import (
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"math/rand"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"lemo/api"
	"lemo/persistence"
	"lemo/prompt"
	"lemo/providers"
)

// Benchmarks (see docs/performance.md):
//
//	go test ./memory/ -run '^$' -bench . -benchtime 2000x -timeout 60m
//
// Set LEMO_MEMORY_BENCH_DIR to a folder to keep the corpora between runs.
// The corpora are built once per process (1,000,000 records take minutes):
// records of 20 to 80 words drawn from a 30,000-word vocabulary with a
// Zipf distribution (s = 1.07), as user and assistant messages, JSON tool
// results and failures of one owner, in Tasks of 500 records.

// wordGen draws words with a Zipf distribution over a synthetic vocabulary.
type wordGen struct {
	r     *rand.Rand
	zipf  *rand.Zipf
	words []string
}

// newWordGen returns a generator over the vocabulary of seed 1, drawing
// with a source seeded with seed.
func newWordGen(seed int64) *wordGen {
	r := rand.New(rand.NewSource(1))
	syll := []string{"ka", "lo", "mi", "ne", "ru", "sa", "to", "vi", "de", "po", "qua", "zen", "tri", "bel", "mor", "fin", "gal", "hux", "jor", "wex"}
	seen := make(map[string]bool)
	var words []string
	for len(words) < 30000 {
		n := 1 + r.Intn(4)
		var b strings.Builder
		for i := 0; i < n; i++ {
			b.WriteString(syll[r.Intn(len(syll))])
		}
		w := b.String()
		if len(w) < 3 || seen[w] || stopWords[w] {
			continue
		}
		seen[w] = true
		words = append(words, w)
	}
	r = rand.New(rand.NewSource(seed))
	return &wordGen{r: r, zipf: rand.NewZipf(r, 1.07, 1, uint64(len(words)-1)), words: words}
}

func (g *wordGen) text(n int) string {
	var b strings.Builder
	for i := 0; i < n; i++ {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(g.words[g.zipf.Uint64()])
	}
	return b.String()
}

// record returns the i-th record of a corpus.
func (g *wordGen) record(i int) proto.Message {
	text := g.text(20 + g.r.Intn(61))
	if i%50 == 8 {
		// One record in 50 is a long document (about 4 KB: a file read, a
		// catalog), indexed as passages.
		text = g.text(600)
	}
	switch i % 10 {
	case 0, 1, 2:
		return &api.UserMessage{Text: text}
	case 3, 4, 5:
		return &api.AssistantMessage{Text: text}
	case 6, 7, 8:
		out, _ := json.Marshal(map[string]string{"output": text})
		return &api.ToolResult{CallId: fmt.Sprintf("call-%d", i), Retained: true, RetainedOutput: out, OutputBytes: uint64(len(out))}
	default:
		return &api.ToolFailed{CallId: fmt.Sprintf("call-%d", i), Kind: api.ToolFailureKind_TOOL_FAILURE_KIND_ERROR, Message: text}
	}
}

// benchCorpus is a store and memory holding n records, shared by the
// benchmarks of one process.
type benchCorpus struct {
	dir     string
	dd      *persistence.DataDir
	st      *persistence.Store
	mem     *Memory
	gen     *wordGen
	records int
	// embedDims and embedRate: the vectors the corpus has (embedCorpus).
	embedDims int
	embedRate float64
	rawBytes  int64 // encoded events
	rawText   int64 // indexed text
	build     time.Duration
	flush     time.Duration
	sstBytes  int64 // on disk after the build, without the index (separate store)
	// samples are texts of records of the corpus, for queries that match.
	samples []string
	// keep: the corpus is kept for later runs.
	keep bool
}

var (
	corporaMu sync.Mutex
	corpora   = map[int]*benchCorpus{}
)

func openBenchStore(dir string) (*persistence.DataDir, *persistence.Store, error) {
	dd, err := persistence.OpenDataDir(dir)
	if err != nil {
		return nil, nil, err
	}
	st, err := persistence.Open(dd, persistence.Options{Log: zerolog.Nop()})
	if err != nil {
		_ = dd.Close()
		return nil, nil, err
	}
	return dd, st, nil
}

// corpusOf returns the shared corpus of n records, building it on first use.
func corpusOf(b *testing.B, n int) *benchCorpus {
	b.Helper()
	corporaMu.Lock()
	defer corporaMu.Unlock()
	if c := corpora[n]; c != nil {
		return c
	}
	// LEMO_MEMORY_BENCH_DIR keeps corpora between runs (they are reused
	// when found there); otherwise they live in a temporary folder.
	keep := os.Getenv("LEMO_MEMORY_BENCH_DIR")
	var dir string
	var err error
	if keep != "" {
		dir = filepath.Join(keep, fmt.Sprint(n))
		err = os.MkdirAll(dir, 0o700)
	} else {
		dir, err = os.MkdirTemp("", "lemo-memory-bench-")
	}
	if err != nil {
		b.Fatal(err)
	}
	c := &benchCorpus{dir: dir, gen: newWordGen(1), records: n, keep: keep != ""}
	corpora[n] = c
	if c.dd, c.st, err = openBenchStore(filepath.Join(dir, "indexed")); err != nil {
		b.Fatal(err)
	}
	if c.mem, err = Open(context.Background(), c.st, Options{IndexInterval: time.Hour, manual: true}); err != nil {
		b.Fatal(err)
	}
	if saved, err := os.ReadFile(filepath.Join(dir, "corpus.json")); err == nil {
		var st corpusStats
		if err := json.Unmarshal(saved, &st); err != nil {
			b.Fatal(err)
		}
		c.rawBytes, c.rawText, c.sstBytes, c.samples, c.build, c.flush = st.RawBytes, st.RawText, st.SSTBytes, st.Samples, st.Build, st.Flush
		return c
	}
	// The same events without the index, to measure the index on disk.
	rawDD, rawSt, err := openBenchStore(filepath.Join(dir, "raw"))
	if err != nil {
		b.Fatal(err)
	}
	start := time.Now()
	const perTask, perAppend = 500, 250
	for task := 0; task*perTask < n; task++ {
		id := persistence.NewTaskID(time.Unix(1700000000+int64(task), 0))
		at := time.Unix(1700000000+int64(task)*600, 0)
		seq := uint64(1)
		batch := []*api.Event{api.NewEvent(id, seq, timestamppb.New(at), &api.TaskCreated{Owner: "o", Model: "fake/m"})}
		for r := 0; r < perTask && task*perTask+r < n; r++ {
			seq++
			body := c.gen.record(task*perTask + r)
			ev := api.NewEvent(id, seq, timestamppb.New(at.Add(time.Duration(r)*time.Second)), body)
			batch = append(batch, ev)
			_, text, _, _, _, _ := recordText(ev, nil)
			c.rawText += int64(len(text))
			if (task*perTask+r)%997 == 0 {
				c.samples = append(c.samples, text)
			}
			if len(batch) == perAppend || r == perTask-1 || task*perTask+r == n-1 {
				for _, e := range batch {
					c.rawBytes += int64(proto.Size(e))
				}
				if _, err := c.st.Append(context.Background(), persistence.Append{TaskID: id, Events: batch, Extra: c.mem.Postings("o", batch)}); err != nil {
					b.Fatal(err)
				}
				if _, err := rawSt.Append(context.Background(), persistence.Append{TaskID: id, Events: batch}); err != nil {
					b.Fatal(err)
				}
				batch = nil
				if (task*perTask+r+1)%20000 == 0 { // as the background indexer would
					if err := c.mem.Flush(context.Background()); err != nil {
						b.Fatal(err)
					}
				}
			}
		}
	}
	c.build = time.Since(start)
	start = time.Now()
	if err := c.mem.Flush(context.Background()); err != nil {
		b.Fatal(err)
	}
	c.flush = time.Since(start)
	_ = rawSt.Close()
	_ = rawDD.Close()
	c.sstBytes = dirSize(filepath.Join(dir, "raw"))
	if c.keep {
		saved, _ := json.Marshal(corpusStats{c.rawBytes, c.rawText, c.sstBytes, c.samples, c.build, c.flush})
		if err := os.WriteFile(filepath.Join(dir, "corpus.json"), saved, 0o600); err != nil {
			b.Fatal(err)
		}
	}
	return c
}

// corpusStats is what a kept corpus remembers of its build.
type corpusStats struct {
	RawBytes, RawText, SSTBytes int64
	Samples                     []string
	Build, Flush                time.Duration
}

// dirSize is the size of the store's table files (every record of these
// stores is below the value threshold, so the tables hold all the data).
func dirSize(dir string) int64 {
	var n int64
	_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(p, ".sst") {
			if fi, err := d.Info(); err == nil {
				n += fi.Size()
			}
		}
		return nil
	})
	return n
}

func closeBenchCorpora() {
	corporaMu.Lock()
	defer corporaMu.Unlock()
	for n, c := range corpora {
		if c.mem != nil {
			_ = c.mem.Close()
		}
		if c.st != nil {
			_ = c.st.Close()
		}
		if c.dd != nil {
			_ = c.dd.Close()
		}
		if !c.keep {
			_ = os.RemoveAll(c.dir)
		}
		delete(corpora, n)
	}
}

// latencies collects per-operation times and reports percentiles.
type latencies []time.Duration

func (l latencies) report(b *testing.B) {
	if len(l) == 0 {
		return
	}
	sort.Slice(l, func(i, j int) bool { return l[i] < l[j] })
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	b.ReportMetric(ms(l[len(l)/2]), "p50-ms")
	b.ReportMetric(ms(l[len(l)*99/100]), "p99-ms")
	b.ReportMetric(ms(l[len(l)-1]), "max-ms")
}

// queries are 2 to 4 words of the vocabulary's mid range (ranks 50 to
// 5,000: words as specific as people search for), or, with common, of its
// 50 most frequent words.
func queries(g *wordGen, n int, common bool) []string {
	r := rand.New(rand.NewSource(7))
	out := make([]string, n)
	for i := range out {
		k := 2 + r.Intn(3)
		var w []string
		for j := 0; j < k; j++ {
			if common {
				w = append(w, g.words[r.Intn(50)])
			} else {
				w = append(w, g.words[50+r.Intn(4950)])
			}
		}
		out[i] = strings.Join(w, " ")
	}
	return out
}

func benchSearch(b *testing.B, common bool) {
	c := corpusOf(b, 1_000_000)
	qs := queries(c.gen, 1000, common)
	// Warm the caches the way a running daemon has them.
	for _, q := range qs[:100] {
		if _, err := c.mem.Search(context.Background(), Query{Owner: "o", Text: q, Limit: 20}); err != nil {
			b.Fatal(err)
		}
	}
	lat := make(latencies, 0, b.N)
	hits := 0
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t := time.Now()
		h, err := c.mem.Search(context.Background(), Query{Owner: "o", Text: qs[i%len(qs)], Limit: 20})
		lat = append(lat, time.Since(t))
		if err != nil {
			b.Fatal(err)
		}
		hits += len(h)
	}
	b.StopTimer()
	lat.report(b)
	b.ReportMetric(float64(hits)/float64(b.N), "hits/op")
}

// BenchmarkSearch1M measures memory.search's top 20 over 1,000,000 records
// with specific (mid-frequency) query words, and reports the index's size.
func BenchmarkSearch1M(b *testing.B) {
	benchSearch(b, false)
	c := corpusOf(b, 1_000_000)
	var logical, events int64
	err := c.st.View(func(v *persistence.Snapshot) error {
		for _, p := range []string{"i/", "j/"} {
			if err := v.Scan([]byte(p), persistence.ScanOptions{}, func(k, val []byte) error {
				logical += int64(len(k) + len(val))
				return nil
			}); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	events = c.rawBytes
	segs, pending := 0, 0
	_ = c.st.View(func(v *persistence.Snapshot) error {
		s, _ := c.mem.liveSegments(v, "o")
		p, _ := c.mem.pendingDocs(v, "o", 0)
		segs, pending = len(s), len(p)
		return nil
	})
	b.ReportMetric(float64(logical)/float64(c.rawText), "index/text")
	b.ReportMetric(float64(logical)/float64(events), "index/events")
	b.Logf("corpus: %d records, %d MB of text, %d MB of encoded events; built in %s, segmented in %s; %d segments, %d pending",
		c.records, c.rawText>>20, events>>20, c.build.Round(time.Second), c.flush.Round(time.Second), segs, pending)
	b.Logf("index records: %d MB (%.2f x the text, %.2f x the events); events alone on disk: %d MB of tables",
		logical>>20, float64(logical)/float64(c.rawText), float64(logical)/float64(events), c.sstBytes>>20)
}

// BenchmarkSearch1MCommonWords is the worst case: queries of the 50 most
// frequent words, whose posting lists are the longest.
func BenchmarkSearch1MCommonWords(b *testing.B) { benchSearch(b, true) }

// BenchmarkIndexSizeOnDisk compares the tables of the indexed store with
// those of the same events stored without the index. Each iteration closes
// the indexed store (so its memtables are flushed), measures its tables and
// opens it again with the memory on it: ns/op is that round trip on a store
// of a million records; the size figures are reported as metrics.
func BenchmarkIndexSizeOnDisk(b *testing.B) {
	c := corpusOf(b, 1_000_000)
	var indexed int64
	for b.Loop() {
		if err := c.mem.Close(); err != nil {
			b.Fatal(err)
		}
		_ = c.st.Close()
		_ = c.dd.Close()
		indexed = dirSize(filepath.Join(c.dir, "indexed"))
		var err error
		if c.dd, c.st, err = openBenchStore(filepath.Join(c.dir, "indexed")); err != nil {
			b.Fatal(err)
		}
		if c.mem, err = Open(context.Background(), c.st, Options{IndexInterval: time.Hour, manual: true}); err != nil {
			b.Fatal(err)
		}
	}
	index := indexed - c.sstBytes
	b.ReportMetric(float64(index)/float64(c.rawText), "disk-index/text")
	b.ReportMetric(float64(index)/float64(c.sstBytes), "disk-index/events-on-disk")
	b.Logf("on disk: events with index %d MB, events alone %d MB, index %d MB; text %d MB", indexed>>20, c.sstBytes>>20, index>>20, c.rawText>>20)
}

// cycleHistory is a Task of 2,000 events (about 2.5 MB): a request (a
// record of the corpus reworded, so recall has something to find), then
// 400 rounds of an answer with one call, its record, and a retained result
// of about 4.5 KB.
func cycleHistory(g *wordGen, request string) []*api.Event {
	const task = "01JCYCLEBENCHTASK000000000"
	var evs []*api.Event
	add := func(b proto.Message) {
		evs = append(evs, api.NewEvent(task, uint64(len(evs)+1), timestamppb.New(time.Unix(1800000000+int64(len(evs)), 0)), b))
	}
	add(&api.TaskCreated{Owner: "o", Model: "fake/m"})
	add(&api.UserMessage{Text: "Find out why " + request + " and " + g.text(10)})
	for i := 1; len(evs) < 2000; i++ {
		id := fmt.Sprintf("call-%d-1", i)
		add(&api.CycleStarted{Cycle: uint32(i)})
		add(&api.AssistantMessage{Cycle: uint32(i), Text: g.text(30), ToolCallIds: []string{id}})
		args, _ := json.Marshal(map[string]string{"query": g.text(8)})
		add(&api.ToolCallRecorded{CallId: id, Cycle: uint32(i), Tool: "files.grep", Arguments: args})
		add(&api.CycleFinished{Cycle: uint32(i), Outcome: api.CycleOutcome_CYCLE_OUTCOME_COMPLETED})
		out, _ := json.Marshal(map[string]string{"matches": g.text(700)})
		add(&api.ToolResult{CallId: id, Retained: true, RetainedOutput: out, OutputBytes: uint64(len(out))})
	}
	return evs[:2000]
}

func benchSpecs() []providers.ToolSpec {
	specs := make([]providers.ToolSpec, 12)
	for i := range specs {
		specs[i] = providers.ToolSpec{Name: fmt.Sprintf("tool_%d", i), Description: "A tool of the benchmark with a description of average length for a model to read.",
			Parameters: json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"},"text":{"type":"string"}},"required":["path"]}`)}
	}
	return specs
}

// benchAssemble measures what a Cycle does before calling the model:
// recall against 100,000 records, then Build, for a 2,000-event Task.
func benchAssemble(b *testing.B, window int, withRecall bool) {
	c := corpusOf(b, 100_000)
	h := cycleHistory(newWordGen(2), c.samples[42])
	size := 0
	for _, ev := range h {
		size += proto.Size(ev)
	}
	specs := benchSpecs()
	q := RecallQuery{Owner: "o", TaskID: h[0].GetTaskId(), History: h}
	var sum *api.InputSummary
	lat := make(latencies, 0, b.N)
	recalled := 0
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t := time.Now()
		var ev []prompt.Evidence
		if withRecall {
			var err error
			if ev, err = c.mem.Recall(context.Background(), q); err != nil {
				b.Fatal(err)
			}
		}
		_, s, err := prompt.Build(prompt.Input{History: h, Tools: specs, Window: window, Recall: ev})
		lat = append(lat, time.Since(t))
		if err != nil {
			b.Fatal(err)
		}
		sum = s
		recalled = len(ev)
	}
	b.StopTimer()
	lat.report(b)
	b.ReportMetric(float64(len(sum.GetExcerpts())), "excerpts")
	b.ReportMetric(float64(len(sum.GetRecalled())), "recalled")
	b.Logf("history: %d events, %d KB; window %d: %d tokens of %d, %d excerpts, %d items recalled, %d given to the model",
		len(h), size>>10, window, sum.GetEstimatedTokens(), sum.GetCeilingTokens(), len(sum.GetExcerpts()), recalled, len(sum.GetRecalled()))
}

// BenchmarkAssemble2000Events1MWindow: the whole conversation fits (a
// 1,048,576-token window), so recall is used.
func BenchmarkAssemble2000Events1MWindow(b *testing.B) { benchAssemble(b, 1<<20, true) }

// BenchmarkAssemble2000Events256KWindow: 400 results are excerpted to fit
// a 262,144-token window (recall is computed, and left out).
func BenchmarkAssemble2000Events256KWindow(b *testing.B) { benchAssemble(b, 1<<18, true) }

// BenchmarkRecall100K is recall alone for the 2,000-event Task.
func BenchmarkRecall100K(b *testing.B) { benchRecall(b, false) }

// BenchmarkRecall100KUnchanged is a Cycle whose recall query did not
// change since its Task's previous Cycle: the result is reused.
func BenchmarkRecall100KUnchanged(b *testing.B) { benchRecall(b, true) }

func benchRecall(b *testing.B, reuse bool) {
	measureRecalls(b, corpusOf(b, 100_000), reuse)
}

// measureRecalls times b.N recalls of one Cycle over c (each searching
// unless reuse) and reports their latencies and the items recalled.
func measureRecalls(b *testing.B, c *benchCorpus, reuse bool) {
	h := cycleHistory(newWordGen(2), c.samples[42])
	timeRecalls(b, c.mem, RecallQuery{Owner: "o", TaskID: h[0].GetTaskId(), History: h}, reuse)
}

// timeRecalls times b.N recalls of q, each searching unless reuse, and
// reports their latencies and how many items the last one gave.
func timeRecalls(b *testing.B, m *Memory, q RecallQuery, reuse bool) {
	lat := make(latencies, 0, b.N)
	items := 0
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if !reuse {
			m.recalls.reset() // every recall searches
		}
		t := time.Now()
		ev, err := m.Recall(context.Background(), q)
		if err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(t))
		items = len(ev)
	}
	b.StopTimer()
	lat.report(b)
	b.ReportMetric(float64(items), "items")
}

// BenchmarkReadHistory2000 is the Cycle's read of a 2,000-event history
// from the store (decoding included), for comparison.
func BenchmarkReadHistory2000(b *testing.B) {
	dd, st, err := openBenchStore(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	defer func() {
		_ = st.Close()
		_ = dd.Close()
	}()
	h := cycleHistory(newWordGen(2), "the request")
	id := h[0].GetTaskId()
	for i := 0; i < len(h); i += 200 {
		if _, err := st.Append(context.Background(), persistence.Append{TaskID: id, Events: h[i:min(i+200, len(h))]}); err != nil {
			b.Fatal(err)
		}
	}
	c := struct{ st *persistence.Store }{st}
	lat := make(latencies, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t := time.Now()
		n := 0
		if err := c.st.Events(id, 1, 0, func(*api.Event) error { n++; return nil }); err != nil || n != 2000 {
			b.Fatal(err, n)
		}
		lat = append(lat, time.Since(t))
	}
	b.StopTimer()
	lat.report(b)
}

// BenchmarkPostings measures what a Task's append goroutine spends on
// index records: one event of each indexed kind.
func BenchmarkPostings(b *testing.B) {
	g := newWordGen(3)
	evs := make([]*api.Event, 10)
	for i := range evs {
		evs[i] = api.NewEvent("T", uint64(i+1), timestamppb.Now(), g.record(i+10)) // short ones (see record)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		_ = IndexEvents("o", evs[i%10:i%10+1])
	}
}

// BenchmarkPostingsLongRecord is the same for a long tool result (about
// 4 KB, indexed as passages).
func BenchmarkPostingsLongRecord(b *testing.B) {
	g := newWordGen(3)
	ev := api.NewEvent("T", 9, timestamppb.Now(), g.record(8))
	b.SetBytes(int64(len(ev.GetToolResult().GetRetainedOutput())))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		_ = IndexEvents("o", []*api.Event{ev})
	}
}

// BenchmarkPostings256KB is the same for the largest retained tool
// output (256 KB: about 330 passages).
func BenchmarkPostings256KB(b *testing.B) {
	g := newWordGen(3)
	out, _ := json.Marshal(map[string]string{"output": g.text(40000)[:256<<10-16]})
	ev := api.NewEvent("T", 9, timestamppb.Now(), &api.ToolResult{CallId: "c", Retained: true, RetainedOutput: out, OutputBytes: uint64(len(out))})
	b.SetBytes(int64(len(out)))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		_ = IndexEvents("o", []*api.Event{ev})
	}
}

// BenchmarkAppend64TasksIndexed is persistence's BenchmarkAppend64Tasks as
// the daemon appends: each event (a user message of 30 words) carries its
// index postings (Postings), committed in the same transaction, and the
// background indexer builds segments meanwhile.
//
//	go test ./memory/ -run '^$' -bench Append64TasksIndexed -benchtime 10s
func BenchmarkAppend64TasksIndexed(b *testing.B) {
	dd, err := persistence.OpenDataDir(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	defer dd.Close()
	st, err := persistence.Open(dd, persistence.Options{Log: zerolog.Nop()})
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	mem, err := Open(context.Background(), st, Options{Log: zerolog.Nop()})
	if err != nil {
		b.Fatal(err)
	}
	defer mem.Close()
	const tasks = 64
	ctx := context.Background()
	ids := make([]string, tasks)
	for i := range ids {
		ids[i] = persistence.NewTaskID(time.Now())
		ev := api.NewEvent(ids[i], 1, timestamppb.Now(), &api.TaskCreated{Owner: "o"})
		if _, err := st.Append(ctx, persistence.Append{TaskID: ids[i], Events: []*api.Event{ev}, Extra: mem.Postings("o", []*api.Event{ev})}); err != nil {
			b.Fatal(err)
		}
	}
	lat := make([][]time.Duration, tasks)
	// The texts are drawn before the clock starts.
	g := newWordGen(1)
	texts := make([][]string, tasks)
	for i := range texts {
		n := b.N / tasks
		if i < b.N%tasks {
			n++
		}
		for range n {
			texts[i] = append(texts[i], g.text(30))
		}
	}
	b.ResetTimer()
	start := time.Now()
	var wg sync.WaitGroup
	for i := 0; i < tasks; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			id := ids[i]
			for j, text := range texts[i] {
				s := uint64(j + 2)
				evs := []*api.Event{api.NewEvent(id, s, timestamppb.Now(), &api.UserMessage{Text: text})}
				t := time.Now()
				if _, err := st.Append(ctx, persistence.Append{TaskID: id, Events: evs, Extra: mem.Postings("o", evs)}); err != nil {
					b.Error(err)
					return
				}
				lat[i] = append(lat[i], time.Since(t))
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	var all []time.Duration
	for _, l := range lat {
		all = append(all, l...)
	}
	sort.Slice(all, func(i, j int) bool { return all[i] < all[j] })
	if len(all) > 0 {
		b.ReportMetric(float64(len(all))/elapsed.Seconds(), "events/s")
		b.ReportMetric(float64(all[len(all)/2].Microseconds()), "p50-µs")
		b.ReportMetric(float64(all[len(all)*99/100].Microseconds()), "p99-µs")
	}
}

// The step benchmark's shape (tests/steps_bench_test.go, issue 18):
// rounds of sameTextTasks Tasks of one owner started at once, each with
// the same request, sameTextCalls calls of the system tool whose results
// are the same text, and the same final answer. A few Tasks' records
// share each millisecond (they run at once), and the recall query of
// every Cycle matches every Task's request.
const (
	sameTextRounds  = 5
	sameTextTasks   = 50
	sameTextCalls   = 19
	sameTextRequest = "List the services of this daemon, again and again."
	// sameTextKey keys the corpus among corpora (whose other keys count
	// records).
	sameTextKey = -1
)

// sameTextTask returns the events of Task i of round r, after calls tool
// results (and its answer when calls is sameTextCalls).
func sameTextTask(r, i, calls int) []*api.Event {
	start := time.Unix(1700000000, 0).Add(time.Duration(r) * time.Minute)
	id := persistence.NewTaskID(start.Add(time.Duration(r*sameTextTasks+i) * time.Millisecond))
	var evs []*api.Event
	at := func(step int) *timestamppb.Timestamp {
		// Four Tasks share each millisecond of a step.
		return timestamppb.New(start.Add(time.Duration(step)*30*time.Millisecond + time.Duration(i/4)*time.Millisecond))
	}
	add := func(step int, b proto.Message) {
		evs = append(evs, api.NewEvent(id, uint64(len(evs)+1), at(step), b))
	}
	add(0, &api.TaskCreated{Owner: "o", Model: "openai/bench-model"})
	add(0, &api.UserMessage{Text: sameTextRequest})
	for c := 1; c <= calls; c++ {
		call := fmt.Sprintf("call_%d", c)
		add(c, &api.CycleStarted{Cycle: uint32(c)})
		add(c, &api.AssistantMessage{Cycle: uint32(c), ToolCallIds: []string{call}})
		add(c, &api.ToolCallRecorded{CallId: call, Cycle: uint32(c), Tool: "system", Arguments: []byte(`{"action":"list"}`)})
		add(c, &api.CycleFinished{Cycle: uint32(c), Outcome: api.CycleOutcome_CYCLE_OUTCOME_COMPLETED})
		out := []byte(`{"services":[]}`)
		add(c, &api.ToolResult{CallId: call, Retained: true, RetainedOutput: out, OutputBytes: uint64(len(out))})
	}
	if calls == sameTextCalls {
		add(calls+1, &api.CycleStarted{Cycle: uint32(calls + 1)})
		add(calls+1, &api.AssistantMessage{Cycle: uint32(calls + 1), Text: "Done: the services are listed."})
		add(calls+1, &api.CycleFinished{Cycle: uint32(calls + 1), Outcome: api.CycleOutcome_CYCLE_OUTCOME_COMPLETED})
	}
	return evs
}

// sameTextCorpus returns the shared corpus of the step benchmark's shape:
// sameTextRounds-1 rounds of finished Tasks (in segments of about 256
// records, merged as the background indexer does) and a last round half
// done (its records pending), and the recall query of the last round's
// first Task.
func sameTextCorpus(b *testing.B) (*benchCorpus, RecallQuery) {
	b.Helper()
	last := sameTextTask(sameTextRounds-1, 0, sameTextCalls/2)
	q := RecallQuery{Owner: "o", TaskID: last[0].GetTaskId(), History: last}
	corporaMu.Lock()
	defer corporaMu.Unlock()
	if c := corpora[sameTextKey]; c != nil {
		return c, q
	}
	dir, err := os.MkdirTemp("", "lemo-memory-bench-")
	if err != nil {
		b.Fatal(err)
	}
	c := &benchCorpus{dir: dir}
	corpora[sameTextKey] = c
	if c.dd, c.st, err = openBenchStore(dir); err != nil {
		b.Fatal(err)
	}
	if c.mem, err = Open(context.Background(), c.st, Options{IndexInterval: time.Hour, manual: true}); err != nil {
		b.Fatal(err)
	}
	for r := 0; r < sameTextRounds; r++ {
		for i := 0; i < sameTextTasks; i++ {
			if r < sameTextRounds-1 && i%12 == 0 && r+i > 0 { // about 256 records
				if err := c.mem.Flush(context.Background()); err != nil {
					b.Fatal(err)
				}
			}
			if r == sameTextRounds-1 && i == 0 {
				if err := c.mem.Flush(context.Background()); err != nil {
					b.Fatal(err)
				}
			}
			calls := sameTextCalls
			if r == sameTextRounds-1 {
				calls /= 2
			}
			evs := sameTextTask(r, i, calls)
			if _, err := c.st.Append(context.Background(), persistence.Append{TaskID: evs[0].GetTaskId(), Events: evs, Extra: c.mem.Postings("o", evs)}); err != nil {
				b.Fatal(err)
			}
			c.records += len(evs)
		}
	}
	return c, q
}

// BenchmarkRecallSameText is one Cycle's recall in the step benchmark's
// shape (sameTextCorpus): every search (no reuse of a cached result).
func BenchmarkRecallSameText(b *testing.B) { benchRecallSameText(b, false) }

// BenchmarkRecallSameTextUnchanged is the same Cycle's recall reusing its
// cached result (as four Cycles in five do in the step benchmark).
func BenchmarkRecallSameTextUnchanged(b *testing.B) { benchRecallSameText(b, true) }

func benchRecallSameText(b *testing.B, reuse bool) {
	c, q := sameTextCorpus(b)
	b.ReportAllocs()
	timeRecalls(b, c.mem, q, reuse)
}
