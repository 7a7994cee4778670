package actors_test

import (
	"context"
	"errors"
	"sync"
	"testing"

	"lemo/actors"
	"lemo/api"
	"lemo/providers"
	"lemo/providers/fake"
)

// Limits changed while Tasks run (a configuration reload) apply to the
// next request and to each Task's next step, without races.
func TestSetLimitsWhileRunning(t *testing.T) {
	loop := func(n int, _ *providers.Request) fake.Turn {
		return fake.Turn{ToolCalls: []providers.ToolCall{call("p", "test_echo", "again")}}
	}
	h := newHarnessWith(t, loop, func(o *actors.Options) { o.MaxCycles = 100000 })
	if got := h.d.Limits(); got.MaxCycles != 100000 || got.MaxParallelTools != 4 || got.MaxRequestBytes != 256<<10 {
		t.Fatalf("Limits() = %+v, want the options with their defaults", got)
	}
	// A Task loops under the start limits while the limits change
	// concurrently (the race detector checks the reads).
	busy := h.create("loop while the limits change")
	var wg sync.WaitGroup
	stop := make(chan struct{})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			h.d.SetLimits(actors.Limits{MaxCycles: 100000 + i%2, MaxParallelTools: 1 + i%3})
		}
	}()
	h.waitFor(busy, "ten cycles", func(evs []*api.Event) bool { return count(evs, "cycle_started") >= 10 })
	close(stop)
	wg.Wait()

	h.d.SetLimits(actors.Limits{MaxCycles: 3, MaxRequestBytes: 16})
	if _, err := h.d.CreateTask(context.Background(), actors.Operator, actors.CreateTask{Request: "longer than sixteen bytes", Model: "fake/m"}); !errors.Is(err, actors.ErrTooLarge) {
		t.Fatalf("CreateTask over the new MaxRequestBytes: %v, want ErrTooLarge", err)
	}
	id := h.create("short")
	evs := h.waitStatus(id, api.TaskStatus_TASK_STATUS_PAUSED)
	if n := count(evs, "cycle_started"); n != 3 {
		t.Fatalf("a Task created under MaxCycles 3 ran %d cycles before it paused", n)
	}
	// The Task that was looping pauses at its next step too.
	h.waitStatus(busy, api.TaskStatus_TASK_STATUS_PAUSED)

	h.d.SetLimits(actors.Limits{})
	if got := h.d.Limits(); got != (actors.Limits{MaxCycles: 50, MaxParallelTools: 4, MaxRequestBytes: 256 << 10}) {
		t.Fatalf("Limits() after SetLimits(zero) = %+v, want the defaults", got)
	}
}

func count(evs []*api.Event, kind string) int {
	n := 0
	for _, e := range evs {
		if api.Kind(e) == kind {
			n++
		}
	}
	return n
}
