package actors_test

import (
	"context"

	"runtime"
	"sort"
	"sync"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"lemo/actors"
	"lemo/api"
	"lemo/persistence"
	"lemo/providers/fake"
)

// seedTasks writes n finished Tasks of events events each straight into the
// store (the daemon must be stopped), with up to 64 appends in flight.
func seedTasks(b *testing.B, h *harness, n, events int) []string {
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
	ids := make([]string, n)
	base := time.Now()
	for i := range ids {
		ids[i] = persistence.NewTaskID(base.Add(time.Duration(i) * time.Millisecond))
	}
	text := string(make([]byte, 100))
	work := make(chan string)
	var wg sync.WaitGroup
	var failed error
	var mu sync.Mutex
	for w := 0; w < 64; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for id := range work {
				bodies := []proto.Message{&api.TaskCreated{Owner: "operator", Model: "fake/m", Title: "seeded"}}
				for len(bodies) < events-1 {
					bodies = append(bodies, &api.UserMessage{Text: text})
				}
				bodies = append(bodies, &api.StatusChanged{Status: api.TaskStatus_TASK_STATUS_FINISHED})
				evs := make([]*api.Event, len(bodies))
				for i, body := range bodies {
					evs[i] = api.NewEvent(id, uint64(i+1), timestamppb.Now(), body)
				}
				if _, err := st.Append(context.Background(), persistence.Append{TaskID: id, Events: evs}); err != nil {
					mu.Lock()
					failed = err
					mu.Unlock()
				}
			}
		}()
	}
	for _, id := range ids {
		work <- id
	}
	close(work)
	wg.Wait()
	if failed != nil {
		b.Fatal(failed)
	}
	return ids
}

// BenchmarkStartup100kTasks measures opening the store and starting the
// daemon over 100,000 stored Tasks (no full replay happens at boot).
func BenchmarkStartup100kTasks(b *testing.B) {
	h := newHarness(b, fake.Echo())
	h.stop()
	seedTasks(b, h, 100_000, 3)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		start := time.Now()
		h.start()
		b.ReportMetric(float64(time.Since(start).Milliseconds()), "ms/start")
		b.StopTimer()
		h.stop()
		b.StartTimer()
	}
}

// BenchmarkActivate1000Events measures activating a dormant Task of 1,000
// events: from a command to its answer (spawn, load and fold the history).
// Run it with -benchtime=Nx; it seeds N Tasks.
func BenchmarkActivate1000Events(b *testing.B) {
	h := newHarness(b, fake.Echo())
	h.stop()
	ids := seedTasks(b, h, b.N, 1000)
	h.start()
	lat := make([]time.Duration, 0, b.N)
	ctx := context.Background()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		start := time.Now()
		// A command the finished Task refuses still activates it.
		if _, err := h.d.Pause(ctx, actors.Operator, ids[i]); err == nil {
			b.Fatal("Pause of a finished task succeeded")
		}
		lat = append(lat, time.Since(start))
	}
	b.StopTimer()
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
}

// BenchmarkIdleTaskHeap measures the heap an activated, idle Task holds.
// Run it with -benchtime=Nx; it activates N dormant Tasks and reports the
// heap growth per Task.
func BenchmarkIdleTaskHeap(b *testing.B) {
	h := newHarnessWith(b, fake.Echo(), func(o *actors.Options) { o.IdleTimeout = time.Hour })
	h.stop()
	ids := seedTasks(b, h, b.N, 3)
	h.start()
	ctx := context.Background()
	// Warm up the tree's own structures with one Task outside the count.
	if _, err := h.d.Pause(ctx, actors.Operator, ids[0]); err == nil {
		b.Fatal("Pause of a finished task succeeded")
	}
	before := heap()
	b.ResetTimer()
	for _, id := range ids[1:] {
		if _, err := h.d.Pause(ctx, actors.Operator, id); err == nil {
			b.Fatal("Pause of a finished task succeeded")
		}
	}
	b.StopTimer()
	after := heap()
	if n := len(ids) - 1; n > 0 {
		b.ReportMetric(float64(after-before)/float64(n), "heap-B/task")
	}
}

func heap() int64 {
	var ms runtime.MemStats
	for i := 0; i < 3; i++ {
		runtime.GC()
	}
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapAlloc)
}
