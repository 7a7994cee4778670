package tests

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"lemo/api"
	"lemo/client"
	"lemo/memory"
	"lemo/persistence"
)

// percentile returns the p-th percentile of sorted durations.
func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(float64(len(sorted)-1) * p)
	return sorted[i]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// BenchmarkRemoteListTasks measures a command's round trip on loopback:
// list tasks, from this process to lemo serve and back (the daemon dials
// the answer back).
func BenchmarkRemoteListTasks(b *testing.B) {
	data := filepath.Join(b.TempDir(), "data")
	d := serveRemote(b, data)
	c := d.connect(b, "")
	ctx := context.Background()
	for i := 0; i < 10; i++ {
		if _, err := c.CreateTask(ctx, client.CreateTask{Request: fmt.Sprint("task ", i), Model: "fake/echo"}); err != nil {
			b.Fatal(err)
		}
	}
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		list, _, err := c.ListTasks(ctx, "", 10)
		if err != nil || len(list) != 10 {
			b.Fatalf("ListTasks: %d, %v", len(list), err)
		}
		lat = append(lat, time.Since(t0))
	}
	b.StopTimer()
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	b.ReportMetric(ms(percentile(lat, 0.5)), "p50-ms")
	b.ReportMetric(ms(percentile(lat, 0.99)), "p99-ms")
}

// BenchmarkRemoteFanout: 100 clients (sessions on one node in this
// process) subscribed to one Task that streams 1,000 deltas a second, and
// one more client that never reads. It reports the delivery lag of every
// delta (received − sent, both on this machine's clock), whether the
// stalled client was told it fell behind, and how long the Task took to
// stream (not slowed by anyone).
func BenchmarkRemoteFanout(b *testing.B) {
	const clients, deltas, rate = 100, 5000, 1000
	data := filepath.Join(b.TempDir(), "data")
	d := serveRemote(b, data)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	for n := 0; n < b.N; n++ {
		conns := make([]*client.Conn, clients+1)
		subs := make([]*client.Subscription, clients+1)
		for i := range conns {
			conns[i] = d.connect(b, "")
			s, err := conns[i].Subscribe(ctx, client.SubscribeOptions{})
			if err != nil {
				b.Fatal(err)
			}
			subs[i] = s
		}
		stalled := subs[clients]
		var mu sync.Mutex
		var lags []time.Duration
		var first, last int64
		var wg sync.WaitGroup
		for i := 0; i < clients; i++ {
			wg.Add(1)
			go func(s *client.Subscription) {
				defer wg.Done()
				got := 0
				local := make([]time.Duration, 0, deltas)
				for u := range s.C {
					now := time.Now().UnixNano()
					if dl := u.GetDelta(); dl != nil && dl.GetKind() == api.DeltaKind_DELTA_KIND_TEXT {
						sent, err := strconv.ParseInt(strings.TrimSpace(dl.GetText()), 10, 64)
						if err != nil {
							continue
						}
						local = append(local, time.Duration(now-sent))
						mu.Lock()
						if first == 0 || sent < first {
							first = sent
						}
						if sent > last {
							last = sent
						}
						mu.Unlock()
						if got++; got == deltas {
							break
						}
					}
					if u.GetFellBehind() != nil {
						b.Errorf("a reading client fell behind")
						return
					}
				}
				mu.Lock()
				lags = append(lags, local...)
				mu.Unlock()
			}(subs[i])
		}
		b.ResetTimer()
		daemonCPU, selfCPU := processCPU(d.cmd.Process.Pid), selfCPUTime()
		if _, err := conns[0].CreateTask(ctx, client.CreateTask{Request: fmt.Sprintf("deltas=%d rate=%d", deltas, rate), Model: "fake/stream"}); err != nil {
			b.Fatal(err)
		}
		wg.Wait()
		b.StopTimer()
		b.ReportMetric((processCPU(d.cmd.Process.Pid) - daemonCPU).Seconds(), "daemon-cpu-s")
		b.ReportMetric((selfCPUTime() - selfCPU).Seconds(), "clients-cpu-s")
		// The stalled client was told it fell behind once it read.
		fell := false
		deadline := time.After(30 * time.Second)
	drain:
		for {
			select {
			case u, ok := <-stalled.C:
				if !ok {
					break drain
				}
				if u.GetFellBehind() != nil {
					fell = true
					break drain
				}
			case <-deadline:
				break drain
			}
		}
		sort.Slice(lags, func(i, j int) bool { return lags[i] < lags[j] })
		if len(lags) != clients*deltas {
			b.Errorf("%d deltas delivered, want %d", len(lags), clients*deltas)
		}
		b.ReportMetric(ms(percentile(lags, 0.5)), "p50-lag-ms")
		b.ReportMetric(ms(percentile(lags, 0.99)), "p99-lag-ms")
		b.ReportMetric(ms(lags[len(lags)-1]), "max-lag-ms")
		b.ReportMetric(float64(last-first)/1e9, "stream-s")
		b.ReportMetric(float64(len(lags)), "deltas")
		if fell {
			b.ReportMetric(1, "stalled-fell-behind")
		} else {
			b.ReportMetric(0, "stalled-fell-behind")
			b.Errorf("the stalled client was never told it fell behind")
		}
		// The Task streams at its nominal rate whatever the clients do:
		// deltas-1 intervals of 1/rate seconds, with 10% to spare.
		if nominal := float64(deltas-1) / rate; float64(last-first)/1e9 > nominal*1.1 {
			b.Errorf("the Task took %.2f s to stream, nominal %.2f s: something slowed it", float64(last-first)/1e9, nominal)
		}
		for i := range conns {
			subs[i].Close()
			_ = conns[i].Close()
		}
	}
}

