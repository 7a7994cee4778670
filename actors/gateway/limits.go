package gateway

import (
	"errors"
	"fmt"
)

// ErrLimit is wrapped by every refusal of a bounded resource (a session,
// a subscription, a connection).
var ErrLimit = errors.New("gateway: limit reached")

// LimitError says which limit refused what, and what to do about it.
type LimitError struct {
	// What is the resource and scope: "sessions of this token".
	What string
	// Limit is the bound in force; Key the configuration key that sets it.
	Limit int
	Key   string
	// Hint says what the client can do.
	Hint string
}

func (e *LimitError) Error() string {
	return fmt.Sprintf("too many %s: the limit is %d (%s); %s", e.What, e.Limit, e.Key, e.Hint)
}

func (e *LimitError) Unwrap() error { return ErrLimit }

// held is what one token and every client together hold of one resource.
type held struct {
	byToken, all int
}

// quota is the bounds of one resource: per token and overall, with the
// configuration keys that set them and the names used in errors.
type quota struct {
	perToken, total       int
	perTokenKey, totalKey string
	// noun names the resource in errors ("sessions").
	noun string
	// hint says how a client frees some.
	hint string
}

// admitOne decides whether a token holding h may take one more of q's
// resource. The per-token bound is checked first: it is the one a client
// can do something about.
func admitOne(h held, q quota) error {
	if h.byToken >= q.perToken {
		return &LimitError{What: q.noun + " of this token", Limit: q.perToken, Key: q.perTokenKey, Hint: q.hint + ", or ask the operator to raise " + q.perTokenKey}
	}
	if h.all >= q.total {
		return &LimitError{What: q.noun + " on this daemon", Limit: q.total, Key: q.totalKey, Hint: "try again later, or ask the operator to raise " + q.totalKey}
	}
	return nil
}

// check reports limits that cannot work together (after defaults).
func (l *Limits) check() error {
	if l.ConnectionReserve >= l.MaxConnections {
		return fmt.Errorf("gateway: the connection reserve (%d) must be below the connection limit (%d): connections still authenticating need room too", l.ConnectionReserve, l.MaxConnections)
	}
	return nil
}

func (l *Limits) sessionQuota() quota {
	return quota{perToken: l.MaxSessionsPerToken, total: l.MaxSessionsTotal,
		perTokenKey: "remote.max_sessions_per_token", totalKey: "remote.max_sessions",
		noun: "sessions", hint: "close other clients (lemo commands, consoles, programs) that use this token"}
}

func (l *Limits) subscriptionQuota() quota {
	return quota{perToken: l.MaxSubscriptionsPerToken, total: l.MaxSubscriptionsTotal,
		perTokenKey: "remote.max_subscriptions_per_token", totalKey: "remote.max_subscriptions",
		noun: "subscriptions", hint: "unsubscribe from Tasks you no longer follow, or close other clients that use this token"}
}

// connVerdict is what happens to a connection the gateway accepted.
type connVerdict int

const (
	// connAdmit: it is kept while it authenticates.
	connAdmit connVerdict = iota
	// connAdmitEvict: it is kept, and the oldest connection still
	// unauthenticated is closed to make room.
	connAdmitEvict
	// connRefuse: it is closed at once.
	connRefuse
)

func (v connVerdict) String() string {
	switch v {
	case connAdmit:
		return "admit"
	case connAdmitEvict:
		return "admit, evict the oldest unauthenticated"
	}
	return "refuse"
}

// admitConn decides about a new connection, given the connections open
// and how many of them have not authenticated yet. At most max
// connections are open, and at most max-reserve of them unauthenticated:
// the reserve is only ever held by authenticated connections. A new
// connection is unauthenticated itself, so when either bound is reached it
// takes the place of the oldest unauthenticated connection (which had the
// longest time to present its token); a client that presents its token at
// once, as Lemo's clients do, therefore always gets in, however many
// silent connections an outsider holds. Only when every open connection is
// authenticated is a new one refused.
func admitConn(open, unauth, max, reserve int) connVerdict {
	if unauth < max-reserve && open < max {
		return connAdmit
	}
	if unauth > 0 {
		return connAdmitEvict
	}
	return connRefuse
}
