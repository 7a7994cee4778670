package gateway

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"lemo/api"
)

// Sessions counts the attached sessions, and a client that goes away is
// counted no more.
func TestSessionsCountsAttachedClients(t *testing.T) {
	h := newHarness(t, Limits{}, nil)
	if n := h.g.Sessions(); n != 0 {
		t.Fatalf("Sessions() = %d before any client, want 0", n)
	}
	a := h.connect(alice)
	h.connect(bob)
	if n := h.g.Sessions(); n != 2 {
		t.Fatalf("Sessions() = %d with two clients, want 2", n)
	}
	a.stop()
	deadline := time.Now().Add(10 * time.Second)
	for h.g.Sessions() != 1 {
		if time.Now().After(deadline) {
			t.Fatalf("Sessions() = %d after one client left, want 1", h.g.Sessions())
		}
		time.Sleep(time.Millisecond)
	}
}

// helloAs opens a session as p with a token of its own (tokenName), or
// returns the refusal.
func (h *harness) helloAs(p Principal, tokenName string) (*testClient, *api.Response) {
	h.t.Helper()
	c := &testClient{h: h, principal: p, responses: make(map[uint64]*api.Response), updates: make(map[uint64][]*api.Update)}
	c.cond = sync.NewCond(&c.mu)
	c.pid = h.g.system.Root.SpawnPrefix(actor.PropsFromProducer(func() actor.Actor { return c }), "client")
	c.header = map[string]string{hdrPeer: "peer-" + c.pid.Id, hdrOwner: p.Owner, hdrOperator: fmt.Sprint(p.Operator), hdrAddress: "test-" + c.pid.Id, hdrToken: tokenName}
	resp := c.callTo(h.g.pid, &api.Request{Command: &api.Request_Hello{Hello: &api.Hello{ProtocolVersion: api.ProtocolVersion, Client: "test"}}})
	if c.welcome = resp.GetWelcome(); c.welcome != nil {
		c.session = h.g.system.NewLocalPID(c.welcome.GetSession())
	}
	return c, resp
}

// One token's sessions are bounded whatever node they come from, with an
// error that names the limit; another token still gets in.
func TestSessionsPerToken(t *testing.T) {
	h := newHarness(t, Limits{MaxSessionsPerToken: 2, MaxSessionsTotal: 3}, nil)
	for i := 0; i < 2; i++ {
		if _, r := h.helloAs(alice, "alice-token"); r.GetWelcome() == nil {
			t.Fatalf("session %d: %v", i+1, r)
		}
	}
	_, r := h.helloAs(alice, "alice-token")
	if errCode(r) != api.ErrorCode_ERROR_CODE_BUSY || !strings.Contains(r.GetError().GetMessage(), "remote.max_sessions_per_token") {
		t.Fatalf("third session of one token: %v, want BUSY naming remote.max_sessions_per_token", r)
	}
	if _, r := h.helloAs(bob, "bob-token"); r.GetWelcome() == nil {
		t.Fatalf("another token: %v", r)
	}
	if _, r := h.helloAs(bob, "bob-token"); !strings.Contains(r.GetError().GetMessage(), "(remote.max_sessions)") {
		t.Fatalf("beyond the overall limit: %v", r)
	}
}

// Subscriptions are bounded per token over all its sessions; an
// unsubscribe or a session's end gives them back.
func TestSubscriptionsPerToken(t *testing.T) {
	h := newHarness(t, Limits{MaxSubscriptionsPerToken: 3}, nil)
	a1, _ := h.helloAs(alice, "alice-token")
	a2, _ := h.helloAs(alice, "alice-token")
	b, _ := h.helloAs(bob, "bob-token")
	for i, c := range []*testClient{a1, a1, a2} {
		if r := c.call(subscribe(uint64(i+1), "", 0)); r.GetSubscribed() == nil {
			t.Fatalf("subscription %d: %v", i+1, r)
		}
	}
	r := a2.call(subscribe(9, "", 0))
	if errCode(r) != api.ErrorCode_ERROR_CODE_BUSY || !strings.Contains(r.GetError().GetMessage(), "remote.max_subscriptions_per_token") {
		t.Fatalf("fourth subscription of one token in another session: %v", r)
	}
	if r := b.call(subscribe(1, "", 0)); r.GetSubscribed() == nil {
		t.Fatalf("another token: %v", r)
	}
	if r := a1.call(&api.Request{Command: &api.Request_Unsubscribe{Unsubscribe: &api.UnsubscribeRequest{Subscription: 1}}}); r.GetDone() == nil {
		t.Fatalf("unsubscribe: %v", r)
	}
	if r := a2.call(subscribe(9, "", 0)); r.GetSubscribed() == nil {
		t.Fatalf("after an unsubscribe: %v", r)
	}
	a1.stop()
	a2.stop()
	deadline := time.Now().Add(10 * time.Second)
	for h.g.Subscriptions() != 1 {
		if time.Now().After(deadline) {
			t.Fatalf("Subscriptions() = %d after alice's sessions ended, want 1 (bob's)", h.g.Subscriptions())
		}
		time.Sleep(time.Millisecond)
	}
}

// A hello that declares an address another token's node holds is refused
// and leaves the secret the daemon presents there unchanged.
func TestHelloCannotTakeOverAnAddress(t *testing.T) {
	h := newHarness(t, Limits{}, nil)
	v, _ := h.helloAs(alice, "alice-token")
	addr := v.header[hdrAddress]
	h.g.guard.mu.Lock()
	h.g.guard.callbacks[addr].secret = "victim-secret"
	h.g.guard.mu.Unlock()
	m := &testClient{h: h, responses: make(map[uint64]*api.Response), updates: make(map[uint64][]*api.Update)}
	m.cond = sync.NewCond(&m.mu)
	m.pid = h.g.system.Root.SpawnPrefix(actor.PropsFromProducer(func() actor.Actor { return m }), "client")
	m.header = map[string]string{hdrPeer: "peer-m", hdrOwner: "bob", hdrOperator: "false", hdrAddress: addr, hdrToken: "bob-token"}
	r := m.callTo(h.g.pid, &api.Request{Command: &api.Request_Hello{Hello: &api.Hello{ProtocolVersion: api.ProtocolVersion, Client: "evil", CallbackSecret: []byte("mallory-secret-0123456789")}}})
	if errCode(r) != api.ErrorCode_ERROR_CODE_CONFLICT {
		t.Fatalf("hello on another node's address: %v, want CONFLICT", r)
	}
	h.g.guard.mu.Lock()
	defer h.g.guard.mu.Unlock()
	if got := h.g.guard.callbacks[addr].secret; got != "victim-secret" {
		t.Fatalf("the secret presented to the victim is now %q", got)
	}
}
