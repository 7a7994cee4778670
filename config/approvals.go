package config

import (
	"fmt"
	"regexp"
	"time"
)

// Approvals is the daemon's approval policy: which tools' calls need a
// person's approval (ask) or never run (deny), for every Task. It adds to
// each tool's own rule (the shell's command rules) and to a Task's own
// rules; nothing here can loosen them. Precedence is deny > ask > allow,
// whatever the lists hold: allow says that the daemon itself asks nothing
// for those tools (what a tool no rule names gets too); it never exempts a
// call from a deny or ask rule, the tool's own ask, a Task's rule or the
// model's request for approval. To ask for all but a few tools, list the
// ones to ask for ("files.write", "shell.*"), not "*" with allow
// exceptions. A SIGHUP applies changed rules to the calls judged after it.
type Approvals struct {
	Allow   []string      `yaml:"allow" env:"LEMO_APPROVALS_ALLOW" help:"tool names or patterns (files.*, *) the daemon itself asks nothing for; never overrides an ask or deny, nor a tool's own ask (deny > ask > allow)"`
	Ask     []string      `yaml:"ask" env:"LEMO_APPROVALS_ASK" help:"tool names or patterns whose calls need a person's approval before they run, in every Task"`
	Deny    []string      `yaml:"deny" env:"LEMO_APPROVALS_DENY" help:"tool names or patterns whose calls never run, in every Task (deny always wins)"`
	Timeout time.Duration `yaml:"timeout" env:"LEMO_APPROVALS_TIMEOUT" help:"deadline of the approvals that these rules, a Task's rules or the model ask for (a tool's own approvals keep theirs); 0: none"`
}

// maxApprovalRules bounds each list.
const maxApprovalRules = 256

// toolPattern is a tool name or a pattern with "*" (tools.CheckPattern).
var toolPattern = regexp.MustCompile(`^[a-z0-9_.*-]{1,64}$`)

// Problems checks the approvals keys and returns every problem, located by
// key and position ("approvals.ask[2]").
func (a *Approvals) Problems() []error {
	var ps []error
	for _, l := range []struct {
		key      string
		patterns []string
	}{{"allow", a.Allow}, {"ask", a.Ask}, {"deny", a.Deny}} {
		where := "approvals." + l.key
		if len(l.patterns) > maxApprovalRules {
			ps = append(ps, Problem{Where: where, What: fmt.Sprintf("%d patterns: at most %d are accepted", len(l.patterns), maxApprovalRules)})
			continue
		}
		for i, p := range l.patterns {
			if !toolPattern.MatchString(p) {
				ps = append(ps, Problem{Where: fmt.Sprintf("%s[%d]", where, i), What: fmt.Sprintf("%q: want a tool name (1 to 64 characters of a-z, 0-9, '_', '.' or '-', such as shell.run) or a pattern with '*' (files.*, *)", p)})
			}
		}
	}
	if a.Timeout < 0 {
		ps = append(ps, Problem{Where: "approvals.timeout", What: fmt.Sprintf("must not be negative (got %s; 0: no deadline)", a.Timeout)})
	}
	return ps
}
