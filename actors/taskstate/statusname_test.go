package taskstate

import (
	"testing"

	"lemo/api"
)

func TestStatusName(t *testing.T) {
	for _, c := range []struct {
		st   api.TaskStatus
		want string
	}{
		{api.TaskStatus_TASK_STATUS_RUNNING, "running"},
		{api.TaskStatus_TASK_STATUS_FINISHED, "finished"},
		{api.TaskStatus_TASK_STATUS_PAUSED, "paused"},
		{api.TaskStatus_TASK_STATUS_UNSPECIFIED, "unspecified"},
		{api.TaskStatus(999), "999"}, // not a known status: its number, as String gives it
	} {
		if got := StatusName(c.st); got != c.want {
			t.Errorf("StatusName(%d) = %q, want %q", c.st, got, c.want)
		}
	}
	for v := range api.TaskStatus_name {
		st := api.TaskStatus(v)
		if got, want := StatusName(st), statusName(st); got != want {
			t.Errorf("StatusName(%s) = %q, want %q", st, got, want)
		}
	}
}

func BenchmarkStatusName(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		_ = StatusName(api.TaskStatus_TASK_STATUS_RUNNING)
	}
}
