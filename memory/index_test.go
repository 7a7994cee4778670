package memory

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"lemo/api"
	"lemo/persistence"
)

func TestTerms(t *testing.T) {
	cases := []struct {
		text string
		want []string
	}{
		{"", nil},
		{"The staging DATABASE password rotates!", []string{"stage", "databas", "password", "rotat"}},
		{"facts, queries, classes, status, analysis, bus", []string{"fact", "queri", "class", "status", "analysi", "bus"}},
		// Snowball English: inflections meet, and an agent noun meets
		// its verb (Porter2 leaves "owner" whole; agentStem folds it).
		{"owns owned owning owner", []string{"own"}},
		{"server serves holders", []string{"serv", "hold"}},
		// Stems under 5 letters keep their "er".
		{"user peer", []string{"user", "peer"}},
		{"reconcile reconciled reconciliation", []string{"reconcil", "reconcili"}},
		{"deliveries delivered", []string{"deliveri", "deliv"}},
		// Only ASCII words are stemmed; digits keep a token whole.
		{"rotates2 v1.30", []string{"rotates2", "v1", "30"}},
		{"a b c 1 22 x9", []string{"22", "x9"}},
		{"snake_case and kebab-case", []string{"snake", "case", "kebab"}},
		{"Ünïcödé wörds", []string{"ünïcödé", "wörds"}},
		{"東京タワー", []string{"東", "京", "タ", "ワ", "ー"}},
		{strings.Repeat("x", 49) + " kept", []string{"kept"}},
		{"repeat repeat REPEAT", []string{"repeat"}},
	}
	for _, c := range cases {
		if got := Terms(c.text); !reflect.DeepEqual(got, c.want) {
			t.Errorf("Terms(%q) = %q, want %q", c.text, got, c.want)
		}
	}
}

func TestTokenizeJSONEscapes(t *testing.T) {
	var tk tokenizer
	var got []string
	tk.each(`{"result":"line one\nline two\ttab \u00e9t\u00e9 \"quoted\""}`, true, func(term []byte) bool {
		got = append(got, string(term))
		return true
	})
	want := []string{"result", "line", "one", "line", "two", "tab", "été", "quot"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("JSON tokens = %q, want %q", got, want)
	}
}

func TestNorms(t *testing.T) {
	for i := 1; i < 256; i++ {
		if normTable[i] < normTable[i-1] {
			t.Fatalf("normTable not monotone at %d: %d < %d", i, normTable[i], normTable[i-1])
		}
	}
	for _, n := range []int{0, 1, 31, 32, 33, 100, 1000, 20000, 1 << 30} {
		b := encodeNorm(n)
		if normTable[b] > uint32(n) {
			t.Errorf("encodeNorm(%d) = %d decodes to %d, above the length", n, b, normTable[b])
		}
		if b < 255 && normTable[b+1] <= uint32(n) {
			t.Errorf("encodeNorm(%d) = %d is not the largest code at or below it", n, b)
		}
		if n >= 32 && n < 20000 && float64(n-int(normTable[b]))/float64(n) > 0.035 {
			t.Errorf("encodeNorm(%d) decodes to %d: more than 3.5%% off", n, normTable[b])
		}
	}
}

func TestPendingRoundTrip(t *testing.T) {
	d := analyze(docInfo{ref: string(persistence.EventRef("T1", 7)), kind: KindToolResult, untrusted: true, time: t0.UnixMilli(), source: "call c1 (files.read)"},
		`{"text":"hello hello world"}`, true)
	got, err := decodePending(d.ref, d.encode())
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, d) {
		t.Fatalf("round trip:\n got %+v\nwant %+v", got, d)
	}
	if d.tf("hello") != 2 || d.tf("world") != 1 || d.tf("text") != 1 || d.tf("nope") != 0 || d.length != 4 {
		t.Fatalf("terms %+v length %d", d.terms, d.length)
	}
	if _, err := decodePending("r", d.encode()[:10]); err == nil {
		t.Fatal("truncated record decoded")
	}
}

