// Package prompt assembles a Cycle's input: the instructions, the tool
// definitions and the Task's conversation rebuilt from its durable history
// plus its live tool results, within the model's token budget.
//
// Rules (the design's "Cycle input"):
//   - Token counts are estimates from UTF-8 (see Estimate).
//   - The ceiling is 35% of the model's window before the Task's first model
//     response and 70% after it; an unknown window counts as 65,536 tokens.
//     The ceiling is a limit, never a target.
//   - The user's messages, the assistant's messages and every tool call with
//     its result stay in the conversation, in order; a call and its result are
//     never separated. A result whose live output is gone reads as the part
//     its tool retained, or as explicitly unavailable; a call whose outcome is
//     unknown says so.
//   - When the input does not fit even with every excerpt at its minimum,
//     Build fails with an *OverflowError; nothing is dropped silently.
//
// Lifecycle:
//  1. The Cycle reads the Task's events and takes the Task's live results.
//  2. Build turns them into a providers.Request and an api.InputSummary.
//  3. The summary is recorded with the Cycle, so clients can show what the
//     model saw.
//
// Example:
//
//	req, sum, err := prompt.Build(prompt.Input{History: evs, Live: live, Tools: specs, Window: 8192})
package prompt