// processCPU returns the user+system CPU time of process pid (Linux).
func processCPU(pid int) time.Duration {
	user, sys := processTimes(pid)
	return user + sys
}

// processTimes returns the user and system CPU time of process pid (zero
// when it cannot be read).
func processTimes(pid int) (user, sys time.Duration) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, 0
	}
	// Fields after the command name (which may hold spaces) in ")".
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+2:]))
	if len(f) < 13 {
		return 0, 0
	}
	utime, _ := strconv.ParseInt(f[11], 10, 64)
	stime, _ := strconv.ParseInt(f[12], 10, 64)
	const tick = time.Second / 100 // clock ticks (USER_HZ 100)
	return time.Duration(utime) * tick, time.Duration(stime) * tick
}

func selfCPUTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkServeReady100kTasks measures how long the real lemo serve takes
// from exec to serving (store opened, memory caught up, recovery done, the
// remote API listening) over a data folder of 100,000 stored Tasks whose
// history the memory has indexed, as a daemon that ran for a long time
// leaves it.
func BenchmarkServeReady100kTasks(b *testing.B) {
	const tasks = 100_000
	// LEMO_SERVE_BENCH_DIR keeps the seeded folder between runs (seeding
	// takes a minute or two).
	data := filepath.Join(b.TempDir(), "data")
	if dir := os.Getenv("LEMO_SERVE_BENCH_DIR"); dir != "" {
		data = filepath.Join(dir, "data-100k")
	}
	if _, err := os.Stat(filepath.Join(data, "seeded")); err != nil {
		if err := os.RemoveAll(data); err != nil {
			b.Fatal(err)
		}
		seedIndexedTasks(b, data, tasks)
		if err := os.WriteFile(filepath.Join(data, "seeded"), nil, 0o600); err != nil {
			b.Fatal(err)
		}
	}
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		d := launchDaemon(b, lemoBin, data)
		select {
		case <-d.ready:
		case <-d.done:
			b.Fatalf("lemo serve exited: %v\n%s", d.err, d.logs())
		case <-time.After(time.Minute):
			b.Fatalf("lemo serve not serving within a minute:\n%s", d.logs())
		}
		lat = append(lat, time.Since(t0))
		b.StopTimer()
		d.stop()
		b.StartTimer()
	}
	b.StopTimer()
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	b.ReportMetric(ms(percentile(lat, 0.5)), "p50-ms")
	b.ReportMetric(ms(lat[len(lat)-1]), "max-ms")
}

// seedIndexedTasks writes n finished Tasks of three events (created, a
// request of some words, finished) into a new data folder through the
// store and the memory, as the daemon writes them, and lets the memory
// index them.
func seedIndexedTasks(b *testing.B, data string, n int) {
	b.Helper()
	dd, err := persistence.OpenDataDir(data)
	if err != nil {
		b.Fatal(err)
	}
	defer dd.Close()
	st, err := persistence.Open(dd, persistence.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	ctx := context.Background()
	mem, err := memory.Open(ctx, st, memory.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer mem.Close()
	words := strings.Fields("alpha build cache deploy error fetch graph handler index journal kernel ledger module network " +
		"option parser queue render schema token update vector worker yaml zone budget cycle delta event")
	base := time.Now().Add(-time.Duration(n) * time.Millisecond)
	work := make(chan int)
	errs := make(chan error, 64)
	var wg sync.WaitGroup
	for w := 0; w < 64; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				id := persistence.NewTaskID(base.Add(time.Duration(i) * time.Millisecond))
				var req strings.Builder
				for j := 0; j < 16; j++ {
					req.WriteString(words[(i*7+j*13)%len(words)] + " ")
				}
				fmt.Fprintf(&req, "ticket-%d", i)
				now := timestamppb.Now()
				evs := []*api.Event{
					api.NewEvent(id, 1, now, &api.TaskCreated{Owner: "local", Model: "fake/echo", Title: "seeded"}),
					api.NewEvent(id, 2, now, &api.UserMessage{Text: req.String()}),
					api.NewEvent(id, 3, now, &api.StatusChanged{Status: api.TaskStatus_TASK_STATUS_FINISHED}),
				}
				if _, err := st.Append(ctx, persistence.Append{TaskID: id, Events: evs, Extra: mem.Postings("local", evs)}); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	for i := 0; i < n; i++ {
		work <- i
	}
	close(work)
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		b.Fatal(err)
	}
	if err := mem.Flush(ctx); err != nil {
		b.Fatal(err)
	}
}
