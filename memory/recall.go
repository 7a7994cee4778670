package memory

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"

	"lemo/api"
	"lemo/excerpt"
	"lemo/persistence"
	"lemo/prompt"
)

// Recall's query and candidates.
const (
	// recallQueryTerms is how many of the query's terms recall uses: its
	// most specific (rarest) ones.
	recallQueryTerms = 16
	// focusBytes bounds each part of the latest focus that joins the query.
	focusBytes = 2 << 10
	// requestBytes bounds the part of the request that joins the query.
	requestBytes = 4 << 10
	// maxItemTokens bounds one recalled item; a longer record is recalled
	// as a labelled excerpt.
	maxItemTokens = 2500
)

// RecallText returns the text recall queries with: the Task's request
// (its first user message) and its latest focus (the latest user message,
// the latest assistant text and the arguments of the latest tool calls).
func RecallText(history []*api.Event) string {
	var request, lastUser, lastAssistant string
	var lastArgs []string
	for _, ev := range history {
		switch b := ev.Body.(type) {
		case *api.Event_UserMessage:
			if request == "" {
				request = b.UserMessage.GetText()
			} else {
				lastUser = b.UserMessage.GetText()
			}
		case *api.Event_AssistantMessage:
			lastAssistant = b.AssistantMessage.GetText()
			lastArgs = lastArgs[:0]
		case *api.Event_ToolCallRecorded:
			lastArgs = append(lastArgs, string(b.ToolCallRecorded.GetArguments()))
		}
	}
	parts := []string{excerpt.Head(request, requestBytes), excerpt.Tail(lastUser, focusBytes), excerpt.Tail(lastAssistant, focusBytes)}
	for _, a := range lastArgs {
		parts = append(parts, excerpt.Head(a, focusBytes/2))
	}
	return excerpt.Head(strings.Join(parts, "\n"), MaxQueryBytes)
}

// RecallQuery is what a Cycle recalls for.
type RecallQuery struct {
	Owner  string
	TaskID string
	// History is the Task's history; recall excludes what is already in it.
	History []*api.Event
}

// Recall implements actors.Memory: the evidence from the owner's other
// Tasks most relevant to the Task's request and latest focus. Only items
// whose relevance reaches Options.MinRelevance and that contain two of the
// query's terms are considered; the same content is recalled once, nothing
// already in the Task's conversation is recalled, superseded facts are not
// recalled, and the items fit Options.RecallTokens as the prompt renders
// them. It reads only: no score or record changes because something was
// recalled, and nothing recalled is indexed again.
func (m *Memory) Recall(ctx context.Context, q RecallQuery) ([]prompt.Evidence, error) {
	text := RecallText(q.History)
	if strings.TrimSpace(text) == "" {
		return nil, nil
	}
	sq := Query{Owner: q.Owner, Text: text, ExcludeTask: q.TaskID}
	if err := m.validQuery(&sq); err != nil {
		return nil, err
	}
	if err := m.waitLoaded(ctx); err != nil {
		return nil, err
	}
	conv := conversationTexts(q.History)
	var out []prompt.Evidence
	err := m.view(func(v *persistence.Snapshot) error {
		res, err := m.search(v, &sq, 4*m.opt.RecallItems, recallQueryTerms)
		if err != nil {
			return err
		}
		hits, err := m.hits(v, q.Owner, res)
		if err != nil {
			return err
		}
		budget := m.opt.RecallTokens - prompt.RecallOverhead
		used := 0
		seen := make(map[uint64]bool)
		for i := range hits {
			h := &hits[i]
			if len(out) >= m.opt.RecallItems || budget-used <= 0 {
				break
			}
			if h.Relevance < m.opt.MinRelevance {
				break // hits are in score order
			}
			// One shared word is not relevance: a record must contain two
			// of the query's terms (the one, for a one-term query).
			if h.Matched < min(2, h.QueryTerms) || h.SupersededBy != "" || seen[h.hash] {
				continue
			}
			if err := ctx.Err(); err != nil {
				return err
			}
			text, err := m.recordText(v, q.Owner, h)
			if errors.Is(err, persistence.ErrNotFound) {
				continue
			}
			if err != nil {
				return err
			}
			if conv.has(text) {
				continue
			}
			e := prompt.Evidence{TaskID: h.TaskID, Seq: h.Seq, Kind: h.Kind.String(), Time: h.Time, Source: h.Source,
				Text: text, Score: h.Score, Untrusted: h.Untrusted}
			t := prompt.EvidenceTokens(&e)
			if t > maxItemTokens {
				e.Text = excerptEvidence(h, text, maxItemTokens-(t-prompt.Estimate(text)))
				t = prompt.EvidenceTokens(&e)
			}
			if used+t > budget {
				continue
			}
			seen[h.hash] = true
			used += t
			out = append(out, e)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("memory: recall: %w", err)
	}
	return out, nil
}

// excerptEvidence shortens a long recalled record, naming its handle.
func excerptEvidence(h *Hit, text string, keep int) string {
	label := fmt.Sprintf("[… excerpt: this record has %d bytes; the middle was left out here", len(text))
	if h.Seq > 0 {
		label += "; the whole record: " + prompt.Handle(h.TaskID, h.Seq)
	}
	label += "]"
	return prompt.Excerpt(text, keep-prompt.Estimate(label)-2, label)
}

// convTexts indexes the indexable records of a Task's conversation by the
// length of their trimmed text, so a candidate is compared only with
// records of its own length (and no text is copied to build it).
type convTexts struct {
	history []*api.Event
	byLen   map[int][]int
}

func conversationTexts(history []*api.Event) convTexts {
	c := convTexts{history: history, byLen: make(map[int][]int)}
	for i, ev := range history {
		n := -1
		switch b := ev.Body.(type) {
		case *api.Event_UserMessage:
			n = len(strings.TrimSpace(b.UserMessage.GetText()))
		case *api.Event_AssistantMessage:
			n = len(strings.TrimSpace(b.AssistantMessage.GetText()))
		case *api.Event_ToolResult:
			n = len(bytes.TrimSpace(b.ToolResult.GetRetainedOutput()))
		case *api.Event_ToolFailed, *api.Event_Failure:
			_, text, _, _, _, ok := recordText(ev, nil)
			if ok {
				n = len(strings.TrimSpace(text))
			}
		}
		if n > 0 {
			c.byLen[n] = append(c.byLen[n], i)
		}
	}
	return c
}

func (c convTexts) has(text string) bool {
	t := strings.TrimSpace(text)
	for _, i := range c.byLen[len(t)] {
		if _, s, _, _, _, ok := recordText(c.history[i], nil); ok && strings.TrimSpace(s) == t {
			return true
		}
	}
	return false
}
