package mcp

import (
	"fmt"
	"regexp"
	"sort"
	"strings"
	"unicode"

	"lemo/tools"
)

// Prefix starts the name of every tool that comes from an MCP server.
const Prefix = "mcp."

var validServer = regexp.MustCompile(`^[a-z0-9_-]{1,32}$`)

// ValidServerName reports whether name can name a server in tool names
// (mcp.<server>.<tool>): 1 to 32 characters of a-z, 0-9, '_' and '-'.
func ValidServerName(name string) bool { return validServer.MatchString(name) }

// MapToolName maps a server's tool name to the part after mcp.<server>.:
// lower case, a lower-to-upper case step ("getUser") becomes "_"
// ("get_user"), and every character outside [a-z0-9_-] (dots too, which
// would read as another level) becomes "_". Runs of "_" stay as they are so
// that the mapping stays simple to predict.
func MapToolName(name string) string {
	var b strings.Builder
	var prev rune
	for i, r := range name {
		switch {
		case r >= 'A' && r <= 'Z':
			if i > 0 && (unicode.IsLower(prev) || unicode.IsDigit(prev)) {
				b.WriteByte('_')
			}
			b.WriteRune(unicode.ToLower(r))
		case (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9') || r == '_' || r == '-':
			b.WriteRune(r)
		default:
			b.WriteByte('_')
		}
		prev = r
	}
	return b.String()
}

// ToolName is the Lemo name of a server's tool: mcp.<server>.<mapped>.
func ToolName(server, tool string) string { return Prefix + server + "." + MapToolName(tool) }

// Refused is a server tool that is not offered, and why.
type Refused struct {
	Tool   string // the server's name for it
	Reason string
}

// Plan decides which of a server's tools (by the server's names) become
// Lemo tools: those that allow admits (all when allow is empty), whose
// mapped names are valid, at most tools.MaxNameLen long and unique, also
// once "." is mapped to "_" as models see them. Tools whose names collide
// after mapping are all refused, each with a reason that names the others.
// It returns the Lemo names of the offered tools by server name, and the
// refused ones sorted by name.
func Plan(server string, names, allow []string) (offered map[string]string, refused []Refused) {
	offered = make(map[string]string)
	allowed := make(map[string]bool, len(allow))
	for _, a := range allow {
		allowed[a] = true
	}
	byModel := make(map[string][]string)
	for _, n := range names {
		if len(allow) > 0 && !allowed[n] {
			continue
		}
		full := ToolName(server, n)
		switch {
		case MapToolName(n) == "":
			refused = append(refused, Refused{Tool: n, Reason: "its name is empty"})
			continue
		case len(full) > tools.MaxNameLen:
			refused = append(refused, Refused{Tool: n, Reason: fmt.Sprintf("its Lemo name %s is %d characters, longer than %d", full, len(full), tools.MaxNameLen)})
			continue
		}
		model := tools.ModelName(full)
		byModel[model] = append(byModel[model], n)
	}
	for _, group := range byModel {
		if len(group) == 1 {
			offered[group[0]] = ToolName(server, group[0])
			continue
		}
		sort.Strings(group)
		for _, n := range group {
			var others []string
			for _, o := range group {
				if o != n {
					others = append(others, fmt.Sprintf("%q", o))
				}
			}
			refused = append(refused, Refused{Tool: n, Reason: fmt.Sprintf("its name maps to %s, as %s does: neither is offered; rename one on the server, or offer one with mcp.servers.%s.tools", ToolName(server, n), strings.Join(others, ", "), server)})
		}
	}
	sort.Slice(refused, func(i, j int) bool { return refused[i].Tool < refused[j].Tool })
	return offered, refused
}

// ServerTool is a tool one server offers: the server, the server's name
// for the tool, and its Lemo name.
type ServerTool struct {
	Server, Tool, Name string
}

// Collisions finds the offered tools of different servers whose Lemo names
// meet as models see them ("." as "_": mcp.a_b.c and mcp.a.b_c are both
// mcp_a_b_c). All of them are refused (which one came first is no reason
// to prefer it), each with a reason naming the others, their servers and
// the keys that leave one out. It returns the reasons by tool.
func Collisions(ts []ServerTool) map[ServerTool]string {
	byModel := make(map[string][]ServerTool)
	for _, t := range ts {
		m := tools.ModelName(t.Name)
		byModel[m] = append(byModel[m], t)
	}
	out := make(map[ServerTool]string)
	for model, group := range byModel {
		if len(group) < 2 {
			continue
		}
		sort.Slice(group, func(i, j int) bool { return group[i].Name < group[j].Name })
		for _, t := range group {
			var others, keys []string
			for _, o := range group {
				keys = append(keys, "mcp.servers."+o.Server+".tools")
				if o != t {
					others = append(others, fmt.Sprintf("%s (tool %q of the server %s)", o.Name, o.Tool, o.Server))
				}
			}
			out[t] = fmt.Sprintf("its name %s reads as %s to models, as %s does: neither is offered; leave all but one out with %s, or rename a server", t.Name, model, strings.Join(others, ", "), strings.Join(keys, " or "))
		}
	}
	return out
}

// Admit decides which tools of a server that listed them late (after the
// daemon registered the others) are offered, given the names already
// registered: the tools are offered unless their names meet a registered
// one as models see them ("." as "_"), or each other's (Collisions). The
// registered tool stays (Tasks may have loaded it); the late one is
// refused, with a reason naming both and the keys that leave one out. It
// returns the reasons by tool, like Collisions.
func Admit(registered []string, late []ServerTool) map[ServerTool]string {
	out := Collisions(late)
	byModel := make(map[string]string, len(registered))
	for _, n := range registered {
		byModel[tools.ModelName(n)] = n
	}
	for _, t := range late {
		if _, refused := out[t]; refused {
			continue
		}
		model := tools.ModelName(t.Name)
		if other, ok := byModel[model]; ok {
			out[t] = fmt.Sprintf("its name %s reads as %s to models, as the tool %s, offered before the server %s listed its tools, does: it stays and this one is not offered; leave it out with mcp.servers.%s.tools, or rename a server", t.Name, model, other, t.Server, t.Server)
		}
	}
	return out
}
