package actors_test

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"lemo/actors"
	"lemo/api"
	"lemo/persistence"
	"lemo/providers"
	"lemo/providers/fake"
	"lemo/tools/tasks"
)

func percentile(d []time.Duration, p int) float64 {
	sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
	return float64(d[min(len(d)-1, len(d)*p/100)].Microseconds()) / 1000
}

// BenchmarkSpawn50Children measures, for a parent that spawns 50 children
// at once (zero-delay model), the time from each spawn call's start record
// to the child's first model request. Run it with -benchtime=Nx.
func BenchmarkSpawn50Children(b *testing.B) {
	const n = 50
	var mu sync.Mutex
	first := map[string]time.Time{} // child request -> its first model request
	plan := func(_ int, req *providers.Request) fake.Turn {
		last := req.Messages[len(req.Messages)-1]
		if strings.HasPrefix(last.Content, "CHILD") {
			mu.Lock()
			if _, ok := first[last.Content]; !ok {
				first[last.Content] = time.Now()
			}
			mu.Unlock()
			return fake.Turn{Text: "ok"}
		}
		if strings.HasPrefix(last.Content, "PARENT") {
			calls := make([]providers.ToolCall, n)
			for i := range calls {
				calls[i] = fake.ToolCall(fmt.Sprint(i), "tasks_spawn", map[string]any{"request": fmt.Sprintf("CHILD %s %d", last.Content, i)})
			}
			return fake.Turn{ToolCalls: calls}
		}
		return fake.Turn{Text: "done"}
	}
	var h *harness
	h = newHarnessWith(b, plan, func(o *actors.Options) {
		o.MaxChildren, o.MaxRunningChildren, o.MaxParallelTools, o.IdleTimeout = n, n*b.N+1, n, time.Hour
	}, tasks.NewTree(lazyStoreOf(&h))...)
	var lat []time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		id := h.create(fmt.Sprintf("PARENT%d", i))
		evs := h.waitFor(id, "50 children", func(evs []*api.Event) bool {
			k := 0
			for _, ev := range evs {
				if ev.GetToolResult() != nil {
					k++
				}
			}
			return k == n
		})
		started := map[string]time.Time{}
		for _, ev := range evs {
			if s := ev.GetToolExecutionStarted(); s != nil {
				started[s.GetCallId()] = ev.GetTime().AsTime()
			}
		}
		for j := 0; j < n; j++ {
			req := fmt.Sprintf("CHILD PARENT%d %d", i, j)
			deadline := time.Now().Add(10 * time.Second)
			for {
				mu.Lock()
				t, ok := first[req]
				mu.Unlock()
				if ok {
					lat = append(lat, t.Sub(started[fmt.Sprintf("call-1-%d", j+1)]))
					break
				}
				if time.Now().After(deadline) {
					b.Fatalf("child %q never called the model", req)
				}
				time.Sleep(time.Millisecond) // polling the scripted model
			}
		}
	}
	b.StopTimer()
	b.ReportMetric(percentile(lat, 50), "p50-ms")
	b.ReportMetric(percentile(lat, 99), "p99-ms")
}

