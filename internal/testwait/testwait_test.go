package testwait

import (
	"errors"
	"fmt"
	"runtime"
	"testing"
	"time"
)

// recorder is a testing.TB whose Fatalf records the failure and ends the
// goroutine, as testing's does.
type recorder struct {
	testing.TB
	failed string
}

func (r *recorder) Helper() {}
func (r *recorder) Fatalf(format string, args ...any) {
	r.failed = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

func TestUntilReturnsOnceTheConditionHolds(t *testing.T) {
	n := 0
	Until(t, time.Minute, "three polls", func() error {
		if n++; n < 3 {
			return errors.New("not yet")
		}
		return nil
	})
	if n != 3 {
		t.Fatalf("polled %d times, want 3", n)
	}
}

func TestUntilFailsAfterTheDeadline(t *testing.T) {
	r := &recorder{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		Until(r, 10*time.Millisecond, "never", func() error { return errors.New("no") })
	}()
	<-done
	if want := "timed out after 10ms waiting for never: no"; r.failed != want {
		t.Fatalf("failure %q, want %q", r.failed, want)
	}
}

func TestUntilTrue(t *testing.T) {
	n := 0
	UntilTrue(t, time.Minute, "two polls", func() bool { n++; return n == 2 })
	if n != 2 {
		t.Fatalf("polled %d times, want 2", n)
	}
}
