package actors_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"lemo/actors"
	"lemo/actors/live"
	"lemo/api"
	"lemo/persistence"
	"lemo/providers"
	"lemo/providers/fake"
	"lemo/tools"
	"lemo/tools/shell"
	"lemo/tools/tasks"
)

// storeOf lets tools registered before the harness starts read its store.
type storeOf struct{ h *harness }

func (s storeOf) Meta(task string) (*api.TaskMeta, error) { return s.h.store.Meta(task) }
func (s storeOf) ListTasks(o persistence.ListOptions) ([]*api.TaskMeta, string, error) {
	return s.h.store.ListTasks(o)
}
func (s storeOf) ReadEvents(task string, from uint64, limit int) ([]*api.Event, error) {
	return s.h.store.ReadEvents(task, from, limit)
}

// liveTools are shell.run (every command allowed) and tasks.read_block over
// lv; ref is set to the harness once it exists.
func liveTools(t *testing.T, lv *live.Accountant, ref *storeOf) []tools.Tool {
	t.Helper()
	sh, err := shell.New(shell.Config{Policy: shell.Policy{Default: shell.Allow}, Environ: os.Environ()})
	if err != nil {
		t.Fatal(err)
	}
	readers := tasks.New(ref, tasks.Config{Live: func(task, call string) (tasks.LiveText, bool) {
		r, ok := lv.Lookup(task, call)
		if !ok {
			return nil, false
		}
		return r, true
	}})
	return append([]tools.Tool{sh}, readers...)
}

func newLive(t *testing.T, lim live.Limits) *live.Accountant {
	t.Helper()
	lv, err := live.New(filepath.Join(t.TempDir(), "live"), lim)
	if err != nil {
		t.Fatal(err)
	}
	return lv
}

func shellCall(id, command string) providers.ToolCall {
	args, _ := json.Marshal(map[string]string{"command": command})
	return providers.ToolCall{ID: id, Name: "shell_run", Arguments: args}
}

// A command prints far more than the per-call bound: the Task's live
// result keeps the bound in memory, the rest is spilled, and
// tasks.read_block reads the spilled end of it.
func TestLiveResultSpills(t *testing.T) {
	const callBytes, printed = 1 << 20, 20_000_000
	lv := newLive(t, live.Limits{CallBytes: callBytes, TaskBytes: 2 << 20, TotalBytes: 4 << 20})
	var taskID atomic.Value
	taskID.Store("")
	ref := &storeOf{}
	h := newHarnessLive(t, func(n int, req *providers.Request) fake.Turn {
		switch n {
		case 0:
			return fake.Turn{ToolCalls: []providers.ToolCall{shellCall("s", fmt.Sprintf("head -c %d /dev/zero | tr '\\0' a; echo END", printed))}}
		case 1:
			args, _ := json.Marshal(map[string]any{"task": taskID.Load(), "call_id": "call-1-1", "part": "result", "offset": printed - 10, "length": 200})
			return fake.Turn{ToolCalls: []providers.ToolCall{{ID: "r", Name: "tasks_read_block", Arguments: args}}}
		case 2:
			return fake.Turn{ToolCalls: []providers.ToolCall{call("b", "test_block", "hold")}}
		}
		return fake.Turn{Text: "done"}
	}, lv, nil, liveTools(t, lv, ref)...)
	ref.h = h
	id := h.create("print a lot")
	taskID.Store(id)
	eventually(t, "the third call running", func() error {
		if !h.blocks.isRunning("hold") {
			return errNotYet
		}
		return nil
	})
	r, ok := lv.Lookup(id, "call-1-1")
	if !ok {
		t.Fatal("the shell call's live result is not held")
	}
	st := r.Stats()
	if st.HeapBytes > callBytes || st.SpilledBytes < printed-callBytes || st.Bytes != printed+4 {
		t.Fatalf("live result: %+v; want at most %d bytes in memory and the rest of %d spilled", st, callBytes, printed+4)
	}
	if got := lv.TaskUsage(id); got > 2<<20 {
		t.Fatalf("the Task holds %d bytes of live results in memory, over its bound", got)
	}
	reqs := h.model.Requests()
	got, _ := toolMessage(reqs[2], "call-2-1")
	var block struct {
		Text       string `json:"text"`
		TotalBytes int    `json:"total_bytes"`
		Live       bool   `json:"live"`
	}
	if err := json.Unmarshal([]byte(got), &block); err != nil {
		t.Fatalf("tasks.read_block result %q: %v", got, err)
	}
	if !block.Live || !strings.HasSuffix(block.Text, "aaaEND\n\n[stderr: 0 bytes]\n\n") || block.TotalBytes < printed {
		t.Fatalf("tasks.read_block read %+v; want the spilled end of the output", block)
	}
	shellMsg, _ := toolMessage(reqs[1], "call-1-1")
	if len(shellMsg) > 64<<10 || !strings.Contains(shellMsg, "tasks.read_block") {
		t.Fatalf("the model's view of the shell result is %d bytes: %.300s", len(shellMsg), shellMsg)
	}
	h.blocks.release("hold")
	h.waitStatus(id, api.TaskStatus_TASK_STATUS_FINISHED)
	eventually(t, "live results released", func() error {
		if u := lv.Usage(); u.Results != 0 || u.HeapBytes != 0 || u.SpillBytes != 0 {
			return fmt.Errorf("still held: %+v", u)
		}
		return nil
	})
}

