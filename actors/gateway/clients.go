package gateway

// Sessions returns how many sessions are attached: one per connection of a
// client command, console or program. cmd/lemo reports it as a metric.
func (g *Gateway) Sessions() int {
	g.guard.mu.Lock()
	defer g.guard.mu.Unlock()
	return len(g.guard.sessions)
}

// Subscriptions returns how many subscriptions every session holds.
func (g *Gateway) Subscriptions() int {
	g.guard.mu.Lock()
	defer g.guard.mu.Unlock()
	return g.guard.subs
}

// Connections counts the remote API's connections.
func (g *Gateway) Connections() ConnStats { return g.conns.snapshot() }
