package actors_test

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"testing"

	"lemo/api"
	"lemo/memory"
	"lemo/persistence"
	"lemo/prompt"
	"lemo/providers/fake"
)

// heldRecall is a memory whose Recall holds every caller until released,
// counting how many are in it at once.
type heldRecall struct {
	mu      sync.Mutex
	in, max int
	release chan struct{}
}

func (m *heldRecall) Postings(string, []*api.Event) []persistence.KV { return nil }
func (m *heldRecall) RecordFact(context.Context, string, string, string, memory.FactInput) (string, error) {
	return "", nil
}

func (m *heldRecall) Recall(ctx context.Context, _ memory.RecallQuery) ([]prompt.Evidence, error) {
	m.mu.Lock()
	m.in++
	m.max = max(m.max, m.in)
	m.mu.Unlock()
	defer func() {
		m.mu.Lock()
		m.in--
		m.mu.Unlock()
	}()
	select {
	case <-m.release:
		return nil, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (m *heldRecall) counts() (in, max int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.in, m.max
}

// Cycles assemble their input (recall included) at most as many at once as
// the process has CPUs; the others wait their turn, and every Task still
// gets its answer.
func TestCyclesAssembleAtMostCPUsAtOnce(t *testing.T) {
	cpus := runtime.GOMAXPROCS(0)
	mem := &heldRecall{release: make(chan struct{})}
	h := newHarnessMemory(t, fake.Echo(), nil, mem, nil)
	tasks := cpus + 3
	ids := make([]string, tasks)
	for i := range ids {
		ids[i] = h.create(fmt.Sprint("task ", i))
	}
	for released := 0; released < tasks; released++ {
		want := min(cpus, tasks-released)
		eventually(t, "cycles assembling", func() error {
			if in, _ := mem.counts(); in != want {
				return fmt.Errorf("%d cycles in recall, want %d", in, want)
			}
			return nil
		})
		mem.release <- struct{}{}
	}
	for _, id := range ids {
		h.waitStatus(id, api.TaskStatus_TASK_STATUS_FINISHED)
	}
	if _, most := mem.counts(); most != cpus {
		t.Fatalf("at most %d cycles assembled their input at once, want %d (GOMAXPROCS)", most, cpus)
	}
}
