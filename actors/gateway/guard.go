package gateway

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"context"
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

// Metadata keys of the remote connection.
const (
	// MetadataToken carries the client's token on every gRPC call.
	MetadataToken = "lemo-token"
	// MetadataCallback carries the client's callback secret on the
	// connection the daemon dials back to the client.
	MetadataCallback = "lemo-callback"
)

// Message header keys the guard stamps on every envelope it lets through
// (any the peer sent are replaced), so actors can trust them.
const (
	hdrPeer     = "lemo-peer"
	hdrOwner    = "lemo-owner"
	hdrOperator = "lemo-operator"
	hdrAddress  = "lemo-address"
	// hdrToken identifies the token (a digest of its digest), for the
	// per-token limits.
	hdrToken = "lemo-token-id"
)

// Type names a peer may send.
var (
	typeRequest    = string(proto.MessageName(&api.Request{}))
	typeWatch      = string(proto.MessageName(&actor.Watch{}))
	typeUnwatch    = string(proto.MessageName(&actor.Unwatch{}))
	typeTerminated = string(proto.MessageName(&actor.Terminated{}))
)

const (
	receiveMethod = "/remote.Remoting/Receive"
	// maxEnvelopes bounds one batch (a client's writer sends at most its
	// batch size).
	maxEnvelopes = 4096
)

// errRejected is wrapped by every reason the guard closes a stream.
var errRejected = errors.New("gateway: rejected")

// guard authenticates remote connections and inspects every message batch
// before protoactor decodes it. It is shared by gRPC's goroutines and the
// gateway's actors, hence its mutex.
type guard struct {
	tokens    *Tokens
	gatewayID string
	// anyHost lets a peer declare a host name (TLS mode, where the daemon
	// verifies the client's certificate when it dials back); otherwise the
	// declared address must be an IP equal to the connection's source.
	anyHost bool
	log     zerolog.Logger

	// gate orders message processing before Stop: a stream holds it (read)
	// while protoactor processes the message it received; close takes it
	// (write) before remote shuts down, which otherwise races with a
	// message in flight (protoactor's endpoint manager is not
	// synchronised).
	gate    sync.RWMutex
	closing bool // guarded by gate

	// conns, when set, is told which connections authenticated.
	conns *conns

	// self is the daemon's own address (empty until remote listens):
	// every target of a client's batch is readdressed to it, so a
	// message is always delivered here, whatever address the client
	// dialed (a tunnel's local end), and never makes the daemon dial out.
	self atomic.Pointer[string]

	mu sync.Mutex
	// sessions maps a session actor's id to its peer key and token.
	sessions map[string]sessionEntry
	// sessionsBy and subsBy count sessions and subscriptions by token id;
	// subs is every client's subscriptions.
	sessionsBy map[string]int
	subsBy     map[string]int
	subs       int
	// callbacks maps a client's address to the secret the daemon presents
	// when it dials it, the token that declared it, and the number of
	// sessions using it.
	callbacks map[string]*callback
}

type sessionEntry struct {
	peer, token string
}

type callback struct {
	secret string
	token  string
	users  int
}

func newGuard(tokens *Tokens, gatewayID string, anyHost bool, log zerolog.Logger) *guard {
	return &guard{tokens: tokens, gatewayID: gatewayID, anyHost: anyHost, log: log,
		sessions: make(map[string]sessionEntry), sessionsBy: make(map[string]int), subsBy: make(map[string]int), callbacks: make(map[string]*callback)}
}

// tokenID identifies a token in the per-token counts and headers without
// revealing its digest.
func tokenID(digest [32]byte) string {
	h := sha256.New()
	h.Write([]byte("lemo token id\x00"))
	h.Write(digest[:])
	return hex.EncodeToString(h.Sum(nil)[:16])
}

// authenticate returns the principal and token digest of the call's token;
// a valid token authenticates the call's connection.
func (g *guard) authenticate(ctx context.Context) (Principal, [32]byte, bool) {
	md, _ := metadata.FromIncomingContext(ctx)
	vals := md.Get(MetadataToken)
	if len(vals) != 1 {
		return Principal{}, [32]byte{}, false
	}
	p, ok := g.tokens.Lookup(vals[0])
	if ok && g.conns != nil {
		g.conns.authenticated(peerAddr(ctx))
	}
	return p, sha256.Sum256([]byte(vals[0])), ok
}

func (g *guard) recovered(where string, err *error) {
	if v := recover(); v != nil {
		g.log.Error().Str("rpc", where).Interface("panic", v).Msg("remote handler panicked; the peer's stream was closed")
		*err = status.Errorf(codes.Internal, "lemo: internal error")
	}
}

