package memory

import (
	"context"
	"fmt"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

func cand(task string, seq uint64, kind Kind, rel float64, at time.Time, text string) *candidate {
	return &candidate{Hit: Hit{TaskID: task, Seq: seq, Kind: kind, Relevance: rel, Time: at, hash: contentHash(text)}, text: text, hop: 1}
}

func order(cs []*candidate) []string {
	var out []string
	for _, c := range cs {
		s := c.TaskID
		if c.supersededBy != "" {
			s += " (" + c.supersededBy + ")"
		}
		out = append(out, s)
	}
	return out
}

func TestRankCandidates(t *testing.T) {
	now := t0.Add(100 * 24 * time.Hour)
	day := func(d int) time.Time { return t0.Add(time.Duration(d) * 24 * time.Hour) }
	cases := []struct {
		name  string
		cands []*candidate
		query string
		want  []string
	}{{
		name: "a request ranks below the answer that carries information",
		cands: []*candidate{
			cand("Q", 2, KindUserMessage, 0.6, day(90), "Which port does the billing api use?"),
			cand("A", 5, KindAssistantMessage, 0.4, day(90), "The billing api listens on port 8443."),
		},
		want: []string{"A", "Q"},
	}, {
		name: "of two equally relevant records the newer ranks first",
		cands: []*candidate{
			cand("OLD", 3, KindAssistantMessage, 0.5, day(10), "Lunch is served from noon in the canteen."),
			cand("NEW", 3, KindAssistantMessage, 0.5, day(95), "The cafeteria opens for breakfast at seven."),
		},
		want: []string{"NEW", "OLD"},
	}, {
		name: "an old answer that fits better stays above a new one that barely does",
		cands: []*candidate{
			cand("OLD", 3, KindAssistantMessage, 0.6, day(10), "Lunch is served from noon in the canteen."),
			cand("NEW", 3, KindAssistantMessage, 0.3, day(95), "The cafeteria opens for breakfast at seven."),
		},
		want: []string{"OLD", "NEW"},
	}, {
		name: "a later value for the same subject supersedes, and the stale one follows it, labelled",
		cands: []*candidate{
			cand("T05", 0, KindFact, 0.7, day(5), "The partner API rate limit is 600 requests per minute."),
			cand("T51", 9, KindAssistantMessage, 0.4, day(51), "The partner API limit is now 1,500 requests per minute with bursts of 120."),
			cand("X", 4, KindAssistantMessage, 0.5, day(60), "Partner onboarding needs a signed contract."),
		},
		want: []string{"X", "T51", "T05 (superseded by T51/9, " + day(51).Format(time.RFC3339) + ")"},
	}, {
		name: "records that share a few entities do not supersede each other",
		cands: []*candidate{
			cand("T29", 8, KindAssistantMessage, 0.5, day(29), "The Rotterdam depot at Waalhaven Zuid has 12 dock doors; Bruno Costa manages it, open 05:00-23:00."),
			cand("T74", 0, KindFact, 0.4, day(74), "Ines Peeters manages the Antwerp depot; Bruno Costa manages Rotterdam."),
		},
		want: []string{"T29", "T74"},
	}, {
		name: "a request or a failure never supersedes",
		cands: []*candidate{
			cand("T05", 0, KindFact, 0.7, day(5), "The partner API rate limit is 600 requests per minute."),
			cand("Q", 2, KindUserMessage, 0.9, day(90), "What is the partner API rate limit per minute?"),
			cand("F", 7, KindFailure, 0.3, day(91), "tool call failed (error): partner API rate limit per minute unknown"),
		},
		want: []string{"T05", "Q", "F"},
	}, {
		name: "a later read of the same document supersedes the earlier, and so does the conclusion drawn from it",
		cands: []*candidate{
			cand("OLD", 9, KindToolResult, 0.5, day(59), `{"path":"monitoring/queue.txt","revision":"sha256:aa","content":"sms-out: 12,408 waiting, oldest 47 minutes\nprovider: HTTP 503 since 09:40"}`),
			cand("OLD", 11, KindAssistantMessage, 0.6, day(59).Add(time.Minute), "The SMS queue has 12,408 waiting messages because the provider answers HTTP 503."),
			cand("NEW", 9, KindToolResult, 0.4, day(87), `{"path":"monitoring/queue.txt","revision":"sha256:bb","content":"sms-out: 0 waiting\nprovider: healthy since 11:05"}`),
			cand("NEW", 11, KindAssistantMessage, 0.3, day(87).Add(time.Minute), "The provider is healthy again and the SMS queue is empty."),
		},
		want: []string{"NEW", "OLD (superseded by NEW/9, " + day(87).Format(time.RFC3339) + ")",
			"NEW", "OLD (superseded by NEW/11, " + day(87).Add(time.Minute).Format(time.RFC3339) + ")"},
	}, {
		name: "reads of different documents, or without a revision, are compared by their terms",
		cands: []*candidate{
			cand("A", 9, KindToolResult, 0.5, day(10), `{"path":"a.txt","revision":"sha256:aa","content":"sms-out: 12,408 waiting"}`),
			cand("B", 9, KindToolResult, 0.4, day(20), `{"path":"b.txt","revision":"sha256:bb","content":"provider healthy"}`),
			cand("C", 9, KindToolResult, 0.3, day(30), `{"path":"a.txt","content":"sms-out: 0 waiting"}`),
		},
		want: []string{"A", "B", "C"},
	}, {
		name: "a query that names the old value keeps the superseded record's rank, labelled",
		cands: []*candidate{
			cand("OLD", 9, KindToolResult, 0.6, day(59), `{"path":"monitoring/queue.txt","revision":"sha256:aa","content":"sms-out: 12,408 waiting, oldest 47 minutes"}`),
			cand("X", 4, KindAssistantMessage, 0.5, day(60), "notification-hub is owned by Hana Kim's team."),
			cand("NEW", 9, KindToolResult, 0.3, day(87), `{"path":"monitoring/queue.txt","revision":"sha256:bb","content":"sms-out: 3 waiting"}`),
		},
		query: "Who owns the service whose SMS queue backed up to 12,408 messages?",
		want:  []string{"OLD (superseded by NEW/9, " + day(87).Format(time.RFC3339) + ")", "X", "NEW"},
	}, {
		name: "a query that names no value only the old record states: the stale record follows its replacement",
		cands: []*candidate{
			cand("OLD", 9, KindToolResult, 0.6, day(59), `{"path":"monitoring/queue.txt","revision":"sha256:aa","content":"sms-out: 12,408 waiting, oldest 47 minutes"}`),
			cand("X", 4, KindAssistantMessage, 0.5, day(60), "notification-hub is owned by Hana Kim's team."),
			cand("NEW", 9, KindToolResult, 0.3, day(87), `{"path":"monitoring/queue.txt","revision":"sha256:bb","content":"sms-out: 3 waiting"}`),
		},
		query: "How big is the SMS queue?",
		want:  []string{"X", "NEW", "OLD (superseded by NEW/9, " + day(87).Format(time.RFC3339) + ")"},
	}}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			query := make(map[string]bool)
			for _, t := range Terms(c.query) {
				query[t] = true
			}
			if got := order(rankCandidates(c.cands, now, query)); !reflect.DeepEqual(got, c.want) {
				t.Fatalf("order = %q\nwant    %q", got, c.want)
			}
		})
	}
}

