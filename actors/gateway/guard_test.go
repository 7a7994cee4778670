package gateway

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/remote"
	"github.com/rs/zerolog"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"lemo/api"
)

const (
	testToken   = "alice-secret-0123456789"
	testAddress = "127.0.0.1:40000"
	// testSelf is the daemon's own address in the guard's tests.
	testSelf = "127.0.0.1:7465"
)

func testGuard(t testing.TB) *guard {
	t.Helper()
	tokens, err := NewTokens(Token{Secret: testToken, Principal: alice})
	if err != nil {
		t.Fatal(err)
	}
	g := newGuard(tokens, "gateway", false, zerolog.Nop())
	self := testSelf
	g.self.Store(&self)
	return g
}

// fakeStream replays messages to the guard as a gRPC stream would.
type fakeStream struct {
	grpc.ServerStream
	ctx  context.Context
	msgs []*remote.RemoteMessage
}

func (f *fakeStream) Context() context.Context { return f.ctx }

func (f *fakeStream) RecvMsg(m any) error {
	if len(f.msgs) == 0 {
		return errors.New("EOF")
	}
	proto.Merge(m.(*remote.RemoteMessage), f.msgs[0])
	f.msgs = f.msgs[1:]
	return nil
}

func streamContext(token string, from string) context.Context {
	ctx := context.Background()
	if token != "" {
		ctx = metadata.NewIncomingContext(ctx, metadata.Pairs(MetadataToken, token))
	}
	addr, _ := net.ResolveTCPAddr("tcp", from)
	return peer.NewContext(ctx, &peer.Peer{Addr: addr})
}

func connectMsg(addr string) *remote.RemoteMessage {
	return &remote.RemoteMessage{MessageType: &remote.RemoteMessage_ConnectRequest{ConnectRequest: &remote.ConnectRequest{
		ConnectionType: &remote.ConnectRequest_ServerConnection{ServerConnection: &remote.ServerConnection{SystemId: "x", Address: addr}}}}}
}

func batch(typ, target string, data []byte, sender *actor.PID) *remote.RemoteMessage {
	b := &remote.MessageBatch{TypeNames: []string{typ}, Targets: []*actor.PID{{Address: "daemon:1", Id: target}},
		Envelopes: []*remote.MessageEnvelope{{TypeId: 0, Target: 0, MessageData: data, MessageHeader: &remote.MessageHeader{HeaderData: map[string]string{hdrOwner: "root", hdrOperator: "true"}}}}}
	if sender != nil {
		b.Senders = []*actor.PID{sender}
		b.Envelopes[0].Sender = 1
	}
	return &remote.RemoteMessage{MessageType: &remote.RemoteMessage_MessageBatch{MessageBatch: b}}
}

func marshal(m proto.Message) []byte {
	b, _ := proto.Marshal(m)
	return b
}

// run feeds msgs through the guard's stream interceptor and returns the
// error that ended the stream and the messages the handler saw.
func run(g *guard, ctx context.Context, msgs ...*remote.RemoteMessage) ([]*remote.RemoteMessage, error) {
	var seen []*remote.RemoteMessage
	handler := func(srv any, ss grpc.ServerStream) error {
		for {
			m := new(remote.RemoteMessage)
			if err := ss.RecvMsg(m); err != nil {
				if err.Error() == "EOF" {
					return nil
				}
				return err
			}
			seen = append(seen, m)
		}
	}
	err := g.stream(nil, &fakeStream{ctx: ctx, msgs: msgs}, &grpc.StreamServerInfo{FullMethod: receiveMethod}, handler)
	return seen, err
}

