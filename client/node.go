package client

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"crypto/tls"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/remote"
	"github.com/rs/zerolog"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"lemo/api"
	"lemo/remoting"
)

// Metadata keys shared with the daemon's gateway.
const (
	metadataToken    = "lemo-token"
	metadataCallback = "lemo-callback"
)

// Bounds of the client's own messages and of gRPC on both directions.
const (
	// maxRequestBytes bounds one message to the daemon; with writerBatch
	// messages per gRPC message it stays well under grpcMaxMessage.
	maxRequestBytes = 2 << 20
	writerBatch     = 8
	grpcMaxMessage  = 32 << 20
)

// NodeOptions configure a Node.
type NodeOptions struct {
	// Listen is where the node listens for the daemon's replies, host:port
	// (default 127.0.0.1:0: the loopback, a port the system picks). A fixed
	// port is what an SSH tunnel for the dial-back (ssh -R) needs.
	Listen string
	// Advertise is the address the daemon dials, from the daemon's side:
	// host:port, or a host alone for the listen port (which must then be
	// fixed). Default: the listen address as bound; required when Listen
	// names every interface (0.0.0.0, ::). Without TLS the daemon accepts
	// only an IP equal to the connection's source; clients behind NAT
	// are reached only through a tunnel (see CheckCallback).
	Advertise string
	// TLS, when set, makes the node dial the daemon over TLS and serve the
	// daemon's dial-back over TLS with the same certificate: set
	// Certificates (the node's certificate, valid for its advertised host)
	// and RootCAs (the daemon's CA). Required with a TLS daemon.
	TLS *tls.Config
	// Log receives protoactor's logs (default: discarded).
	Log zerolog.Logger
}

// Node is the process's endpoint for the remote API: protoactor remote
// needs every client to listen, because the daemon dials its replies back.
// One Node carries any number of Conns (each its own session), to one or
// more daemons.
//
// Run at most one Node per process: protoactor's remote sets gRPC's global
// logger when it starts, which races with a second node's gRPC goroutines.
type Node struct {
	system *actor.ActorSystem
	remote *remote.Remote
	secret []byte
	tls    *tls.Config

	// gate orders message processing before Close: a stream holds it (read)
	// while protoactor processes the message it received, and Close takes
	// it (write) before shutting remote down, which otherwise races with
	// the processing of a message in flight (protoactor's endpoint manager
	// is not synchronised).
	gate    sync.RWMutex
	closing bool // guarded by gate

	mu     sync.Mutex
	tokens map[string]*daemonToken // daemon address → token
	// aliases maps a daemon's own address (its Welcome's) to the address
	// dialed to reach it, when they differ (a tunnel's local end). The
	// PIDs a daemon names (senders, the watcher of a Conn's receiver) are
	// at its own address, which protoactor would dial: resolveAlias sends
	// to them at the address dialed. Kept for the node's life, one per
	// daemon the node attached to.
	aliases   map[string]string
	receivers map[string]bool // actor ids that may receive messages
	conns     map[*Conn]bool
	closed    bool
}

// daemonToken is the token the node presents to one daemon, and how many
// Conns use it.
type daemonToken struct {
	token string
	users int
}

