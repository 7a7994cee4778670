package client

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"lemo/api"
	"lemo/excerpt"
)

// View renders one kind of tool for people: a call's arguments, its live
// state and its result. Renderings are plain text, one line where
// possible; input that does not have the expected shape falls back to
// JSON.
type View interface {
	Call(tool string, args json.RawMessage) string
	State(tool string, state json.RawMessage) string
	Result(tool string, output json.RawMessage) string
}

// Views resolves a tool to its View: the View its contract names when one
// is registered, else the generic JSON view.
type Views struct {
	byID  map[string]View
	tools map[string]*api.ToolInfo
}

// Ids of the built-in Views.
const (
	ViewFiles  = "files"
	ViewShell  = "shell"
	ViewSystem = "system"
)

// NewViews returns the registry for the daemon's tool contracts, with the
// built-in text Views registered.
func NewViews(tools []*api.ToolInfo) *Views {
	v := &Views{byID: map[string]View{ViewFiles: filesView{}, ViewShell: shellView{}, ViewSystem: systemView{}}, tools: make(map[string]*api.ToolInfo)}
	for _, t := range tools {
		v.tools[t.GetName()] = t
	}
	return v
}

// Register adds (or replaces) the View with id.
func (v *Views) Register(id string, view View) { v.byID[id] = view }

// For returns the View of tool.
func (v *Views) For(tool string) View {
	if t := v.tools[tool]; t != nil {
		if view := v.byID[t.GetView()]; view != nil {
			return view
		}
	}
	return JSONView{}
}

// JSONView renders anything as compact JSON, clipped.
type JSONView struct{}

func (JSONView) Call(tool string, args json.RawMessage) string {
	return tool + " " + compact(args, 200)
}
func (JSONView) State(tool string, s json.RawMessage) string  { return compact(s, 200) }
func (JSONView) Result(tool string, o json.RawMessage) string { return compact(o, 400) }

// compact renders JSON on one line, at most n bytes.
func compact(b json.RawMessage, n int) string {
	var buf bytes.Buffer
	if json.Compact(&buf, b) != nil {
		return clipText(string(b), n)
	}
	return clipText(buf.String(), n)
}

func clipText(s string, n int) string {
	s = strings.TrimSpace(s)
	if len(s) <= n {
		return s
	}
	return excerpt.Head(s, n) + fmt.Sprintf("… (%d bytes)", len(s))
}

func firstLine(s string, n int) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return clipText(s[:i], n) + " …"
	}
	return clipText(s, n)
}

// obj decodes a JSON object loosely; nil when it is not one.
func obj(b json.RawMessage) map[string]any {
	var m map[string]any
	if json.Unmarshal(b, &m) != nil {
		return nil
	}
	return m
}

func str(m map[string]any, k string) string {
	s, _ := m[k].(string)
	return s
}

func num(m map[string]any, k string) (int64, bool) {
	f, ok := m[k].(float64)
	return int64(f), ok
}

// filesView renders files.read/write/edit/list/find/grep.
type filesView struct{}

func (filesView) Call(tool string, args json.RawMessage) string {
	m := obj(args)
	if m == nil {
		return JSONView{}.Call(tool, args)
	}
	path := str(m, "path")
	switch tool {
	case "files.write":
		return fmt.Sprintf("write %s (%d bytes)", path, len(str(m, "content")))
	case "files.edit":
		return fmt.Sprintf("edit %s: %q → %q", path, clipText(str(m, "old_text"), 40), clipText(str(m, "new_text"), 40))
	case "files.find":
		return fmt.Sprintf("find %s in %s", str(m, "pattern"), orDot(path))
	case "files.grep":
		return fmt.Sprintf("grep %q in %s", str(m, "pattern"), orDot(path))
	case "files.list":
		return "list " + orDot(path)
	case "files.read":
		if off, ok := num(m, "offset"); ok && off > 0 {
			return fmt.Sprintf("read %s from line %d", path, off)
		}
		return "read " + path
	}
	return JSONView{}.Call(tool, args)
}

func orDot(p string) string {
	if p == "" {
		return "."
	}
	return p
}

