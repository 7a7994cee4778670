package taskstate

import (
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"lemo/api"
)

func ids(ws []Waiting) string {
	var out []string
	for _, w := range ws {
		out = append(out, w.ID)
	}
	return strings.Join(out, ",")
}

// The admission derived from the recorded statuses: the children that
// started and have not ended hold places, the created ones wait in
// creation order, roots are left out. After the restart nothing starts
// before it asks (its parent's continue); then the oldest that asked
// start while places are free.
func TestNewAdmission(t *testing.T) {
	t0 := time.Unix(1000, 0)
	meta := func(id, parent string, st api.TaskStatus, at time.Duration) *api.TaskMeta {
		return &api.TaskMeta{TaskId: id, ParentId: parent, Status: st, Created: timestamppb.New(t0.Add(at))}
	}
	w := func(id string) Waiting { return Waiting{ID: id} } // a loaded child asks by id
	const (
		created  = api.TaskStatus_TASK_STATUS_CREATED
		running  = api.TaskStatus_TASK_STATUS_RUNNING
		paused   = api.TaskStatus_TASK_STATUS_PAUSED
		awaiting = api.TaskStatus_TASK_STATUS_AWAITING_APPROVAL
		finished = api.TaskStatus_TASK_STATUS_FINISHED
	)
	for _, tt := range []struct {
		name    string
		limit   int
		metas   []*api.TaskMeta
		queue   string // as loaded
		holding int
		asks    []string
		start   string // what the asks started, in order
		left    string // the queue after the asks
	}{
		{"interrupted children keep their places", 2, []*api.TaskMeta{
			meta("c1", "p", paused, 1), meta("c2", "p", paused, 2), meta("c3", "p", created, 3), meta("c4", "p", created, 4)},
			"c3,c4", 2, []string{"c4", "c3"}, "", "c3,c4"},
		{"a free place goes to the oldest that asked", 2, []*api.TaskMeta{
			meta("c5", "p", created, 5), meta("c1", "p", paused, 1), meta("c3", "q", created, 3), meta("c4", "p", created, 4)},
			"c3,c4,c5", 1, []string{"c5", "c4"}, "c5", "c3,c4"},
		{"same time: by id", 1, []*api.TaskMeta{meta("cb", "p", created, 1), meta("ca", "p", created, 1)},
			"ca,cb", 0, []string{"cb", "ca"}, "cb", "ca"},
		{"roots and ended children hold nothing", 1, []*api.TaskMeta{
			meta("r", "", running, 0), meta("r2", "", created, 0), meta("f", "p", finished, 0), meta("c", "p", created, 2)},
			"c", 0, []string{"c"}, "c", ""},
		{"running and awaiting hold places", 2, []*api.TaskMeta{
			meta("a", "p", running, 0), meta("b", "p", awaiting, 0), meta("c", "p", created, 2)},
			"c", 2, []string{"c"}, "", "c"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			a := NewAdmission(tt.limit, tt.metas)
			if ids(a.Queue()) != tt.queue || a.Holding() != tt.holding {
				t.Fatalf("loaded: queue %q, holding %d; want %q, %d", ids(a.Queue()), a.Holding(), tt.queue, tt.holding)
			}
			var started []Waiting
			for _, id := range tt.asks {
				s, _ := a.Ask(w(id))
				started = append(started, s...)
			}
			if ids(started) != tt.start || ids(a.Queue()) != tt.left {
				t.Fatalf("after asks %v: started %q, queue %q; want %q, %q", tt.asks, ids(started), ids(a.Queue()), tt.start, tt.left)
			}
		})
	}
}