func TestIndexEventsSelectsRecords(t *testing.T) {
	evs := []*api.Event{
		api.NewEvent("T", 1, nil, &api.TaskCreated{Owner: "o"}),
		api.NewEvent("T", 2, nil, user("request text")),
		api.NewEvent("T", 3, nil, &api.CycleStarted{Cycle: 1}),
		api.NewEvent("T", 4, nil, assistant("")), // only tool calls: nothing to index
		api.NewEvent("T", 5, nil, &api.ToolCallRecorded{CallId: "c1", Tool: "files.read", Arguments: []byte(`{"path":"x"}`)}),
		api.NewEvent("T", 6, nil, result("c1", `"retained output"`)),
		api.NewEvent("T", 7, nil, &api.ToolResult{CallId: "c2", Retained: false, OutputBytes: 10}),
		api.NewEvent("T", 8, nil, &api.ToolFailed{CallId: "c3", Kind: api.ToolFailureKind_TOOL_FAILURE_KIND_ERROR, Message: "disk full"}),
		api.NewEvent("T", 9, nil, &api.ToolFailed{CallId: "c4", Kind: api.ToolFailureKind_TOOL_FAILURE_KIND_CANCELLED, Message: "cancelled"}),
		api.NewEvent("T", 10, nil, &api.Failure{Scope: api.FailureScope_FAILURE_SCOPE_CYCLE, Kind: "auth", Message: "bad key"}),
		api.NewEvent("T", 11, nil, &api.Failure{Scope: api.FailureScope_FAILURE_SCOPE_CYCLE, Kind: "cancelled", Message: "stop"}),
		api.NewEvent("T", 12, nil, assistant("the answer")),
	}
	kvs := IndexEvents("o", evs)
	var got []string
	for _, kv := range kvs[:len(kvs)-1] {
		task, seq, _, ok := persistence.ParseRef(kv.Key[len(persistence.PendingPrefix("o")):])
		if !ok || task != "T" {
			t.Fatalf("key %q", kv.Key)
		}
		d, err := decodePending("", kv.Value)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, fmt.Sprintf("%d:%s:%s", seq, d.kind, d.source))
	}
	want := []string{"2:user_message:user", "6:tool_result:call c1 (files.read)", "8:failure:call c3", "10:failure:cycle", "12:assistant_message:assistant"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("indexed %q, want %q", got, want)
	}
	wm := kvs[len(kvs)-1]
	if string(wm.Key) != string(persistence.WatermarkKey("T")) || persistence.ParseWatermark(wm.Value) != 12 {
		t.Fatalf("last record %q = %v, want the watermark 12", wm.Key, wm.Value)
	}
	if kvs := IndexEvents("", evs); len(kvs) != 1 {
		t.Fatalf("without an owner: %d records, want only the watermark", len(kvs))
	}
}

// refBM25 scores texts for query the slow, obvious way, with the index's
// tokenizer and length codes.
func refBM25(texts map[string]string, query string) map[string]float64 {
	docs := make(map[string]*pdoc)
	var sumLen float64
	for ref, text := range texts {
		d := analyze(docInfo{ref: ref}, text, false)
		docs[ref] = d
		sumLen += float64(d.length)
	}
	n := float64(len(docs))
	avg := sumLen / n
	out := make(map[string]float64)
	for _, term := range Terms(query) {
		df := 0.0
		for _, d := range docs {
			if d.tf(term) > 0 {
				df++
			}
		}
		idf := math.Log(1 + (n-df+0.5)/(df+0.5))
		for ref, d := range docs {
			if tf := float64(d.tf(term)); tf > 0 {
				dl := float64(normTable[d.norm])
				out[ref] += idf * tf * (bm25K1 + 1) / (tf + bm25K1*(1-bm25B+bm25B*dl/avg))
			}
		}
	}
	return out
}

var vocabulary = strings.Fields(`alpha bravo charlie delta echo foxtrot golf hotel india juliet kilo lima mike
november oscar papa quebec romeo sierra tango uniform victor whiskey xray yankee zulu database password rotate
deploy staging production server client memory recall index segment merge query budget window token excerpt`)