func (filesView) State(tool string, s json.RawMessage) string { return compact(s, 200) }

func (filesView) Result(tool string, out json.RawMessage) string {
	m := obj(out)
	if m == nil {
		return JSONView{}.Result(tool, out)
	}
	switch tool {
	case "files.read":
		start, _ := num(m, "start_line")
		end, _ := num(m, "end_line")
		total, _ := num(m, "total_lines")
		return fmt.Sprintf("%s lines %d-%d of %d", str(m, "path"), start, end, total)
	case "files.write", "files.edit":
		b, _ := num(m, "bytes")
		if r, ok := num(m, "replacements"); ok {
			return fmt.Sprintf("%s: %d replacement(s), %d bytes", str(m, "path"), r, b)
		}
		return fmt.Sprintf("%s: %d bytes written", str(m, "path"), b)
	case "files.list":
		total, _ := num(m, "total")
		return fmt.Sprintf("%s: %d entries", orDot(str(m, "path")), total)
	case "files.find", "files.grep":
		matches, _ := m["matches"].([]any)
		return fmt.Sprintf("%d match(es)", len(matches))
	}
	return JSONView{}.Result(tool, out)
}

// shellView renders shell.run.
type shellView struct{}

func (shellView) Call(tool string, args json.RawMessage) string {
	if m := obj(args); m != nil && str(m, "command") != "" {
		return "$ " + firstLine(str(m, "command"), 200)
	}
	return JSONView{}.Call(tool, args)
}

func (shellView) State(tool string, s json.RawMessage) string {
	m := obj(s)
	if m == nil {
		return compact(s, 200)
	}
	el, _ := num(m, "elapsed_ms")
	out, _ := num(m, "stdout_bytes")
	line := str(m, "last_line")
	txt := fmt.Sprintf("%s %.1fs, %d bytes out", orText(str(m, "phase"), "running"), float64(el)/1000, out)
	if line != "" {
		txt += ": " + firstLine(line, 120)
	}
	return txt
}

func orText(s, d string) string {
	if s == "" {
		return d
	}
	return s
}

func (shellView) Result(tool string, out json.RawMessage) string {
	m := obj(out)
	if m == nil {
		return JSONView{}.Result(tool, out)
	}
	code, _ := num(m, "exit_code")
	var b strings.Builder
	fmt.Fprintf(&b, "exit %d", code)
	if t, _ := m["timed_out"].(bool); t {
		b.WriteString(" (timed out)")
	}
	if o := strings.TrimRight(str(m, "stdout"), "\n"); o != "" {
		b.WriteString("\n" + indent(clipText(o, 2000)))
	}
	if e := strings.TrimRight(str(m, "stderr"), "\n"); e != "" {
		b.WriteString("\n" + indent("stderr: "+clipText(e, 1000)))
	}
	return b.String()
}

func indent(s string) string { return "  " + strings.ReplaceAll(s, "\n", "\n  ") }

// systemView renders the system tool.
type systemView struct{}

func (systemView) Call(tool string, args json.RawMessage) string {
	m := obj(args)
	if m == nil {
		return JSONView{}.Call(tool, args)
	}
	if str(m, "action") == "list" {
		return "list the attached Services"
	}
	in, _ := json.Marshal(m["input"])
	return fmt.Sprintf("%s.%s %s", str(m, "service"), str(m, "operation"), compact(in, 160))
}

func (systemView) State(tool string, s json.RawMessage) string { return compact(s, 200) }

func (systemView) Result(tool string, out json.RawMessage) string {
	m := obj(out)
	if m == nil {
		return JSONView{}.Result(tool, out)
	}
	if svcs, ok := m["services"].([]any); ok {
		var names []string
		for _, s := range svcs {
			if sm, ok := s.(map[string]any); ok {
				names = append(names, str(sm, "name"))
			}
		}
		sort.Strings(names)
		if len(names) == 0 {
			return "no Services attached"
		}
		return "Services: " + strings.Join(names, ", ")
	}
	o, _ := json.Marshal(m["output"])
	return "(untrusted) " + compact(o, 400)
}
