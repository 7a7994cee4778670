package memory

import (
	"context"
	"crypto/sha256"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"lemo/api"
	"lemo/persistence"
	"lemo/prompt"
)

// history builds a Task's history in memory (for a recall query).
func history(task string, bodies ...proto.Message) []*api.Event {
	out := []*api.Event{api.NewEvent(task, 1, nil, &api.TaskCreated{Owner: "o"})}
	for i, b := range bodies {
		out = append(out, api.NewEvent(task, uint64(i+2), nil, b))
	}
	return out
}

func (e *env) recall(owner, task string, h []*api.Event) []prompt.Evidence {
	e.t.Helper()
	ev, err := e.mem.Recall(context.Background(), RecallQuery{Owner: owner, TaskID: task, History: h})
	if err != nil {
		e.t.Fatalf("Recall: %v", err)
	}
	return ev
}

func describe(ev []prompt.Evidence) []string {
	var out []string
	for _, e := range ev {
		out = append(out, e.Kind+": "+e.Text)
	}
	return out
}

// passwordWorld is two Tasks of owner o (one about a password, one about
// poetry) and owner p's copy of the password fact.
func passwordWorld(t *testing.T, e *env) (a, fact string) {
	t.Helper()
	a = e.task("o", t0)
	e.add("o", a, t0.Add(time.Minute), user("Remember this: the staging database password rotates every Friday at noon."))
	var err error
	fact, err = e.mem.RecordFact(context.Background(), "o", a, "call-1-1", FactInput{Content: "The staging database password rotates every Friday at noon (UTC).", Method: "memory.record"})
	if err != nil {
		t.Fatal(err)
	}
	e.add("o", a, t0.Add(2*time.Minute), assistant("Recorded."))
	b := e.task("o", t0.Add(time.Hour))
	e.add("o", b, t0.Add(time.Hour), user("Write a haiku about autumn leaves."), assistant("Crimson leaves descend / the maple lets go softly / autumn breathes its last"))
	p := e.task("p", t0)
	e.add("p", p, t0.Add(time.Minute), user("The staging database password rotates every Friday at noon."))
	return a, fact
}

func TestRecallFindsOtherTasksEvidenceWithProvenance(t *testing.T) {
	for _, flush := range []bool{false, true} {
		t.Run(fmt.Sprintf("flushed=%v", flush), func(t *testing.T) {
			e := newEnv(t, Options{})
			a, fact := passwordWorld(t, e)
			if flush {
				e.flush()
			}
			c := persistence.NewTaskID(t0.Add(2 * time.Hour))
			h := history(c, user("When does the staging database password rotate?"), assistant("Let me check the password rotation schedule."))
			ev := e.recall("o", c, h)
			got := describe(ev)
			// The request brings its Task's answer (episode expansion),
			// which shows it as its question (foldRequests).
			want := []string{
				"fact: The staging database password rotates every Friday at noon (UTC).",
				"assistant_message: Recorded.",
			}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("recalled:\n%q\nwant:\n%q", got, want)
			}
			f := ev[0]
			if f.TaskID != a || f.Seq != 0 || !strings.Contains(f.Source, "fact "+fact+" recorded by memory.record in call call-1-1") || f.Score <= 0 {
				t.Fatalf("fact provenance: %+v", f)
			}
			u := ev[1]
			if u.TaskID != a || u.Seq <= 2 || u.Source != "assistant" || !u.Time.Equal(t0.Add(2*time.Minute)) ||
				u.Question != "Remember this: the staging database password rotates every Friday at noon." {
				t.Fatalf("answer provenance and question: %+v", u)
			}
			// Unrelated: nothing at all.
			d := persistence.NewTaskID(t0.Add(3 * time.Hour))
			if ev := e.recall("o", d, history(d, user("Translate this sentence into French, please."))); len(ev) != 0 {
				t.Fatalf("unrelated request recalled %q", describe(ev))
			}
			// One shared ordinary word is not relevance.
			if ev := e.recall("o", d, history(d, user("Compose a sonnet about the sea at noon"))); len(ev) != 0 {
				t.Fatalf("a single shared word recalled %q", describe(ev))
			}
			// A Task never recalls its own records.
			if ev := e.recall("o", a, history(a, user("When does the staging database password rotate?"))); len(ev) != 0 {
				t.Fatalf("task a recalled its own records: %q", describe(ev))
			}
		})
	}
}

