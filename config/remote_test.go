package config

import (
	"strings"
	"testing"
	"time"
)

func TestRemoteProblems(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(r *Remote)
		want   []string // problems expected, by text; none when valid
	}{
		{"defaults", func(r *Remote) {}, nil},
		{"no connections", func(r *Remote) { r.MaxConnections = 0 }, []string{"remote.max_connections: must be at least 1"}},
		{"reserve takes every connection", func(r *Remote) { r.MaxConnections, r.ConnectionReserve = 8, 8 }, []string{"remote.connection_reserve: must be at least 1 and below remote.max_connections (8)"}},
		{"no reserve", func(r *Remote) { r.ConnectionReserve = 0 }, []string{"remote.connection_reserve"}},
		{"no auth timeout", func(r *Remote) { r.AuthTimeout = 0 }, []string{"remote.auth_timeout: must be a positive duration"}},
		{"per token over total", func(r *Remote) { r.MaxSessions, r.MaxSessionsPerToken = 10, 11 }, []string{"remote.max_sessions_per_token: must not exceed remote.max_sessions (10)"}},
		{"subscriptions", func(r *Remote) { r.MaxSubscriptions, r.MaxSubscriptionsPerToken = 5, 0 }, []string{"remote.max_subscriptions_per_token: must be at least 1"}},
		{"every problem at once", func(r *Remote) { *r = Remote{AuthTimeout: -time.Second} }, []string{
			"remote.max_connections", "remote.max_sessions:", "remote.max_sessions_per_token", "remote.max_subscriptions:", "remote.max_subscriptions_per_token", "remote.auth_timeout"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := Default()
			tc.change(&c.Remote)
			got := Join(c.Validate())
			if len(tc.want) == 0 {
				if got != nil {
					t.Fatalf("Validate = %v, want valid", got)
				}
				return
			}
			if got == nil {
				t.Fatalf("Validate = nil, want %v", tc.want)
			}
			for _, w := range tc.want {
				if !strings.Contains(got.Error(), w) {
					t.Errorf("Validate = %v, lacks %q", got, w)
				}
			}
		})
	}
}