// unary answers the unary remoting RPCs (ListProcesses,
// GetProcessDiagnostics, which protoactor leaves unimplemented and would
// panic on) with an error, after checking the token. A client uses it to
// test its token: Unimplemented means the token was accepted.
func (g *guard) unary(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (resp any, err error) {
	defer g.recovered(info.FullMethod, &err)
	if _, _, ok := g.authenticate(ctx); !ok {
		return nil, status.Error(codes.Unauthenticated, "lemo: missing or wrong token")
	}
	return nil, status.Errorf(codes.Unimplemented, "lemo: %s is not offered", info.FullMethod)
}

// stream checks the token of a Receive stream and wraps it so that every
// message is inspected before protoactor sees it. Panics below it close
// the stream instead of the daemon.
func (g *guard) stream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) (err error) {
	defer g.recovered(info.FullMethod, &err)
	if info.FullMethod != receiveMethod {
		return status.Errorf(codes.Unimplemented, "lemo: %s is not offered", info.FullMethod)
	}
	p, digest, ok := g.authenticate(ss.Context())
	if !ok {
		g.log.Warn().Str("peer", peerAddr(ss.Context())).Msg("remote connection without a valid token refused")
		return status.Error(codes.Unauthenticated, "lemo: missing or wrong token")
	}
	gs := &guardedStream{ServerStream: ss, g: g, principal: p, digest: digest, source: peerIP(ss.Context())}
	defer gs.release()
	return handler(srv, gs)
}

// close makes every stream stop delivering messages, after those being
// processed.
func (g *guard) close() {
	g.gate.Lock()
	g.closing = true
	g.gate.Unlock()
}

func peerAddr(ctx context.Context) string {
	if p, ok := peer.FromContext(ctx); ok && p.Addr != nil {
		return p.Addr.String()
	}
	return ""
}

func peerIP(ctx context.Context) net.IP {
	host, _, err := net.SplitHostPort(peerAddr(ctx))
	if err != nil {
		return nil
	}
	return net.ParseIP(host)
}

// dialStream adds the callback secret of the client being dialed.
func (g *guard) dialStream(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	g.mu.Lock()
	cb := g.callbacks[cc.Target()]
	if cb != nil && cb.users == 0 {
		// Kept only to deliver a refused hello's answer: this is its dial.
		delete(g.callbacks, cc.Target())
	}
	g.mu.Unlock()
	if cb != nil {
		ctx = metadata.AppendToOutgoingContext(ctx, MetadataCallback, cb.secret)
	}
	return streamer(ctx, desc, cc, method, opts...)
}

// ErrAddressClaimed: a client declared an address whose callback another
// client node (another token or callback secret) holds.
var ErrAddressClaimed = errors.New("gateway: address claimed by another client")

// sessionClaim is what a hello binds: a session actor to a peer, a token
// and the callback secret of the peer's address.
type sessionClaim struct {
	id, peer, token, address, secret string
}

// addSession binds a session actor to its peer and token, and the peer's
// callback secret to its address, within the session limits. An address
// belongs to the first node that declared it until its last session ends:
// a peer that can connect from the same IP (any local user on loopback)
// cannot replace the secret the daemon presents to another client.
//
// A hello refused for a limit is answered too, which needs the secret when
// the daemon dials the client: the address keeps it (with no user) until
// that dial, and a later claim of the address replaces it.
func (g *guard) addSession(c sessionClaim, lim *Limits) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	cb := g.callbacks[c.address]
	if cb != nil && cb.users > 0 && (cb.token != c.token || subtle.ConstantTimeCompare([]byte(cb.secret), []byte(c.secret)) != 1) {
		return fmt.Errorf("%w: %s is in use by another client node (another token or callback secret); a client must listen on an address of its own", ErrAddressClaimed, c.address)
	}
	if cb != nil && cb.users == 0 {
		cb = nil
	}
	if err := admitOne(held{byToken: g.sessionsBy[c.token], all: len(g.sessions)}, lim.sessionQuota()); err != nil {
		if cb == nil {
			g.callbacks[c.address] = &callback{secret: c.secret, token: c.token}
		}
		return err
	}
	g.sessions[c.id] = sessionEntry{peer: c.peer, token: c.token}
	g.sessionsBy[c.token]++
	if cb == nil {
		cb = &callback{secret: c.secret, token: c.token}
		g.callbacks[c.address] = cb
	}
	cb.users++
	return nil
}

