package memory_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"lemo/actors"
	"lemo/api"
	"lemo/memory"
	"lemo/persistence"
	"lemo/providers"
	"lemo/providers/fake"
	"lemo/providers/fake/tiny"
	"lemo/providers/ollama"
	"lemo/tools"
	"lemo/tools/files"
	"lemo/tools/memorytool"
)

// The recall evaluation (docs/memory.md): the Tasks of testdata/recall/
// tasks.txt are fed through an in-process daemon (real store, memory,
// files and memory tools, the actor tree, a scripted model), then every
// question of questions.txt is the request of a new Task, and what that
// Task's first model request recalled is scored against the hand labels,
// beside a textbook BM25 over the same record texts.
// `make eval-recall` prints the table (LEMO_EVAL_RECALL=1).

// evalTask is one Task of tasks.txt.
type evalTask struct {
	name    string
	user    string
	answer  string
	reads   []evalRead // files.read calls, in order (misses included)
	facts   []string
	readIDs []string // item ids of reads, parallel to reads
	factIDs []string
}

type evalRead struct {
	path    string
	content string
	miss    bool
}

type evalQuestion struct {
	kind  string
	text  string
	want  [][]string // pieces; each piece: the items that carry it
	stale []string
}

func parseEvalTasks(t testing.TB, path string) []*evalTask {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []*evalTask
	var cur *evalTask
	sc := bufio.NewScanner(f)
	for line := 1; sc.Scan(); line++ {
		s := sc.Text()
		if strings.HasPrefix(s, "#") || strings.TrimSpace(s) == "" {
			continue
		}
		if name, ok := strings.CutPrefix(s, "task "); ok {
			cur = &evalTask{name: name}
			out = append(out, cur)
			continue
		}
		if cur == nil {
			t.Fatalf("%s:%d: %q before the first task", path, line, s)
		}
		if c, ok := strings.CutPrefix(s, "| "); ok || s == "|" {
			r := &cur.reads[len(cur.reads)-1]
			r.content += c + "\n"
			continue
		}
		key, val, ok := strings.Cut(s, ": ")
		if !ok {
			t.Fatalf("%s:%d: cannot read %q", path, line, s)
		}
		switch key {
		case "user":
			cur.user = val
		case "answer":
			cur.answer = val
		case "read", "miss":
			id := cur.name + "." + key
			if key == "read" {
				if n := countPrefix(cur.readIDs, cur.name+".read"); n > 0 {
					id += strconv.Itoa(n + 1)
				}
			}
			cur.reads = append(cur.reads, evalRead{path: val, miss: key == "miss"})
			cur.readIDs = append(cur.readIDs, id)
		case "fact":
			id := cur.name + ".fact"
			if n := len(cur.facts); n > 0 {
				id += strconv.Itoa(n + 1)
			}
			cur.facts = append(cur.facts, val)
			cur.factIDs = append(cur.factIDs, id)
		default:
			t.Fatalf("%s:%d: unknown key %q", path, line, key)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func countPrefix(ids []string, p string) int {
	n := 0
	for _, id := range ids {
		if strings.HasPrefix(id, p) {
			n++
		}
	}
	return n
}

func parseEvalQuestions(t testing.TB, path string) []*evalQuestion {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []*evalQuestion
	for i, s := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(s, "#") || strings.TrimSpace(s) == "" {
			continue
		}
		key, val, ok := strings.Cut(strings.TrimSpace(s), ": ")
		if !ok {
			t.Fatalf("%s:%d: cannot read %q", path, i+1, s)
		}
		switch key {
		case "exact", "paraphrase", "multihop", "none", "changed":
			out = append(out, &evalQuestion{kind: key, text: val})
		case "want":
			out[len(out)-1].want = append(out[len(out)-1].want, strings.Fields(val))
		case "stale":
			out[len(out)-1].stale = append(out[len(out)-1].stale, strings.Fields(val)...)
		default:
			t.Fatalf("%s:%d: unknown key %q", path, i+1, key)
		}
	}
	return out
}

// evalClock is the daemon's clock during the evaluation: each Task runs on
// its own simulated day, and every reading advances a millisecond, so
// record times keep the Tasks' order. Frozen, it stands still: a
// question's recall then ranks by the same ages whatever the daemon's
// background work read of the clock before it (the ages of near-tied
// records decided their order otherwise, and a run differed from the
// next by a question now and then).
type evalClock struct {
	day    atomic.Int64
	tick   atomic.Int64
	frozen atomic.Bool
}

var evalBase = time.Date(2027, 1, 4, 9, 0, 0, 0, time.UTC)

func (c *evalClock) now() time.Time {
	t := evalBase.AddDate(0, 0, int(c.day.Load()))
	if c.frozen.Load() {
		return t
	}
	return t.Add(time.Duration(c.tick.Add(1)) * time.Millisecond)
}

// evalRun is the outcome of one evaluation: for each question, the items
// its Task's first model request recalled, in order ("" for a record no
// item of tasks.txt produced), and the record texts for the baseline.
type evalRun struct {
	recalled [][]string
	texts    map[string]string // item id -> indexed text
	records  int               // indexed records in the owner's memory
	// embedding is the embedder's status at the end (semantic recall on).
	embedding *memory.EmbeddingStatus
}

const evalOwner = "harbourline"

func runRecallEval(t *testing.T, tasks []*evalTask, qs []*evalQuestion, opt memory.Options) *evalRun {
	t.Helper()
	dir := t.TempDir()
	ws, err := filepath.EvalSymlinks(dir)
	if err != nil {
		t.Fatal(err)
	}
	ws = filepath.Join(ws, "workspace")
	if err := os.MkdirAll(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	current := map[string]*evalTask{}
	plan := func(n int, req *providers.Request) fake.Turn {
		first := req.Messages[0].Content
		mu.Lock()
		tk := current[first]
		mu.Unlock()
		if tk == nil {
			return fake.Turn{Text: "ok"}
		}
		for _, m := range req.Messages {
			if m.Role == providers.RoleTool {
				return fake.Turn{Text: tk.answer}
			}
		}
		var calls []providers.ToolCall
		for i, r := range tk.reads {
			calls = append(calls, fake.ToolCall(fmt.Sprintf("r%d", i+1), "files_read", map[string]any{"path": r.path}))
		}
		for i, f := range tk.facts {
			calls = append(calls, fake.ToolCall(fmt.Sprintf("f%d", i+1), "memory_record", map[string]any{"content": f}))
		}
		if len(calls) == 0 {
			return fake.Turn{Text: tk.answer}
		}
		return fake.Turn{ToolCalls: calls}
	}
	model := fake.NewScriptedModel("m", 131072, plan)
	clock := &evalClock{}
	opt.Now = clock.now
	if err := os.MkdirAll(filepath.Join(dir, "tasks"), 0o755); err != nil {
		t.Fatal(err)
	}
	if opt.IndexInterval == 0 {
		opt.IndexInterval = 20 * time.Millisecond
	}
	if opt.EmbedQueryTimeout == 0 {
		// The evaluation measures what recall finds, not how fast the
		// model embeds: on a loaded machine the model in its own process
		// can take longer than the daemon's 2 s, and a recall that falls
		// back to the lexical index would count as semantic recall's.
		opt.EmbedQueryTimeout = time.Minute
	}
	// open starts the daemon over the data folder data: store, memory,
	// tools and the actor tree, as lemo serve wires them.
	open := func(data string) *evalDaemon {
		dd, err := persistence.OpenDataDir(data)
		if err != nil {
			t.Fatal(err)
		}
		st, err := persistence.Open(dd, persistence.Options{Log: zerolog.Nop(), MemTableSize: 8 << 20, BlockCacheSize: 4 << 20})
		if err != nil {
			t.Fatal(err)
		}
		mem, err := memory.Open(context.Background(), st, opt)
		if err != nil {
			t.Fatal(err)
		}
		reg := tools.NewRegistry()
		ft, err := files.New(files.Config{})
		if err != nil {
			t.Fatal(err)
		}
		for _, tl := range append(memorytool.New(mem, memorytool.Config{}), ft[0]) {
			if err := reg.Register(tl); err != nil {
				t.Fatal(err)
			}
		}
		provs := providers.NewRegistry()
		if err := provs.Register(fake.NewScripted("fake", model)); err != nil {
			t.Fatal(err)
		}
		d, err := actors.Start(context.Background(), actors.Deps{Store: st, Providers: provs, Tools: reg, Memory: mem, Log: zerolog.Nop(), Now: clock.now},
			actors.Options{WorkspaceRoot: filepath.Join(dir, "tasks"), ShutdownTimeout: 20 * time.Second,
				WorkspaceGrants: []actors.WorkspaceGrant{{Owner: evalOwner, Root: ws}}})
		if err != nil {
			t.Fatal(err)
		}
		e := &evalDaemon{d: d, mem: mem}
		e.stop = func() {
			if err := d.Stop(context.Background()); err != nil {
				t.Errorf("Stop: %v", err)
			}
			if err := mem.Close(); err != nil {
				t.Errorf("memory Close: %v", err)
			}
			if err := st.Close(); err != nil {
				t.Errorf("store Close: %v", err)
			}
			_ = dd.Close()
		}
		return e
	}
	fed := filepath.Join(dir, "data")
	cur := open(fed)
	defer func() {
		if cur != nil {
			cur.stop()
		}
	}()
	caller := actors.Caller{Owner: evalOwner}
	runTask := func(request string) (string, []*api.Event) {
		m, err := cur.d.CreateTask(context.Background(), caller, actors.CreateTask{Request: request, Model: "fake/m", Workspace: ws})
		if err != nil {
			t.Fatalf("CreateTask: %v", err)
		}
		id := m.GetTaskId()
		deadline := time.Now().Add(30 * time.Second)
		for {
			evs, err := cur.d.History(context.Background(), caller, id, 1, 0)
			if err != nil {
				t.Fatal(err)
			}
			st := evs[len(evs)-1].GetStatusChanged().GetStatus()
			if st == api.TaskStatus_TASK_STATUS_FINISHED {
				return id, evs
			}
			if st == api.TaskStatus_TASK_STATUS_FAILED {
				t.Fatalf("task %q failed: %v", request, evs[len(evs)-1])
			}
			if time.Now().After(deadline) {
				t.Fatalf("task %q did not finish", request)
			}
			time.Sleep(time.Millisecond)
		}
	}

	run := &evalRun{texts: make(map[string]string)}
	byRef := make(map[string]string)  // task/seq -> item
	byFact := make(map[string]string) // fact id -> item
	for i, tk := range tasks {
		clock.day.Store(int64(i))
		for _, r := range tk.reads {
			if r.miss {
				continue
			}
			p := filepath.Join(ws, r.path)
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, []byte(r.content), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		mu.Lock()
		current[tk.user] = tk
		mu.Unlock()
		id, evs := runTask(tk.user)
		mu.Lock()
		delete(current, tk.user)
		mu.Unlock()
		calls := make(map[string]string) // call id -> item
		facts := make(map[string]string) // call id -> fact
		for _, ev := range evs {
			ref := fmt.Sprintf("%s/%d", id, ev.GetSeq())
			switch b := ev.Body.(type) {
			case *api.Event_UserMessage:
				byRef[ref] = tk.name + ".user"
				run.texts[tk.name+".user"] = b.UserMessage.GetText()
			case *api.Event_AssistantMessage:
				if b.AssistantMessage.GetText() == tk.answer {
					byRef[ref] = tk.name + ".answer"
					run.texts[tk.name+".answer"] = tk.answer
				}
			case *api.Event_ToolCallRecorded:
				c := b.ToolCallRecorded
				var in struct{ Path, Content string }
				_ = json.Unmarshal(c.GetArguments(), &in)
				for i, r := range tk.reads {
					if in.Path != "" && r.path == in.Path {
						calls[c.GetCallId()] = tk.readIDs[i]
					}
				}
				for i, f := range tk.facts {
					if in.Content != "" && f == in.Content {
						calls[c.GetCallId()] = tk.factIDs[i]
						facts[c.GetCallId()] = f
					}
				}
			case *api.Event_ToolResult:
				item := calls[b.ToolResult.GetCallId()]
				out := b.ToolResult.GetRetainedOutput()
				if strings.Contains(item, ".fact") {
					var r struct{ ID string }
					if err := json.Unmarshal(out, &r); err != nil || r.ID == "" {
						t.Fatalf("task %s: memory.record answered %s", tk.name, out)
					}
					byFact[r.ID] = item
					run.texts[item] = facts[b.ToolResult.GetCallId()]
					continue
				}
				if strings.HasSuffix(item, ".miss") {
					t.Fatalf("task %s: %s did not fail", tk.name, item)
				}
				byRef[ref] = item
				run.texts[item] = string(out)
			case *api.Event_ToolFailed:
				item := calls[b.ToolFailed.GetCallId()]
				if !strings.HasSuffix(item, ".miss") {
					t.Fatalf("task %s: %s failed: %s", tk.name, item, b.ToolFailed.GetMessage())
				}
				byRef[ref] = item
				run.texts[item] = "tool call failed: " + b.ToolFailed.GetMessage()
			}
		}
		for _, ids := range [][]string{tk.readIDs, tk.factIDs, {tk.name + ".user", tk.name + ".answer"}} {
			for _, item := range ids {
				if _, ok := run.texts[item]; !ok {
					t.Fatalf("task %s: no record of item %s", tk.name, item)
				}
			}
		}
	}
	run.records = len(run.texts)
	// With semantic recall on, each question is asked once the embedder
	// has embedded every record before it.
	caughtUp := func() {
		if _, on := cur.mem.EmbeddingStatus(); !on {
			return
		}
		deadline := time.Now().Add(5 * time.Minute)
		for {
			s, _ := cur.mem.EmbeddingStatus()
			if s.Behind == 0 {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("the embedder did not catch up: %+v", s)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}

	evidence := regexp.MustCompile(`<evidence task="([^"]+)"(?: seq="(\d+)")? kind="([^"]+)" time="[^"]*" source="([^"]*)"`)
	factSrc := regexp.MustCompile(`^fact (\S+)`)
	clock.day.Store(int64(len(tasks) + 1))
	clock.frozen.Store(true)
	// Each question is asked of the memory of the Tasks above alone: the
	// daemon stops, and every question's Task runs on a copy of the fed
	// data folder of its own. Asked one after another in one daemon,
	// each question would also see the Tasks of the questions before it:
	// records no label covers, which took recall's places and made a
	// question's result depend on the questions asked before it.
	// Indexed first: the embedder embeds what the index holds, so
	// "caught up" before the last Tasks were indexed left their records
	// to be embedded during the first questions, racing their recall.
	if err := cur.mem.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	caughtUp()
	if s, on := cur.mem.EmbeddingStatus(); on {
		run.embedding = &s
	}
	cur.stop()
	cur = nil
	asked := filepath.Join(dir, "asked")
	for _, q := range qs {
		copyTree(t, fed, asked)
		cur = open(asked)
		caughtUp()
		start := len(model.Requests())
		_, _ = runTask(q.text)
		var req *providers.Request
		for _, r := range model.Requests()[start:] {
			if r.Messages[0].Content == q.text {
				req = r
				break
			}
		}
		if req == nil {
			t.Fatalf("no model request for %q", q.text)
		}
		var got []string
		last := req.Messages[len(req.Messages)-1]
		if last.Role == providers.RoleUser && strings.HasPrefix(last.Content, "[Recalled evidence") {
			for _, m := range evidence.FindAllStringSubmatch(last.Content, -1) {
				item := ""
				if m[2] != "" {
					item = byRef[m[1]+"/"+m[2]]
				} else if f := factSrc.FindStringSubmatch(m[4]); f != nil {
					item = byFact[f[1]]
				}
				got = append(got, item)
			}
		}
		run.recalled = append(run.recalled, got)
		if os.Getenv("LEMO_EVAL_DEBUG") != "" && strings.Contains(q.text, os.Getenv("LEMO_EVAL_DEBUG")) {
			hits, _ := cur.mem.Search(context.Background(), memory.Query{Owner: evalOwner, Text: q.text, Limit: 10, TextBytes: 80})
			for _, h := range hits {
				fmt.Printf("DEBUG %s/%d %s score %.2f rel %.2f matched %d/%d %q\n", h.TaskID, h.Seq, h.Kind, h.Score, h.Relevance, h.Matched, h.QueryTerms, h.Text)
			}
		}
		if s, on := cur.mem.EmbeddingStatus(); on {
			// What the questions' recalls met: failed query embeddings
			// and recalls that fell back to the lexical index.
			run.embedding.Failures += s.Failures
			run.embedding.LexicalOnly += s.LexicalOnly
		}
		cur.stop()
		cur = nil
	}
	return run
}

// evalDaemon is the evaluation's daemon over one data folder.
type evalDaemon struct {
	d    *actors.Daemon
	mem  *memory.Memory
	stop func()
}

// copyTree makes dst a copy of the folder src, removing what dst held.
func copyTree(t *testing.T, src, dst string) {
	t.Helper()
	if err := os.RemoveAll(dst); err != nil {
		t.Fatal(err)
	}
	if err := os.CopyFS(dst, os.DirFS(src)); err != nil {
		t.Fatal(err)
	}
}

// evalRow is one row of the table: the figures of one kind of question.
type evalRow struct {
	name                                  string
	n, nNone, nMulti, nStale              int
	hit5, complete5, rr, none, staleAbove float64
}

func (r *evalRow) add(q *evalQuestion, got []string) {
	r.n++
	if q.kind == "none" {
		r.nNone++
		if len(got) == 0 {
			r.none++
		}
		return
	}
	rank := func(items []string) int {
		for i, g := range got {
			for _, it := range items {
				if g == it {
					return i + 1
				}
			}
		}
		return 0
	}
	var all []string
	complete := true
	for _, piece := range q.want {
		all = append(all, piece...)
		if r := rank(piece); r == 0 || r > 5 {
			complete = false
		}
	}
	first := rank(all)
	if first > 0 && first <= 5 {
		r.hit5++
	}
	if first > 0 {
		r.rr += 1 / float64(first)
	}
	if q.kind == "multihop" {
		r.nMulti++
		if complete {
			r.complete5++
		}
	}
	if len(q.stale) > 0 {
		r.nStale++
		if s := rank(q.stale); s > 0 && (first == 0 || s < first) {
			r.staleAbove++
		}
	}
}

func (r *evalRow) answerable() int { return r.n - r.nNone }

// evalTable scores the recalled lists (one per question) by kind.
func evalTable(qs []*evalQuestion, recalled [][]string) []*evalRow {
	kinds := []string{"exact", "paraphrase", "multihop", "changed", "none"}
	rows := map[string]*evalRow{}
	all := &evalRow{name: "all"}
	for _, k := range kinds {
		rows[k] = &evalRow{name: k}
	}
	for i, q := range qs {
		rows[q.kind].add(q, recalled[i])
		all.add(q, recalled[i])
	}
	out := []*evalRow{all}
	for _, k := range kinds {
		out = append(out, rows[k])
	}
	return out
}

func ratio(a float64, n int) string {
	if n == 0 {
		return "–"
	}
	return fmt.Sprintf("%.2f", a/float64(n))
}

func formatEvalTable(lemo, base []*evalRow) string {
	var b strings.Builder
	b.WriteString("| questions | n | recall@5 | complete@5 (multi-hop) | MRR | nothing relevant → nothing | stale above replacement |\n")
	b.WriteString("| --- | --- | --- | --- | --- | --- | --- |\n")
	for i := range lemo {
		l, r := lemo[i], base[i]
		pair := func(a, b float64, n int) string { return ratio(a, n) + " (" + ratio(b, n) + ")" }
		stale := "–"
		if l.nStale > 0 {
			stale = fmt.Sprintf("%d of %d (%d)", int(l.staleAbove), l.nStale, int(r.staleAbove))
		}
		fmt.Fprintf(&b, "| %s | %d | %s | %s | %s | %s | %s |\n", l.name, l.n,
			pair(l.hit5, r.hit5, l.answerable()), pair(l.complete5, r.complete5, l.nMulti), pair(l.rr, r.rr, l.answerable()),
			pair(l.none, r.none, l.nNone), stale)
	}
	return b.String()
}

// bm25Baseline ranks the item texts for each question with textbook BM25
// (k1 1.2, b 0.75; lower-cased letter and digit runs, English stop words
// dropped, no stemming) and returns the top 5 with a positive score.
func bm25Baseline(texts map[string]string, qs []*evalQuestion) [][]string {
	tok := func(s string) []string {
		var out []string
		for _, w := range strings.FieldsFunc(strings.ToLower(s), func(r rune) bool {
			return !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9')
		}) {
			if len(w) > 1 && !baselineStop[w] {
				out = append(out, w)
			}
		}
		return out
	}
	ids := make([]string, 0, len(texts))
	for id := range texts {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	tfs := make([]map[string]int, len(ids))
	lens := make([]int, len(ids))
	df := map[string]int{}
	total := 0
	for i, id := range ids {
		tfs[i] = map[string]int{}
		for _, w := range tok(texts[id]) {
			if tfs[i][w] == 0 {
				df[w]++
			}
			tfs[i][w]++
			lens[i]++
		}
		total += lens[i]
	}
	avg := float64(total) / float64(len(ids))
	out := make([][]string, len(qs))
	for qi, q := range qs {
		seen := map[string]bool{}
		scores := make([]float64, len(ids))
		for _, w := range tok(q.text) {
			if seen[w] || df[w] == 0 {
				continue
			}
			seen[w] = true
			idf := math.Log(1 + (float64(len(ids))-float64(df[w])+0.5)/(float64(df[w])+0.5))
			for i := range ids {
				if tf := float64(tfs[i][w]); tf > 0 {
					scores[i] += idf * tf * 2.2 / (tf + 1.2*(0.25+0.75*float64(lens[i])/avg))
				}
			}
		}
		order := make([]int, len(ids))
		for i := range order {
			order[i] = i
		}
		sort.SliceStable(order, func(a, b int) bool { return scores[order[a]] > scores[order[b]] })
		for _, i := range order[:5] {
			if scores[i] > 0 {
				out[qi] = append(out[qi], ids[i])
			}
		}
	}
	return out
}

var baselineStop = func() map[string]bool {
	m := map[string]bool{}
	for _, w := range strings.Fields("a about after all also am an and any are as at be been before but by can could did do does for from had has have he her his how i if in into is it its me my no not now of on once only or our out over own please she should so some such than that the their them then there these they this those through to too under until up very was we were what when where which while who whom why will with would you your") {
		m[w] = true
	}
	return m
}()

// TestRecallEvaluation runs the evaluation and holds recall to the
// targets of docs/memory.md; LEMO_EVAL_RECALL=1 prints the table.
func TestRecallEvaluation(t *testing.T) {
	if testing.Short() {
		t.Skip("the recall evaluation feeds 257 Tasks through a daemon")
	}
	tasks := parseEvalTasks(t, "testdata/recall/tasks.txt")
	qs := parseEvalQuestions(t, "testdata/recall/questions.txt")
	start := time.Now()
	opt := memory.Options{}
	if v := os.Getenv("LEMO_EVAL_MINREL"); v != "" {
		f, err := strconv.ParseFloat(v, 64)
		if err != nil {
			t.Fatalf("LEMO_EVAL_MINREL: %v", err)
		}
		opt.MinRelevance = f
	}
	// LEMO_EVAL_EMBED_MODEL turns on semantic recall with that Ollama
	// embedding model, at LEMO_EVAL_OLLAMA (a base URL), or in the
	// tiny-ollama kit for tiny-embed (a plumbing check: its vectors carry
	// no meaning).
	embedModel := os.Getenv("LEMO_EVAL_EMBED_MODEL")
	if embedModel == "glove" || embedModel == "glove-pc" {
		// GloVe word vectors in process (eval_glove_test.go).
		var err error
		opt.Embedder, opt.EmbedModel = gloveEvalEmbedder(t, embedModel, tasks, qs)
		if v := os.Getenv("LEMO_EVAL_MIN_SIMILARITY"); v != "" {
			if opt.MinSimilarity, err = strconv.ParseFloat(v, 64); err != nil {
				t.Fatalf("LEMO_EVAL_MIN_SIMILARITY: %v", err)
			}
		}
	} else if embedModel != "" {
		base := os.Getenv("LEMO_EVAL_OLLAMA")
		switch {
		case base != "":
		case embedModel == "tiny-embed":
			base = tiny.Start(t, tiny.Options{}).URL
		case embedModel == evalSentenceModel:
			base = startEmbedServer(t)
		default:
			t.Fatalf("LEMO_EVAL_EMBED_MODEL other than tiny-embed and %s needs LEMO_EVAL_OLLAMA, the Ollama server's base URL", evalSentenceModel)
		}
		var err error
		opt.Embedder, opt.EmbedModel = ollamaEmbedder(t, base, embedModel)
		if v := os.Getenv("LEMO_EVAL_MIN_SIMILARITY"); v != "" {
			if opt.MinSimilarity, err = strconv.ParseFloat(v, 64); err != nil {
				t.Fatalf("LEMO_EVAL_MIN_SIMILARITY: %v", err)
			}
		}
		if v := os.Getenv("LEMO_EVAL_MIN_MARGIN"); v != "" {
			if opt.MinSimilarityMargin, err = strconv.ParseFloat(v, 64); err != nil {
				t.Fatalf("LEMO_EVAL_MIN_MARGIN: %v", err)
			}
		}
	}
	run := runRecallEval(t, tasks, qs, opt)
	lemo := evalTable(qs, run.recalled)
	base := evalTable(qs, bm25Baseline(run.texts, qs))
	table := formatEvalTable(lemo, base)
	if os.Getenv("LEMO_EVAL_RECALL") != "" {
		fmt.Printf("Recall evaluation: %d Tasks, %d memory items, %d questions (%s)\nLemo's recall (plain BM25 over the same texts in parentheses):\n\n%s\n",
			len(tasks), run.records, len(qs), time.Since(start).Round(time.Millisecond), table)
		if e := run.embedding; e != nil {
			fmt.Printf("Semantic recall with %s: %d records embedded, %d Tasks behind, %d failed calls, %d recalls lexical only\n",
				opt.EmbedModel, e.Vectors, e.Behind, e.Failures, e.LexicalOnly)
		}
		if os.Getenv("LEMO_EVAL_RECALL") == "v" {
			for i, q := range qs {
				fmt.Printf("%-10s %-70.70s %v\n", q.kind, q.text, run.recalled[i])
			}
		}
	} else {
		t.Log("\n" + table)
	}
	if opt.MinRelevance != 0 || opt.Embedder != nil {
		return // a calibration run, or one with semantic recall
	}
	// The regression guard: the figures recall reached (docs/memory.md);
	// the targets (recall@5 0.90, paraphrase 0.80, complete@5
	// 0.75) are not all met by lexical recall, so these are floors, not
	// the targets.
	holdEvalFloors(t, lemo, table, []evalFloor{
		{"recall@5", 0.83},
		{"recall@5 paraphrase", 0.54},
		{"complete@5 multi-hop", 0.75},
		{"MRR", 0.79},
		{"nothing relevant answered with nothing", 0.93},
	})
}

// ollamaEmbedder embeds with model through Ollama's /api/embed at base,
// as the daemon's ollama provider does.
func ollamaEmbedder(t *testing.T, base, model string) (memory.Embedder, string) {
	t.Helper()
	prov, err := ollama.New(ollama.Config{BaseURL: base})
	if err != nil {
		t.Fatal(err)
	}
	return memory.EmbedderFunc(func(ctx context.Context, texts []string) ([][]float32, error) {
		return prov.Embed(ctx, model, texts)
	}), "ollama/" + model
}
