package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/rs/zerolog"

	"lemo/tools/mcp"
)

// mcpServers starts each enabled MCP server (as the daemon would, with the
// daemon's environment scrubbed the same way), lists its tools and stops
// it; a server that cannot be started or reached is a failure with what
// to do, a refused tool a warning.
func (e *doctorEnv) mcpServers(ctx context.Context) []checkResult {
	c := mcpConfig(e.cfg, e.environ, toolProcs{}, nil, zerolog.Nop())
	if len(c.Servers) == 0 {
		return nil
	}
	m, err := mcp.New(c)
	if err != nil {
		return []checkResult{{Check: "mcp servers", Status: checkFail, Detail: err.Error(), Fix: "correct the mcp.servers keys"}}
	}
	defer m.Close()
	_, _ = m.Tools(ctx) // what went wrong is in each server's status
	var out []checkResult
	byName := make(map[string]mcp.ServerConfig, len(c.Servers))
	for _, s := range c.Servers {
		byName[s.Name] = s
	}
	for _, st := range m.Status() {
		out = append(out, mcpCheck(st, byName[st.Name])...)
	}
	return out
}

// mcpCheck is the findings of one server's status after its tools were
// listed.
func mcpCheck(st mcp.Status, sc mcp.ServerConfig) []checkResult {
	check := "mcp server " + st.Name
	where := sc.Command
	if sc.URL != "" {
		where = sc.URL
		if i := strings.IndexAny(where, "?"); i >= 0 {
			where = where[:i]
		}
	}
	if st.LastError != "" && len(st.Tools) == 0 {
		fix := fmt.Sprintf("run %s by hand to see why it does not start, install it, or correct mcp.servers.%s.command, args and env; a slow first start (npx downloading) may need a larger mcp.servers.%s.start_timeout", sc.Command, st.Name, st.Name)
		if sc.URL != "" {
			fix = fmt.Sprintf("check that the server answers at %s, and the headers it needs (mcp.servers.%s.headers)", where, st.Name)
		}
		why := strings.TrimPrefix(st.LastError, "mcp server "+st.Name+": ")
		return []checkResult{{Check: check, Status: checkFail, Detail: st.Transport + " " + where + ": " + why, Fix: fix}}
	}
	names := make([]string, 0, len(st.Tools))
	for _, n := range st.Tools {
		names = append(names, strings.TrimPrefix(n, mcp.Prefix+st.Name+"."))
	}
	out := []checkResult{{Check: check, Status: checkOK, Detail: fmt.Sprintf("%s %s: %d tools: %s", st.Transport, where, len(names), clip(strings.Join(names, ", "), 300))}}
	if len(names) == 0 {
		out[0].Status = checkWarn
		out[0].Fix = fmt.Sprintf("the server offers no tool Lemo can use: check mcp.servers.%s.tools", st.Name)
	}
	for _, r := range st.Refused {
		out = append(out, checkResult{Check: check, Status: checkWarn, Detail: fmt.Sprintf("tool %q is not offered: %s", r.Tool, r.Reason),
			Fix: fmt.Sprintf("rename it on the server, or leave it out with mcp.servers.%s.tools", st.Name)})
	}
	return out
}