func (g *guard) removeSession(id, address string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	e, ok := g.sessions[id]
	if !ok {
		return
	}
	delete(g.sessions, id)
	if g.sessionsBy[e.token]--; g.sessionsBy[e.token] <= 0 {
		delete(g.sessionsBy, e.token)
	}
	if cb := g.callbacks[address]; cb != nil {
		if cb.users--; cb.users <= 0 {
			delete(g.callbacks, address)
		}
	}
}

// addSubscription counts one more subscription of token, within the
// subscription limits; removeSubscription counts one less.
func (g *guard) addSubscription(token string, lim *Limits) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if err := admitOne(held{byToken: g.subsBy[token], all: g.subs}, lim.subscriptionQuota()); err != nil {
		return err
	}
	g.subsBy[token]++
	g.subs++
	return nil
}

func (g *guard) removeSubscription(token string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.subsBy[token] <= 0 {
		return
	}
	if g.subsBy[token]--; g.subsBy[token] == 0 {
		delete(g.subsBy, token)
	}
	g.subs--
}

func (g *guard) sessionPeer(id string) (string, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	e, ok := g.sessions[id]
	return e.peer, ok
}

// guardedStream is one authenticated Receive stream.
type guardedStream struct {
	grpc.ServerStream
	g         *guard
	principal Principal
	digest    [32]byte
	source    net.IP
	// Set by the connect request.
	address string
	key     string
	header  map[string]string
	holding bool // holds g.gate while protoactor processes a message
}

func (s *guardedStream) release() {
	if s.holding {
		s.holding = false
		s.g.gate.RUnlock()
	}
}

// RecvMsg receives the next message and lets it through only if it is
// allowed; anything else ends the stream with an error.
func (s *guardedStream) RecvMsg(m any) error {
	s.release()
	if err := s.ServerStream.RecvMsg(m); err != nil {
		return err
	}
	msg, ok := m.(*remote.RemoteMessage)
	if !ok {
		return status.Errorf(codes.Internal, "lemo: unexpected message type %T", m)
	}
	if err := s.inspect(msg); err != nil {
		s.g.log.Warn().Err(err).Str("peer", peerAddr(s.Context())).Str("owner", s.principal.Owner).Msg("remote stream closed")
		return status.Error(codes.PermissionDenied, err.Error())
	}
	s.g.gate.RLock()
	if s.g.closing {
		s.g.gate.RUnlock()
		return status.Error(codes.Unavailable, "lemo: the daemon is stopping")
	}
	s.holding = true
	return nil
}

func (s *guardedStream) inspect(msg *remote.RemoteMessage) error {
	switch t := msg.GetMessageType().(type) {
	case *remote.RemoteMessage_ConnectRequest:
		if s.address != "" {
			return fmt.Errorf("%w: a second connect request on one stream", errRejected)
		}
		sc := t.ConnectRequest.GetServerConnection()
		if sc == nil {
			return fmt.Errorf("%w: only server connections are accepted (clients must listen)", errRejected)
		}
		if err := s.g.checkAddress(sc.GetAddress(), s.source); err != nil {
			return err
		}
		s.address = sc.GetAddress()
		s.key = peerKey(s.digest, s.address)
		s.header = map[string]string{hdrPeer: s.key, hdrOwner: s.principal.Owner, hdrOperator: strconv.FormatBool(s.principal.Operator), hdrAddress: s.address, hdrToken: tokenID(s.digest)}
		return nil
	case *remote.RemoteMessage_MessageBatch:
		if s.address == "" {
			return fmt.Errorf("%w: a message batch before the connect request", errRejected)
		}
		return s.g.inspectBatch(t.MessageBatch, s.address, s.key, s.header)
	default:
		return fmt.Errorf("%w: unexpected remote message %T", errRejected, t)
	}
}

// peerKey identifies a client node: its token and its address. It survives
// reconnections of the node's streams, so sessions do too.
func peerKey(digest [32]byte, address string) string {
	h := sha256.New()
	h.Write(digest[:])
	h.Write([]byte(address))
	return hex.EncodeToString(h.Sum(nil)[:16])
}

// checkAddress validates the address a peer declares as its own (where the
// daemon dials replies to).
func (g *guard) checkAddress(addr string, source net.IP) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("%w: declared address %q: want host:port", errRejected, addr)
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return fmt.Errorf("%w: declared address %q: bad port", errRejected, addr)
	}
	ip := net.ParseIP(host)
	switch {
	case ip != nil && source != nil && ip.Equal(source):
		return nil
	case ip == nil && g.anyHost && host != "":
		return nil
	case g.anyHost && ip != nil:
		return nil
	}
	return fmt.Errorf("%w: declared address %q does not match the connection's source %v", errRejected, addr, source)
}

