package failpoint

import (
	"errors"
	"testing"
)

func TestEnableEvalDisable(t *testing.T) {
	if Armed() || Eval("a", nil) != nil {
		t.Fatal("a failpoint is enabled before any Enable")
	}
	boom := errors.New("boom")
	var got []any
	disable := Enable("a", func(arg any) error {
		got = append(got, arg)
		if arg == 2 {
			return boom
		}
		return nil
	})
	if !Armed() {
		t.Fatal("Armed() = false after Enable")
	}
	if err := Eval("a", 1); err != nil {
		t.Fatalf("Eval(a, 1) = %v, want nil", err)
	}
	if err := Eval("a", 2); !errors.Is(err, boom) {
		t.Fatalf("Eval(a, 2) = %v, want boom", err)
	}
	if err := Eval("b", 2); err != nil {
		t.Fatalf("Eval(b) = %v: b is not enabled", err)
	}
	disable()
	disable() // idempotent
	if Armed() || Eval("a", 2) != nil {
		t.Fatal("failpoint still enabled after disable")
	}
	if len(got) != 2 {
		t.Fatalf("fn saw %v, want the two evaluations of a", got)
	}
}

// BenchmarkDisabled is what a step pays in production: no failpoint is
// enabled.
func BenchmarkDisabled(b *testing.B) {
	for b.Loop() {
		if Armed() {
			b.Fatal("armed")
		}
		if err := Eval("persistence.commit", nil); err != nil {
			b.Fatal(err)
		}
	}
}
