package persistence

import (
	"context"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"lemo/api"
)

// BenchmarkAppend64Tasks measures durable appends from 64 concurrent Tasks,
// each waiting for its acknowledgement before the next append (as a Task
// actor does). It reports acknowledged events per second and the p50/p99
// acknowledgement latency.
func BenchmarkAppend64Tasks(b *testing.B) {
	// Production settings: the zero Options (but for counting commits).
	dd, err := OpenDataDir(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	defer dd.Close()
	var commits, committed atomic.Int64
	store, err := Open(dd, Options{OnCommit: func(appends, events int, wait time.Duration) {
		commits.Add(1)
		committed.Add(int64(events))
	}})
	if err != nil {
		b.Fatal(err)
	}
	defer store.Close()
	st := &testStore{Store: store, dd: dd}
	const tasks = 64
	ids := make([]string, tasks)
	for i := range ids {
		ids[i] = NewTaskID(time.Now())
		mustAppend(b, st, ids[i], created(ids[i], "o"))
	}
	text := string(make([]byte, 200))
	lat := make([][]time.Duration, tasks)
	b.ResetTimer()
	commits.Store(0)
	committed.Store(0)
	start := time.Now()
	var wg sync.WaitGroup
	for i := 0; i < tasks; i++ {
		n := b.N / tasks
		if i < b.N%tasks {
			n++
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			id := ids[i]
			for s := uint64(2); s < uint64(2+n); s++ {
				t := time.Now()
				e := &api.Event{TaskId: id, Seq: s, Body: &api.Event_UserMessage{UserMessage: &api.UserMessage{Text: text}}}
				if _, err := st.Append(context.Background(), Append{TaskID: id, Events: []*api.Event{e}}); err != nil {
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
	if n := commits.Load(); n > 0 {
		b.ReportMetric(float64(committed.Load())/float64(n), "events/commit")
	}
}