// corpus appends n user messages of random words (Zipf-like) to tasks of
// owner and returns their texts by ref.
func corpus(e *env, owner string, tasks, n int, seed int64) map[string]string {
	r := rand.New(rand.NewSource(seed))
	zipf := rand.NewZipf(r, 1.1, 2, uint64(len(vocabulary)-1))
	ids := make([]string, tasks)
	for i := range ids {
		ids[i] = e.task(owner, t0.Add(time.Duration(i)*time.Minute))
	}
	texts := make(map[string]string)
	for i := 0; i < n; i++ {
		words := make([]string, 3+r.Intn(20))
		for j := range words {
			words[j] = vocabulary[zipf.Uint64()]
		}
		text := strings.Join(words, " ")
		task := ids[i%tasks]
		seq := e.add(owner, task, t0.Add(time.Hour+time.Duration(i)*time.Second), user(text))
		texts[string(persistence.EventRef(task, seq))] = text
	}
	return texts
}

func hitRef(h Hit) string {
	if h.FactID != "" {
		return string(persistence.FactRef(h.TaskID, h.FactID))
	}
	return string(persistence.EventRef(h.TaskID, h.Seq))
}

// checkAgainstRef compares a search with the reference ranking.
func checkAgainstRef(t *testing.T, e *env, texts map[string]string, query string, limit int) []Hit {
	t.Helper()
	hits := e.search(Query{Owner: "o", Text: query, Limit: limit})
	ref := refBM25(texts, query)
	type rs struct {
		ref   string
		score float64
	}
	var want []rs
	for r, s := range ref {
		want = append(want, rs{r, s})
	}
	// Equal scores are ordered by recency, which the reference does not
	// model: compare the scores rank by rank, and each hit's own score.
	sort.Slice(want, func(i, j int) bool { return want[i].score > want[j].score })
	if len(want) > limit {
		want = want[:limit]
	}
	if len(hits) != len(want) {
		t.Fatalf("%q: %d hits, want %d", query, len(hits), len(want))
	}
	for i, h := range hits {
		if math.Abs(h.Score-want[i].score) > 1e-9 {
			t.Fatalf("%q: hit %d %s scores %.12f, the reference has %s at %.12f", query, i, hitRef(h), h.Score, want[i].ref, want[i].score)
		}
		if got := ref[hitRef(h)]; math.Abs(got-h.Score) > 1e-9 {
			t.Fatalf("%q: hit %d %s scores %.12f, its reference score is %.12f", query, i, hitRef(h), h.Score, got)
		}
	}
	return hits
}

func TestSearchMatchesReferenceBM25WhereverStored(t *testing.T) {
	e := newEnv(t, Options{SegmentDocs: 16, MergeFactor: 3})
	queries := []string{"alpha", "database password", "deploy staging production", "zulu yankee xray", "echo echo golf", "nothing matches this"}
	texts := make(map[string]string)
	add := func(round int) {
		for k, v := range corpus(e, "o", 3, 50, int64(round)) {
			texts[k] = v
		}
	}
	// All pending.
	add(0)
	for _, q := range queries {
		checkAgainstRef(t, e, texts, q, 20)
	}
	if segs, pending := e.counts("o"); segs != 0 || pending != 50 {
		t.Fatalf("before Flush: %d segments, %d pending", segs, pending)
	}
	// Segments built and merged, with pending documents beside them.
	for round := 1; round <= 8; round++ {
		e.flush()
		add(round)
		for _, q := range queries {
			checkAgainstRef(t, e, texts, q, 20)
		}
	}
	segs, pending := e.counts("o")
	if pending != 50 || segs < 2 || e.mem.nextSeg <= 8 {
		t.Fatalf("after 8 flushes: %d segments, %d pending, next segment %d; want merges and 50 pending", segs, pending, e.mem.nextSeg)
	}
	// The same after a restart, with everything in segments.
	e.flush()
	e.restart()
	for _, q := range queries {
		hits := checkAgainstRef(t, e, texts, q, 50)
		if q == "nothing matches this" && len(hits) != 0 {
			t.Fatalf("%q: %d hits", q, len(hits))
		}
	}
}