// NewNode starts a node listening on o.Listen (default: the loopback, an
// ephemeral port).
func NewNode(o NodeOptions) (*Node, error) {
	cb, err := CheckCallback(o.Listen, o.Advertise)
	if err != nil {
		return nil, err
	}
	n := &Node{tls: o.TLS, tokens: make(map[string]*daemonToken), aliases: make(map[string]string), receivers: make(map[string]bool), conns: make(map[*Conn]bool)}
	raw := make([]byte, 32)
	if _, err := rand.Read(raw); err != nil {
		return nil, fmt.Errorf("client: random secret: %w", err)
	}
	n.secret = []byte(base64.RawURLEncoding.EncodeToString(raw))
	log := o.Log
	n.system = actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger {
		return slog.New(zerolog.NewSlogHandler(log)).With("lib", "protoactor")
	}), actor.WithDeadLetterRequestLogging(false))
	serverOpts := []grpc.ServerOption{
		grpc.ChainStreamInterceptor(n.guardStream),
		grpc.ChainUnaryInterceptor(n.guardUnary),
		grpc.MaxRecvMsgSize(grpcMaxMessage),
		grpc.MaxSendMsgSize(grpcMaxMessage),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: 10 * time.Second, PermitWithoutStream: true}),
	}
	creds := insecure.NewCredentials()
	if o.TLS != nil {
		serverOpts = append(serverOpts, grpc.Creds(credentials.NewTLS(o.TLS.Clone())))
		creds = credentials.NewTLS(o.TLS.Clone())
	}
	opts := []remote.ConfigOption{
		remote.WithServerOptions(serverOpts...),
		remote.WithDialOptions(
			grpc.WithTransportCredentials(creds),
			grpc.WithChainStreamInterceptor(n.dialStream),
			grpc.WithDefaultCallOptions(grpc.MaxCallSendMsgSize(grpcMaxMessage), grpc.MaxCallRecvMsgSize(grpcMaxMessage)),
			grpc.WithKeepaliveParams(keepalive.ClientParameters{Time: 30 * time.Second, Timeout: 20 * time.Second, PermitWithoutStream: true}),
		),
		remote.WithEndpointWriterBatchSize(writerBatch),
		remote.WithEndpointWriterQueueSize(1024),
		remote.WithEndpointManagerQueueSize(1024),
	}
	if cb.Advertise != "" {
		opts = append(opts, remote.WithAdvertisedHost(cb.Advertise))
	}
	rc := remote.Configure(cb.Host, cb.Port, opts...)
	rc.MaxRetryCount = 1
	n.system.ProcessRegistry.RegisterAddressResolver(n.resolveAlias) // before remote's
	n.remote = remote.NewRemote(n.system, rc)
	if err := startRemote(n.remote, net.JoinHostPort(cb.Host, strconv.Itoa(cb.Port))); err != nil {
		n.system.Shutdown()
		return nil, err
	}
	n.system.EventStream.Subscribe(func(evt any) {
		if e, ok := evt.(*remote.EndpointTerminatedEvent); ok {
			n.linkDown(e.Address)
		}
	})
	return n, nil
}

// linkDown tells the Conns to the daemon at addr that the node's link to it
// went down (protoactor made it anew for the next message sent there).
func (n *Node) linkDown(addr string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	for c := range n.conns {
		if c.o.Addr == addr {
			select {
			case c.linkDown <- struct{}{}:
			default:
			}
		}
	}
}

// Callback is a node's checked listen and advertised addresses.
type Callback struct {
	Host      string // the listen host
	Port      int    // the listen port; 0: the system picks one
	Advertise string // host:port the daemon dials; empty: the bound address
}

// CheckCallback checks a node's listen address (host:port, port 0 for one
// the system picks; empty: 127.0.0.1:0) and advertised address (host:port,
// or a host alone for a fixed listen port; empty: the listen address as
// bound), with errors that say what is accepted.
func CheckCallback(listen, advertise string) (Callback, error) {
	cb := Callback{Host: "127.0.0.1"}
	if listen != "" {
		host, port, err := splitCallback(listen, "listen", 0)
		if err != nil {
			return Callback{}, err
		}
		cb.Host, cb.Port = host, port
	}
	unspecified := false
	if ip := net.ParseIP(cb.Host); ip != nil && ip.IsUnspecified() {
		unspecified = true
	}
	if advertise == "" {
		if unspecified {
			return Callback{}, fmt.Errorf("client: listen address %q names every interface: also give the address the daemon dials to reach this client (advertise host:port)", listen)
		}
		return cb, nil
	}
	if !strings.Contains(advertise, ":") || (strings.HasPrefix(advertise, "[") && strings.HasSuffix(advertise, "]")) {
		// A host alone: the listen port, which must be fixed.
		if cb.Port == 0 {
			return Callback{}, fmt.Errorf("client: advertised address %q has no port, and the listen port is picked by the system: give host:port, or a fixed listen port", advertise)
		}
		advertise = net.JoinHostPort(strings.Trim(advertise, "[]"), strconv.Itoa(cb.Port))
	}
	host, port, err := splitCallback(advertise, "advertised", 1)
	if err != nil {
		return Callback{}, err
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
		return Callback{}, fmt.Errorf("client: advertised address %q: the daemon cannot dial %s; give an address it reaches this client at", advertise, host)
	}
	cb.Advertise = net.JoinHostPort(host, strconv.Itoa(port))
	return cb, nil
}

