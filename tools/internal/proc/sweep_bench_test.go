package proc

import "testing"

// BenchmarkSweepNothing is the sweep at the end of every shell run that
// left nothing behind: a walk of /proc. Reading the environment of only
// the processes started since the run began (since = now) is what keeps it
// cheap; since = 0 reads every process's environment.
//
//	go test -run '^$' -bench SweepNothing ./tools/internal/proc/
func BenchmarkSweepNothing(b *testing.B) {
	now, err := Ticks()
	if err != nil {
		b.Fatal(err)
	}
	for _, c := range []struct {
		name  string
		since uint64
	}{{"since-run-start", now}, {"every-process", 0}} {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				if n := Sweep(1<<30, "LEMO_BENCH_NO_SUCH_TAG=x", c.since, 0); n != 0 {
					b.Fatalf("Sweep found %d processes", n)
				}
			}
		})
	}
}
