package config

import (
	"fmt"
	"time"
)

// Remote bounds what remote clients can make the daemon hold: connections
// (which must authenticate within seconds), sessions and subscriptions,
// per token and overall.
type Remote struct {
	MaxConnections           int           `yaml:"max_connections" env:"LEMO_REMOTE_MAX_CONNECTIONS" help:"open connections to the remote API, authenticated or not"`
	ConnectionReserve        int           `yaml:"connection_reserve" env:"LEMO_REMOTE_CONNECTION_RESERVE" help:"connections of remote.max_connections that only authenticated clients may hold (a silent flood never fills them)"`
	AuthTimeout              time.Duration `yaml:"auth_timeout" env:"LEMO_REMOTE_AUTH_TIMEOUT" help:"a connection that presents no valid token within this time is closed"`
	MaxSessions              int           `yaml:"max_sessions" env:"LEMO_REMOTE_MAX_SESSIONS" help:"client sessions (one per lemo command, console or program) of every token together"`
	MaxSessionsPerToken      int           `yaml:"max_sessions_per_token" env:"LEMO_REMOTE_MAX_SESSIONS_PER_TOKEN" help:"client sessions of one token"`
	MaxSubscriptions         int           `yaml:"max_subscriptions" env:"LEMO_REMOTE_MAX_SUBSCRIPTIONS" help:"subscriptions (followed Tasks) of every token together"`
	MaxSubscriptionsPerToken int           `yaml:"max_subscriptions_per_token" env:"LEMO_REMOTE_MAX_SUBSCRIPTIONS_PER_TOKEN" help:"subscriptions of one token over all its sessions"`
}

// Problems checks the remote keys and returns every problem, located by
// key ("remote.max_connections").
func (r *Remote) Problems() []error {
	var ps []error
	add := func(where, format string, args ...any) {
		ps = append(ps, Problem{Where: "remote." + where, What: fmt.Sprintf(format, args...)})
	}
	for _, k := range []struct {
		key string
		n   int
	}{
		{"max_connections", r.MaxConnections}, {"max_sessions", r.MaxSessions}, {"max_sessions_per_token", r.MaxSessionsPerToken},
		{"max_subscriptions", r.MaxSubscriptions}, {"max_subscriptions_per_token", r.MaxSubscriptionsPerToken},
	} {
		if k.n < 1 {
			add(k.key, "must be at least 1 (got %d)", k.n)
		}
	}
	if r.MaxConnections >= 1 && (r.ConnectionReserve < 1 || r.ConnectionReserve >= r.MaxConnections) {
		add("connection_reserve", "must be at least 1 and below remote.max_connections (%d) (got %d): the reserve keeps room for authenticated clients, the rest is for connections still authenticating", r.MaxConnections, r.ConnectionReserve)
	}
	if r.AuthTimeout <= 0 {
		add("auth_timeout", "must be a positive duration (got %s)", r.AuthTimeout)
	}
	if r.MaxSessionsPerToken > r.MaxSessions && r.MaxSessions >= 1 {
		add("max_sessions_per_token", "must not exceed remote.max_sessions (%d) (got %d)", r.MaxSessions, r.MaxSessionsPerToken)
	}
	if r.MaxSubscriptionsPerToken > r.MaxSubscriptions && r.MaxSubscriptions >= 1 {
		add("max_subscriptions_per_token", "must not exceed remote.max_subscriptions (%d) (got %d)", r.MaxSubscriptions, r.MaxSubscriptionsPerToken)
	}
	return ps
}