// splitCallback splits a host:port of the node (what says which one) with
// a port from minPort to 65535.
func splitCallback(addr, what string, minPort int) (string, int, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil || host == "" {
		return "", 0, fmt.Errorf("client: %s address %q: want host:port (an IP address or host name, and a port), e.g. 127.0.0.1:7466", what, addr)
	}
	p, err := strconv.Atoi(port)
	if err != nil || p < minPort || p > 65535 {
		return "", 0, fmt.Errorf("client: %s address %q: the port must be a number from %d to 65535", what, addr, minPort)
	}
	if net.ParseIP(host) == nil && !validHostName(host) {
		return "", 0, fmt.Errorf("client: %s address %q: %q is neither an IP address nor a host name", what, addr, host)
	}
	return host, p, nil
}

// validHostName reports whether s is a DNS host name (letters, digits,
// hyphens and dots, labels of 1 to 63 characters).
func validHostName(s string) bool {
	if len(s) > 253 {
		return false
	}
	for _, label := range strings.Split(s, ".") {
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return false
		}
		for _, r := range label {
			if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-') {
				return false
			}
		}
	}
	return true
}

func startRemote(r *remote.Remote, listen string) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = fmt.Errorf("client: listen for the daemon's replies on %s: %v", listen, v)
		}
	}()
	r.Start()
	return nil
}

// Addr is the address the daemon dials back to.
func (n *Node) Addr() string { return n.system.Address() }

// Close closes every Conn of the node and stops it.
func (n *Node) Close() error {
	n.mu.Lock()
	if n.closed {
		n.mu.Unlock()
		return nil
	}
	n.closed = true
	conns := make([]*Conn, 0, len(n.conns))
	for c := range n.conns {
		conns = append(conns, c)
	}
	n.mu.Unlock()
	for _, c := range conns {
		_ = c.Close()
	}
	n.gate.Lock()
	n.closing = true
	n.gate.Unlock()
	remoting.Shutdown(n.remote)
	n.system.Shutdown()
	return nil
}

var errNodeClosed = errors.New("client: node closed")

func (n *Node) addConn(c *Conn, daemon, token string) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		return errNodeClosed
	}
	dt := n.tokens[daemon]
	if dt != nil && dt.token != token {
		return fmt.Errorf("client: this node already talks to %s with another token (the connection carries one); use another process for another identity", daemon)
	}
	if dt == nil {
		dt = &daemonToken{token: token}
		n.tokens[daemon] = dt
	}
	dt.users++
	n.conns[c] = true
	return nil
}

func (n *Node) removeConn(c *Conn) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if !n.conns[c] {
		return
	}
	delete(n.conns, c)
	if dt := n.tokens[c.o.Addr]; dt != nil {
		if dt.users--; dt.users <= 0 {
			delete(n.tokens, c.o.Addr)
		}
	}
}

func (n *Node) allowReceiver(id string, ok bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if ok {
		n.receivers[id] = true
	} else {
		delete(n.receivers, id)
	}
}

