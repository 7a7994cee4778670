package persistence

import (
	"bytes"
	"errors"
	"reflect"
	"sort"
	"testing"

	"lemo/api"
)

func TestRefs(t *testing.T) {
	r := EventRef("T1", 258)
	if task, seq, fact, ok := ParseRef(r); !ok || task != "T1" || seq != 258 || fact != "" {
		t.Fatalf("ParseRef(EventRef) = %q %d %q %v", task, seq, fact, ok)
	}
	r = FactRef("T1", "F9")
	if task, seq, fact, ok := ParseRef(r); !ok || task != "T1" || seq != 0 || fact != "F9" {
		t.Fatalf("ParseRef(FactRef) = %q %d %q %v", task, seq, fact, ok)
	}
	for _, bad := range []string{"", "T1", "/e12345678", "T1/x", "T1/e123", "T1/f"} {
		if _, _, _, ok := ParseRef([]byte(bad)); ok {
			t.Errorf("ParseRef(%q) ok", bad)
		}
	}
	// A Task's event refs sort by seq.
	if bytes.Compare(EventRef("T", 2), EventRef("T", 10)) >= 0 {
		t.Fatal("event refs do not sort by seq")
	}
}

func TestMemoryKeysSortAndNest(t *testing.T) {
	keys := [][]byte{
		SegmentKey("o", 10), SegmentKey("o", 2), BlockKey("o", BlockTerms, 2, 1), BlockKey("o", BlockTerms, 10, 0),
		BlockKey("o", BlockTerms, 2, 0), PendingKey("o", EventRef("T", 1)),
	}
	sort.Slice(keys, func(i, j int) bool { return bytes.Compare(keys[i], keys[j]) < 0 })
	want := [][]byte{
		BlockKey("o", BlockTerms, 2, 0), BlockKey("o", BlockTerms, 2, 1), BlockKey("o", BlockTerms, 10, 0),
		SegmentKey("o", 2), SegmentKey("o", 10), PendingKey("o", EventRef("T", 1)),
	}
	if !reflect.DeepEqual(keys, want) {
		t.Fatalf("key order:\n%q\nwant\n%q", keys, want)
	}
	if s := SegmentFromKey(SegmentKey("o", 77)); s != 77 {
		t.Fatalf("SegmentFromKey = %d", s)
	}
	if s, ok := BlockSegment("o", BlockDocs, BlockKey("o", BlockDocs, 77, 3)); !ok || s != 77 {
		t.Fatalf("BlockSegment = %d %v", s, ok)
	}
	// One owner's prefix never selects another owner's keys.
	if bytes.HasPrefix(PendingKey("ab", nil), IndexOwnerPrefix("a")) || bytes.HasPrefix(FactKey("ab", "x"), FactPrefix("a")) {
		t.Fatal("owner prefixes overlap")
	}
	if !bytes.HasPrefix(SupersededKey("o", "F1", "F2"), SupersededPrefix("o", "F1")) || bytes.HasPrefix(SupersededKey("o", "F10", "F2"), SupersededPrefix("o", "F1")) {
		t.Fatal("superseded prefixes")
	}
}

