package tests

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"lemo/api"
	"lemo/client"
)

// The step benchmark (issue 18): T Tasks started at once against an
// OpenAI-compatible model server on loopback that answers at once: a call
// of the system tool with {"action":"list"} until stepsToolResults tool
// results are in the conversation, then a final text (20 model calls a
// Task). Each Task is driven as `lemo run` drives one: its own connection
// creates it and follows it until it finishes. The daemon, the model
// server and the clients are three processes; the figures count the
// daemon alone, the clients' CPU apart.

const (
	stepsToolResults = 19
	stepsPerTask     = stepsToolResults + 1
	// stepsModelEnv makes the test binary serve the fake model (see
	// TestMain), so that its CPU is counted neither as the daemon's nor as
	// the clients'.
	stepsModelEnv = "LEMO_STEPS_FAKE_MODEL"
	stepsModel    = "bench-model"
)

// serveStepsModel is the fake model server's process: it prints
// STEPS_URL=<base URL> and serves until stdin closes.
func serveStepsModel() {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	srv := &http.Server{Handler: stepsModelHandler(), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(l) }()
	fmt.Printf("STEPS_URL=http://%s/v1\n", l.Addr())
	_, _ = io.Copy(io.Discard, os.Stdin)
	_ = srv.Close()
}

// stepsModelHandler answers GET /v1/models and streamed POST
// /v1/chat/completions.
func stepsModelHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/models", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"object":"list","data":[{"id":"`+stepsModel+`","object":"model","context_length":131072}]}`)
	})
	mux.HandleFunc("POST /v1/chat/completions", func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Messages []struct {
				Role string `json:"role"`
			} `json:"messages"`
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			http.Error(w, `{"error":{"message":"bad request"}}`, http.StatusBadRequest)
			return
		}
		results := 0
		for _, m := range req.Messages {
			if m.Role == "tool" {
				results++
			}
		}
		w.Header().Set("Content-Type", "text/event-stream")
		var chunk, finish string
		if results < stepsToolResults {
			chunk = fmt.Sprintf(`{"id":"c","object":"chat.completion.chunk","model":"%s","choices":[{"index":0,"delta":{"role":"assistant","tool_calls":[{"index":0,"id":"call_%d","type":"function","function":{"name":"system","arguments":"{\"action\":\"list\"}"}}]},"finish_reason":null}]}`, stepsModel, results)
			finish = "tool_calls"
		} else {
			chunk = fmt.Sprintf(`{"id":"c","object":"chat.completion.chunk","model":"%s","choices":[{"index":0,"delta":{"role":"assistant","content":"Done: the services are listed."},"finish_reason":null}]}`, stepsModel)
			finish = "stop"
		}
		fmt.Fprintf(w, "data: %s\n\ndata: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"model\":\"%s\",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"%s\"}],\"usage\":{\"prompt_tokens\":100,\"completion_tokens\":10,\"total_tokens\":110}}\n\ndata: [DONE]\n\n", chunk, stepsModel, finish)
	})
	return mux
}

// stepsModelServer starts the fake model in a process of its own.
func stepsModelServer(b *testing.B) (url string, pid int) {
	b.Helper()
	exe, err := os.Executable()
	if err != nil {
		b.Fatal(err)
	}
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), stepsModelEnv+"=1")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		_ = stdin.Close()
		_ = cmd.Wait()
	})
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "STEPS_URL=") {
		b.Fatalf("fake model: %q, %v", line, err)
	}
	return strings.TrimSpace(strings.TrimPrefix(line, "STEPS_URL=")), cmd.Process.Pid
}

// procStats are a process's counters from /proc.
type procStats struct {
	cpu, sys   time.Duration
	writeBytes int64
	// switches counts the context switches of the process's threads
	// (voluntary and not; a thread that exited takes its count along, and
	// the Go runtime seldom ends one).
	switches     int64
	peakRSSBytes int64
	// anonBytes and fileBytes split the resident set now: the heap and
	// other private memory, and mapped files (Badger's memtable logs and
	// value log) resident in the page cache.
	anonBytes, fileBytes int64
}