// A question about an owner finds the record that says who owns it, and
// the other way round (the agent noun meets its verb): it ranks above a
// later record that shares every other word of the question.
func TestSearchOwnerMeetsOwns(t *testing.T) {
	e := newEnv(t, Options{})
	a := e.task("o", t0)
	e.add("o", a, t0.Add(time.Hour), assistant("Dana owns the payroll export."), assistant("The vault lease holder is the platform team."))
	b := e.task("o", t0.Add(time.Minute))
	e.add("o", b, t0.Add(2*time.Hour), assistant("Dana reviewed the payroll export."), assistant("The vault lease moved to the platform team."))
	for q, want := range map[string]string{"payroll export owner": "Dana owns the payroll export.", "who holds the vault lease": "The vault lease holder is the platform team."} {
		hits := e.search(Query{Owner: "o", Text: q, Limit: 5, TextBytes: 200})
		if len(hits) == 0 || hits[0].Text != want {
			t.Errorf("search %q: %+v, want %q first", q, hits, want)
		}
	}
}

func TestSearchFiltersAndRecency(t *testing.T) {
	e := newEnv(t, Options{})
	a := e.task("o", t0)
	b := e.task("o", t0.Add(time.Minute))
	e.add("o", a, t0.Add(time.Hour), user("rotate the deploy key"))
	e.add("o", a, t0.Add(2*time.Hour), assistant("rotate the deploy key"))
	e.add("o", b, t0.Add(3*time.Hour), result("c1", `"rotate the deploy key"`))
	e.add("o", b, t0.Add(4*time.Hour), &api.ToolFailed{CallId: "c2", Kind: api.ToolFailureKind_TOOL_FAILURE_KIND_ERROR, Message: "rotate the deploy key"})
	other := e.task("p", t0)
	e.add("p", other, t0.Add(5*time.Hour), user("rotate the deploy key"))

	for _, flush := range []bool{false, true} {
		if flush {
			e.flush()
		}
		kinds := func(hits []Hit) []string {
			var out []string
			for _, h := range hits {
				out = append(out, h.Kind.String())
			}
			return out
		}
		// Same words, same lengths except the failure's prefix: equal
		// scores come newest first.
		got := kinds(e.search(Query{Owner: "o", Text: "deploy key", Kinds: []Kind{KindUserMessage, KindAssistantMessage, KindToolResult}}))
		if want := []string{"tool_result", "assistant_message", "user_message"}; !reflect.DeepEqual(got, want) {
			t.Fatalf("flush %v: kinds by recency = %q, want %q", flush, got, want)
		}
		if got := kinds(e.search(Query{Owner: "o", Text: "deploy key", Task: a})); !reflect.DeepEqual(got, []string{"assistant_message", "user_message"}) {
			t.Fatalf("flush %v: task filter: %q", flush, got)
		}
		if got := kinds(e.search(Query{Owner: "o", Text: "deploy key", ExcludeTask: a})); !reflect.DeepEqual(got, []string{"tool_result", "failure"}) {
			t.Fatalf("flush %v: excluding a task: %q", flush, got)
		}
		got = kinds(e.search(Query{Owner: "o", Text: "deploy key", Since: t0.Add(90 * time.Minute), Until: t0.Add(3 * time.Hour)}))
		if !reflect.DeepEqual(got, []string{"tool_result", "assistant_message"}) {
			t.Fatalf("flush %v: time range: %q", flush, got)
		}
		if got := e.search(Query{Owner: "o", Text: "deploy key", Limit: 1}); len(got) != 1 {
			t.Fatalf("limit 1: %d hits", len(got))
		}
		// Owners never see each other's records.
		hits := e.search(Query{Owner: "p", Text: "deploy key"})
		if len(hits) != 1 || hits[0].TaskID != other {
			t.Fatalf("owner p: %+v", hits)
		}
		hits = e.search(Query{Owner: "o", Text: "rotate", Kinds: []Kind{KindToolResult}, TextBytes: 8})
		if len(hits) != 1 || hits[0].Text != `"rotate ` || !hits[0].Truncated || hits[0].TextBytes != 23 || hits[0].Source != "call c1" {
			t.Fatalf("text of a hit: %+v", hits)
		}
	}
}