func TestGuardStream(t *testing.T) {
	g := testGuard(t)
	const session = "gateway/abcdefghijklmnopqrstuv"
	key := peerKey(sha256Of(testToken), testAddress)
	if err := g.addSession(sessionClaim{id: session, peer: key, token: "alice", address: testAddress}, testLimits()); err != nil {
		t.Fatal(err)
	}
	if err := g.addSession(sessionClaim{id: "gateway/other", peer: "someone-else", token: "bob", address: "127.0.0.1:1"}, testLimits()); err != nil {
		t.Fatal(err)
	}
	me := &actor.PID{Address: testAddress, Id: "c1"}
	hello := marshal(&api.Request{Id: 1, Command: &api.Request_Hello{Hello: &api.Hello{ProtocolVersion: 1}}})
	ok := streamContext(testToken, "127.0.0.1:5555")
	cases := []struct {
		name string
		ctx  context.Context
		msgs []*remote.RemoteMessage
		code codes.Code // codes.OK: accepted
		want string
	}{
		{"hello to the gateway", ok, []*remote.RemoteMessage{connectMsg(testAddress), batch(typeRequest, "gateway", hello, me)}, codes.OK, ""},
		{"request to own session", ok, []*remote.RemoteMessage{connectMsg(testAddress), batch(typeRequest, session, hello, me)}, codes.OK, ""},
		{"watch of own session", ok, []*remote.RemoteMessage{connectMsg(testAddress), batch(typeWatch, session, marshal(&actor.Watch{Watcher: me}), nil)}, codes.OK, ""},
		{"no token", streamContext("", "127.0.0.1:5555"), nil, codes.Unauthenticated, "token"},
		{"wrong token", streamContext("not-the-token-at-all", "127.0.0.1:5555"), nil, codes.Unauthenticated, "token"},
		{"batch before connect", ok, []*remote.RemoteMessage{batch(typeRequest, "gateway", hello, me)}, codes.PermissionDenied, "before the connect"},
		{"second connect", ok, []*remote.RemoteMessage{connectMsg(testAddress), connectMsg(testAddress)}, codes.PermissionDenied, "second connect"},
		{"client connection", ok, []*remote.RemoteMessage{{MessageType: &remote.RemoteMessage_ConnectRequest{ConnectRequest: &remote.ConnectRequest{ConnectionType: &remote.ConnectRequest_ClientConnection{ClientConnection: &remote.ClientConnection{}}}}}}, codes.PermissionDenied, "clients must listen"},
		{"address of another host", ok, []*remote.RemoteMessage{connectMsg("10.1.2.3:40000")}, codes.PermissionDenied, "does not match"},
		{"host name without TLS", ok, []*remote.RemoteMessage{connectMsg("example.com:40000")}, codes.PermissionDenied, "does not match"},
		{"bad port", ok, []*remote.RemoteMessage{connectMsg("127.0.0.1:0")}, codes.PermissionDenied, "bad port"},
		{"unknown type to the gateway", ok, []*remote.RemoteMessage{connectMsg(testAddress), batch("nope.Nope", "gateway", []byte{1}, me)}, codes.PermissionDenied, "nope.Nope"},
		{"stop to the gateway", ok, []*remote.RemoteMessage{connectMsg(testAddress), batch("actor.Stop", "gateway", nil, nil)}, codes.PermissionDenied, "actor.Stop"},
		{"poison to a session", ok, []*remote.RemoteMessage{connectMsg(testAddress), batch("actor.PoisonPill", session, nil, nil)}, codes.PermissionDenied, "actor.PoisonPill"},
		{"request to an internal actor", ok, []*remote.RemoteMessage{connectMsg(testAddress), batch(typeRequest, "daemon/tasks", hello, me)}, codes.PermissionDenied, ""},
		{"request to the activator", ok, []*remote.RemoteMessage{connectMsg(testAddress), batch(typeRequest, "activator", hello, me)}, codes.PermissionDenied, ""},
		{"request to another client's session", ok, []*remote.RemoteMessage{connectMsg(testAddress), batch(typeRequest, "gateway/other", hello, me)}, codes.PermissionDenied, "not this client's session"},
		{"sender at another address", ok, []*remote.RemoteMessage{connectMsg(testAddress), batch(typeRequest, "gateway", hello, &actor.PID{Address: "10.0.0.1:80", Id: "x"})}, codes.PermissionDenied, "sender"},
		{"watch naming another address", ok, []*remote.RemoteMessage{connectMsg(testAddress), batch(typeWatch, session, marshal(&actor.Watch{Watcher: &actor.PID{Address: "10.0.0.1:80", Id: "x"}}), nil)}, codes.PermissionDenied, "another address"},
		{"terminated naming another address", ok, []*remote.RemoteMessage{connectMsg(testAddress), batch(typeTerminated, session, marshal(&actor.Terminated{Who: &actor.PID{Address: "10.0.0.1:80", Id: "x"}}), nil)}, codes.PermissionDenied, "another address"},
		{"malformed watch", ok, []*remote.RemoteMessage{connectMsg(testAddress), batch(typeWatch, session, []byte{0xff, 0xff}, nil)}, codes.PermissionDenied, "malformed"},
		{"empty batch", ok, []*remote.RemoteMessage{connectMsg(testAddress), {MessageType: &remote.RemoteMessage_MessageBatch{MessageBatch: &remote.MessageBatch{}}}}, codes.PermissionDenied, "0 envelopes"},
		{"disconnect request", ok, []*remote.RemoteMessage{connectMsg(testAddress), {MessageType: &remote.RemoteMessage_DisconnectRequest{DisconnectRequest: &remote.DisconnectRequest{}}}}, codes.PermissionDenied, "unexpected"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			seen, err := run(g, tc.ctx, tc.msgs...)
			if got := status.Code(err); got != tc.code {
				t.Fatalf("stream ended with %v (%v), want %v", got, err, tc.code)
			}
			if tc.want != "" && !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q lacks %q", err, tc.want)
			}
			if tc.code != codes.OK {
				return
			}
			b := seen[len(seen)-1].GetMessageBatch()
			h := b.GetEnvelopes()[0].GetMessageHeader().GetHeaderData()
			if h[hdrOwner] != "alice" || h[hdrOperator] != "false" || h[hdrPeer] != key || h[hdrAddress] != testAddress {
				t.Errorf("header = %v, want the guard's own (alice, not operator)", h)
			}
		})
	}
}