// BenchmarkMessageDelivery measures a message between two Tasks: from the
// sender's MessageSent record to the recipient's MessageReceived record (the
// recipient waits in tasks.wait_message). Run it with -benchtime=Nx: N
// messages.
func BenchmarkMessageDelivery(b *testing.B) {
	plan := func(_ int, req *providers.Request) fake.Turn {
		last := req.Messages[len(req.Messages)-1]
		switch {
		case strings.HasPrefix(last.Content, "PARENT"):
			return fake.Turn{ToolCalls: []providers.ToolCall{fake.ToolCall("s", "tasks_spawn", map[string]any{"request": "CHILD"})}}
		case last.Content == "CHILD", strings.Contains(last.Content, `"sent":true`):
			return fake.Turn{ToolCalls: []providers.ToolCall{fake.ToolCall("m", "tasks_send", map[string]any{"to": "parent", "text": "ping"})}}
		default:
			// The parent waits for the next message.
			return fake.Turn{ToolCalls: []providers.ToolCall{fake.ToolCall("w", "tasks_wait_message", map[string]any{"timeout": 60})}}
		}
	}
	var h *harness
	h = newHarnessWith(b, plan, func(o *actors.Options) { o.MaxCycles = 1 << 30; o.IdleTimeout = time.Hour }, tasks.NewTree(lazyStoreOf(&h))...)
	b.ResetTimer()
	id := h.create("PARENT")
	evs := h.waitFor(id, "messages", func(evs []*api.Event) bool {
		k := 0
		for _, ev := range evs {
			if ev.GetMessageReceived() != nil {
				k++
			}
		}
		return k >= b.N
	})
	b.StopTimer()
	var child string
	recv := map[uint64]time.Time{}
	for _, ev := range evs {
		if cs := ev.GetChildSpawned(); cs != nil {
			child = cs.GetChildId()
		}
		if m := ev.GetMessageReceived(); m != nil {
			recv[m.GetFromSeq()] = ev.GetTime().AsTime()
		}
	}
	if _, err := h.d.Cancel(context.Background(), actors.Operator, id); err != nil {
		b.Fatal(err)
	}
	var lat []time.Duration
	for _, ev := range h.history(child) {
		if ev.GetMessageSent() != nil {
			if r, ok := recv[ev.GetSeq()]; ok {
				lat = append(lat, r.Sub(ev.GetTime().AsTime()))
			}
		}
	}
	if len(lat) < b.N {
		b.Fatalf("%d messages matched, want %d", len(lat), b.N)
	}
	b.ReportMetric(percentile(lat, 50), "p50-ms")
	b.ReportMetric(percentile(lat, 99), "p99-ms")
}

// BenchmarkIdleTreeHeap compares the daemon's heap over 1,000 dormant
// Tasks that form one tree (a root, 8 children each, to depth 3, linked
// both ways, all finished) with its heap over 1,000 dormant Tasks without
// links: dormant Tasks cost nothing, linked or not.
func BenchmarkIdleTreeHeap(b *testing.B) {
	for _, linked := range []bool{false, true} {
		b.Run(fmt.Sprintf("linked=%v", linked), func(b *testing.B) {
			h := newHarness(b, fake.Echo())
			h.stop()
			seedTree(b, h, 1000, linked)
			before := heap()
			h.start()
			b.ReportMetric(float64(heap()-before)/1024, "daemon-heap-KiB")
		})
	}
}

// seedTree writes n finished Tasks straight into the store: a tree with 8
// children per Task when linked, else n unrelated Tasks.
func seedTree(b *testing.B, h *harness, n int, linked bool) {
	b.Helper()
	dd, err := persistence.OpenDataDir(h.dir)
	if err != nil {
		b.Fatal(err)
	}
	defer dd.Close()
	st, err := persistence.Open(dd, persistence.Options{Log: testLog(b)})
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	base := time.Now()
	ids := make([]string, n)
	for i := range ids {
		ids[i] = persistence.NewTaskID(base.Add(time.Duration(i) * time.Millisecond))
	}
	parent := func(i int) int { return (i - 1) / 8 }
	for i, id := range ids {
		tc := &api.TaskCreated{Owner: "operator", Model: "fake/m", Title: "seeded"}
		if linked && i > 0 {
			tc.ParentId, tc.ParentCallId = ids[parent(i)], fmt.Sprintf("call-1-%d", i)
		}
		bodies := []proto.Message{tc, &api.UserMessage{Text: "x"}}
		if linked {
			for k := 8*i + 1; k <= 8*i+8 && k < n; k++ {
				bodies = append(bodies, &api.ChildSpawned{ChildId: ids[k], CallId: fmt.Sprintf("call-1-%d", k)},
					&api.ChildEnded{ChildId: ids[k], Status: api.TaskStatus_TASK_STATUS_FINISHED, Answer: "ok"})
			}
		}
		bodies = append(bodies, &api.StatusChanged{Status: api.TaskStatus_TASK_STATUS_FINISHED})
		evs := make([]*api.Event, len(bodies))
		for j, body := range bodies {
			evs[j] = api.NewEvent(id, uint64(j+1), timestamppb.Now(), body)
		}
		if _, err := st.Append(context.Background(), persistence.Append{TaskID: id, Events: evs}); err != nil {
			b.Fatal(err)
		}
	}
}
