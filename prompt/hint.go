package prompt

import (
	"fmt"

	"lemo/api"
)

// toolsHint is the sentence an overflow's message ends with when the
// tools' schemas take part of the input: every tool's schema is offered
// to the model, which a small window cannot hold.
func toolsHint(sections []*api.SectionSize) string {
	for _, s := range sections {
		if s.GetSection() == "tools" && s.GetTokens() > 0 {
			return fmt.Sprintf("The tools' schemas take %d of those tokens: give the Task fewer tools (lemo run --tools files.read,files.write) or none (--tools none).", s.GetTokens())
		}
	}
	return ""
}