func TestRecallDeduplicates(t *testing.T) {
	e := newEnv(t, Options{})
	same := "The build server for the payments service is build-7.internal, port 8443."
	for i := 0; i < 3; i++ {
		id := e.task("o", t0.Add(time.Duration(i)*time.Minute))
		e.add("o", id, t0.Add(time.Duration(i)*time.Hour), user(same))
	}
	other := e.task("o", t0)
	e.add("o", other, t0.Add(time.Minute), result("c1", `{"host":"build-7.internal","service":"payments","port":8443}`))
	c := e.task("o", t0)
	e.add("o", c, t0.Add(time.Minute), user("Which build server does the payments service use?"))
	ev := e.recall("o", c, history(c, user("Which build server does the payments service use?")))
	// (In either order: the message, a request that the query asks only
	// in part, weighs by its sameness.)
	kinds := map[string]int{}
	for _, x := range ev {
		kinds[x.Kind]++
		if x.Kind == "user_message" && x.Text != same {
			t.Fatalf("recalled %q, want the message once and the tool result", describe(ev))
		}
	}
	if len(ev) != 2 || kinds["user_message"] != 1 || kinds["tool_result"] != 1 {
		t.Fatalf("recalled %q, want the message once and the tool result", describe(ev))
	}
	// What the conversation already holds is not recalled again. (The
	// daemon indexes a Task's records as it appends them: recall reads
	// the Task's history as indexed.)
	e.add("o", c, t0.Add(2*time.Minute), assistant("  "+same+"\n"))
	ev = e.recall("o", c, history(c, user("Which build server does the payments service use?"), assistant("  "+same+"\n")))
	if len(ev) != 1 || ev[0].Kind != "tool_result" {
		t.Fatalf("with the text in the conversation: %q", describe(ev))
	}
}

func TestRecallSkipsSupersededFacts(t *testing.T) {
	e := newEnv(t, Options{})
	a := e.task("o", t0)
	old, err := e.mem.RecordFact(context.Background(), "o", a, "c1", FactInput{Content: "The release branch is release-41."})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.mem.RecordFact(context.Background(), "o", a, "c2", FactInput{Content: "The release branch is release-42.", Supersedes: old}); err != nil {
		t.Fatal(err)
	}
	c := persistence.NewTaskID(t0)
	ev := e.recall("o", c, history(c, user("Which release branch should I use?")))
	if len(ev) != 1 || ev[0].Text != "The release branch is release-42." {
		t.Fatalf("recalled %q", describe(ev))
	}
}

