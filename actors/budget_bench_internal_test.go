package actors

import (
	"testing"

	"lemo/actors/taskstate"
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
