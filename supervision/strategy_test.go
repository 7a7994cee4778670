package supervision

import (
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
)

// crashOnce panics on every string it receives.
type crashOnce struct{}

func (crashOnce) Receive(ctx actor.Context) {
	if s, ok := ctx.Message().(string); ok {
		panic(s)
	}
}

// parent spawns one child and forwards strings to it; it supervises the
// child with its Strategy.
type parent struct {
	s     *Strategy
	child chan *actor.PID
}

func (p *parent) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		p.child <- ctx.Spawn(actor.PropsFromProducer(func() actor.Actor { return crashOnce{} }))
	case string:
		ctx.Send(ctx.Children()[0], m)
	}
}

func (p *parent) HandleFailure(sys *actor.ActorSystem, sup actor.Supervisor, child *actor.PID, rs *actor.RestartStatistics, reason interface{}, message interface{}) {
	p.s.HandleFailure(sys, sup, child, rs, reason, message)
}

// The strategy counts a child's crashes, asks Level for the child's level
// and carries the decision out: a child Task restarts within the budget,
// then is stopped with its parent told.
func TestStrategyDecidesForAChildTask(t *testing.T) {
	type seen struct {
		recent int
		d      Decision
	}
	var mu sync.Mutex
	var got []seen
	s := &Strategy{
		Budget: Budget{Max: 2, Within: time.Minute},
		Level:  func(*actor.PID) Level { return LevelChildTask },
		OnFailure: func(child *actor.PID, reason any, message any, recent int, d Decision) {
			mu.Lock()
			defer mu.Unlock()
			got = append(got, seen{recent, d})
		},
	}
	sys := actor.NewActorSystem()
	p := &parent{s: s, child: make(chan *actor.PID, 1)}
	pid := sys.Root.Spawn(actor.PropsFromProducer(func() actor.Actor { return p }))
	defer sys.Root.Stop(pid)
	child := <-p.child
	stopped := make(chan struct{})
	watcher := sys.Root.Spawn(actor.PropsFromFunc(func(ctx actor.Context) {
		switch ctx.Message().(type) {
		case *actor.Started:
			ctx.Watch(child)
		case *actor.Terminated:
			close(stopped)
		}
	}))
	defer sys.Root.Stop(watcher)
	for i := 0; i < 3; i++ {
		sys.Root.Send(pid, "crash")
	}
	select {
	case <-stopped:
	case <-time.After(10 * time.Second):
		t.Fatal("the child was not stopped after its budget")
	}
	mu.Lock()
	defer mu.Unlock()
	want := []seen{
		{1, Decision{Directive: Restart, Record: RecordTaskRestart, Kind: "panic"}},
		{2, Decision{Directive: Restart, Record: RecordTaskRestart, Kind: "panic"}},
		{3, Decision{Directive: Stop, Record: RecordTaskFailed, Kind: "panic", TellParent: true}},
	}
	if len(got) != len(want) {
		t.Fatalf("decisions %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("decision %d = %+v, want %+v", i+1, got[i], want[i])
		}
	}
}