// inspectBatch lets a batch through only if every envelope is well formed,
// of an allowed type, addressed to the gateway or to a session of this
// peer, and names no address but the peer's own. It replaces the
// envelopes' headers with the peer's trusted ones, and the targets'
// address with the daemon's own (g.self).
func (g *guard) inspectBatch(b *remote.MessageBatch, address, key string, header map[string]string) error {
	if n := len(b.GetEnvelopes()); n == 0 || n > maxEnvelopes {
		return fmt.Errorf("%w: a batch of %d envelopes", errRejected, n)
	}
	for _, p := range b.GetSenders() {
		if p == nil || p.GetAddress() != address {
			return fmt.Errorf("%w: a sender at another address than the peer's own", errRejected)
		}
	}
	for _, p := range b.GetTargets() {
		if p == nil {
			return fmt.Errorf("%w: an empty target", errRejected)
		}
	}
	self := g.self.Load()
	if self == nil {
		return fmt.Errorf("%w: the daemon does not know its address yet", errRejected)
	}
	for _, p := range b.GetTargets() {
		p.Address = *self
	}
	types, targets, senders := b.GetTypeNames(), b.GetTargets(), b.GetSenders()
	kept := b.Envelopes[:0]
	for _, env := range b.GetEnvelopes() {
		if env == nil {
			return fmt.Errorf("%w: an empty envelope", errRejected)
		}
		if env.GetTypeId() < 0 || int(env.GetTypeId()) >= len(types) ||
			env.GetTarget() < 0 || int(env.GetTarget()) >= len(targets) ||
			env.GetSender() < 0 || int(env.GetSender()) > len(senders) ||
			env.GetSerializerId() != 0 {
			return fmt.Errorf("%w: a malformed envelope", errRejected)
		}
		typ, target := types[env.GetTypeId()], targets[env.GetTarget()]
		if err := g.allowed(typ, target.GetId(), key, env.GetMessageData(), address); err != nil {
			if errors.Is(err, errEnded) {
				continue // to a session that ended: nothing to deliver to
			}
			return err
		}
		env.MessageHeader = &remote.MessageHeader{HeaderData: header}
		kept = append(kept, env)
	}
	b.Envelopes = kept
	return nil
}

// errEnded: a message to a session that no longer exists (or never did:
// session names cannot be guessed). It is dropped, not answered with a
// closed stream, because a client's last messages (acks, the end of a
// watch) often race with its session's end, and the stream carries the
// messages of the node's other sessions too.
var errEnded = errors.New("gateway: no such session")

// allowed checks one message's type and target.
func (g *guard) allowed(typ, target, key string, data []byte, address string) error {
	if target == g.gatewayID {
		if typ != typeRequest {
			return fmt.Errorf("%w: %s to the gateway", errRejected, typ)
		}
		return nil
	}
	owner, ok := g.sessionPeer(target)
	if !ok {
		if strings.HasPrefix(target, g.gatewayID+"/") {
			return errEnded
		}
		return fmt.Errorf("%w: a message to %q, which is neither the gateway nor a session", errRejected, target)
	}
	if subtle.ConstantTimeCompare([]byte(owner), []byte(key)) != 1 {
		return fmt.Errorf("%w: a message to an actor that is not this client's session", errRejected)
	}
	switch typ {
	case typeRequest:
		return nil
	case typeWatch, typeUnwatch, typeTerminated:
		// System messages name a PID that protoactor dials: it must be
		// the peer's own.
		var who *actor.PID
		switch typ {
		case typeWatch:
			m := new(actor.Watch)
			if proto.Unmarshal(data, m) != nil {
				return fmt.Errorf("%w: a malformed watch", errRejected)
			}
			who = m.GetWatcher()
		case typeUnwatch:
			m := new(actor.Unwatch)
			if proto.Unmarshal(data, m) != nil {
				return fmt.Errorf("%w: a malformed unwatch", errRejected)
			}
			who = m.GetWatcher()
		default:
			m := new(actor.Terminated)
			if proto.Unmarshal(data, m) != nil {
				return fmt.Errorf("%w: a malformed terminated", errRejected)
			}
			who = m.GetWho()
		}
		if who == nil || who.GetAddress() != address {
			return fmt.Errorf("%w: %s names another address than the peer's own", errRejected, typ)
		}
		return nil
	}
	return fmt.Errorf("%w: %s to a session", errRejected, typ)
}
