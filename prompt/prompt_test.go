package prompt

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"lemo/api"
	"lemo/providers"
)

func TestEstimate(t *testing.T) {
	cases := []struct {
		text string
		want int
	}{
		{"", 0},
		{"a", 1},
		{"abcd", 1},
		{"abcde", 2},
		{"héllo", 1 + 1},                   // 4 ASCII bytes -> 1, plus 1 non-ASCII rune
		{"日本語", 3},                         // one token per non-ASCII rune
		{"ab日本", 1 + 2},                    // 2 ASCII -> 1, 2 runes
		{string([]byte{0xff, 'a'}), 1 + 1}, // an invalid byte counts as a rune
	}
	for _, c := range cases {
		if got := Estimate(c.text); got != c.want {
			t.Errorf("Estimate(%q) = %d, want %d", c.text, got, c.want)
		}
	}
}

func TestCeiling(t *testing.T) {
	cases := []struct {
		window int
		after  bool
		want   int
	}{
		{8192, false, 2867},
		{8192, true, 5734},
		{0, false, 22937},
		{0, true, 45875},
		{131072, true, 91750},
	}
	for _, c := range cases {
		if got := Ceiling(c.window, c.after); got != c.want {
			t.Errorf("Ceiling(%d, %v) = %d, want %d", c.window, c.after, got, c.want)
		}
	}
}

func history(bodies ...proto.Message) []*api.Event {
	out := make([]*api.Event, len(bodies))
	for i, b := range bodies {
		out[i] = api.NewEvent("T", uint64(i+1), nil, b)
	}
	return out
}

func TestConversationKeepsCallsWithResults(t *testing.T) {
	h := history(
		&api.TaskCreated{},
		&api.UserMessage{Text: "first"},
		&api.CycleStarted{Cycle: 1},
		&api.UserMessage{Text: "during the cycle"},
		&api.AssistantMessage{Cycle: 1, Text: "calling", ToolCallIds: []string{"c1", "c2", "c3", "c4"}},
		&api.ToolCallRecorded{CallId: "c1", Tool: "files.read", Arguments: []byte(`{"a":1}`)},
		&api.ToolCallRecorded{CallId: "c2", Tool: "x", Arguments: []byte(`{}`)},
		&api.ToolCallRecorded{CallId: "c3", Tool: "x", Arguments: []byte(`{}`)},
		&api.ToolCallRecorded{CallId: "c4", Tool: "x", Arguments: []byte(`{}`)},
		&api.CycleFinished{Cycle: 1, Outcome: api.CycleOutcome_CYCLE_OUTCOME_COMPLETED},
		&api.UserMessage{Text: "while tools run"},
		&api.ToolResult{CallId: "c1", Retained: true, RetainedOutput: []byte(`"retained"`), OutputBytes: 100},
		&api.ToolResult{CallId: "c2"},
		&api.ToolFailed{CallId: "c3", Kind: api.ToolFailureKind_TOOL_FAILURE_KIND_OUTCOME_UNKNOWN, Message: "died"},
		&api.ToolResult{CallId: "c4", Retained: true, RetainedOutput: []byte(`"whole"`), OutputBytes: 7, Untrusted: true},
	)
	live := map[string]json.RawMessage{"c2": json.RawMessage(`"live output"`)}
	msgs, hasResp := Conversation(h, live, nil)
	if !hasResp {
		t.Fatal("hasResponse = false")
	}
	var roles []string
	for _, m := range msgs {
		roles = append(roles, string(m.Role)+":"+m.Content)
	}
	got := strings.Join(roles, "\n")
	want := strings.Join([]string{
		"user:first",
		"assistant:calling",
		`tool:[only the retained part of this result is available (10 of 100 bytes); the live result was released]` + "\n" + `"retained"`,
		`tool:"live output"`,
		"tool:[outcome unknown: died]",
		"tool:" + MarkUntrusted + "\n" + `"whole"`,
		"user:during the cycle",
		"user:while tools run",
	}, "\n")
	if got != want {
		t.Fatalf("conversation:\n%s\nwant:\n%s", got, want)
	}
	if msgs[1].ToolCalls[0].Name != "files_read" || msgs[1].ToolCalls[0].ID != "c1" {
		t.Fatalf("tool call = %+v", msgs[1].ToolCalls[0])
	}
	// Without the live result, c2 reads as unavailable.
	msgs, _ = Conversation(h, nil, nil)
	if msgs[3].Content != MarkUnavailable {
		t.Fatalf("released live result reads %q", msgs[3].Content)
	}
}

func TestBuildOverflow(t *testing.T) {
	h := history(&api.TaskCreated{}, &api.UserMessage{Text: strings.Repeat("word ", 4000)})
	_, sum, err := Build(Input{History: h, Window: 8192})
	var oe *OverflowError
	if !errors.As(err, &oe) {
		t.Fatalf("Build err = %v, want *OverflowError", err)
	}
	if oe.Available != 2867 || oe.Needed <= oe.Available || sum.GetCeilingTokens() != 2867 {
		t.Fatalf("overflow = %+v, summary %v", oe, sum)
	}
	req, sum, err := Build(Input{History: h, Window: 0, Tools: []providers.ToolSpec{{Name: "t", Parameters: json.RawMessage(`{"type":"object"}`)}}})
	if err != nil {
		t.Fatalf("with the fallback window: %v", err)
	}
	if sum.GetWindowKnown() || sum.GetCeilingTokens() != 22937 || len(req.Messages) != 1 {
		t.Fatalf("summary %v", sum)
	}
}
