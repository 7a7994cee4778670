package memory

import (
	"context"
	"fmt"
	"math/rand"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"lemo/api"
	"lemo/persistence"
)

// tiedWorld fills e with Tasks of owner o whose records tie by the dozen:
// a few texts (two long enough to be indexed as passages) at one of
// instants milliseconds, spread over several segments and pending
// documents. It returns the Tasks.
func tiedWorld(t *testing.T, e *env, r *rand.Rand, instants int) []string {
	t.Helper()
	long := func(words string, n int) string {
		var b strings.Builder
		for i := 0; b.Len() < n; i++ {
			fmt.Fprintf(&b, "%s line %d of the deploy log.\n", words, i%7)
		}
		return b.String()
	}
	texts := []string{
		"Deploy the billing service to the staging cluster.",
		"The billing service deploy to staging failed: the cluster rejected the image.",
		"Deploy the billing service to the staging cluster.",
		"staging cluster billing",
		"The deploy of the billing service finished.",
		long("billing service staging deploy cluster", 4000),
		long("the image of the billing service was pushed", 3000),
	}
	body := func(i int) proto.Message {
		text := texts[r.Intn(len(texts))]
		switch r.Intn(4) {
		case 0:
			return user(text)
		case 1:
			return assistant(text)
		case 2:
			return result(fmt.Sprintf("call-%d", i), `{"out":`+fmt.Sprintf("%q", text)+`}`)
		default:
			return &api.ToolFailed{CallId: fmt.Sprintf("call-%d", i), Kind: api.ToolFailureKind_TOOL_FAILURE_KIND_ERROR, Message: text}
		}
	}
	var tasks []string
	n := 30 + r.Intn(50)
	flushes := map[int]bool{r.Intn(n): true, r.Intn(n): true, r.Intn(n): true}
	for i := 0; i < n; i++ {
		task := persistence.NewTaskID(t0.Add(time.Duration(i) * time.Millisecond))
		e.add("o", task, t0, &api.TaskCreated{Owner: "o", Model: "fake/m"})
		for j, k := 0, 1+r.Intn(6); j < k; j++ {
			// Records tie on time as well as score.
			e.add("o", task, t0.Add(time.Duration(r.Intn(instants))*time.Millisecond), body(j))
		}
		tasks = append(tasks, task)
		if flushes[i] {
			e.flush()
		}
	}
	return tasks
}

// TestOnePassWidenMatchesTwoSearches: recall's first hop searches once for
// recallCandidates*passageWiden candidates (searchOpts.widenFrom) where it
// searched for recallCandidates, then again for more when passages of few
// records took most places. On indexes whose records tie on score and
// time by the dozen, the one search returns exactly what the two did:
// the same candidates in the same order, relevance bar and terms. The
// candidates tied at the place where the narrow search stops are those
// the search scored first (worse): without that order, which of them the
// narrow search kept depended on its heap's shape, and a search for more
// did not always find them.
func TestOnePassWidenMatchesTwoSearches(t *testing.T) {
	queries := []string{
		"Deploy the billing service to staging",
		"billing cluster image",
		"why did the staging deploy fail",
		"deploy log line",
		"billing",
	}
	var widened, narrow, narrowTied int
	for seed := int64(1); seed <= 9; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			r := rand.New(rand.NewSource(seed))
			e := newEnv(t, Options{})
			// Few instants: passages and ties crowd the places, and the
			// search widens; more: it does not, and ties remain.
			tasks := tiedWorld(t, e, r, []int{5, 40, 400}[seed%3])
			e.loaded()
			for qi, text := range queries {
				q := Query{Owner: "o", Text: text}
				var own map[string]int
				var ownDocs int
				if qi%2 == 1 { // as Recall: without the asking Task's records
					q.ExcludeTask = tasks[r.Intn(len(tasks))]
					var h []*api.Event
					if err := e.st.Events(q.ExcludeTask, 1, 0, func(ev *api.Event) error { h = append(h, ev); return nil }); err != nil {
						t.Fatal(err)
					}
					own, ownDocs = ownTerms(h)
				}
				err := e.mem.view(func(v *persistence.Snapshot) error {
					segs, err := e.mem.liveSegments(v, "o")
					if err != nil {
						return err
					}
					pend, err := e.mem.pendingSet(v, "o")
					if err != nil {
						return err
					}
					so := searchOpts{k: recallCandidates, maxTerms: recallQueryTerms, own: own, ownDocs: ownDocs, evidenceBar: true, segs: segs, pend: pend}
					// Are the candidates at the place where the narrow
					// search stops tied on score and time?
					all := so
					all.k = 1 << 12
					full, err := e.mem.searchWith(v, &q, all)
					if err != nil {
						return err
					}
					c := full.cands
					tied := len(c) > so.k && c[so.k-1].score == c[so.k].score && c[so.k-1].time == c[so.k].time
					// The two searches recall made.
					want, err := e.mem.searchWith(v, &q, so)
					if err != nil {
						return err
					}
					if len(want.cands) == so.k && fewRecords(want.cands) {
						wide := so
						wide.k *= passageWiden
						if want, err = e.mem.searchWith(v, &q, wide); err != nil {
							return err
						}
						widened++
					} else {
						narrow++
						if tied {
							narrowTied++
						}
					}
					one := so
					one.k, one.widenFrom = recallCandidates*passageWiden, recallCandidates
					got, err := e.mem.searchWith(v, &q, one)
					if err != nil {
						return err
					}
					if !reflect.DeepEqual(got, want) {
						t.Errorf("query %q (without %q): the one search differs from the two:\n got %s\nwant %s", text, q.ExcludeTask, describeResult(got), describeResult(want))
					}
					return nil
				})
				if err != nil {
					t.Fatal(err)
				}
			}
		})
	}
	// The test means something only if both paths ran, and searches
	// that did not widen stopped inside a tie.
	if widened == 0 || narrow == 0 || narrowTied == 0 {
		t.Fatalf("searches widened %d, not widened %d (%d stopped inside a tie): the worlds do not exercise the widening", widened, narrow, narrowTied)
	}
	t.Logf("searches widened %d, not widened %d (%d stopped inside a tie)", widened, narrow, narrowTied)
}

