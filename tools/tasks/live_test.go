package tasks

import (
	"path/filepath"
	"strings"
	"testing"

	"lemo/actors/live"
	"lemo/tools"
)

// tasks.read_block reads a held live result (memory, then spill file) in
// place of the retained record, in ranges cut on rune boundaries; once it
// is released, the record answers again.
func TestReadBlockLive(t *testing.T) {
	f := newFixture(t)
	task := f.alice[0]
	lv, err := live.New(filepath.Join(t.TempDir(), "live"), live.Limits{CallBytes: 15, TaskBytes: 15, TotalBytes: 15})
	if err != nil {
		t.Fatal(err)
	}
	f.reg = tools.NewRegistry()
	for _, tl := range New(f.st, Config{Live: func(task, call string) (LiveText, bool) {
		r, ok := lv.Lookup(task, call)
		if !ok {
			return nil, false
		}
		return r, true
	}}) {
		if err := f.reg.Register(tl); err != nil {
			t.Fatal(err)
		}
	}
	whole := strings.Repeat("é0123456789", 200) // 15 bytes in memory (inside a rune), the rest spilled
	r := lv.Open(task, "call-1-1")
	w := r.Stream("stdout")
	for i := 0; i < len(whole); i += 100 {
		w.Write([]byte(whole[i:min(i+100, len(whole))]))
	}
	r.Hold(0)
	if st := r.Stats(); st.HeapBytes != 15 || st.SpilledBytes != int64(len(whole))-15 {
		t.Fatalf("live result: %+v", st)
	}
	want := "[stdout: 2400 bytes]\n" + whole + "\n"
	block := func(input map[string]any) (blockOutput, error) {
		input["task"] = task
		var out blockOutput
		err := f.run(t, NameReadBlock, "alice", "", input, &out)
		return out, err
	}
	var got strings.Builder
	off := 0
	for i := 0; i < 1000; i++ {
		out, err := block(map[string]any{"call_id": "call-1-1", "part": "result", "offset": off, "length": 7})
		if err != nil {
			t.Fatal(err)
		}
		if !out.Live || out.Seq != 8 || out.TotalBytes != len(want) || out.Offset != off || len(out.Text) > 7 || !utf8Valid(out.Text) {
			t.Fatalf("range at %d: %+v", off, out)
		}
		got.WriteString(out.Text)
		if out.NextOffset == 0 {
			break
		}
		off = out.NextOffset
	}
	if got.String() != want {
		t.Fatalf("ranges joined differ from the live result:\n%.200q\nwant\n%.200q", got.String(), want)
	}
	// By seq too (the handle excerpts name); an offset inside a rune starts
	// at that rune.
	if out, err := block(map[string]any{"seq": 8, "offset": len("[stdout: 2400 bytes]\n") + 1, "length": 3}); err != nil || !out.Live || out.Text != "é0" {
		t.Fatalf("offset inside a rune: %+v %v", out, err)
	}
	if _, err := block(map[string]any{"seq": 8, "offset": len(want) + 1}); err == nil {
		t.Fatal("an offset beyond the live result was accepted")
	}
	r.Release()
	out, err := block(map[string]any{"seq": 8})
	if err != nil || out.Live || out.TotalBytes != len(strings.Repeat("é0123456789", 50)) {
		t.Fatalf("after release: %+v %v, want the retained record", out, err)
	}
}
