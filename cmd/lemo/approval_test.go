package main

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestApprovalDetail(t *testing.T) {
	long := strings.Repeat("line\n", 30)
	for _, tc := range []struct {
		name, tool, args string
		limit            int
		want             []string
		more             bool
	}{
		{"write shows the content", "files.write", `{"path":"notes/a.txt","content":"hello\nworld\n"}`, 20,
			[]string{"  write /w/notes/a.txt (12 bytes):", "  │ hello", "  │ world"}, false},
		{"edit shows old and new", "files.edit", `{"path":"/abs/b.go","old_text":"x := 1","new_text":"x := 2\ny := 3"}`, 20,
			[]string{"  edit /abs/b.go:", "  - x := 1", "  + x := 2", "  + y := 3"}, false},
		{"shell shows the command and folder", "shell.run", `{"command":"rm -rf build"}`, 20,
			[]string{"  in /w", "  $ rm -rf build"}, false},
		{"other tools show their arguments", "system", `{"a":1}`, 20,
			[]string{"  system:", "  {", "    \"a\": 1", "  }"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, more := approvalDetail(tc.tool, json.RawMessage(tc.args), "/w", tc.limit)
			if strings.Join(got, "\n") != strings.Join(tc.want, "\n") || more != tc.more {
				t.Fatalf("approvalDetail =\n%s\n(more %v), want\n%s\n(more %v)", strings.Join(got, "\n"), more, strings.Join(tc.want, "\n"), tc.more)
			}
		})
	}
	args, _ := json.Marshal(map[string]string{"path": "big.txt", "content": long})
	got, more := approvalDetail("files.write", args, "/w", 20)
	if !more || len(got) != 22 || !strings.Contains(got[21], "10 more line(s): m shows them") {
		t.Fatalf("bounded write: more %v, %d lines:\n%s", more, len(got), strings.Join(got, "\n"))
	}
	if all, more := approvalDetail("files.write", args, "/w", 0); more || len(all) != 31 {
		t.Fatalf("unbounded write: more %v, %d lines", more, len(all))
	}
}

func TestParseAnswer(t *testing.T) {
	for _, tc := range []struct {
		line string
		want answer
	}{
		{"y", answer{approve: true}},
		{" YES ", answer{approve: true}},
		{"a", answer{approve: true, always: true}},
		{" Always ", answer{approve: true, always: true}},
		{"s", answer{skip: true}},
		{"m", answer{more: true}},
		{"", answer{reason: "denied at the terminal"}},
		{"n", answer{reason: "denied at the terminal"}},
		{"n use git mv instead", answer{reason: "use git mv instead"}},
		{"whatever", answer{reason: "denied at the terminal"}},
	} {
		if got := parseAnswer(tc.line); got != tc.want {
			t.Errorf("parseAnswer(%q) = %+v, want %+v", tc.line, got, tc.want)
		}
	}
}
