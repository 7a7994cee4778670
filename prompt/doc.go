// Package prompt assembles a Cycle's input: the instructions, the tool
// definitions, the Task's conversation rebuilt from its durable history plus
// its live tool results, and recalled evidence from other Tasks, within the
// model's token budget.
//
// Rules (the design's "Cycle input"):
//   - Token counts are estimates from UTF-8 (see Estimate): ceil(ASCII
//     bytes / 4) plus one per non-ASCII rune, plus MessageOverhead per
//     message and schema bytes / 3 plus ToolOverhead per tool definition.
//   - The ceiling is 35% of the model's window before the Task's first model
//     response and 70% after it (so continuing a paused Task that has a
//     response uses 70%); an unknown window counts as 65,536 tokens. It
//     covers instructions, tool definitions, recalled evidence and the
//     conversation, and is a limit, never a target: nothing is added to
//     fill it.
//   - The user's messages, the assistant's messages and every tool call with
//     its result stay in the conversation, in order; a call and its result are
//     never separated. A result whose live output is gone reads as the part
//     its tool retained, or as explicitly unavailable; a call whose outcome is
//     unknown says so.
//   - Under pressure, the largest tool results and call arguments become
//     labelled excerpts (head and tail; the label says how much was left out
//     and names the tasks.read_block handle, task id and seq, of the record
//     that holds it whole, or says that the output was not retained). The
//     excerpting finds the largest size cap that fits, so the largest pieces
//     are cut first, and never below MinExcerptTokens. Only the assembled
//     request changes: records in the store and live results are never
//     rewritten.
//   - When the input does not fit even with every excerpt at its minimum,
//     Build fails with an *OverflowError (needed and available tokens, by
//     section); nothing is dropped silently.
//   - Recalled evidence (at most RecallBudget tokens) is rendered as a last
//     user-role message that says it is data from other Tasks, not
//     instructions, each item labelled with its task, seq, kind, time and
//     source. It only uses the room the whole conversation leaves: when the
//     conversation needs excerpts, nothing is recalled. Placing it last keeps
//     the conversation a stable prefix from one Cycle to the next (providers'
//     prompt caches).
//   - The request shares the bytes of the tool outputs it shows with the
//     history and live results it was built from (they are immutable); it
//     copies nothing else of size.
//   - The InputSummary records the estimated tokens per section
//     (instructions, tools, recall, conversation), every excerpt (record seq,
//     call id, part, original and kept tokens) and every recalled item, so
//     clients can show what the model saw.
//
// Lifecycle:
//  1. The Cycle reads the Task's events, takes the Task's live results and
//     asks the memory for recall.
//  2. Build turns them into a providers.Request and an api.InputSummary, or
//     an *OverflowError.
//  3. The summary is recorded with the Cycle (CycleFinished.input), beside
//     the provider-reported prompt tokens, so clients can show what the
//     model saw and how far the estimate was off.
//
// Example:
//
//	req, sum, err := prompt.Build(prompt.Input{History: evs, Live: live, Tools: specs, Window: 8192, Recall: evidence})
//	var oe *prompt.OverflowError
//	if errors.As(err, &oe) {
//		// record oe.Overflow() as the Cycle's failure
//	}
package prompt
