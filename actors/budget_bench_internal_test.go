package actors

import (
	"context"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"lemo/actors/taskstate"
	"lemo/api"
	"lemo/persistence"
	"lemo/tools"
	"lemo/tools/files"
)

// BenchmarkFirstCycleOverhead is the estimate of the instructions and tool
// definitions a Task's first reservation adds (later Cycles start from the
// input the previous one recorded): the built-in files tools.
func BenchmarkFirstCycleOverhead(b *testing.B) {
	reg := tools.NewRegistry()
	fts, err := files.New(files.DefaultConfig())
	if err != nil {
		b.Fatal(err)
	}
	for _, ft := range fts {
		if err := reg.Register(ft); err != nil {
			b.Fatal(err)
		}
	}
	t := &task{env: &env{deps: Deps{Tools: reg}}, st: taskstate.New()}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if t.overhead() == 0 {
			b.Fatal("no overhead")
		}
	}
}

// BenchmarkTreeReservation is the root's work for one ask of a tree's
// Cycle: read its descendants' spend from the store's children index and
// answer (taskstate.TreeGrant and PathGrant, the grant recorded). The ask
// comes from a grandchild in a tree of 50 Tasks (a root with limits, 7
// children with limits, 6 grandchildren under each) whose owner has
// 10,000 other Tasks: the owner's other Tasks are not read.
func BenchmarkTreeReservation(b *testing.B) {
	dd, err := persistence.OpenDataDir(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	st, err := persistence.Open(dd, persistence.Options{Log: zerolog.Nop()})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = st.Close(); _ = dd.Close() })
	at := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	next := func() string { at = at.Add(time.Millisecond); return persistence.NewTaskID(at) }
	ev := func(id string, seq uint64, body proto.Message) *api.Event {
		return api.NewEvent(id, seq, timestamppb.New(at), body)
	}
	ctx := context.Background()
	var wg sync.WaitGroup
	ids := make(chan string)
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for id := range ids {
				if _, err := st.Append(ctx, persistence.Append{TaskID: id, Events: []*api.Event{ev(id, 1, &api.TaskCreated{Owner: "o"})}}); err != nil {
					b.Error(err)
				}
			}
		}()
	}
	for range 10_000 {
		ids <- next()
	}
	close(ids)
	wg.Wait()
	limit := &api.BudgetAmounts{Tokens: 10_000_000}
	root := next()
	if _, err := st.Append(ctx, persistence.Append{TaskID: root, Events: []*api.Event{ev(root, 1, &api.TaskCreated{Owner: "o", Budget: limit})}}); err != nil {
		b.Fatal(err)
	}
	seqs := map[string]uint64{root: 1}
	spawn := func(parent string) string {
		kid := next()
		seqs[parent]++
		seqs[kid] = 3
		_, err := st.Append(ctx, persistence.Append{TaskID: parent, Events: []*api.Event{ev(parent, seqs[parent], &api.ChildSpawned{ChildId: kid})},
			Also: []persistence.Append{{TaskID: kid, Events: []*api.Event{ev(kid, 1, &api.TaskCreated{Owner: "o", ParentId: parent, Budget: limit}),
				ev(kid, 2, &api.StatusChanged{Status: api.TaskStatus_TASK_STATUS_RUNNING}),
				ev(kid, 3, &api.CycleStarted{Cycle: 1, Reservation: &api.BudgetReservation{InputTokens: 2000, OutputTokens: 4096}})}}}})
		if err != nil {
			b.Fatal(err)
		}
		return kid
	}
	var asker string
	for range 7 {
		kid := spawn(root)
		for range 6 {
			asker = spawn(kid)
		}
	}
	sum := &api.BudgetSummary{Limits: limit, Spent: &api.BudgetAmounts{Tokens: 1000}}
	ask := &cmdBudgetAsk{from: asker, cycle: 2, r: &api.BudgetReservation{InputTokens: 2000, OutputTokens: 4096}}
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := processCPU(b)
	defer func() { b.ReportMetric(float64(processCPU(b)-cpu0)/float64(b.N), "cpu-ns/op") }()
	for b.Loop() {
		var grants taskstate.Grants
		nodes, err := st.Descendants(root)
		if err != nil || len(nodes) != 49 {
			b.Fatalf("Descendants = %d, %v", len(nodes), err)
		}
		ans := treeAnswer(root, sum, 1, &budgetRead{ask: ask, nodes: nodes}, &grants, at)
		if ans.ex != nil || ans.err != "" || grants.Len() != 1 {
			b.Fatalf("answer = %+v", ans)
		}
	}
}

// processCPU is the CPU time the process used so far (user and system,
// every thread), in nanoseconds: unlike the wall time per operation, it
// does not count the time spent waiting for a core on a busy machine.
func processCPU(b *testing.B) int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}