func TestRecallBudget(t *testing.T) {
	e := newEnv(t, Options{})
	a := e.task("o", t0)
	// 40 long matching records, each over the per-item bound (recalled as
	// the passages that match), more than the budget holds.
	for i := 0; i < 40; i++ {
		text := fmt.Sprintf("incident %d: the ingest pipeline stalled. ", i) + strings.Repeat(fmt.Sprintf("log line %d of the stall with details; ", i), 400)
		e.add("o", a, t0.Add(time.Duration(i)*time.Minute), result(fmt.Sprintf("c%d", i), fmt.Sprintf("%q", text)))
	}
	c := persistence.NewTaskID(t0)
	ev := e.recall("o", c, history(c, user("Why did the ingest pipeline stall?")))
	if len(ev) == 0 {
		t.Fatal("nothing recalled")
	}
	total := prompt.RecallOverhead
	for i := range ev {
		n := prompt.EvidenceTokens(&ev[i])
		if n > maxItemTokens {
			t.Fatalf("item %d has %d tokens, over the per-item bound %d", i, n, maxItemTokens)
		}
		if !strings.Contains(ev[i].Text, prompt.Handle(a, ev[i].Seq)) {
			t.Fatalf("item %d is an excerpt without its handle:\n%s", i, ev[i].Text)
		}
		total += n
	}
	if total > prompt.RecallBudget {
		t.Fatalf("recall of %d items is %d tokens, over the budget %d", len(ev), total, prompt.RecallBudget)
	}
	if total < prompt.RecallBudget-maxItemTokens {
		t.Fatalf("recall of %d items is %d tokens: room for another item was left", len(ev), total)
	}
	// A smaller configured budget and item count are honoured.
	e.mem.opt.RecallTokens, e.mem.opt.RecallItems = 3000, 1
	if ev := e.recall("o", c, history(c, user("Why did the ingest pipeline stall?"))); len(ev) != 1 {
		t.Fatalf("with 1 item allowed: %d items", len(ev))
	}
}