func readProcStats(b *testing.B, pid int) procStats {
	b.Helper()
	user, sys := processTimes(pid)
	s := procStats{cpu: user + sys, sys: sys, switches: contextSwitches(b, pid)}
	io, err := os.ReadFile(fmt.Sprintf("/proc/%d/io", pid))
	if err != nil {
		b.Fatalf("read /proc/%d/io: %v", pid, err)
	}
	for _, l := range strings.Split(string(io), "\n") {
		if v, ok := strings.CutPrefix(l, "write_bytes: "); ok {
			s.writeBytes, _ = strconv.ParseInt(v, 10, 64)
		}
	}
	st, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		b.Fatalf("read /proc/%d/status: %v", pid, err)
	}
	for _, l := range strings.Split(string(st), "\n") {
		name, v, ok := strings.Cut(l, ":")
		if !ok {
			continue
		}
		kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
		switch name {
		case "VmHWM":
			s.peakRSSBytes = kb << 10
		case "RssAnon":
			s.anonBytes = kb << 10
		case "RssFile":
			s.fileBytes = kb << 10
		}
	}
	return s
}

// contextSwitches sums the context switches of pid's threads.
func contextSwitches(b *testing.B, pid int) int64 {
	b.Helper()
	threads, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	if err != nil {
		b.Fatalf("read /proc/%d/task: %v", pid, err)
	}
	var n int64
	for _, t := range threads {
		st, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/status", pid, t.Name()))
		if err != nil {
			continue // the thread ended meanwhile
		}
		for _, l := range strings.Split(string(st), "\n") {
			if name, v, ok := strings.Cut(l, ":"); ok && (name == "voluntary_ctxt_switches" || name == "nonvoluntary_ctxt_switches") {
				c, _ := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
				n += c
			}
		}
	}
	return n
}

// histogram is a Prometheus histogram scraped from /metrics: cumulative
// counts by upper bound.
type histogram struct {
	bounds []float64
	counts []float64
}

func scrapeHistogram(b *testing.B, addr, name string) histogram {
	b.Helper()
	var h histogram
	type bucket struct{ le, n float64 }
	var bs []bucket
	for series, v := range scrape(b, addr) {
		rest, ok := strings.CutPrefix(series, name+"_bucket{")
		if !ok {
			continue
		}
		i := strings.Index(rest, `le="`)
		if i < 0 {
			continue
		}
		le := rest[i+4:]
		le = le[:strings.IndexByte(le, '"')]
		f := math.Inf(1)
		if le != "+Inf" {
			f, _ = strconv.ParseFloat(le, 64)
		}
		bs = append(bs, bucket{f, v})
	}
	sort.Slice(bs, func(i, j int) bool { return bs[i].le < bs[j].le })
	for _, x := range bs {
		h.bounds = append(h.bounds, x.le)
		h.counts = append(h.counts, x.n)
	}
	return h
}

// quantile interpolates the q-quantile of the observations between before
// and h (linearly inside a bucket, as Prometheus' histogram_quantile
// does), in seconds.
func (h histogram) quantile(before histogram, q float64) float64 {
	if len(h.counts) == 0 {
		return 0
	}
	n := make([]float64, len(h.counts))
	for i := range h.counts {
		n[i] = h.counts[i]
		if i < len(before.counts) {
			n[i] -= before.counts[i]
		}
	}
	total := n[len(n)-1]
	if total == 0 {
		return 0
	}
	rank := q * total
	lower, prev := 0.0, 0.0
	for i, c := range n {
		if c >= rank {
			upper := h.bounds[i]
			if math.IsInf(upper, 1) {
				return lower
			}
			if c == prev {
				return upper
			}
			return lower + (upper-lower)*(rank-prev)/(c-prev)
		}
		lower, prev = h.bounds[i], c
	}
	return lower
}

// BenchmarkSteps runs the step workload at T = 1 and T = 50 against a real
// lemo serve. Each iteration starts T Tasks at once and waits for all to
// finish; the figures are per model call (step) of all iterations.
// Set LEMO_STEPS_PROFILE to a folder to keep a CPU profile of the daemon
// over the measured window (http.pprof on), and LEMO_STEPS_DATA to a
// folder to keep each run's data folder in (to read what the steps
// wrote). With -test.v each round's CreateTask latencies and the
// append-to-ack histogram's buckets are logged.
func BenchmarkSteps(b *testing.B) {
	for _, tasks := range []int{1, 50} {
		b.Run(fmt.Sprintf("T=%d", tasks), func(b *testing.B) { benchSteps(b, tasks) })
	}
}

