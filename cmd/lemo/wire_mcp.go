package main

import (
	"context"
	"os"
	"sort"

	"github.com/rs/zerolog"

	"lemo/config"
	"lemo/tools"
	"lemo/tools/isolation"
	"lemo/tools/mcp"
)

// mcpConfig is the enabled servers of the mcp keys as tools/mcp takes
// them, sorted by name. A server's processes run with the tool processes'
// run tag, in namespaces (when the daemon uses them) that hide the data
// folder but keep the server's folder.
func mcpConfig(cfg *config.Config, environ []string, procs toolProcs, obs mcp.Observer, log zerolog.Logger) mcp.Config {
	names := make([]string, 0, len(cfg.MCP.Servers))
	for n, s := range cfg.MCP.Servers {
		if s.On() {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	c := mcp.Config{Environ: environ, RunTag: procs.runTag, Version: buildVersion, Observer: obs, Log: log.With().Str("component", "mcp").Logger()}
	if procs.namespaces != nil {
		c.Namespaces = func(dir string) *isolation.Namespaces {
			if dir == "" {
				return procs.in()
			}
			return procs.in(dir)
		}
	}
	for _, n := range names {
		s := cfg.MCP.Servers[n]
		c.Servers = append(c.Servers, mcp.ServerConfig{
			Name: n, Command: s.Command, Args: s.Args, Env: s.Env, Dir: s.Cwd, URL: s.URL, Headers: s.Headers,
			Tools: s.Tools, Retain: s.Retain, RetainBytes: s.RetainBytes, Approval: s.Approval,
			CallTimeout: s.Timeout, StartTimeout: s.StartTimeout, MaxOutputBytes: s.MaxOutputBytes, MaxMessageBytes: s.MaxMessageBytes,
		})
	}
	return c
}

// startMCP builds the manager of the configured MCP servers and registers
// their tools in reg: each server is started once to list its tools (in
// parallel, each within its start timeout) and a stdio server stopped
// again until its first call. A server that cannot be reached yet is tried
// again in the background (its tools are registered once it answers;
// until then reg's Pending says why they are missing, for lemo tools and
// for a Task that names one); it and a tool that is refused are logged
// with what to do; the daemon starts without them. nil when no server is
// configured.
func startMCP(ctx context.Context, cfg *config.Config, reg *tools.Registry, procs toolProcs, obs mcp.Observer, log zerolog.Logger) (*mcp.Manager, error) {
	c := mcpConfig(cfg, os.Environ(), procs, obs, log)
	if len(c.Servers) == 0 {
		return nil, nil
	}
	m, err := mcp.New(c)
	if err != nil {
		return nil, err
	}
	reg.SetPending(m.Pending)
	if err := m.Offer(ctx, reg); err != nil {
		log.Warn().Err(err).Str("fix", "run lemo doctor to see each MCP server's state and tools").Msg("some MCP servers or tools are not offered")
	}
	for _, st := range m.Status() {
		log.Info().Str("mcp_server", st.Name).Str("transport", st.Transport).Str("state", st.State).Int("tools", len(st.Tools)).Msg("MCP server")
	}
	return m, nil
}
