package actors

import "testing"

// An incarnation waits for the appends in flight when it loads, and only
// for those of its own Task.
func TestAppendingSettled(t *testing.T) {
	var a appending
	closed := func(c <-chan struct{}) bool {
		select {
		case <-c:
			return true
		default:
			return false
		}
	}
	if !closed(a.settled("t1")) {
		t.Fatal("a Task with no append in flight is not settled")
	}
	end1 := a.begin("t1")
	end2 := a.begin("t1")
	endOther := a.begin("t2")
	s := a.settled("t1")
	if closed(s) {
		t.Fatal("settled with two appends in flight")
	}
	end1()
	end1() // twice: counted once
	if closed(s) {
		t.Fatal("settled with one append still in flight")
	}
	end2()
	if !closed(s) {
		t.Fatal("not settled once both appends landed")
	}
	if closed(a.settled("t2")) {
		t.Fatal("another Task's append settled with these")
	}
	endOther()
	if !closed(a.settled("t2")) || len(a.m) != 0 {
		t.Fatalf("entries left: %v", a.m)
	}
}
