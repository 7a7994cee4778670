package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"path"
	"strings"
)

// approvalLines bounds what an approval prompt shows of a call before the
// person asks for more (m).
const approvalLines = 20

// approvalDetail is what a person decides an approval on: the content a
// write would leave, the lines an edit replaces and their replacement, the
// command with the folder it runs in, else the arguments. It shows at
// most limit lines (limit <= 0: all) and says whether it left some out.
func approvalDetail(tool string, args json.RawMessage, workspace string, limit int) (lines []string, more bool) {
	var m map[string]any
	_ = json.Unmarshal(args, &m)
	str := func(k string) string { s, _ := m[k].(string); return s }
	in := func(p string) string {
		if workspace == "" {
			return p
		}
		if p == "" {
			return workspace
		}
		if path.IsAbs(p) {
			return p
		}
		return path.Join(workspace, p)
	}
	var body []string
	switch {
	case tool == "files.write" && m != nil:
		content := str("content")
		lines = append(lines, fmt.Sprintf("  write %s (%d bytes):", in(str("path")), len(content)))
		for _, l := range splitLines(content) {
			body = append(body, "  │ "+l)
		}
	case tool == "files.edit" && m != nil:
		lines = append(lines, fmt.Sprintf("  edit %s:", in(str("path"))))
		for _, l := range splitLines(str("old_text")) {
			body = append(body, "  - "+l)
		}
		for _, l := range splitLines(str("new_text")) {
			body = append(body, "  + "+l)
		}
		if all, _ := m["replace_all"].(bool); all {
			body = append(body, "  (every occurrence)")
		}
	case tool == "shell.run" && m != nil:
		if workspace == "" {
			// A descendant's: its folder is not known here.
			lines = append(lines, "  in the task's folder")
		} else {
			lines = append(lines, "  in "+in(""))
		}
		for _, l := range splitLines(str("command")) {
			body = append(body, "  $ "+l)
		}
	default:
		var b bytes.Buffer
		if json.Indent(&b, args, "", "  ") != nil {
			b.Reset()
			b.Write(args)
		}
		lines = append(lines, "  "+tool+":")
		for _, l := range splitLines(b.String()) {
			body = append(body, "  "+l)
		}
	}
	if limit > 0 && len(body) > limit {
		more = true
		body = append(body[:limit:limit], fmt.Sprintf("  … %d more line(s): m shows them", len(body)-limit))
	}
	return append(lines, body...), more
}

func splitLines(s string) []string {
	s = strings.TrimSuffix(s, "\n")
	if s == "" {
		return nil
	}
	return strings.Split(s, "\n")
}

// answer is what the person typed at an approval prompt.
type answer struct {
	approve, skip, more bool
	// always: approve and allow the same kind of call for the Task.
	always bool
	// reason is why a denial was given ("n REASON").
	reason string
}

// parseAnswer reads a line typed at an approval prompt: y approves, a
// approves and always allows the same kind of call for the Task, s skips,
// m shows more, anything else (Enter too) denies; "n REASON" denies with
// that reason.
func parseAnswer(line string) answer {
	word, rest, _ := strings.Cut(strings.TrimSpace(line), " ")
	switch strings.ToLower(word) {
	case "y", "yes":
		return answer{approve: true}
	case "a", "always":
		return answer{approve: true, always: true}
	case "s", "skip":
		return answer{skip: true}
	case "m", "more":
		return answer{more: true}
	case "n", "no":
		if r := strings.TrimSpace(rest); r != "" {
			return answer{reason: r}
		}
	}
	return answer{reason: "denied at the terminal"}
}