// Asking and ending, step by step: never more than the limit hold a
// place, the queue is first created first started, a child is never
// started or queued twice, and one that ends while it waits leaves the
// queue.
func TestAdmissionSteps(t *testing.T) {
	t0 := time.Unix(1000, 0)
	w := func(id string, at time.Duration) Waiting { return Waiting{ID: id, Parent: "p", Created: t0.Add(at)} }
	a := NewAdmission(2, nil)
	type step struct {
		op      string // ask, reopen or end
		w       Waiting
		start   string
		queued  bool
		queue   string
		holding int
	}
	for i, s := range []step{
		{"ask", w("c1", 1), "c1", false, "", 1},
		{"ask", w("c2", 2), "c2", false, "", 2},
		{"ask", w("c4", 4), "", true, "c4", 2},
		{"ask", w("c3", 3), "", true, "c3,c4", 2},    // created before c4: starts before it
		{"ask", w("c3", 3), "", true, "c3,c4", 2},    // asked again (a continue cascade): once
		{"ask", w("c1", 1), "c1", false, "c3,c4", 2}, // holds a place, still not started (its start was lost): started again, no second place
		{"end", w("c4", 0), "", false, "c3", 2},      // cancelled while it waited
		{"end", w("c1", 0), "c3", false, "", 2},
		{"end", w("c9", 0), "", false, "", 2}, // unknown: nothing
		{"end", w("c2", 0), "", false, "", 1},
		{"reopen", w("c1", 0), "", false, "", 2}, // ended, runs again: takes a place without queueing
		{"reopen", w("c4", 0), "", false, "", 3}, // even beyond the limit
		{"ask", w("c5", 5), "", true, "c5", 3},
		{"end", w("c1", 0), "", false, "c5", 2},
		{"end", w("c4", 0), "c5", false, "", 2},
	} {
		var start []Waiting
		queued := false
		switch s.op {
		case "ask":
			start, queued = a.Ask(s.w)
		case "reopen":
			a.Reopened(s.w.ID)
		default:
			start = a.Ended(s.w.ID)
		}
		if ids(start) != s.start || queued != s.queued || ids(a.Queue()) != s.queue || a.Holding() != s.holding {
			t.Fatalf("step %d (%s %s): start %q queued %v queue %q holding %d; want %q %v %q %d",
				i, s.op, s.w.ID, ids(start), queued, ids(a.Queue()), a.Holding(), s.start, s.queued, s.queue, s.holding)
		}
	}
}

// A child that must wait records it once, with why; a root, a started
// child or one that said so records nothing.
func TestQueueRecord(t *testing.T) {
	child := New()
	child.TaskID = "C"
	create := Create(CreateInput{Owner: "alice", Model: "fake/m", Request: "sub"})
	create[0].(*api.TaskCreated).ParentId = "P"
	apply(child, create[:2]) // as a spawn records it: created, not running
	if !child.Queued() || child.StatusWord() != "queued" {
		t.Fatalf("a created child is not queued (%s)", child.StatusWord())
	}
	bodies := child.Queue(2, 2)
	if len(bodies) != 1 {
		t.Fatalf("Queue = %v, want one record", bodies)
	}
	sc, ok := bodies[0].(*api.StatusChanged)
	if !ok || sc.GetStatus() != api.TaskStatus_TASK_STATUS_CREATED || !strings.HasPrefix(sc.GetDetail(), QueuedDetail) || !strings.Contains(sc.GetDetail(), "2 of 2") {
		t.Fatalf("Queue = %v, want the created status saying it is queued", bodies)
	}
	apply(child, bodies)
	if again := child.Queue(2, 2); again != nil {
		t.Fatalf("Queue again = %v, want nothing", again)
	}
	if m := (&api.TaskMeta{ParentId: "P", Status: api.TaskStatus_TASK_STATUS_CREATED}); StatusWord(m) != "queued" {
		t.Fatalf("StatusWord = %q, want queued", StatusWord(m))
	}
	if m := (&api.TaskMeta{Status: api.TaskStatus_TASK_STATUS_CREATED}); StatusWord(m) != "created" {
		t.Fatalf("StatusWord of a root = %q, want created", StatusWord(m))
	}
	if _, err := child.Continue(""); err == nil || !strings.Contains(err.Error(), "queued child task") {
		t.Fatalf("Continue of a queued child = %v, want a refusal that says it is queued", err)
	}
	apply(child, child.Start("spawned"))
	if child.Queued() || child.Queue(2, 2) != nil {
		t.Fatal("a started child is still queued")
	}
}