func TestSearchValidates(t *testing.T) {
	e := newEnv(t, Options{})
	for _, q := range []Query{
		{Owner: "", Text: "x"},
		{Owner: "a/b", Text: "x"},
		{Owner: "o", Text: strings.Repeat("x ", MaxQueryBytes)},
		{Owner: "o", Text: "x", Task: "bad/id"},
	} {
		if _, err := e.mem.Search(t.Context(), q); err == nil {
			t.Errorf("Search(%+v) succeeded", q)
		}
	}
	if hits := e.search(Query{Owner: "o", Text: "   "}); len(hits) != 0 {
		t.Fatalf("empty query: %d hits", len(hits))
	}
}

func TestLargePostingListsUseChunks(t *testing.T) {
	e := newEnv(t, Options{SegmentDocs: 16, MergeFactor: 2})
	task := e.task("o", t0)
	texts := make(map[string]string)
	for i := 0; i < 3000; i += 500 {
		var bodies []proto.Message
		first := e.seqs[task] + 1
		for j := range 500 {
			text := fmt.Sprintf("common word%d", (i+j)%97)
			bodies = append(bodies, user(text))
			texts[string(persistence.EventRef(task, first+uint64(j)))] = text
		}
		e.add("o", task, t0.Add(time.Hour), bodies...)
		if i == 1000 {
			e.flush()
		}
	}
	e.flush() // two segments of 1,500 documents, merged into one
	var chunks uint32
	err := e.st.View(func(v *persistence.Snapshot) error {
		segs, err := e.mem.liveSegments(v, "o")
		for _, s := range segs {
			chunks += s.hdr.chunks
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if chunks == 0 {
		t.Fatal("a term in 3,000 documents was stored inline, want overflow chunks")
	}
	checkAgainstRef(t, e, texts, "common word5", 50)
}

// TestDocRowsDecodedOnce checks the decoded document table (row's memo)
// against the plain decoding: every row of a block of several, with its
// ref parsed as persistence.ParseRef parses it, and corrupt blocks refused.
func TestDocRowsDecodedOnce(t *testing.T) {
	var rows []docRow
	for i := range docBlockDocs {
		ref := persistence.EventRef(fmt.Sprintf("T%d", i%7), uint64(i)*1000003)
		if i%5 == 0 {
			ref = persistence.FactRef(fmt.Sprintf("T%d", i), fmt.Sprintf("F%d", i))
		}
		rows = append(rows, docRow{ref: string(ref), source: strings.Repeat("s", i%3), hash: uint64(i) * 7919, textBytes: uint32(i), untrusted: i%2 == 0})
	}
	blk := binaryUvarint(uint64(len(rows)))
	for i := range rows {
		blk = appendDocRow(blk, &rows[i])
	}
	want, err := decodeDocRows(blk)
	if err != nil {
		t.Fatal(err)
	}
	got, err := decodeParsedRows(blk)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) {
		t.Fatalf("decodeParsedRows: %d rows, want %d", len(got), len(want))
	}
	for i := range want {
		if got[i].docRow != want[i] {
			t.Fatalf("row %d = %+v, want %+v", i, got[i].docRow, want[i])
		}
		task, seq, fact, ok := persistence.ParseRef([]byte(want[i].ref))
		if !ok || got[i].task != task || got[i].seq != seq || got[i].fact != fact {
			t.Fatalf("row %d ref parsed as %q %d %q, want %q %d %q", i, got[i].task, got[i].seq, got[i].fact, task, seq, fact)
		}
	}
	for _, bad := range [][]byte{blk[:len(blk)-1], binaryUvarint(docBlockDocs + 1)} {
		if _, err := decodeParsedRows(bad); err == nil {
			t.Errorf("decodeParsedRows(%d bytes) accepted a corrupt block", len(bad))
		}
	}
	for _, bad := range []string{"", "T1", "/e12345678", "T1/x", "T1/e123", "T1/f"} {
		if _, _, _, ok := parseRef(bad); ok {
			t.Errorf("parseRef(%q) ok", bad)
		}
	}
}

func binaryUvarint(v uint64) []byte {
	var b [10]byte
	n := binary.PutUvarint(b[:], v)
	return b[:n]
}

// TestSortPicks checks that sorting only the runs that tie gives the order
// a full sort by score, time and ref gives, whether or not the picks come
// in score and time order.
func TestSortPicks(t *testing.T) {
	rng := rand.New(rand.NewSource(7))
	for round := range 200 {
		n := rng.Intn(60)
		picks := make([]pick, n)
		for i := range picks {
			picks[i] = pick{c: &scored{score: float64(rng.Intn(4)), time: int64(rng.Intn(3)), doc: uint32(i)}, ref: fmt.Sprintf("T%d", rng.Intn(1000))}
		}
		if round%2 == 0 { // as searchWith gives them: by score and time
			sort.SliceStable(picks, func(i, j int) bool {
				a, b := picks[i].c, picks[j].c
				if a.score != b.score {
					return a.score > b.score
				}
				return a.time > b.time
			})
		}
		want := slices.Clone(picks)
		sort.SliceStable(want, func(i, j int) bool {
			a, b := want[i], want[j]
			if a.c.score != b.c.score {
				return a.c.score > b.c.score
			}
			if a.c.time != b.c.time {
				return a.c.time > b.c.time
			}
			return a.ref > b.ref
		})
		sortPicks(picks)
		for i := range picks {
			if picks[i].c != want[i].c {
				t.Fatalf("round %d: pick %d is doc %d (%s), want doc %d (%s)", round, i, picks[i].c.doc, picks[i].ref, want[i].c.doc, want[i].ref)
			}
		}
	}
}

func TestMayBeIn(t *testing.T) {
	submitted := map[string]uint64{"T1": 5}
	through := func(task string) (uint64, bool) { s, ok := submitted[task]; return s, ok }
	for _, c := range []struct {
		ref  string
		want bool
	}{
		{string(persistence.EventRef("T1", 5)), true},   // handed to a commit
		{string(persistence.EventRef("T1", 6)), false},  // not yet: not in any snapshot opened before
		{string(persistence.EventRef("T2", 99)), true},  // a Task the store does not know
		{string(persistence.FactRef("T1", "F1")), true}, // facts have no seq
		{"not a ref", true},
	} {
		if got := mayBeIn(c.ref, through); got != c.want {
			t.Errorf("mayBeIn(%q) = %v, want %v", c.ref, got, c.want)
		}
	}
}

// TestConversationTexts: a candidate is in the conversation when a record
// of it has the same trimmed text, failures included (their texts are
// formatted only when a candidate is first compared).
func TestConversationTexts(t *testing.T) {
	task := "T1"
	at := timestamppb.New(time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC))
	history := []*api.Event{
		api.NewEvent(task, 1, at, user("deploy the key")),
		api.NewEvent(task, 2, at, assistant("  done: the key is deployed ")),
		api.NewEvent(task, 3, at, result("c1", `{"ok":true}`)),
		api.NewEvent(task, 4, at, &api.ToolFailed{CallId: "c2", Kind: api.ToolFailureKind_TOOL_FAILURE_KIND_UNKNOWN_TOOL, Message: "tool x is not loaded"}),
	}
	_, failText, _, _, _, ok := recordText(history[3], nil)
	if !ok {
		t.Fatal("recordText(ToolFailed): not a record")
	}
	c := conversationTexts(history)
	for _, tc := range []struct {
		text string
		want bool
	}{
		{"deploy the key", true},
		{"done: the key is deployed", true},
		{`{"ok":true}`, true},
		{" " + failText + "\n", true},
		{failText + "!", false},
		{"deploy the keys", false},
	} {
		if got := c.has(tc.text); got != tc.want {
			t.Errorf("has(%q) = %v, want %v", tc.text, got, tc.want)
		}
	}
}
