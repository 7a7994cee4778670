package actors

import (
	"maps"
	"testing"
)

func TestStoppedNotes(t *testing.T) {
	got := stoppedNotes([]StoppedProcess{
		{TaskID: "t1", CallID: "c1", Pid: 12, Command: "sh"},
		{TaskID: "t1", CallID: "c1", Pid: 13, Command: "sleep"},
		{TaskID: "t1", CallID: "c2", Pid: 14, Command: "node"},
		{TaskID: "t2", CallID: "c1", Pid: 15, Command: "make"},
		{Pid: 16, Command: "orphan"}, // no call: nothing to note
	})
	want := map[string]map[string]string{
		"t1": {
			"c1": "processes still running at the restart were stopped: pid 12 (sh), pid 13 (sleep)",
			"c2": "processes still running at the restart were stopped: pid 14 (node)",
		},
		"t2": {"c1": "processes still running at the restart were stopped: pid 15 (make)"},
	}
	if !maps.EqualFunc(got, want, maps.Equal) {
		t.Fatalf("stoppedNotes = %v, want %v", got, want)
	}
}