// The Task's own request is in the index when its first Cycle recalls. Its
// words that no other record holds must not raise the bar of a perfect
// match (they used to, and a paraphrased question recalled nothing), and
// asking the same question again recalls the same evidence.
func TestRecallIgnoresTheQuerysOwnWords(t *testing.T) {
	e := newEnv(t, Options{})
	a := e.task("o", t0)
	e.add("o", a, t0.Add(time.Minute), user("Check the cafeteria hours."),
		assistant("The cafeteria at head office serves lunch from 11:45 to 13:30, with a vegetarian option every day."))
	b := e.task("o", t0.Add(time.Hour))
	e.add("o", b, t0.Add(time.Hour), user("Book the boardroom for Thursday."), assistant("Booked the boardroom for Thursday morning."))
	var counts []int
	for i := 0; i < 3; i++ {
		at := t0.Add(time.Duration(i+2) * time.Hour)
		q := e.task("o", at)
		req := "Around what hour might hungry colleagues grab lunch at the cafeteria?"
		e.add("o", q, at, user(req))
		ev := e.recall("o", q, history(q, user(req)))
		n := 0
		for _, x := range ev {
			if x.TaskID == a && x.Kind == "assistant_message" {
				n++
			}
		}
		if n != 1 {
			t.Fatalf("asked %d times: recalled %q, want task a's answer", i+1, describe(ev))
		}
		counts = append(counts, len(ev))
	}
	if counts[1] != counts[2] {
		t.Fatalf("the same question recalled %v items", counts)
	}
	_ = context.Background()
}