func sha256Of(s string) [32]byte {
	_, d, _ := testGuard(nopT{}).authenticate(metadata.NewIncomingContext(context.Background(), metadata.Pairs(MetadataToken, s)))
	return d
}

type nopT struct{ testing.TB }

func (nopT) Helper()               {}
func (nopT) Fatal(args ...any)     { panic(args) }
func (nopT) Errorf(string, ...any) {}

// Envelopes to a session that ended are dropped, the rest delivered, and
// the stream stays open: it carries the node's other sessions too.
func TestGuardDropsMessagesToEndedSessions(t *testing.T) {
	g := testGuard(t)
	key := peerKey(sha256Of(testToken), testAddress)
	if err := g.addSession(sessionClaim{id: "gateway/live", peer: key, token: "alice", address: testAddress}, testLimits()); err != nil {
		t.Fatal(err)
	}
	data := marshal(&api.Request{Id: 1, Command: &api.Request_Goodbye{Goodbye: &api.Goodbye{}}})
	b := &remote.MessageBatch{TypeNames: []string{typeRequest}, Targets: []*actor.PID{{Id: "gateway/ended"}, {Id: "gateway/live"}},
		Envelopes: []*remote.MessageEnvelope{{Target: 0, MessageData: data}, {Target: 1, MessageData: data}}}
	seen, err := run(g, streamContext(testToken, "127.0.0.1:1"), connectMsg(testAddress), &remote.RemoteMessage{MessageType: &remote.RemoteMessage_MessageBatch{MessageBatch: b}})
	if err != nil {
		t.Fatal(err)
	}
	envs := seen[1].GetMessageBatch().GetEnvelopes()
	if len(envs) != 1 || envs[0].GetTarget() != 1 {
		t.Fatalf("delivered %v, want only the live session's envelope", envs)
	}
	g.removeSession("gateway/live", testAddress)
	if _, ok := g.sessionPeer("gateway/live"); ok || len(g.callbacks) != 0 || len(g.sessionsBy) != 0 {
		t.Fatalf("removeSession left state: %v %v %v", g.sessions, g.callbacks, g.sessionsBy)
	}
}

