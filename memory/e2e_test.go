package memory_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"lemo/actors"
	"lemo/api"
	"lemo/memory"
	"lemo/persistence"
	"lemo/prompt"
	"lemo/providers"
	"lemo/providers/fake"
	"lemo/tools"
	"lemo/tools/memorytool"
	"lemo/tools/tasks"
)

const fact = "The staging database password rotates every Friday at noon UTC."

// daemon is a daemon with memory and the memory and tasks tools on a real
// store in a temporary folder.
type daemon struct {
	t     *testing.T
	dir   string
	dd    *persistence.DataDir
	st    *persistence.Store
	mem   *memory.Memory
	d     *actors.Daemon
	model *fake.ScriptedModel
	// memOpt are the memory's options (IndexInterval 20ms unless set).
	memOpt memory.Options
}

// plan answers by the Task's request: "Remember …" records the fact,
// "Search …" searches memory, "Read …" reads a record by its handle;
// anything else gets a short answer.
func plan(n int, req *providers.Request) fake.Turn {
	first := req.Messages[0].Content
	answered := false
	for _, m := range req.Messages {
		if m.Role == providers.RoleTool {
			answered = true
		}
	}
	switch {
	case answered:
		return fake.Turn{Text: "Done."}
	case strings.HasPrefix(first, "Remember"):
		return fake.Turn{ToolCalls: []providers.ToolCall{fake.ToolCall("p1", "memory_record", map[string]string{"content": fact})}}
	case strings.HasPrefix(first, "Search"):
		return fake.Turn{ToolCalls: []providers.ToolCall{fake.ToolCall("p1", "memory_search", map[string]any{"query": "staging database password", "kinds": []string{"fact"}})}}
	case strings.HasPrefix(first, "Read"):
		var args json.RawMessage
		_ = json.Unmarshal([]byte(strings.TrimPrefix(first, "Read ")), &args)
		return fake.Turn{ToolCalls: []providers.ToolCall{{ID: "p1", Name: "tasks_read_block", Arguments: args}}}
	}
	return fake.Turn{Text: "ok"}
}

func startDaemon(t *testing.T) *daemon {
	t.Helper()
	d := &daemon{t: t, dir: t.TempDir(), model: fake.NewScriptedModel("m", 32768, plan)}
	d.start()
	t.Cleanup(d.stop)
	return d
}

func (d *daemon) start() {
	d.t.Helper()
	var err error
	if d.dd, err = persistence.OpenDataDir(d.dir); err != nil {
		d.t.Fatal(err)
	}
	if d.st, err = persistence.Open(d.dd, persistence.Options{Log: zerolog.Nop(), MemTableSize: 8 << 20, BlockCacheSize: 4 << 20}); err != nil {
		d.t.Fatal(err)
	}
	opt := d.memOpt
	if opt.IndexInterval == 0 {
		opt.IndexInterval = 20 * time.Millisecond
	}
	if d.mem, err = memory.Open(context.Background(), d.st, opt); err != nil {
		d.t.Fatal(err)
	}
	reg := tools.NewRegistry()
	all := append(memorytool.New(d.mem, memorytool.Config{}), tasks.New(d.st, tasks.Config{})...)
	for _, tl := range all {
		if err := reg.Register(tl); err != nil {
			d.t.Fatal(err)
		}
	}
	provs := providers.NewRegistry()
	if err := provs.Register(fake.NewScripted("fake", d.model)); err != nil {
		d.t.Fatal(err)
	}
	d.d, err = actors.Start(context.Background(), actors.Deps{Store: d.st, Providers: provs, Tools: reg, Memory: d.mem, Log: zerolog.Nop()},
		actors.Options{WorkspaceRoot: d.t.TempDir(), ShutdownTimeout: 20 * time.Second})
	if err != nil {
		d.t.Fatal(err)
	}
}

func (d *daemon) stop() {
	if d.d == nil {
		return
	}
	if err := d.d.Stop(context.Background()); err != nil {
		d.t.Errorf("Stop: %v", err)
	}
	if err := d.mem.Close(); err != nil {
		d.t.Errorf("memory Close: %v", err)
	}
	if err := d.st.Close(); err != nil {
		d.t.Errorf("store Close: %v", err)
	}
	_ = d.dd.Close()
	d.d = nil
}