// addAlias records that the daemon dialed at dialed names itself own
// (see Node.aliases). A daemon address already routed elsewhere (two
// tunnels to daemons that listen on the same address) keeps its first
// route; an address the node dials itself is never rerouted.
func (n *Node) addAlias(own, dialed string) {
	if own == "" || own == dialed {
		return
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if _, ok := n.aliases[own]; !ok && n.tokens[own] == nil {
		n.aliases[own] = dialed
	}
}

// dialedFor returns the address dialed to reach the daemon whose own
// address is addr (Node.aliases), unless a Conn of the node dials addr
// itself.
func (n *Node) dialedFor(addr string) (string, bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	dialed, ok := n.aliases[addr]
	return dialed, ok && n.tokens[addr] == nil
}

// resolveAlias is an address resolver of the node's actor system, asked
// before remote's: a PID at a daemon's own address is reached at the
// address dialed to reach that daemon (the daemon takes every message
// for itself, whatever address it names), unless a Conn of the node
// dials the daemon's own address itself.
func (n *Node) resolveAlias(pid *actor.PID) (actor.Process, bool) {
	dialed, ok := n.dialedFor(pid.GetAddress())
	if !ok {
		return nil, false
	}
	to := actor.NewPID(dialed, pid.GetId())
	p, ok := n.system.ProcessRegistry.Get(to)
	if !ok {
		return nil, false
	}
	return aliasProcess{p: p, to: to}, true
}

// aliasProcess sends what is sent to a PID at a daemon's own address to
// the same actor at the address dialed (remote's process sends to the PID
// it is given, not to the one it was made for).
type aliasProcess struct {
	p  actor.Process
	to *actor.PID
}

func (a aliasProcess) SendUserMessage(_ *actor.PID, m any)   { a.p.SendUserMessage(a.to, m) }
func (a aliasProcess) SendSystemMessage(_ *actor.PID, m any) { a.p.SendSystemMessage(a.to, m) }
func (a aliasProcess) Stop(_ *actor.PID)                     { a.p.Stop(a.to) }

// dialStream presents the token of the daemon being dialed.
func (n *Node) dialStream(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	n.mu.Lock()
	dt := n.tokens[cc.Target()]
	n.mu.Unlock()
	if dt != nil {
		ctx = metadata.AppendToOutgoingContext(ctx, metadataToken, dt.token)
	}
	return streamer(ctx, desc, cc, method, opts...)
}

// guardUnary refuses the unary remoting RPCs (protoactor panics on them).
func (n *Node) guardUnary(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	return nil, status.Errorf(codes.Unimplemented, "lemo client: %s is not offered", info.FullMethod)
}

// guardStream accepts only the daemon (which presents this node's
// callback secret) and only the messages a client expects, addressed to
// its receivers. Panics below it close the stream, not the process.
func (n *Node) guardStream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = status.Errorf(codes.Internal, "lemo client: internal error")
		}
	}()
	md, _ := metadata.FromIncomingContext(ss.Context())
	vals := md.Get(metadataCallback)
	if len(vals) != 1 || subtle.ConstantTimeCompare([]byte(vals[0]), n.secret) != 1 {
		return status.Error(codes.Unauthenticated, "lemo client: not the daemon this client attached to")
	}
	cs := &clientStream{ServerStream: ss, n: n}
	defer cs.release()
	return handler(srv, cs)
}

type clientStream struct {
	grpc.ServerStream
	n       *Node
	holding bool // holds n.gate while protoactor processes a message
}

func (s *clientStream) release() {
	if s.holding {
		s.holding = false
		s.n.gate.RUnlock()
	}
}

var allowedTypes = map[string]bool{
	string(proto.MessageName(&api.Response{})):    true,
	string(proto.MessageName(&api.UpdateBatch{})): true,
	string(proto.MessageName(&api.ServiceCall{})): true,
	string(proto.MessageName(&api.Chunk{})):       true,
	string(proto.MessageName(&actor.Watch{})):     true,
	string(proto.MessageName(&actor.Unwatch{})):   true,
	terminatedType: true,
}

func (s *clientStream) RecvMsg(m any) error {
	s.release()
	if err := s.ServerStream.RecvMsg(m); err != nil {
		return err
	}
	if err := s.check(m); err != nil {
		return err
	}
	s.n.gate.RLock()
	if s.n.closing {
		s.n.gate.RUnlock()
		return status.Error(codes.Unavailable, "lemo client: closing")
	}
	s.holding = true
	return nil
}