// Every target of a batch is readdressed to the daemon's own address: a
// message is delivered here whatever address the client dialed (a
// tunnel's local end), and never makes the daemon dial another address.
// Until the daemon knows its address, batches are refused.
func TestGuardReaddressesTargets(t *testing.T) {
	g := testGuard(t)
	b := &remote.MessageBatch{TypeNames: []string{typeRequest}, Targets: []*actor.PID{{Address: "10.9.8.7:80", Id: "gateway"}},
		Envelopes: []*remote.MessageEnvelope{{MessageData: marshal(&api.Request{Id: 1})}}}
	if err := g.inspectBatch(b, testAddress, "k", nil); err != nil {
		t.Fatal(err)
	}
	if got := b.GetTargets()[0].GetAddress(); got != testSelf {
		t.Fatalf("target address %q, want the daemon's own %q", got, testSelf)
	}
	g.self.Store(nil)
	if err := g.inspectBatch(b, testAddress, "k", nil); !errors.Is(err, errRejected) {
		t.Fatalf("before the daemon knows its address: %v, want a rejection", err)
	}
}

func TestGuardMalformedEnvelopes(t *testing.T) {
	g := testGuard(t)
	good := func() *remote.MessageBatch {
		return &remote.MessageBatch{TypeNames: []string{typeRequest}, Targets: []*actor.PID{{Id: "gateway"}},
			Envelopes: []*remote.MessageEnvelope{{MessageData: marshal(&api.Request{Id: 1})}}}
	}
	cases := map[string]func(b *remote.MessageBatch){
		"type id out of range": func(b *remote.MessageBatch) { b.Envelopes[0].TypeId = 1 },
		"negative type id":     func(b *remote.MessageBatch) { b.Envelopes[0].TypeId = -1 },
		"target out of range":  func(b *remote.MessageBatch) { b.Envelopes[0].Target = 3 },
		"sender out of range":  func(b *remote.MessageBatch) { b.Envelopes[0].Sender = 2 },
		"another serializer":   func(b *remote.MessageBatch) { b.Envelopes[0].SerializerId = 1 },
		"nil target":           func(b *remote.MessageBatch) { b.Targets[0] = nil },
		"nil envelope":         func(b *remote.MessageBatch) { b.Envelopes[0] = nil },
		"too many envelopes":   func(b *remote.MessageBatch) { b.Envelopes = make([]*remote.MessageEnvelope, maxEnvelopes+1) },
		"nil sender":           func(b *remote.MessageBatch) { b.Senders = []*actor.PID{nil} },
	}
	for name, mutate := range cases {
		t.Run(name, func(t *testing.T) {
			b := good()
			if err := g.inspectBatch(b, testAddress, "k", nil); err != nil {
				t.Fatalf("the unmutated batch: %v", err)
			}
			b = good()
			mutate(b)
			if err := g.inspectBatch(b, testAddress, "k", nil); !errors.Is(err, errRejected) {
				t.Fatalf("inspectBatch = %v, want a rejection", err)
			}
		})
	}
}

func TestGuardUnaryAndRecovery(t *testing.T) {
	g := testGuard(t)
	info := &grpc.UnaryServerInfo{FullMethod: "/remote.Remoting/ListProcesses"}
	called := false
	handler := func(ctx context.Context, req any) (any, error) { called = true; panic("implement me") }
	if _, err := g.unary(streamContext(testToken, "127.0.0.1:1"), nil, info, handler); status.Code(err) != codes.Unimplemented {
		t.Errorf("ListProcesses with the token: %v, want Unimplemented", err)
	}
	if _, err := g.unary(streamContext("", "127.0.0.1:1"), nil, info, handler); status.Code(err) != codes.Unauthenticated {
		t.Errorf("ListProcesses without a token: %v, want Unauthenticated", err)
	}
	if called {
		t.Error("the unimplemented handler was called")
	}
	// A panic below the stream interceptor closes the stream, not the
	// process.
	panicking := func(srv any, ss grpc.ServerStream) error { panic("unknown type") }
	err := g.stream(nil, &fakeStream{ctx: streamContext(testToken, "127.0.0.1:1")}, &grpc.StreamServerInfo{FullMethod: receiveMethod}, panicking)
	if status.Code(err) != codes.Internal {
		t.Fatalf("panicking handler: %v, want Internal", err)
	}
	if err := g.stream(nil, &fakeStream{ctx: streamContext(testToken, "127.0.0.1:1")}, &grpc.StreamServerInfo{FullMethod: "/other/Method"}, panicking); status.Code(err) != codes.Unimplemented {
		t.Fatalf("other method: %v", err)
	}
}

