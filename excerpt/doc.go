// Package excerpt cuts text to a byte budget without splitting a character:
// the head, the tail, or the head and tail around a label that says how much
// was left out.
//
// A cut never falls inside a UTF-8 sequence, and it keeps a combining mark
// with the character it modifies (up to MaxMarks marks; a longer run is cut
// between marks, as Unicode's stream-safe format allows). Invalid bytes are
// kept as they are: a cut backs off at most utf8.UTFMax-1 bytes to keep a
// valid sequence whole, so a run of stray continuation bytes never empties
// the result.
//
// Use:
//  1. Pick the shape: Head or Tail for a raw cut (strings or byte slices),
//     Short for a head marked with "…", Ends for a head and a tail of given
//     sizes, Fit for a head and a tail that with the label fit a budget.
//  2. Pass the text and the budget in bytes; text within the budget comes
//     back unchanged.
//
// Example:
//
//	msg := excerpt.Short(err.Error(), 4096)                      // "first bytes…"
//	out := excerpt.Fit(stdout, 8<<10)                             // "head\n[… 9000 of 17000 bytes omitted …]\ntail"
//	n := len(excerpt.Head(buf, budget))                           // where to truncate a buffer
package excerpt
