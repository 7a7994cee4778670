package mcp

import (
	"context"
	"errors"
	"fmt"
	"sort"

	"lemo/tools"
)

// Offer lists every server's tools (Tools) and registers them in reg. A
// server whose tools could not be listed (not up yet, a command that
// failed) is tried again in the background, with the restart policy's
// backoff (listRetry), until its listing succeeds or Close: its tools are
// then registered as they would have been at the start (Plan, the
// server's allow-list, its approvals and retain), except those whose
// names meet a registered tool's as models see them (Admit). Until then
// Pending says why its tools are missing. The error joins what the
// start's listing refused or could not reach; the tools registered are
// usable either way. Call it once, before Close.
func (m *Manager) Offer(ctx context.Context, reg Registrar) error {
	ts, err := m.Tools(ctx)
	errs := []error{err}
	m.regMu.Lock()
	defer m.regMu.Unlock()
	for _, t := range ts {
		if rerr := reg.Register(t); rerr != nil {
			t.srv.refuse(t, rerr.Error())
			errs = append(errs, fmt.Errorf("mcp server %s: tool %q is not offered: %w", t.srv.cfg.Name, t.remote, rerr))
		}
	}
	for _, s := range m.servers {
		s.mu.Lock()
		retry := !s.listed && !s.closed && ctx.Err() == nil
		s.retrying = retry
		s.mu.Unlock()
		if retry {
			m.goroutine(func() { m.retryListing(s, reg) })
		}
	}
	return errors.Join(errs...)
}

// retryListing tries to list s's tools until it succeeds, then registers
// them; it ends at Close.
func (m *Manager) retryListing(s *server, reg Registrar) {
	log := m.cfg.Log.With().Str("mcp_server", s.cfg.Name).Logger()
	lastWhy := ""
	for {
		now := m.now()
		s.mu.Lock()
		wait, eager := m.cfg.Restart.listRetry(s.listFails, now)
		s.listNext = now.Add(wait)
		why := s.listErr
		s.mu.Unlock()
		if why != lastWhy {
			log.Warn().Str("why", why).Dur("retry_in", wait).Bool("eager", eager).Msg("the MCP server's tools are not listed; trying again in the background")
			lastWhy = why
		}
		if sleepCtx(m.ctx, wait) != nil {
			return
		}
		s.mu.Lock()
		s.listing = true
		s.mu.Unlock()
		ts, ok, err := s.discover(m.ctx, true)
		s.mu.Lock()
		s.listing = false
		s.mu.Unlock()
		if m.ctx.Err() != nil {
			return
		}
		if !ok {
			continue
		}
		rerr := m.admit(s, ts, reg)
		if err = errors.Join(err, rerr); err != nil {
			log.Warn().Err(err).Str("fix", "run lemo doctor to see the server's state and tools").Msg("some of the MCP server's tools are not offered")
		}
		log.Info().Int("tools", len(s.offered())).Msg("the MCP server listed its tools; they are offered now")
		return
	}
}

// admit registers the tools of s, listed late, in reg: those Admit lets
// in given what reg holds. The server's deaths so far were the failed
// starts of its listing: they are forgotten, as it works now.
func (m *Manager) admit(s *server, ts []*Tool, reg Registrar) error {
	m.regMu.Lock()
	defer m.regMu.Unlock()
	if m.ctx.Err() != nil {
		return ErrClosed
	}
	var names []string
	for _, r := range reg.List() {
		names = append(names, r.Tool.Name())
	}
	late := make([]ServerTool, len(ts))
	for i, t := range ts {
		late[i] = ServerTool{Server: s.cfg.Name, Tool: t.remote, Name: t.name}
	}
	refused := Admit(names, late)
	// Listed before its tools are registered: whoever sees a tool of it
	// sees it no longer pending.
	s.mu.Lock()
	s.listed, s.retrying = true, false
	s.deaths, s.listFails, s.listErr = nil, nil, ""
	s.mu.Unlock()
	var errs []error
	for i, t := range ts {
		why, no := refused[late[i]]
		if !no {
			if err := reg.Register(t); err != nil {
				why, no = err.Error(), true
			}
		}
		if no {
			s.refuse(t, why)
			errs = append(errs, fmt.Errorf("mcp server %s: tool %q is not offered: %s", s.cfg.Name, t.remote, why))
		}
	}
	return errors.Join(errs...)
}

// offered returns the Lemo names of the server's offered tools.
func (s *server) offered() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.tools...)
}

// Pending returns the servers whose tools are not listed yet and are being
// tried again in the background (Offer), with why (pendingState), by
// prefix: lemo tools shows them, and a Task that names one
// of their tools is told.
func (m *Manager) Pending() []tools.Pending {
	if m == nil {
		return nil
	}
	now := m.now()
	var out []tools.Pending
	for _, s := range m.servers {
		s.mu.Lock()
		if s.retrying && !s.listed && !s.closed {
			wait := max(s.listNext.Sub(now), 0)
			if s.listing {
				wait = 0
			}
			out = append(out, tools.Pending{Source: "mcp server " + s.cfg.Name, Prefix: Prefix + s.cfg.Name + ".", State: pendingState(s.listErr, wait)})
		}
		s.mu.Unlock()
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Prefix < out[j].Prefix })
	return out
}