func describeResult(r *searchResult) string {
	var b strings.Builder
	fmt.Fprintf(&b, "perfect %v terms %d %v; %d candidates:", r.perfect, r.terms, r.qterms, len(r.cands))
	for _, c := range r.cands {
		where := "pending"
		if c.seg != nil {
			where = fmt.Sprintf("seg %d doc %d", c.seg.hdr.seg, c.doc)
		}
		fmt.Fprintf(&b, " [%.4f %d %s]", c.score, c.time, where)
	}
	return b.String()
}

// TestTopKKeepsTheBestInOrder: whatever the order candidates are offered
// in, topK keeps the k best by worse and sorted returns them best first,
// as sorting all of them would; candidates tie on score and time often.
func TestTopKKeepsTheBestInOrder(t *testing.T) {
	r := rand.New(rand.NewSource(1))
	for round := 0; round < 300; round++ {
		n, k := r.Intn(300), 1+r.Intn(64)
		all := make([]scored, n)
		for i := range all {
			all[i] = scored{score: float64(r.Intn(4)), time: int64(r.Intn(3)), ord: uint64(r.Intn(4))<<32 | uint64(i)}
		}
		r.Shuffle(n, func(i, j int) { all[i], all[j] = all[j], all[i] })
		top := &topK{k: k}
		for _, s := range all {
			top.offer(s)
		}
		got := top.sorted()
		sort.Slice(all, func(i, j int) bool { return worse(&all[j], &all[i]) })
		want := all[:min(k, n)]
		if len(want) == 0 {
			want = nil
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("round %d (%d offered, k %d): topK kept\n%v\nwant\n%v", round, n, k, got, want)
		}
	}
}

// TestRefOfTask: refOfTask agrees with parsing the ref (what the pending
// layers' task filters did for every posting).
func TestRefOfTask(t *testing.T) {
	a, b := persistence.NewTaskID(t0), persistence.NewTaskID(t0.Add(time.Second))
	refs := []string{
		string(persistence.EventRef(a, 7)),
		string(persistence.EventRef(b, 7)),
		string(persistence.FactRef(a, "f1")),
		string(passageRef([]byte(persistence.EventRef(a, 9)), 10, 1034)),
		string(passageRef([]byte(persistence.EventRef(b, 9)), 10, 1034)),
		string(passageRef([]byte(persistence.FactRef(a, "f1")), 0, 5)), // a fact has no passages
		a, a + "/", a + "/x", a + "/e123", a + "x/" + string(persistence.EventRef(a, 1))[len(a)+1:], "", "/", b[:10],
	}
	for _, ref := range refs {
		for _, task := range []string{a, b, "not/a-task"} {
			parsed, _, _, _, _, ok := parseDocRef(ref)
			want := ok && parsed == task
			if got := refOfTask(ref, task); got != want {
				t.Errorf("refOfTask(%q, %q) = %v, want %v", ref, task, got, want)
			}
		}
	}
}