func (s *clientStream) check(m any) error {
	msg, ok := m.(*remote.RemoteMessage)
	if !ok {
		return status.Error(codes.Internal, "lemo client: unexpected message")
	}
	b := msg.GetMessageBatch()
	if b == nil {
		if msg.GetConnectRequest() != nil {
			return nil
		}
		return status.Error(codes.PermissionDenied, "lemo client: unexpected remote message")
	}
	types, targets, senders := b.GetTypeNames(), b.GetTargets(), b.GetSenders()
	for _, p := range append(append([]*actor.PID(nil), targets...), senders...) {
		if p == nil {
			return status.Error(codes.PermissionDenied, "lemo client: empty pid")
		}
	}
	kept := b.Envelopes[:0]
	for _, env := range b.GetEnvelopes() {
		if env == nil || env.GetTypeId() < 0 || int(env.GetTypeId()) >= len(types) ||
			env.GetTarget() < 0 || int(env.GetTarget()) >= len(targets) ||
			env.GetSender() < 0 || int(env.GetSender()) > len(senders) || env.GetSerializerId() != 0 {
			return status.Error(codes.PermissionDenied, "lemo client: malformed envelope")
		}
		if !allowedTypes[types[env.GetTypeId()]] {
			return status.Errorf(codes.PermissionDenied, "lemo client: message type %s refused", types[env.GetTypeId()])
		}
		if types[env.GetTypeId()] == terminatedType {
			if err := s.readdressTerminated(env); err != nil {
				return err
			}
		}
		s.n.mu.Lock()
		ok := s.n.receivers[targets[env.GetTarget()].GetId()]
		s.n.mu.Unlock()
		if ok {
			kept = append(kept, env)
		}
		// Else: to a Conn that closed, or to nothing this node hosts;
		// dropped, as the stream carries other Conns' messages too.
	}
	b.Envelopes = kept
	return nil
}

var terminatedType = string(proto.MessageName(&actor.Terminated{}))

// readdressTerminated moves a Terminated's actor from a daemon's own
// address to the address dialed to reach it (Node.aliases): protoactor
// hands it to its link to the actor's address, which would dial the
// daemon's own address (through a tunnel: nothing, or another daemon).
func (s *clientStream) readdressTerminated(env *remote.MessageEnvelope) error {
	s.n.mu.Lock()
	none := len(s.n.aliases) == 0
	s.n.mu.Unlock()
	if none {
		return nil
	}
	var t actor.Terminated
	if err := proto.Unmarshal(env.GetMessageData(), &t); err != nil || t.GetWho() == nil {
		return status.Error(codes.PermissionDenied, "lemo client: malformed Terminated")
	}
	dialed, ok := s.n.dialedFor(t.GetWho().GetAddress())
	if !ok {
		return nil
	}
	t.Who.Address = dialed
	data, err := proto.Marshal(&t)
	if err != nil {
		return status.Error(codes.Internal, "lemo client: readdress a Terminated")
	}
	env.MessageData = data
	return nil
}

// probe checks that a daemon listens at addr and accepts token, with a
// plain gRPC call that needs no session: it tells "not running" and "wrong
// token" apart before any actor message is sent.
func (n *Node) probe(ctx context.Context, addr, token string) error {
	creds := insecure.NewCredentials()
	if n.tls != nil {
		creds = credentials.NewTLS(n.tls.Clone())
	}
	// passthrough: the address as given, as protoactor's own dialer uses it.
	cc, err := grpc.NewClient("passthrough:///"+addr, grpc.WithTransportCredentials(creds))
	if err != nil {
		return fmt.Errorf("%w: %s: %v", ErrNotRunning, addr, err)
	}
	defer cc.Close()
	ctx = metadata.AppendToOutgoingContext(ctx, metadataToken, token)
	err = cc.Invoke(ctx, "/remote.Remoting/ListProcesses", &remote.ListProcessesRequest{}, &remote.ListProcessesResponse{}, grpc.WaitForReady(false))
	switch status.Code(err) {
	case codes.Unimplemented:
		return nil
	case codes.Unauthenticated:
		return fmt.Errorf("%w (daemon at %s)", ErrUnauthenticated, addr)
	case codes.Unavailable:
		if ctx.Err() == nil {
			return fmt.Errorf("%w: nothing answers at %s", ErrNotRunning, addr)
		}
	case codes.DeadlineExceeded, codes.Canceled:
		return fmt.Errorf("%w: %s did not answer in time", ErrNotRunning, addr)
	}
	return fmt.Errorf("%w: %s: %v", ErrNotRunning, addr, err)
}

// validAddr checks a daemon address.
func validAddr(addr string) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil || host == "" {
		return fmt.Errorf("client: daemon address %q: want host:port", addr)
	}
	if p, err := strconv.Atoi(port); err != nil || p < 1 || p > 65535 {
		return fmt.Errorf("client: daemon address %q: bad port", addr)
	}
	return nil
}