func benchSteps(b *testing.B, tasks int) {
	url, modelPID := stepsModelServer(b)
	data := filepath.Join(b.TempDir(), "data")
	if kept := os.Getenv("LEMO_STEPS_DATA"); kept != "" {
		run, err := os.MkdirTemp(kept, fmt.Sprintf("T%d-N%d-", tasks, b.N))
		if err != nil {
			b.Fatalf("LEMO_STEPS_DATA: %v", err)
		}
		data = filepath.Join(run, "data")
	}
	env := []string{"LEMO_OLLAMA_DISABLED=true", "LEMO_OPENAI_BASE_URL=" + url, "LEMO_OPENAI_API_KEY=sk-bench", "LEMO_HTTP_LISTEN=127.0.0.1:0"}
	profileDir := os.Getenv("LEMO_STEPS_PROFILE")
	if profileDir != "" {
		env = append(env, "LEMO_HTTP_PPROF=true")
	}
	d := serveWithEnv(b, data, env...)
	metricsAddr := httpAddr(b, d.daemon)
	pid := d.cmd.Process.Pid
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	conns := make([]*client.Conn, tasks)
	for i := range conns {
		conns[i] = d.connect(b, "")
	}
	// One Task before the measured window: the daemon's first model call,
	// tool call and subscription warm what every later one reuses.
	if _, err := runStepTasks(ctx, conns[:1]); err != nil {
		b.Fatalf("warm-up: %v\n%s", err, d.logs())
	}
	var profile *profileRun
	if profileDir != "" {
		profile = startProfile(b, metricsAddr, filepath.Join(profileDir, fmt.Sprintf("daemon-T%d.pprof", tasks)))
	}
	before, modelBefore := readProcStats(b, pid), processCPU(modelPID)
	selfBefore := selfCPUTime()
	ackBefore := scrapeHistogram(b, metricsAddr, "lemo_append_ack_seconds")
	var creates []time.Duration
	b.ResetTimer()
	for n := 0; n < b.N; n++ {
		lat, err := runStepTasks(ctx, conns)
		if err != nil {
			b.Fatalf("%v\n%s", err, d.logs())
		}
		creates = append(creates, lat...)
		if testing.Verbose() {
			slices.Sort(lat)
			b.Logf("round %d: CreateTask %.1f to %.1f ms (median %.1f)", n, ms(lat[0]), ms(lat[len(lat)-1]), ms(lat[len(lat)/2]))
		}
	}
	b.StopTimer()
	after, modelAfter := readProcStats(b, pid), processCPU(modelPID)
	selfAfter := selfCPUTime()
	ackAfter := scrapeHistogram(b, metricsAddr, "lemo_append_ack_seconds")
	if testing.Verbose() {
		for i, le := range ackAfter.bounds {
			n := ackAfter.counts[i]
			if i < len(ackBefore.counts) {
				n -= ackBefore.counts[i]
			}
			b.Logf("appends acknowledged within %g s: %g", le, n)
		}
	}
	if profile != nil {
		profile.wait(b)
		saveHeapProfile(b, metricsAddr, filepath.Join(profileDir, fmt.Sprintf("daemon-T%d.heap.pprof", tasks)))
	}
	steps := float64(b.N * tasks * stepsPerTask)
	b.ReportMetric(ms(after.cpu-before.cpu)/steps, "daemon-cpu-ms/step")
	b.ReportMetric(ms(after.sys-before.sys)/steps, "daemon-sys-ms/step")
	b.ReportMetric(float64(after.switches-before.switches)/steps, "daemon-ctxsw/step")
	b.ReportMetric(float64(after.writeBytes-before.writeBytes)/steps/1024, "disk-KB/step")
	b.ReportMetric(float64(after.peakRSSBytes)/(1<<20), "peak-RSS-MB")
	b.ReportMetric(float64(after.anonBytes)/(1<<20), "end-anon-MB")
	b.ReportMetric(float64(after.fileBytes)/(1<<20), "end-file-MB")
	b.ReportMetric(ms(selfAfter-selfBefore)/steps, "client-cpu-ms/step")
	b.ReportMetric(ms(modelAfter-modelBefore)/steps, "model-cpu-ms/step")
	sort.Slice(creates, func(i, j int) bool { return creates[i] < creates[j] })
	b.ReportMetric(ms(percentile(creates, 0.5)), "create-p50-ms")
	b.ReportMetric(ms(percentile(creates, 0.99)), "create-p99-ms")
	b.ReportMetric(ackAfter.quantile(ackBefore, 0.5)*1000, "ack-p50-ms")
	b.ReportMetric(ackAfter.quantile(ackBefore, 0.99)*1000, "ack-p99-ms")
	b.ReportMetric(0, "ns/op")
}

