package gateway

// Sessions returns how many sessions are attached: one per connection of a
// client command, console or program. cmd/lemo reports it as a metric.
func (g *Gateway) Sessions() int {
	g.guard.mu.Lock()
	defer g.guard.mu.Unlock()
	return len(g.guard.sessions)
}