func TestFoldRequests(t *testing.T) {
	at := t0
	q := func(task string, seq uint64) *candidate {
		return cand(task, seq, KindUserMessage, 1, at, task+" question "+string(rune('a'+seq)))
	}
	a := func(task string, seq uint64) *candidate {
		return cand(task, seq, KindAssistantMessage, 1, at, task+" answer "+string(rune('a'+seq)))
	}
	f := func(task string) *candidate {
		c := cand(task, 0, KindFact, 1, at, task+" fact")
		c.FactID = task + "-F1"
		return c
	}
	type item struct{ ref, question string }
	show := func(cs []*candidate) []item {
		var out []item
		for _, c := range cs {
			out = append(out, item{fmt.Sprintf("%s/%d %s", c.TaskID, c.Seq, c.Kind), c.question})
		}
		return out
	}
	tests := []struct {
		name string
		in   func() []*candidate
		want []item
	}{
		{"a request with its answer: the answer shows it, in the answer's place",
			func() []*candidate { return []*candidate{q("T1", 2), f("T2"), a("T1", 5)} },
			[]item{{"T2/0 fact", ""}, {"T1/5 assistant_message", "T1 question c"}}},
		{"a request without its answer stays",
			func() []*candidate { return []*candidate{q("T1", 2), a("T2", 5)} },
			[]item{{"T1/2 user_message", ""}, {"T2/5 assistant_message", ""}}},
		{"an answer before the request is not its answer",
			func() []*candidate { return []*candidate{q("T1", 6), a("T1", 5)} },
			[]item{{"T1/6 user_message", ""}, {"T1/5 assistant_message", ""}}},
		{"the first answer after the request",
			func() []*candidate { return []*candidate{a("T1", 9), q("T1", 2), a("T1", 5)} },
			[]item{{"T1/9 assistant_message", ""}, {"T1/5 assistant_message", "T1 question c"}}},
		{"a follow-up request takes the answer after it; an answer shows one question",
			func() []*candidate { return []*candidate{q("T1", 2), q("T1", 6), a("T1", 9)} },
			[]item{{"T1/2 user_message", ""}, {"T1/9 assistant_message", "T1 question g"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := show(foldRequests(tt.in())); !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("foldRequests = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestQuestionLine(t *testing.T) {
	long := strings.Repeat("é", maxQuestionBytes) // 2 bytes a rune
	tests := []struct{ in, want string }{
		{"How many trucks?", "How many trucks?"},
		{"How many\ntrucks  are\tthere?", "How many trucks are there?"},
		{long, strings.Repeat("é", maxQuestionBytes/2) + " […]"},
		{"a" + long, "a" + strings.Repeat("é", maxQuestionBytes/2-1) + " […]"},
	}
	for _, tt := range tests {
		got := questionLine(tt.in)
		if got != tt.want || !utf8.ValidString(got) {
			t.Errorf("questionLine(%.20q…) = %.30q… (%d bytes), want %.30q…", tt.in, got, len(got), tt.want)
		}
	}
}

func TestEpisodeRank(t *testing.T) {
	at := t0
	src := func(kind Kind, hop int, rel, rank float64) *candidate {
		c := cand("S", 5, kind, rel, at, "source text")
		c.hop, c.rank = hop, rank
		return c
	}
	tests := []struct {
		name string
		src  *candidate
		want float64
	}{
		{"a request's answer: just below the request's rank", src(KindUserMessage, 1, 0.8, 0.4), 0.4 * episodeWeight},
		{"a tool result's conclusion: below it by conclusionWeight too", src(KindToolResult, 1, 0.8, 0.8), 0.8 * episodeWeight * conclusionWeight},
		{"unranked: from its relevance and weight", src(KindToolResult, 1, 0.5, 0), 0.5 * episodeWeight * conclusionWeight},
		{"a later hop's request: its rank without the request's weight", src(KindUserMessage, 2, 0.8, 0.2), 0.2 / requestWeight * episodeWeight},
		{"a later hop's tool result", src(KindToolResult, 2, 0.8, 0.3), 0.3 * episodeWeight * conclusionWeight},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := episodeRank(tt.src); math.Abs(got-tt.want) > 1e-12 {
				t.Fatalf("episodeRank = %v, want %v", got, tt.want)
			}
		})
	}
}