// runStepTasks creates one Task on each connection at once, follows each
// until it finishes (as lemo run does) and returns the CreateTask
// latencies. A Task that ends otherwise, with a failed tool call, or with
// other than stepsPerTask model calls and stepsToolResults tool results,
// is an error.
func runStepTasks(ctx context.Context, conns []*client.Conn) ([]time.Duration, error) {
	lat := make([]time.Duration, len(conns))
	errs := make([]error, len(conns))
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i, c := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			t0 := time.Now()
			// The system tool is named: a Task otherwise starts with the
			// discovery tools only, and its calls would be refused unrun.
			meta, err := c.CreateTask(ctx, client.CreateTask{Request: "List the services of this daemon, again and again.", Model: "openai/" + stepsModel,
				Tools: []string{"system"}, ToolsRestricted: true})
			lat[i] = time.Since(t0)
			if err != nil {
				errs[i] = fmt.Errorf("CreateTask: %w", err)
				return
			}
			cycles, results := 0, 0
			err = c.Follow(ctx, client.FollowOptions{TaskID: meta.GetTaskId(), FromSeq: 1}, func(u *api.Update) error {
				ev := u.GetEvent()
				if ev == nil {
					return nil
				}
				if ev.GetCycleFinished() != nil {
					cycles++
				}
				if ev.GetToolResult() != nil {
					results++
				}
				if f := ev.GetToolFailed(); f != nil {
					return fmt.Errorf("task %s: a tool call failed: %v", meta.GetTaskId(), f)
				}
				if sc := ev.GetStatusChanged(); sc != nil {
					switch sc.GetStatus() {
					case api.TaskStatus_TASK_STATUS_FINISHED:
						return client.ErrStopFollowing
					case api.TaskStatus_TASK_STATUS_FAILED, api.TaskStatus_TASK_STATUS_PAUSED, api.TaskStatus_TASK_STATUS_CANCELLED:
						return fmt.Errorf("task %s ended %s: %s", meta.GetTaskId(), sc.GetStatus(), sc.GetDetail())
					}
				}
				return nil
			})
			if err == nil && (cycles != stepsPerTask || results != stepsToolResults) {
				err = fmt.Errorf("task %s finished after %d model calls and %d tool results, want %d and %d", meta.GetTaskId(), cycles, results, stepsPerTask, stepsToolResults)
			}
			errs[i] = err
		}()
	}
	close(start)
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	return lat, nil
}

// profileRun is a CPU profile of the daemon being taken.
type profileRun struct {
	done chan error
}

// wait waits for the profile to be written.
func (p *profileRun) wait(b *testing.B) {
	b.Helper()
	if err := <-p.done; err != nil {
		b.Errorf("CPU profile: %v", err)
	}
}

// startProfile takes a CPU profile of the daemon (its /debug/pprof) of
// LEMO_STEPS_PROFILE_SECONDS (default 20) into path.
func startProfile(b *testing.B, addr, path string) *profileRun {
	b.Helper()
	secs := os.Getenv("LEMO_STEPS_PROFILE_SECONDS")
	if secs == "" {
		secs = "20"
	}
	p := &profileRun{done: make(chan error, 1)}
	go func() {
		resp, err := http.Get("http://" + addr + "/debug/pprof/profile?seconds=" + secs)
		if err != nil {
			p.done <- err
			return
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			p.done <- fmt.Errorf("profile: %s", resp.Status)
			return
		}
		f, err := os.Create(path)
		if err != nil {
			p.done <- err
			return
		}
		_, err = io.Copy(f, resp.Body)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		p.done <- err
	}()
	return p
}

// saveHeapProfile writes the daemon's heap profile (in use and allocated
// since the start) into path.
func saveHeapProfile(b *testing.B, addr, path string) {
	b.Helper()
	resp, err := http.Get("http://" + addr + "/debug/pprof/heap")
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		b.Fatal(err)
	}
	if err := f.Close(); err != nil {
		b.Fatal(err)
	}
}
