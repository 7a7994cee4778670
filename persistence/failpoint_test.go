package persistence

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"lemo/api"
	"lemo/internal/failpoint"
)

var errInjected = errors.New("injected commit failure")

// holdWriter makes the writer's next commit that holds an append of task at
// seq wait until release is called: the appends submitted meanwhile queue
// up and form the next batch together. match (nil: none) picks the
// commits to fail.
func holdWriter(t *testing.T, task string, seq uint64, match func([]Append) bool) (held <-chan struct{}, release func()) {
	t.Helper()
	h, r := make(chan struct{}), make(chan struct{})
	var once sync.Once
	disable := failpoint.Enable(FailCommit, func(arg any) error {
		apps := arg.([]Append)
		for _, a := range apps {
			if a.TaskID == task && len(a.Events) > 0 && a.Events[0].GetSeq() == seq {
				close(h)
				<-r
				return nil
			}
		}
		if match != nil && match(apps) {
			return errInjected
		}
		return nil
	})
	t.Cleanup(disable)
	return h, func() { once.Do(func() { close(r) }) }
}

// queued waits until n appends wait in the writer's queue.
func queued(t *testing.T, st *testStore, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for len(st.w.in) < n {
		if time.Now().After(deadline) {
			t.Fatalf("%d appends queued, want %d", len(st.w.in), n)
		}
		time.Sleep(time.Millisecond)
	}
}

// appendAsync submits an append and returns where its outcome arrives.
func appendAsync(st *testStore, task string, evs ...*api.Event) <-chan error {
	ch := make(chan error, 1)
	go func() {
		_, err := st.Append(context.Background(), Append{TaskID: task, Events: evs})
		ch <- err
	}()
	return ch
}

// texts returns a Task's stored log as "seq:text" (text cut to 12 bytes),
// checking it is contiguous and matches the metadata.
func texts(t *testing.T, st *testStore, task string) []string {
	t.Helper()
	var out []string
	err := st.Events(task, 1, 0, func(ev *api.Event) error {
		if want := uint64(len(out) + 1); ev.GetSeq() != want {
			return fmt.Errorf("seq %d where %d was expected", ev.GetSeq(), want)
		}
		text := ev.GetUserMessage().GetText()
		if ev.GetTaskCreated() != nil {
			text = "created"
		}
		out = append(out, fmt.Sprintf("%d:%.12s", ev.GetSeq(), text))
		return nil
	})
	if err != nil {
		t.Fatalf("task %s: %v", task, err)
	}
	m, err := st.Meta(task)
	if err != nil || m.GetLastSeq() != uint64(len(out)) {
		t.Fatalf("task %s: meta %v, %v; %d events stored", task, m, err, len(out))
	}
	return out
}

// A batch split for size, whose first transaction fails while the second
// would succeed: the second part must not land on top of the failed first
// (it was planned after it), every waiter is told, and the Task's next
// append succeeds without a restart.
func TestSplitBatchFirstPartFails(t *testing.T) {
	dir := t.TempDir()
	st := openTest(t, dir)
	task := NewTaskID(t0)
	mustAppend(t, st, task, created(task, "o"))

	// Two events of 700 KiB do not fit in one transaction of a store with
	// 8 MiB memtables: the batch [seq 3, seq 4] is split in two.
	big := func(seq uint64, tag string) *api.Event {
		return msg(task, seq, tag+strings.Repeat("x", 700<<10))
	}
	held, release := holdWriter(t, task, 2, func(apps []Append) bool {
		return len(apps) == 1 && strings.HasPrefix(apps[0].Events[0].GetUserMessage().GetText(), "failed-3")
	})
	defer release()
	first := appendAsync(st, task, msg(task, 2, "hold"))
	<-held
	part1 := appendAsync(st, task, big(3, "failed-3 "))
	queued(t, st, 1)
	part2 := appendAsync(st, task, big(4, "failed-4 "))
	queued(t, st, 2)
	splits := st.w.splits.Load()
	release()

	if err := <-first; err != nil {
		t.Fatalf("append seq 2: %v", err)
	}
	if err := <-part1; !errors.Is(err, errInjected) {
		t.Fatalf("append seq 3 (failed commit) = %v, want the injected failure", err)
	}
	if err := <-part2; !errors.Is(err, ErrSeqConflict) {
		t.Fatalf("append seq 4, planned after the failed seq 3 = %v, want ErrSeqConflict (nothing written)", err)
	}
	if st.w.splits.Load() == splits {
		t.Fatal("the batch was not split: the test did not exercise the split")
	}
	if got := texts(t, st, task); strings.Join(got, " ") != "1:created 2:hold" {
		t.Fatalf("log after the failure = %v, want seqs 1-2 only", got)
	}

	// The Task continues where its log ends, without a restart.
	mustAppend(t, st, task, msg(task, 3, "retry-3"))
	mustAppend(t, st, task, msg(task, 4, "retry-4"))
	want := "1:created 2:hold 3:retry-3 4:retry-4"
	if got := texts(t, st, task); strings.Join(got, " ") != want {
		t.Fatalf("log = %v, want %s", got, want)
	}
	closeTest(t, st)
	st = openTest(t, dir)
	if got := texts(t, st, task); strings.Join(got, " ") != want {
		t.Fatalf("log after reopening = %v, want %s", got, want)
	}
}

// Every waiter of a failed commit gets its error, nothing of it lands, and
// each Task appends the same seqs again afterwards, stored once.
func TestFailedCommitTellsEveryWaiter(t *testing.T) {
	st := openTest(t, t.TempDir())
	const n = 8
	tasks := make([]string, n)
	for i := range tasks {
		tasks[i] = NewTaskID(t0.Add(time.Duration(i) * time.Millisecond))
		mustAppend(t, st, tasks[i], created(tasks[i], "o"))
	}
	hold := tasks[0]
	held, release := holdWriter(t, hold, 2, func(apps []Append) bool { return len(apps) > 1 })
	defer release()
	first := appendAsync(st, hold, msg(hold, 2, "hold"))
	<-held
	outcomes := make([]<-chan error, 0, n-1)
	for _, task := range tasks[1:] {
		outcomes = append(outcomes, appendAsync(st, task, msg(task, 2, "lost"), msg(task, 3, "lost")))
	}
	queued(t, st, n-1)
	release()
	if err := <-first; err != nil {
		t.Fatalf("append to %s: %v", hold, err)
	}
	for i, ch := range outcomes {
		if err := <-ch; !errors.Is(err, errInjected) {
			t.Fatalf("waiter %d of the failed commit: %v, want the injected failure", i, err)
		}
	}
	for _, task := range tasks[1:] {
		if got := texts(t, st, task); len(got) != 1 {
			t.Fatalf("task %s after the failed commit: %v, want only seq 1", task, got)
		}
		mustAppend(t, st, task, msg(task, 2, "again"), msg(task, 3, "again"))
		if got := strings.Join(texts(t, st, task), " "); got != "1:created 2:again 3:again" {
			t.Fatalf("task %s: %s", task, got)
		}
	}
}