// TestTakeMatchesTakingEveryHit: take, which makes hits only of the
// candidates it can take and remembers the texts it found in the
// conversation (inConv), takes what taking every hit in order did. The
// conversation holds texts that many records of other Tasks hold.
func TestTakeMatchesTakingEveryHit(t *testing.T) {
	queries := []string{"Deploy the billing service to staging", "billing cluster image", "deploy log line", "billing"}
	compared := 0
	for seed := int64(1); seed <= 6; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			r := rand.New(rand.NewSource(seed))
			e := newEnv(t, Options{})
			tiedWorld(t, e, r, []int{5, 40, 400}[seed%3])
			e.loaded()
			task := persistence.NewTaskID(t0.Add(time.Hour))
			conv := conversationTexts(history(task,
				user("Deploy the billing service to the staging cluster."),
				&api.ToolFailed{CallId: "c", Kind: api.ToolFailureKind_TOOL_FAILURE_KIND_ERROR, Message: "The deploy of the billing service finished."}))
			for _, text := range queries {
				q := Query{Owner: "o", Text: text, ExcludeTask: task}
				err := e.mem.view(func(v *persistence.Snapshot) error {
					res, err := e.mem.searchWith(v, &q, searchOpts{k: recallCandidates * passageWiden, widenFrom: recallCandidates, maxTerms: recallQueryTerms, evidenceBar: true})
					if err != nil {
						return err
					}
					newRecaller := func() *recaller {
						rc := &recaller{m: e.mem, v: v, ctx: context.Background(), owner: "o", conv: conv, byHash: make(map[uint64]*candidate), query: make(map[string]bool)}
						for _, t := range Terms(text) {
							rc.query[t] = true
						}
						return rc
					}
					for _, minRel := range []float64{0, 0.2, 0.5} {
						got := newRecaller()
						got.inConv = make(map[uint64]bool)
						gotOut, err := got.take(res, 1, 2, minRel, 0)
						if err != nil {
							return err
						}
						// take before: every hit, each text read.
						want := newRecaller()
						hits, err := e.mem.hits(v, "o", res)
						if err != nil {
							return err
						}
						var wantOut []*candidate
						for i := range hits {
							h := &hits[i]
							if h.Relevance < minRel {
								break
							}
							if h.Matched < min(2, h.QueryTerms) || h.SupersededBy != "" || want.byHash[h.hash] != nil {
								continue
							}
							c, err := want.add(h)
							if err != nil {
								return err
							}
							if c != nil {
								c.hop = 1
								wantOut = append(wantOut, c)
							}
						}
						if !reflect.DeepEqual(gotOut, wantOut) || !reflect.DeepEqual(got.all, want.all) {
							t.Errorf("query %q, MinRelevance %v: take took %d, taking every hit %d", text, minRel, len(gotOut), len(wantOut))
						}
						if len(got.inConv) > 0 && len(wantOut) > 0 {
							compared++
						}
					}
					return nil
				})
				if err != nil {
					t.Fatal(err)
				}
			}
		})
	}
	if compared == 0 {
		t.Fatal("no take both found texts in the conversation and took candidates")
	}
}

func TestFewRecords(t *testing.T) {
	recs := func(spec ...int64) []scored { // time*10 + kind
		var out []scored
		for _, s := range spec {
			out = append(out, scored{time: s / 10, kind: Kind(s % 10)})
		}
		return out
	}
	for _, c := range []struct {
		cands []scored
		want  bool
	}{
		{nil, false},
		{recs(11), false},
		{recs(11, 11), false}, // one of two: not fewer than half
		{recs(11, 11, 11), true},
		{recs(11, 12), false},                 // one instant, two kinds: two records
		{recs(11, 21, 11, 21), false},         // two of four: not fewer than half
		{recs(11, 21, 11, 21, 11), true},      // two of five
		{recs(31, 11, 21, 11, 31, 21), false}, // three of six, unsorted
		{recs(31, 11, 11, 11, 31, 21, 21), true},
	} {
		if got := fewRecords(c.cands); got != c.want {
			t.Errorf("fewRecords(%v) = %v, want %v", c.cands, got, c.want)
		}
	}
	many := make([]scored, 3*recallCandidates) // beyond the buffer
	for i := range many {
		many[i].time = int64(i % (recallCandidates + 1))
	}
	if got := fewRecords(many); !got {
		t.Errorf("fewRecords(%d candidates of %d records) = false, want true", len(many), recallCandidates+1)
	}
}
