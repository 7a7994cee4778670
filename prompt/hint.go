package prompt

import (
	"fmt"

	"lemo/api"
)

// toolsHint is the sentence an overflow's message ends with when the
// tools' schemas take part of the input: the Task's tools (tools.initial,
// what it loaded, or its --tools) may be more than a small window holds.
func toolsHint(sections []*api.SectionSize) string {
	for _, s := range sections {
		if s.GetSection() == "tools" && s.GetTokens() > 0 {
			return fmt.Sprintf("The tools' schemas take %d of those tokens: give the Task fewer tools (lemo run --tools files.read,files.write) or none (--tools none), or start Tasks with fewer (tools.initial; they load others with tools.load).", s.GetTokens())
		}
	}
	return ""
}