func testLimits() *Limits {
	l := Limits{MaxSessionsPerToken: 3, MaxSessionsTotal: 5, MaxSubscriptionsPerToken: 4, MaxSubscriptionsTotal: 6}
	l.defaults()
	return &l
}

// Sessions are limited per token, whatever address (source port) they
// declare, and overall; an ended session frees its place.
func TestGuardSessionLimits(t *testing.T) {
	g := testGuard(t)
	lim := testLimits()
	add := func(id, token, address string) error {
		return g.addSession(sessionClaim{id: id, peer: token + address, token: token, address: address, secret: token}, lim)
	}
	// One token, three sessions from three ports of one IP.
	for i := 0; i < 3; i++ {
		if err := add(fmt.Sprintf("gateway/a%d", i), "alice", fmt.Sprintf("127.0.0.1:%d", 40000+i)); err != nil {
			t.Fatal(err)
		}
	}
	err := add("gateway/a3", "alice", "127.0.0.1:40003")
	var le *LimitError
	if !errors.As(err, &le) || !errors.Is(err, ErrLimit) || le.Key != "remote.max_sessions_per_token" || le.Limit != 3 {
		t.Fatalf("fourth session of one token from a new port: %v, want the per-token limit", err)
	}
	if !strings.Contains(err.Error(), "sessions of this token") || !strings.Contains(err.Error(), "3") {
		t.Errorf("error %q does not say which limit", err)
	}
	// Other tokens fill the daemon up to the overall limit.
	for i, tok := range []string{"bob", "carol"} {
		if err := add("gateway/o"+tok, tok, fmt.Sprintf("127.0.0.1:%d", 41000+i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := add("gateway/dave", "dave", "127.0.0.1:42000"); !errors.As(err, &le) || le.Key != "remote.max_sessions" || le.Limit != 5 {
		t.Fatalf("a session beyond the overall limit: %v, want the overall limit", err)
	}
	g.removeSession("gateway/a0", "127.0.0.1:40000")
	if err := add("gateway/dave", "dave", "127.0.0.1:42000"); err != nil {
		t.Fatalf("after a session ended: %v", err)
	}
}

// Subscriptions are limited per token over all its sessions, and overall.
func TestGuardSubscriptionLimits(t *testing.T) {
	g := testGuard(t)
	lim := testLimits()
	for i := 0; i < 4; i++ {
		if err := g.addSubscription("alice", lim); err != nil {
			t.Fatal(err)
		}
	}
	var le *LimitError
	if err := g.addSubscription("alice", lim); !errors.As(err, &le) || le.Key != "remote.max_subscriptions_per_token" {
		t.Fatalf("fifth subscription of one token: %v", err)
	}
	for i := 0; i < 2; i++ {
		if err := g.addSubscription("bob", lim); err != nil {
			t.Fatal(err)
		}
	}
	if err := g.addSubscription("carol", lim); !errors.As(err, &le) || le.Key != "remote.max_subscriptions" {
		t.Fatalf("a subscription beyond the overall limit: %v", err)
	}
	g.removeSubscription("alice")
	g.removeSubscription("nobody") // counts nothing
	if err := g.addSubscription("carol", lim); err != nil {
		t.Fatalf("after one ended: %v", err)
	}
	if g.subs != 6 || g.subsBy["alice"] != 3 {
		t.Fatalf("counts: all %d, alice %d; want 6 and 3", g.subs, g.subsBy["alice"])
	}
}

// A peer on the victim's IP, with another token or another callback
// secret, declares the victim's address: it cannot replace the secret the
// daemon presents when it dials the victim back. The victim's own further
// sessions share the entry, and once they end the address is free.
func TestGuardCallbackSecretCannotBeTakenOver(t *testing.T) {
	g := testGuard(t)
	lim := testLimits()
	victim := sessionClaim{id: "gateway/v1", peer: "pv", token: "alice", address: testAddress, secret: "victim-secret"}
	if err := g.addSession(victim, lim); err != nil {
		t.Fatal(err)
	}
	for name, c := range map[string]sessionClaim{
		"another token":            {id: "gateway/x1", peer: "px", token: "mallory", address: testAddress, secret: "mallory-secret"},
		"another token, no secret": {id: "gateway/x2", peer: "px", token: "mallory", address: testAddress},
		"same token, other secret": {id: "gateway/x3", peer: "pv", token: "alice", address: testAddress, secret: "other-secret"},
	} {
		if err := g.addSession(c, lim); !errors.Is(err, ErrAddressClaimed) {
			t.Errorf("%s: addSession = %v, want ErrAddressClaimed", name, err)
		}
		if got := g.callbacks[testAddress].secret; got != "victim-secret" {
			t.Fatalf("%s: the secret presented to %s is now %q", name, testAddress, got)
		}
		if _, ok := g.sessionPeer(c.id); ok {
			t.Errorf("%s: the refused session was registered", name)
		}
	}
	second := victim
	second.id = "gateway/v2"
	if err := g.addSession(second, lim); err != nil {
		t.Fatalf("the victim's second session: %v", err)
	}
	g.removeSession("gateway/v1", testAddress)
	g.removeSession("gateway/v2", testAddress)
	if err := g.addSession(sessionClaim{id: "gateway/n1", peer: "pn", token: "bob", address: testAddress, secret: "new"}, lim); err != nil {
		t.Fatalf("a new node on the freed address: %v", err)
	}
}

// A hello refused for a limit is still answered: the daemon's dial to the
// refused client presents its secret once, and the entry does not stay.
func TestGuardRefusedHelloIsAnswered(t *testing.T) {
	g := testGuard(t)
	lim := testLimits()
	lim.MaxSessionsPerToken = 1
	if err := g.addSession(sessionClaim{id: "gateway/a", peer: "pa", token: "alice", address: "127.0.0.1:1", secret: "s1"}, lim); err != nil {
		t.Fatal(err)
	}
	refused := sessionClaim{id: "gateway/b", peer: "pb", token: "alice", address: testAddress, secret: "s2"}
	if err := g.addSession(refused, lim); !errors.Is(err, ErrLimit) {
		t.Fatalf("second session: %v, want a limit", err)
	}
	cc, err := grpc.NewClient(testAddress, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	presented := func() []string {
		var got []string
		streamer := func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, opts ...grpc.CallOption) (grpc.ClientStream, error) {
			md, _ := metadata.FromOutgoingContext(ctx)
			got = md.Get(MetadataCallback)
			return nil, nil
		}
		_, _ = g.dialStream(context.Background(), &grpc.StreamDesc{}, cc, receiveMethod, streamer)
		return got
	}
	if got := presented(); len(got) != 1 || got[0] != "s2" {
		t.Fatalf("the dial to the refused client presented %v, want its secret", got)
	}
	if got := presented(); len(got) != 0 {
		t.Fatalf("a second dial presented %v: the refused client's entry stayed", got)
	}
	// A leftover entry (no dial happened) never blocks a new claim.
	_ = g.addSession(refused, lim)
	lim.MaxSessionsPerToken = 5
	if err := g.addSession(sessionClaim{id: "gateway/c", peer: "pc", token: "bob", address: testAddress, secret: "s3"}, lim); err != nil {
		t.Fatalf("a claim of an address only a refused hello used: %v", err)
	}
}