// run creates a Task of owner and waits until it finished.
func (d *daemon) run(owner, request string) (string, []*api.Event) {
	d.t.Helper()
	c := actors.Caller{Owner: owner}
	m, err := d.d.CreateTask(context.Background(), c, actors.CreateTask{Request: request, Model: "fake/m"})
	if err != nil {
		d.t.Fatalf("CreateTask: %v", err)
	}
	id := m.GetTaskId()
	deadline := time.Now().Add(10 * time.Second)
	for {
		evs, err := d.d.History(context.Background(), c, id, 1, 0)
		if err != nil {
			d.t.Fatal(err)
		}
		if st := evs[len(evs)-1].GetStatusChanged().GetStatus(); st == api.TaskStatus_TASK_STATUS_FINISHED || st == api.TaskStatus_TASK_STATUS_FAILED {
			if st == api.TaskStatus_TASK_STATUS_FAILED {
				d.t.Fatalf("task %q failed: %v", request, evs[len(evs)-1])
			}
			return id, evs
		}
		if time.Now().After(deadline) {
			d.t.Fatalf("task %q did not finish: %v", request, evs)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// lastRequest returns the model request whose first message is request.
func (d *daemon) lastRequest(request string) *providers.Request {
	d.t.Helper()
	var out *providers.Request
	for _, r := range d.model.Requests() {
		if r.Messages[0].Content == request {
			out = r
		}
	}
	if out == nil {
		d.t.Fatalf("no model request for %q", request)
	}
	return out
}

// recalled returns the recall message of a request, "" when it has none.
func recalled(req *providers.Request) string {
	last := req.Messages[len(req.Messages)-1]
	if last.Role == providers.RoleUser && strings.HasPrefix(last.Content, "[Recalled evidence") {
		return last.Content
	}
	return ""
}

func summaries(evs []*api.Event) []*api.InputSummary {
	var out []*api.InputSummary
	for _, ev := range evs {
		if cf := ev.GetCycleFinished(); cf != nil {
			out = append(out, cf.GetInput())
		}
	}
	return out
}

func TestEndToEndRecallAcrossTasksAndRestarts(t *testing.T) {
	d := startDaemon(t)

	// Task 1 records a fact through memory.record.
	t1, evs := d.run("alice", "Remember this for later, please.")
	var callID string
	for _, ev := range evs {
		if c := ev.GetToolCallRecorded(); c != nil {
			callID = c.GetCallId()
		}
		if r := ev.GetToolResult(); r != nil && !strings.Contains(string(r.GetRetainedOutput()), `"id":"`) {
			t.Fatalf("memory.record result: %s", r.GetRetainedOutput())
		}
	}

	// Task 2 asks about it: recall brings the fact, with provenance.
	q := "When does the staging database password rotate?"
	t2, evs := d.run("alice", q)
	rc := recalled(d.lastRequest(q))
	if !strings.Contains(rc, fact) || !strings.Contains(rc, `task="`+t1+`"`) || !strings.Contains(rc, `kind="fact"`) ||
		!strings.Contains(rc, "recorded by memory.record in call "+callID) || !strings.Contains(rc, "not instructions") {
		t.Fatalf("task 2's recall:\n%s", rc)
	}
	sums := summaries(evs)
	if len(sums) != 1 || len(sums[0].GetRecalled()) == 0 || sums[0].GetRecalled()[0].GetTaskId() != t1 || sums[0].GetRecalled()[0].GetKind() != "fact" ||
		sums[0].GetSections()[2].GetTokens() == 0 || sums[0].GetSections()[2].GetTokens() > prompt.RecallBudget {
		t.Fatalf("task 2's input summary: %v", sums)
	}

	// An unrelated Task recalls nothing; so does another owner's.
	h := "Write a haiku about autumn leaves."
	_, evs = d.run("alice", h)
	if rc := recalled(d.lastRequest(h)); rc != "" || len(summaries(evs)[0].GetRecalled()) != 0 {
		t.Fatalf("unrelated task recalled:\n%s", rc)
	}
	d.run("bob", q)
	asked, withRecall := 0, 0
	for _, r := range d.model.Requests() {
		if r.Messages[0].Content == q {
			asked++
			if recalled(r) != "" {
				withRecall++
			}
		}
	}
	if asked != 2 || withRecall != 1 {
		t.Fatalf("the question was asked %d times, %d with recall; want bob's without", asked, withRecall)
	}

	// Recalled text was not indexed again: task 2 holds only its request
	// and its answer.
	hits, err := d.mem.Search(context.Background(), memory.Query{Owner: "alice", Text: fact, Limit: 50})
	if err != nil {
		t.Fatal(err)
	}
	for _, hit := range hits {
		if hit.TaskID == t2 && hit.Kind != memory.KindUserMessage {
			t.Fatalf("task 2 has an indexed record with the recalled text: %+v", hit)
		}
	}

	// After a restart: the fact, the index and recall survive.
	d.stop()
	d.start()
	q2 := "Remind me: when does the staging database password rotate?"
	_, _ = d.run("alice", q2)
	if rc := recalled(d.lastRequest(q2)); !strings.Contains(rc, fact) {
		t.Fatalf("after a restart, recall:\n%s", rc)
	}
	// memory.search finds it through the tool, within the owner.
	s := "Search for the rotation fact."
	_, evs = d.run("alice", s)
	found := false
	for _, ev := range evs {
		if r := ev.GetToolResult(); r != nil {
			found = strings.Contains(string(r.GetRetainedOutput()), `"kind":"fact"`) && strings.Contains(string(r.GetRetainedOutput()), `"task":"`+t1+`"`)
		}
	}
	if !found {
		t.Fatalf("memory.search did not find the fact: %v", evs)
	}
	// tasks.read_block reads the fact's source call record by its handle.
	rd := fmt.Sprintf(`Read {"task":%q,"call_id":%q,"part":"arguments"}`, t1, callID)
	d.run("alice", rd)
	// The tool's answer is the last tool message (recall, which the ids in
	// the request may bring, follows it).
	msgs := d.lastRequest(rd).Messages
	var got providers.Message
	for _, m := range msgs {
		if m.Role == providers.RoleTool {
			got = m
		}
	}
	if !strings.Contains(got.Content, "staging database password") {
		t.Fatalf("read_block answered %+v", got)
	}
}

func TestEndToEndOverflowIsRecordedAndShown(t *testing.T) {
	d := startDaemon(t)
	c := actors.Caller{Owner: "alice"}
	m, err := d.d.CreateTask(context.Background(), c, actors.CreateTask{Request: strings.Repeat("overflowing words ", 3000), Model: "fake/m"})
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		evs, err := d.d.History(context.Background(), c, m.GetTaskId(), 1, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, ev := range evs {
			f := ev.GetFailure()
			if f == nil {
				continue
			}
			ov := f.GetOverflow()
			if f.GetKind() != "overflow" || ov.GetAvailableTokens() != 11468 || ov.GetNeededTokens() <= ov.GetAvailableTokens() || len(ov.GetSections()) != 4 {
				t.Fatalf("failure %v", f)
			}
			if len(d.model.Requests()) != 0 {
				t.Fatal("the model was called with an input over the budget")
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no overflow failure recorded: %v", evs)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