func TestSnapshotReadsOneInstant(t *testing.T) {
	st := openTest(t, t.TempDir())
	put := func(k, v string) {
		t.Helper()
		if err := st.UpdateIndex([]KV{{Key: []byte(k), Value: []byte(v)}}); err != nil {
			t.Fatal(err)
		}
	}
	put("i/o/p/a", "1")
	put("i/o/p/b", "2")
	err := st.View(func(v *Snapshot) error {
		put("i/o/p/c", "3") // committed after the snapshot began
		var got []string
		err := v.Scan([]byte("i/o/p/"), ScanOptions{}, func(k, val []byte) error {
			got = append(got, string(k)+"="+string(val))
			return nil
		})
		if err != nil {
			return err
		}
		if !reflect.DeepEqual(got, []string{"i/o/p/a=1", "i/o/p/b=2"}) {
			t.Fatalf("snapshot scan = %q", got)
		}
		if ok, _ := v.Has([]byte("i/o/p/c")); ok {
			t.Fatal("the snapshot sees a later commit")
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	err = st.View(func(v *Snapshot) error {
		var got []string
		err := v.Scan([]byte("i/o/p/"), ScanOptions{From: []byte("i/o/p/b"), KeysOnly: true}, func(k, val []byte) error {
			if val != nil {
				t.Fatal("KeysOnly scan read a value")
			}
			got = append(got, string(k))
			if len(got) == 1 {
				return nil
			}
			return ErrStopScan
		})
		if err != nil || !reflect.DeepEqual(got, []string{"i/o/p/b", "i/o/p/c"}) {
			t.Fatalf("scan from b, stopped: %q %v", got, err)
		}
		if _, err := v.GetCopy([]byte("i/o/p/zz")); !errors.Is(err, ErrNotFound) {
			t.Fatalf("GetCopy of a missing key: %v", err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestSnapshotChildrenSeeksPastEachName(t *testing.T) {
	st := openTest(t, t.TempDir())
	var kvs []KV
	for _, owner := range []string{"ab", "ab-c", "ab.x", "b@y", "z"} {
		for _, k := range []string{"p/1", "p/2", "h/1"} {
			kvs = append(kvs, KV{Key: append(IndexOwnerPrefix(owner), k...)})
		}
	}
	if err := st.UpdateIndex(kvs); err != nil {
		t.Fatal(err)
	}
	var got []string
	err := st.View(func(v *Snapshot) error {
		return v.Children(IndexPrefix(), func(name string) error {
			got = append(got, name)
			return nil
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"ab-c", "ab.x", "ab", "b@y", "z"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("Children = %q, want %q", got, want)
	}
}

func TestSnapshotEventsAndMeta(t *testing.T) {
	st := openTest(t, t.TempDir())
	mustAppend(t, st, "T", created("T", "o"), msg("T", 2, "two"), msg("T", 3, "three"))
	err := st.View(func(v *Snapshot) error {
		ev, err := v.Event("T", 2)
		if err != nil || ev.GetUserMessage().GetText() != "two" {
			t.Fatalf("Event(T, 2) = %v, %v", ev, err)
		}
		if _, err := v.Event("T", 9); !errors.Is(err, ErrNotFound) {
			t.Fatalf("Event(T, 9): %v", err)
		}
		var seqs []uint64
		if err := v.Events("T", 2, 0, func(ev *api.Event) error { seqs = append(seqs, ev.GetSeq()); return nil }); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(seqs, []uint64{2, 3}) {
			t.Fatalf("Events from 2: %v", seqs)
		}
		var metas []string
		if err := v.EachMeta(func(m *api.TaskMeta) error { metas = append(metas, m.GetTaskId()); return nil }); err != nil {
			t.Fatal(err)
		}
		if m, err := v.Meta("T"); err != nil || m.GetLastSeq() != 3 || !reflect.DeepEqual(metas, []string{"T"}) {
			t.Fatalf("Meta = %v %v, EachMeta = %q", m, err, metas)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestUpdateIndexRejects(t *testing.T) {
	st := openTest(t, t.TempDir())
	for _, k := range []string{"e/T/x", "m/T", "k/o/f/x", "f", "i", "j"} {
		if err := st.UpdateIndex([]KV{{Key: []byte(k)}}); !errors.Is(err, ErrInvalid) {
			t.Errorf("UpdateIndex(%q) = %v, want ErrInvalid", k, err)
		}
	}
	// Far more than one transaction holds: refused whole.
	big := make([]KV, 0, 40000)
	for i := 0; i < 40000; i++ {
		big = append(big, KV{Key: []byte("i/o/p/" + string(rune('a'+i%26)) + string(rune(i))), Value: make([]byte, 64)})
	}
	if err := st.UpdateIndex(big); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("a huge update: %v, want ErrTooLarge", err)
	}
	err := st.View(func(v *Snapshot) error {
		return v.Scan([]byte("i/o/p/"), ScanOptions{KeysOnly: true}, func(k, _ []byte) error {
			t.Fatalf("a refused update wrote %q", k)
			return nil
		})
	})
	if err != nil {
		t.Fatal(err)
	}
}