// pausedWithLive runs a Task whose shell call prints size bytes, then
// pauses it while a second call runs, so it ends paused holding the shell
// call's live result (call-1-1).
func pausedWithLive(t *testing.T, h *harness, lv *live.Accountant, request string) string {
	t.Helper()
	id := h.create(request)
	eventually(t, request+": the second call running", func() error {
		if !h.blocks.isRunning(request) {
			return errNotYet
		}
		return nil
	})
	if _, err := h.d.Pause(t.Context(), actors.Operator, id); err != nil {
		t.Fatal(err)
	}
	h.blocks.release(request)
	h.waitFor(id, "paused with both results", func(evs []*api.Event) bool {
		return lastStatus(evs) == api.TaskStatus_TASK_STATUS_PAUSED && has(evs, func(e *api.Event) bool { return e.GetToolResult().GetCallId() == "call-2-1" })
	})
	if _, ok := lv.Lookup(id, "call-1-1"); !ok {
		t.Fatalf("%s: the paused Task does not hold its live result", request)
	}
	return id
}

// printThenBlock: a Task's first answer runs a command printing 3 MB, its
// second a call that blocks until released (keyed by the request).
func printThenBlock(n int, req *providers.Request) fake.Turn {
	switch countAssistant(req) {
	case 0:
		return fake.Turn{ToolCalls: []providers.ToolCall{shellCall("s", "head -c 3000000 /dev/zero | tr '\\0' a")}}
	case 1:
		return fake.Turn{ToolCalls: []providers.ToolCall{call("b", "test_block", firstUser(req))}}
	}
	return fake.Turn{Text: "done"}
}

func firstUser(req *providers.Request) string {
	for _, m := range req.Messages {
		if m.Role == providers.RoleUser {
			return m.Content
		}
	}
	return ""
}

func countAssistant(req *providers.Request) int {
	n := 0
	for _, m := range req.Messages {
		if m.Role == providers.RoleAssistant {
			n++
		}
	}
	return n
}

// Under daemon-wide pressure the oldest live results of paused Tasks are
// evicted: the model then sees them as after a restart.
func TestLiveEvictionUnderPressure(t *testing.T) {
	lv := newLive(t, live.Limits{CallBytes: 1 << 20, TaskBytes: 1 << 20, TotalBytes: 3 << 19})
	ref := &storeOf{}
	h := newHarnessLive(t, printThenBlock, lv, nil, liveTools(t, lv, ref)...)
	ref.h = h
	old := pausedWithLive(t, h, lv, "old")
	// A second Task's output needs the memory the paused one holds.
	busy := h.create("busy")
	eventually(t, "busy: the second call running", func() error {
		if !h.blocks.isRunning("busy") {
			return errNotYet
		}
		return nil
	})
	if _, ok := lv.Lookup(old, "call-1-1"); ok {
		t.Fatalf("the paused Task's live result was not evicted: %+v", lv.Usage())
	}
	r, ok := lv.Lookup(busy, "call-1-1")
	if !ok || r.Stats().HeapBytes != 1<<20 {
		t.Fatalf("the working Task's live result: held %v, %+v; want its bound in memory", ok, r.Stats())
	}
	if u := lv.Usage(); u.Evicted != 1 || u.HeapBytes > 3<<19 {
		t.Fatalf("Usage() = %+v; want one eviction and at most the total bound", u)
	}
	h.blocks.release("busy")
	// The evicted result reads as after a restart.
	if _, err := h.d.Continue(t.Context(), actors.Operator, old, ""); err != nil {
		t.Fatal(err)
	}
	h.waitStatus(old, api.TaskStatus_TASK_STATUS_FINISHED)
	var req *providers.Request
	for _, q := range h.model.Requests() {
		if firstUser(q) == "old" {
			req = q
		}
	}
	got, _ := toolMessage(req, "call-1-1")
	if !strings.HasPrefix(got, "[only the retained part of this result is available") {
		t.Fatalf("after eviction the model sees %.200q; want the retained part, marked", got)
	}
}

// A paused Task holding live results leaves memory after its timeout,
// releasing them (before, it was never passivated).
func TestPausedTaskWithLiveResultsPassivates(t *testing.T) {
	lv := newLive(t, live.Limits{})
	ref := &storeOf{}
	h := newHarnessLive(t, printThenBlock, lv, func(o *actors.Options) {
		o.IdleTimeout = time.Hour
		o.PausedLiveTimeout = 100 * time.Millisecond
	}, liveTools(t, lv, ref)...)
	ref.h = h
	id := pausedWithLive(t, h, lv, "paused")
	eventually(t, "the paused Task passivated", func() error {
		for _, a := range h.d.Inspect() {
			if strings.HasSuffix(a.ID, "/"+id) {
				return fmt.Errorf("the Task's actor is still active (%s)", a.ID)
			}
		}
		if u := lv.Usage(); u.Results != 0 {
			return fmt.Errorf("live results still held: %+v", u)
		}
		return nil
	})
}
