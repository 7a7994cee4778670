package persistence

import (
	"fmt"
	"testing"

	"lemo/api"
)

func TestSubmittedThrough(t *testing.T) {
	st := openTest(t, t.TempDir())
	task := NewTaskID(t0)
	if _, known := st.SubmittedThrough(task); known {
		t.Fatal("SubmittedThrough of a Task never appended to: known")
	}
	mustAppend(t, st, task, created(task, "o"))
	mustAppend(t, st, task, msg(task, 2, "a"), msg(task, 3, "b"))
	if seq, known := st.SubmittedThrough(task); !known || seq != 3 {
		t.Fatalf("SubmittedThrough = %d, %v; want 3, true", seq, known)
	}
	// A refused append (its seq does not continue the log) was never
	// handed to a commit.
	if _, err := st.Append(t.Context(), Append{TaskID: task, Events: []*api.Event{msg(task, 9, "x")}}); err == nil {
		t.Fatal("append at seq 9 after 3: accepted")
	}
	if seq, _ := st.SubmittedThrough(task); seq != 3 {
		t.Fatalf("SubmittedThrough after a refused append = %d, want 3", seq)
	}
}

func TestSubmittedSeqsBounded(t *testing.T) {
	s := newSubmittedSeqs(4)
	for i := range 4 {
		s.mark(fmt.Sprint("T", i), uint64(i+1))
	}
	s.mark("T1", 1) // never lowers
	if seq, ok := s.through("T1"); !ok || seq != 2 {
		t.Fatalf("through(T1) = %d, %v; want 2, true", seq, ok)
	}
	s.mark("T9", 7) // full: cleared, then T9
	if _, ok := s.through("T0"); ok {
		t.Fatal("through(T0) known after the bound cleared the set")
	}
	if seq, ok := s.through("T9"); !ok || seq != 7 {
		t.Fatalf("through(T9) = %d, %v; want 7, true", seq, ok)
	}
}
