package gateway

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/remote"
	"github.com/rs/zerolog"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"lemo/api"
)

const (
	testToken   = "alice-secret-0123456789"
	testAddress = "127.0.0.1:40000"
)

func testGuard(t testing.TB) *guard {
	t.Helper()
	tokens, err := NewTokens(Token{Secret: testToken, Principal: alice})
	if err != nil {
		t.Fatal(err)
	}
	return newGuard(tokens, "gateway", false, zerolog.Nop())
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
	if err := g.addSession(session, key, testAddress, "", 10); err != nil {
		t.Fatal(err)
	}
	if err := g.addSession("gateway/other", "someone-else", "127.0.0.1:1", "", 10); err != nil {
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
	if err := g.addSession("gateway/live", key, testAddress, "", 10); err != nil {
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
	if _, ok := g.sessionPeer("gateway/live"); ok || len(g.callbacks) != 0 || len(g.perPeer) != 0 {
		t.Fatalf("removeSession left state: %v %v %v", g.sessions, g.callbacks, g.perPeer)
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

func TestGuardSessionLimit(t *testing.T) {
	g := testGuard(t)
	for i := 0; i < 3; i++ {
		if err := g.addSession("gateway/s"+string(rune('a'+i)), "k", testAddress, "", 3); err != nil {
			t.Fatal(err)
		}
	}
	if err := g.addSession("gateway/sd", "k", testAddress, "", 3); !errors.Is(err, errTooManySessions) {
		t.Fatalf("fourth session: %v", err)
	}
	if err := g.addSession("gateway/other", "k2", testAddress, "", 3); err != nil {
		t.Fatalf("another peer's session: %v", err)
	}
}
