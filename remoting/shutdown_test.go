package remoting

import (
	"testing"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/remote"
)

var _ Stopper = (*remote.Remote)(nil)

// racyRemote panics in a graceful stop as protoactor's does when an
// endpoint reader closed its channel just before.
type racyRemote struct {
	panics bool
	calls  []bool
}

func (r *racyRemote) Shutdown(graceful bool) {
	r.calls = append(r.calls, graceful)
	if graceful && r.panics {
		ch := make(chan bool, 1)
		close(ch)
		ch <- true // send on closed channel
	}
}

func TestShutdown(t *testing.T) {
	for _, tc := range []struct {
		name     string
		panics   bool
		graceful bool
		calls    []bool
	}{
		{"graceful stop completes", false, true, []bool{true}},
		{"graceful stop panics: hard stop", true, false, []bool{true, false}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := &racyRemote{panics: tc.panics}
			if got := Shutdown(r); got != tc.graceful {
				t.Errorf("Shutdown = %v, want %v", got, tc.graceful)
			}
			if len(r.calls) != len(tc.calls) || (len(r.calls) == 2 && r.calls[1]) {
				t.Errorf("Shutdown calls = %v, want %v", r.calls, tc.calls)
			}
		})
	}
}

// A real remote, started and stopped: the graceful stop completes.
func TestShutdownRealRemote(t *testing.T) {
	sys := actor.NewActorSystem()
	defer sys.Shutdown()
	r := remote.NewRemote(sys, remote.Configure("127.0.0.1", 0))
	r.Start()
	if !Shutdown(r) {
		t.Fatal("the graceful stop of an idle remote did not complete")
	}
}