// indexDigest hashes every memory record (index, watermarks, facts).
func (e *env) indexDigest() string {
	e.t.Helper()
	h := sha256.New()
	err := e.st.View(func(v *persistence.Snapshot) error {
		for _, p := range []string{"i/", "j/", "k/"} {
			err := v.Scan([]byte(p), persistence.ScanOptions{}, func(k, val []byte) error {
				h.Write(k)
				h.Write(val)
				return nil
			})
			if err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		e.t.Fatal(err)
	}
	return fmt.Sprintf("%x", h.Sum(nil))
}

func TestRecallNeverReinforcesItself(t *testing.T) {
	e := newEnv(t, Options{})
	passwordWorld(t, e)
	c := e.task("o", t0.Add(3*time.Hour))
	first := e.add("o", c, t0.Add(3*time.Hour), user("When does the staging database password rotate?"))
	h := history(c, user("When does the staging database password rotate?"))
	h[1].Seq = first
	before := e.indexDigest()
	base := e.recall("o", c, h)
	if len(base) == 0 {
		t.Fatal("nothing recalled")
	}
	for i := 0; i < 20; i++ {
		ev := e.recall("o", c, h)
		if !reflect.DeepEqual(ev, base) {
			t.Fatalf("recall %d differs: %+v, first %+v", i, ev, base)
		}
	}
	if after := e.indexDigest(); after != before {
		t.Fatal("recall changed the memory records")
	}
	// What a Cycle records about its recall (the summary of the items, no
	// text) is not indexed: the only new record is the watermark.
	var items []*api.RecallItem
	for _, ev := range base {
		items = append(items, &api.RecallItem{TaskId: ev.TaskID, Seq: ev.Seq, Kind: ev.Kind, Score: ev.Score})
	}
	e.add("o", c, t0.Add(4*time.Hour), &api.CycleStarted{Cycle: 1},
		&api.CycleFinished{Cycle: 1, Outcome: api.CycleOutcome_CYCLE_OUTCOME_COMPLETED, Input: &api.InputSummary{Recalled: items}})
	hits := e.search(Query{Owner: "o", Text: "staging database password rotates Friday noon", Limit: 50})
	for _, hit := range hits {
		if hit.TaskID == c && hit.Seq != first {
			t.Fatalf("recalled text was indexed again as task c's record: %+v", hit)
		}
	}
	if again := e.recall("o", c, h); !reflect.DeepEqual(again, base) {
		t.Fatalf("after the Cycle was recorded, recall changed: %+v, was %+v", again, base)
	}
}

// A Cycle whose recall query is unchanged reuses the previous result
// while the owner's index gains nothing but the Task's own records; a
// record of another Task makes it search again.
func TestRecallReusesAnUnchangedQuery(t *testing.T) {
	e := newEnv(t, Options{})
	c, h, first := billingRecall(t, e)
	computed := e.mem.recallsComputed.Load()
	// The Task's own records (a tool call and result) leave the query
	// and the other records as they were: the result is reused.
	e.add("o", c, t0.Add(time.Hour+time.Minute), result("c1", `{"port":"checked"}`))
	h = append(h, api.NewEvent(c, 3, nil, result("c1", `{"port":"checked"}`)))
	again := e.recall("o", c, h)
	if got := e.mem.recallsComputed.Load(); got != computed || !reflect.DeepEqual(describe(again), describe(first)) {
		t.Fatalf("unchanged query: searched %d times more, recalled %q, want %q reused", got-computed, describe(again), describe(first))
	}
	// A new record of another Task: recall searches again and finds it.
	b := e.task("o", t0.Add(2*time.Hour))
	e.add("o", b, t0.Add(2*time.Hour), assistant("Update: the billing api moved to port 9443 on bil-app-03."))
	after := e.recall("o", c, h)
	if e.mem.recallsComputed.Load() != computed+1 || !strings.Contains(strings.Join(describe(after), "\n"), "9443") {
		t.Fatalf("after another Task's record: recalled %q", describe(after))
	}
	// A reused result still leaves out what the conversation now holds
	// (a tool result of the Task with a recalled text: the query, which
	// does not read results, is unchanged).
	computed = e.mem.recallsComputed.Load()
	held := after[0].Text
	e.add("o", c, t0.Add(3*time.Hour), result("c2", held))
	h = append(h, api.NewEvent(c, 4, nil, result("c2", held)))
	final := e.recall("o", c, h)
	if e.mem.recallsComputed.Load() != computed || len(final) != len(after)-1 {
		t.Fatalf("with a recalled text in the conversation: searched %d times more, recalled %q", e.mem.recallsComputed.Load()-computed, describe(final))
	}
	for _, ev := range final {
		if ev.Text == held {
			t.Fatalf("recalled what the conversation holds: %q", ev.Text)
		}
	}
}

// A long record is recalled as the passage that matches, labelled with
// where it lies and the record's handle, not as its head and tail.
func TestRecallShowsTheMatchingPassageOfALongRecord(t *testing.T) {
	e := newEnv(t, Options{})
	a := e.task("o", t0)
	var b strings.Builder
	for i := 0; i < 300; i++ {
		fmt.Fprintf(&b, "line %d: routine inventory entry for pallet rack %d, nothing to report\n", i, i)
		if i == 150 {
			b.WriteString("The quarantine cage for damaged hazmat pallets is bay Q7, key held by the night supervisor.\n")
		}
	}
	doc := b.String()
	seq := e.add("o", a, t0.Add(time.Minute), user("Read the warehouse ledger."))
	e.add("o", a, t0.Add(2*time.Minute), result("c1", fmt.Sprintf("%q", doc)))
	c := e.task("o", t0.Add(time.Hour))
	q := "Where is the quarantine cage for damaged hazmat pallets?"
	e.add("o", c, t0.Add(time.Hour), user(q))
	var got *prompt.Evidence
	ev := e.recall("o", c, history(c, user(q)))
	for i := range ev {
		if ev[i].Kind == "tool_result" {
			got = &ev[i]
		}
	}
	if got == nil {
		t.Fatalf("the long record was not recalled: %q", describe(ev))
	}
	if !strings.Contains(got.Text, "bay Q7") || !strings.Contains(got.Text, "the passage that matches") ||
		!strings.Contains(got.Text, prompt.Handle(a, seq+1)) || strings.Contains(got.Text, "line 0:") {
		t.Fatalf("recalled excerpt:\n%s", got.Text)
	}
	if n := prompt.EvidenceTokens(got); n > maxItemTokens {
		t.Fatalf("the excerpt has %d tokens, over %d", n, maxItemTokens)
	}
}

// With RecallReuse, an unchanged query reuses its result that many
// Cycles after another Task's record, then searches again and finds it.
func TestRecallReuseLagsAtMostRecallReuse(t *testing.T) {
	e := newEnv(t, Options{RecallReuse: 2})
	c, h, first := billingRecall(t, e)
	computed := e.mem.recallsComputed.Load()
	b := e.task("o", t0.Add(2*time.Hour))
	e.add("o", b, t0.Add(2*time.Hour), assistant("Update: the billing api moved to port 9443 on bil-app-03."))
	for i := range 2 {
		again := e.recall("o", c, h)
		if e.mem.recallsComputed.Load() != computed || !reflect.DeepEqual(describe(again), describe(first)) {
			t.Fatalf("lagging reuse %d of 2: searched %d times more, recalled %q", i+1, e.mem.recallsComputed.Load()-computed, describe(again))
		}
	}
	after := e.recall("o", c, h)
	if e.mem.recallsComputed.Load() != computed+1 || !strings.Contains(strings.Join(describe(after), "\n"), "9443") {
		t.Fatalf("after 2 lagging reuses: searched %d times more, recalled %q", e.mem.recallsComputed.Load()-computed, describe(after))
	}
	// A changed query searches at once.
	h = append(h, api.NewEvent(c, 3, nil, user("And which host?")))
	e.recall("o", c, h)
	if e.mem.recallsComputed.Load() != computed+2 {
		t.Fatal("a changed query reused the result")
	}
}

// A Task's cached recall goes when an append ends the Task (a follow-up
// that reopens it asks anew); a pause keeps it.
func TestRecallCacheForgetsAnEndedTask(t *testing.T) {
	e := newEnv(t, Options{})
	c, h, _ := billingRecall(t, e)
	cached := func() bool {
		e.mem.recalls.mu.Lock()
		defer e.mem.recalls.mu.Unlock()
		return e.mem.recalls.entries[c] != nil
	}
	if !cached() {
		t.Fatal("the recall was not cached")
	}
	e.add("o", c, t0.Add(2*time.Hour), &api.StatusChanged{Status: api.TaskStatus_TASK_STATUS_PAUSED})
	if !cached() {
		t.Fatal("a pause dropped the cached recall")
	}
	e.add("o", c, t0.Add(3*time.Hour), &api.StatusChanged{Status: api.TaskStatus_TASK_STATUS_FINISHED}, &api.StatusChanged{Status: api.TaskStatus_TASK_STATUS_RUNNING})
	if !cached() {
		t.Fatal("an append that ends the Task and reopens it dropped the cached recall")
	}
	e.add("o", c, t0.Add(4*time.Hour), assistant("done"), &api.StatusChanged{Status: api.TaskStatus_TASK_STATUS_FINISHED})
	if cached() {
		t.Fatal("the ended Task's recall is still cached")
	}
	computed := e.mem.recallsComputed.Load()
	e.recall("o", c, h)
	if e.mem.recallsComputed.Load() != computed+1 {
		t.Fatal("a recall after the end reused a result")
	}
}

// billingRecall records another Task's answer on the billing api's port,
// then recalls for a new Task asking for it: that Task, its history and
// what it recalled (something).
func billingRecall(t *testing.T, e *env) (string, []*api.Event, []prompt.Evidence) {
	t.Helper()
	a := e.task("o", t0)
	e.add("o", a, t0.Add(time.Minute), user("Which port does the billing api use?"), assistant("The billing api listens on port 8443 on bil-app-02."))
	c := e.task("o", t0.Add(time.Hour))
	h := history(c, user("What port is the billing api on?"))
	e.add("o", c, t0.Add(time.Hour), h[1].GetUserMessage())
	first := e.recall("o", c, h)
	if len(first) == 0 {
		t.Fatal("nothing recalled")
	}
	return c, h, first
}
