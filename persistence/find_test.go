package persistence

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"
)

func TestIDMatches(t *testing.T) {
	const id = "01KBQ3N1S1XG4YV8Q7M2ZC0PAB"
	for _, tc := range []struct {
		part string
		want bool
	}{
		{id, true},
		{"01KBQ", true},
		{"01kbq", true},
		{"0PAB", true},
		{"c0pab", true},
		{"XG4YV", false}, // the middle names nothing
		{"", false},
		{id + "X", false},
		{"PAB0", false},
	} {
		if got := IDMatches(id, tc.part); got != tc.want {
			t.Errorf("IDMatches(%q) = %v, want %v", tc.part, got, tc.want)
		}
	}
}

// FindTasks finds a Task by the beginning or end of its id among its
// owner's Tasks only, says when there are more matches than asked, and
// every owner's for "" (the operator).
func TestFindTasks(t *testing.T) {
	st := openTest(t, t.TempDir())
	defer closeTest(t, st)
	ids := map[string]string{
		"01AAAA0000000000000000AAAA": "alice",
		"01AAAB0000000000000000BBBB": "alice",
		"01CCCC0000000000000000AAAA": "bob",
	}
	for id, owner := range ids {
		mustAppend(t, st, id, created(id, owner))
	}
	for _, tc := range []struct {
		owner, part string
		limit       int
		want        []string
		more        bool
	}{
		{"alice", "01AAAA", 5, []string{"01AAAA0000000000000000AAAA"}, false},
		{"alice", "bbbb", 5, []string{"01AAAB0000000000000000BBBB"}, false},
		{"alice", "01AAA", 5, []string{"01AAAA0000000000000000AAAA", "01AAAB0000000000000000BBBB"}, false},
		{"alice", "01AAA", 1, []string{"01AAAA0000000000000000AAAA"}, true},
		{"alice", "01CCCC", 5, nil, false}, // bob's: never another owner's
		{"bob", "AAAA", 5, []string{"01CCCC0000000000000000AAAA"}, false},
		{"", "AAAA", 5, []string{"01AAAA0000000000000000AAAA", "01CCCC0000000000000000AAAA"}, false},
	} {
		t.Run(tc.owner+"/"+tc.part, func(t *testing.T) {
			got, more, err := st.FindTasks(tc.owner, tc.part, tc.limit)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, tc.want) || more != tc.more {
				t.Fatalf("FindTasks(%q, %q, %d) = %v, %v; want %v, %v", tc.owner, tc.part, tc.limit, got, more, tc.want, tc.more)
			}
		})
	}
	if _, _, err := st.FindTasks("alice", "a/b", 5); !errors.Is(err, ErrInvalid) {
		t.Fatalf("FindTasks with a '/' = %v, want ErrInvalid", err)
	}
}

// BenchmarkFindTasks measures a lookup by suffix (the worst case: a scan
// of the owner's index) among 100,000 Tasks of one owner.
func BenchmarkFindTasks(b *testing.B) {
	st := openTest(b, b.TempDir())
	defer closeTest(b, st)
	const n = 100_000
	wb := st.db.NewWriteBatch()
	now := time.Now()
	var last string
	for i := 0; i < n; i++ {
		last = NewTaskID(now.Add(time.Duration(i) * time.Millisecond))
		if err := wb.Set(ownerKey("alice", last), nil); err != nil {
			b.Fatal(err)
		}
	}
	if err := wb.Flush(); err != nil {
		b.Fatal(err)
	}
	part := last[len(last)-8:]
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		got, _, err := st.FindTasks("alice", part, 10)
		if err != nil || len(got) == 0 {
			b.Fatal(fmt.Sprint(got, err))
		}
	}
}
