package gateway

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/remote"
	"github.com/rs/zerolog"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/keepalive"

	"lemo/actors"
	"lemo/actors/services"
	"lemo/api"
	"lemo/logging"
	"lemo/providers"
	"lemo/remoting"
	"lemo/tools"
)

// Backend is the daemon API the gateway bridges to (*actors.Daemon).
type Backend interface {
	CreateTask(ctx context.Context, c actors.Caller, in actors.CreateTask) (*api.TaskMeta, error)
	SendMessage(ctx context.Context, c actors.Caller, taskID, text string) (*api.TaskMeta, error)
	Pause(ctx context.Context, c actors.Caller, taskID string) (*api.TaskMeta, error)
	Continue(ctx context.Context, c actors.Caller, taskID, model string) (*api.TaskMeta, error)
	Cancel(ctx context.Context, c actors.Caller, taskID string) (*api.TaskMeta, error)
	Task(ctx context.Context, c actors.Caller, taskID string) (*api.TaskMeta, error)
	ListTasks(ctx context.Context, c actors.Caller, before string, limit int) ([]*api.TaskMeta, string, error)
	History(ctx context.Context, c actors.Caller, taskID string, from uint64, limit int) ([]*api.Event, error)
	Subscribe(ctx context.Context, c actors.Caller, o actors.SubscribeOptions) (*actors.Subscription, error)
	PendingBelow(ctx context.Context, c actors.Caller, taskID string) ([]*api.TreeEvent, error)
	ProgressBelow(ctx context.Context, c actors.Caller, taskID string) (*api.TreeState, error)
}

var _ Backend = (*actors.Daemon)(nil)

// ToolLister lists the daemon's tools (*tools.Registry).
type ToolLister interface {
	List() []*tools.Registered
}

// ModelLister lists the models of every provider (*providers.Registry).
type ModelLister interface {
	Models(ctx context.Context) providers.Listing
}

// Limits bound what one client may cost the daemon. Zero values take the
// defaults.
type Limits struct {
	// CreditWindow is the number of updates a subscription sends before it
	// waits for the client's Ack (default 256); MaxUnackedBytes bounds the
	// same in bytes (default 8 MiB).
	CreditWindow    int
	MaxUnackedBytes int
	// MaxQueue is how many updates a subscription holds for a client that
	// has no credit left before it ends with FellBehind (default 4096).
	MaxQueue int
	// MaxMessageBytes: larger daemon-to-client messages are chunked
	// (default 512 KiB).
	MaxMessageBytes int
	// GRPCMaxMessage is gRPC's message limit on both directions (default
	// 32 MiB); it must exceed WriterBatch × MaxMessageBytes.
	GRPCMaxMessage int
	// WriterBatch is protoactor's endpoint writer batch: messages per gRPC
	// message (default 16). WriterQueue is the writer's initial queue
	// (default 1024; it grows when needed).
	WriterBatch int
	WriterQueue int
	// MaxInflight bounds a session's commands in flight (default 64);
	// MaxSubscriptions its subscriptions (default 64).
	MaxInflight      int
	MaxSubscriptions int
	// MaxSessionsPerToken bounds the sessions of one token, whatever the
	// addresses and connections they come from (default 128);
	// MaxSessionsTotal every client's (default 1024).
	MaxSessionsPerToken int
	MaxSessionsTotal    int
	// MaxSubscriptionsPerToken bounds the subscriptions of one token over
	// all its sessions (default 1024); MaxSubscriptionsTotal every
	// client's (default 8192).
	MaxSubscriptionsPerToken int
	MaxSubscriptionsTotal    int
	// MaxConnections bounds the open connections to the remote API
	// (default 256); ConnectionReserve of them are kept for connections
	// that authenticated (default 32). AuthTimeout is how long a
	// connection may stay open without presenting a valid token (default
	// 5s).
	MaxConnections    int
	ConnectionReserve int
	AuthTimeout       time.Duration
	// CommandTimeout bounds one command (default 2m).
	CommandTimeout time.Duration
	// HubBuffer is each subscription's queue at the daemon's hub (default
	// 1024); the subscription drains it continuously.
	HubBuffer int
	// SnapshotPage is how many events a subscription reads from history
	// at a time while it replays (default 256).
	SnapshotPage int
	// Linger is the least time between two batches of live updates of one
	// subscription (default 4ms; negative: none): an update after a quiet
	// spell leaves at once, a stream leaves in batches.
	Linger time.Duration
}

func (l *Limits) defaults() {
	set := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	set(&l.CreditWindow, 256)
	set(&l.MaxUnackedBytes, 8<<20)
	set(&l.MaxQueue, 4096)
	set(&l.MaxMessageBytes, 512<<10)
	set(&l.GRPCMaxMessage, 32<<20)
	set(&l.WriterBatch, 16)
	set(&l.WriterQueue, 1024)
	set(&l.MaxInflight, 64)
	set(&l.MaxSubscriptions, 64)
	set(&l.MaxSessionsPerToken, 128)
	set(&l.MaxSessionsTotal, 1024)
	set(&l.MaxSubscriptionsPerToken, 1024)
	set(&l.MaxSubscriptionsTotal, 8192)
	set(&l.MaxConnections, 256)
	if l.ConnectionReserve <= 0 {
		l.ConnectionReserve = min(32, max(1, l.MaxConnections/8))
	}
	if l.AuthTimeout <= 0 {
		l.AuthTimeout = 5 * time.Second
	}
	set(&l.HubBuffer, 1024)
	set(&l.SnapshotPage, 256)
	if l.Linger == 0 {
		l.Linger = 4 * time.Millisecond
	}
	if l.CommandTimeout <= 0 {
		l.CommandTimeout = 2 * time.Minute
	}
}

// Config is what the gateway needs.
type Config struct {
	// Listen is host:port; port 0 picks a free port (see Addr).
	Listen string
	// ServerTLS, when set, serves TLS (set ClientCAs and ClientAuth for
	// client certificates); required for a non-loopback address.
	ServerTLS *tls.Config
	// ClientTLS is used to dial back to clients; with ServerTLS set it is
	// required (clients then serve TLS too).
	ClientTLS *tls.Config
	Tokens    *Tokens
	Daemon    Backend
	Tools     ToolLister
	Models    ModelLister
	// Services is the registry of Program Services; nil refuses
	// registrations.
	Services *services.Registry
	// Approvals answers the approval and steering commands; nil refuses
	// them.
	Approvals Approvals
	// Inspector answers the operators' inspection commands (the actor
	// tree, stopping one tool call); nil takes Daemon when it is one, else
	// they are refused.
	Inspector Inspector
	// DelegateSessions lists the delegate agent's sessions
	// (list_delegate_sessions); nil when the delegate tool is not
	// configured, and the listing is empty with a warning.
	DelegateSessions DelegateCatalog
	// DefaultModel is used when a create names no model.
	DefaultModel string
	// Version is the daemon's version, told to clients.
	Version string
	Log     zerolog.Logger
	Limits  Limits
}

// Approvals is the part of the daemon API that answers approvals and
// steers running calls.
type Approvals interface {
	PendingApprovals(ctx context.Context, c actors.Caller) ([]*api.Event, error)
	ResolveApproval(ctx context.Context, c actors.Caller, approvalID string, approve bool, reason string) (*api.TaskMeta, error)
	AllowForTask(ctx context.Context, c actors.Caller, approvalID, reason string) (*api.TaskMeta, error)
	Steer(ctx context.Context, c actors.Caller, taskID, callID string, input json.RawMessage) error
}

// ErrAddressInUse is wrapped when the listen address is taken.
var ErrAddressInUse = errors.New("gateway: address in use")

// gatewayName is the gateway actor's id: the one well-known name.
const gatewayName = "gateway"

// Gateway is the running edge actor system.
type Gateway struct {
	cfg    Config
	log    zerolog.Logger
	system *actor.ActorSystem
	remote *remote.Remote
	guard  *guard
	conns  *conns
	out    *outbox
	feeds  *feeds
	pid    *actor.PID
	addr   string

	ctx    context.Context
	cancel context.CancelFunc
	// wg tracks every goroutine sessions start (commands, subscriptions).
	wg       sync.WaitGroup
	stopOnce sync.Once
	stopErr  error
}

// Start listens and starts the gateway. It refuses a non-loopback address
// without TLS, and reports an address in use as ErrAddressInUse.
func Start(ctx context.Context, cfg Config) (*Gateway, error) {
	cfg.Limits.defaults()
	if cfg.Tokens == nil || cfg.Daemon == nil || cfg.Tools == nil || cfg.Models == nil {
		return nil, errors.New("gateway: Start needs tokens, a daemon, tools and models")
	}
	host, portText, err := net.SplitHostPort(cfg.Listen)
	if err != nil {
		return nil, fmt.Errorf("gateway: listen address %q: want host:port", cfg.Listen)
	}
	port, err := strconv.Atoi(portText)
	if err != nil || port < 0 || port > 65535 {
		return nil, fmt.Errorf("gateway: listen address %q: bad port", cfg.Listen)
	}
	if !IsLoopback(host) && cfg.ServerTLS == nil {
		return nil, fmt.Errorf("gateway: %s is not a loopback address: TLS is required to listen on it", cfg.Listen)
	}
	if cfg.ServerTLS != nil && cfg.ClientTLS == nil {
		return nil, errors.New("gateway: with TLS the daemon dials back to clients over TLS: ClientTLS is required")
	}
	if err := cfg.Limits.check(); err != nil {
		return nil, err
	}
	// remote.Start panics when it cannot listen: find out first.
	if l, err := net.Listen("tcp", cfg.Listen); err != nil {
		return nil, fmt.Errorf("%w: listen on %s: %v (is another lemo daemon or program using it?)", ErrAddressInUse, cfg.Listen, err)
	} else {
		_ = l.Close()
	}
	g := newGateway(cfg)
	lim := cfg.Limits
	serverOpts := []grpc.ServerOption{
		grpc.ChainStreamInterceptor(g.guard.stream),
		grpc.ChainUnaryInterceptor(g.guard.unary),
		grpc.MaxRecvMsgSize(lim.GRPCMaxMessage),
		grpc.MaxSendMsgSize(lim.GRPCMaxMessage),
		grpc.KeepaliveParams(keepalive.ServerParameters{Time: 30 * time.Second, Timeout: 20 * time.Second}),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: 10 * time.Second, PermitWithoutStream: true}),
		grpc.ConnectionTimeout(10 * time.Second),
		// Lemo's clients use one stream per connection (protoactor's
		// Receive) and a unary call to probe; nothing needs more.
		grpc.MaxConcurrentStreams(maxStreams),
		// gRPC shares write buffers between connections by
		// default: an idle connection holds none, so a flood costs less.
	}
	// Every connection goes through conns (its limits and auth timeout)
	// before TLS or HTTP/2 see it.
	serverCreds, dialCreds := insecure.NewCredentials(), insecure.NewCredentials()
	if cfg.ServerTLS != nil {
		serverCreds, dialCreds = credentials.NewTLS(cfg.ServerTLS), credentials.NewTLS(cfg.ClientTLS)
	}
	serverOpts = append(serverOpts, grpc.Creds(limitedCreds{TransportCredentials: serverCreds, c: g.conns}))
	rc := remote.Configure(host, port,
		remote.WithServerOptions(serverOpts...),
		remote.WithDialOptions(
			grpc.WithTransportCredentials(dialCreds),
			grpc.WithChainStreamInterceptor(g.guard.dialStream),
			grpc.WithDefaultCallOptions(grpc.MaxCallSendMsgSize(lim.GRPCMaxMessage), grpc.MaxCallRecvMsgSize(lim.GRPCMaxMessage)),
			grpc.WithKeepaliveParams(keepalive.ClientParameters{Time: 30 * time.Second, Timeout: 20 * time.Second, PermitWithoutStream: true}),
		),
		remote.WithEndpointWriterBatchSize(lim.WriterBatch),
		remote.WithEndpointWriterQueueSize(lim.WriterQueue),
		remote.WithEndpointManagerBatchSize(lim.WriterBatch),
		remote.WithEndpointManagerQueueSize(lim.WriterQueue),
	)
	// A client that went away is given up after two dial attempts (2 s
	// apart) instead of five.
	rc.MaxRetryCount = 2
	g.remote = remote.NewRemote(g.system, rc)
	if err := startRemote(g.remote); err != nil {
		g.cancel()
		g.system.Shutdown()
		return nil, fmt.Errorf("%w: %v", ErrAddressInUse, err)
	}
	g.addr = g.system.Address()
	g.guard.self.Store(&g.addr)
	if err := g.spawn(); err != nil {
		g.remote.Shutdown(false)
		g.cancel()
		g.system.Shutdown()
		return nil, err
	}
	g.log.Info().Str("address", g.addr).Bool("tls", cfg.ServerTLS != nil).Msg("remote API listening")
	return g, nil
}

// newGateway builds the gateway's parts that do not touch the network.
func newGateway(cfg Config) *Gateway {
	if cfg.Inspector == nil {
		cfg.Inspector, _ = cfg.Daemon.(Inspector)
	}
	g := &Gateway{cfg: cfg, log: cfg.Log.With().Str("component", "gateway").Logger()}
	g.ctx, g.cancel = context.WithCancel(context.Background())
	g.system = actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger {
		return logging.Slog(cfg.Log, "protoactor-edge")
	}), actor.WithDeadLetterRequestLogging(false))
	g.guard = newGuard(cfg.Tokens, gatewayName, cfg.ServerTLS != nil, g.log)
	g.conns = newConns(cfg.Limits, g.log)
	g.guard.conns = g.conns
	g.out = &outbox{root: g.system.Root, max: cfg.Limits.MaxMessageBytes}
	g.feeds = newFeeds(g)
	return g
}

// spawn starts the gateway actor.
func (g *Gateway) spawn() error {
	pid, err := g.system.Root.SpawnNamed(actor.PropsFromProducer(func() actor.Actor { return &gatewayActor{g: g} }), gatewayName)
	if err != nil {
		return fmt.Errorf("gateway: spawn: %w", err)
	}
	g.pid = pid
	return nil
}

// startRemote starts remote, turning its panic (it cannot listen) into an
// error.
func startRemote(r *remote.Remote) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = fmt.Errorf("start remote: %v", v)
		}
	}()
	r.Start()
	return nil
}

// IsLoopback reports whether host names the loopback interface.
func IsLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// maxStreams bounds the concurrent gRPC streams of one connection.
const maxStreams = 16

// Addr returns the address the gateway listens on.
func (g *Gateway) Addr() string { return g.addr }

// Stop ends every session (their subscriptions and services), waits for
// their goroutines and shuts the remote layer down. It is safe to call more
// than once.
func (g *Gateway) Stop(ctx context.Context) error {
	g.stopOnce.Do(func() {
		if err := g.system.Root.StopFuture(g.pid).Wait(); err != nil {
			g.stopErr = fmt.Errorf("gateway: stop sessions: %w", err)
		}
		g.cancel()
		waited := make(chan struct{})
		go func() {
			g.wg.Wait()
			close(waited)
		}()
		select {
		case <-waited:
		case <-ctx.Done():
			if g.stopErr == nil {
				g.stopErr = fmt.Errorf("gateway: sessions did not stop in time: %w", ctx.Err())
			}
		}
		g.guard.close()
		g.conns.close()
		if g.remote != nil {
			remoting.Shutdown(g.remote)
		}
		g.system.Shutdown()
	})
	return g.stopErr
}

// goroutine runs f on a goroutine Stop waits for. A panic in f is
// logged and handed to recovered (which answers the client), never the
// end of the daemon.
func (g *Gateway) goroutine(f func(), recovered func(v any)) {
	g.wg.Add(1)
	go func() {
		defer g.wg.Done()
		defer func() {
			if v := recover(); v != nil {
				g.log.Error().Interface("panic", v).Msg("a session goroutine panicked")
				if recovered != nil {
					recovered(v)
				}
			}
		}()
		f()
	}()
}

// gatewayActor opens sessions. It is the only actor besides sessions that
// peers may address, and only with Hello.
type gatewayActor struct {
	g *Gateway
}

func (a *gatewayActor) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *api.Request:
		a.hello(ctx, m)
	case *actor.Terminated:
		// A session ended; it cleaned up after itself.
	}
}

func (a *gatewayActor) hello(ctx actor.Context, req *api.Request) {
	g := a.g
	client := ctx.Sender()
	hdr := ctx.MessageHeader()
	if client == nil || hdr == nil || hdr.Get(hdrPeer) == "" {
		g.log.Warn().Msg("a request without a sender or not through the guard was dropped")
		return
	}
	reply := func(r *api.Response) { r.Id = req.GetId(); g.out.send(client, r) }
	if err := validate(req); err != nil {
		reply(errorResponse(err))
		return
	}
	hello := req.GetHello()
	if hello == nil {
		reply(errorResponse(invalid("the gateway only accepts hello; send commands to your session")))
		return
	}
	p := Principal{Owner: hdr.Get(hdrOwner), Operator: hdr.Get(hdrOperator) == "true"}
	name := NewSecret()[:22]
	id := ctx.Self().Id + "/" + name
	address := hdr.Get(hdrAddress)
	claim := sessionClaim{id: id, peer: hdr.Get(hdrPeer), token: hdr.Get(hdrToken), address: address, secret: string(hello.GetCallbackSecret())}
	if err := g.guard.addSession(claim, &g.cfg.Limits); err != nil {
		code := api.ErrorCode_ERROR_CODE_BUSY
		if errors.Is(err, ErrAddressClaimed) {
			code = api.ErrorCode_ERROR_CODE_CONFLICT
		}
		g.log.Warn().Err(err).Str("owner", p.Owner).Str("address", address).Msg("a session was refused")
		reply(errorResponse(&cmdError{code: code, msg: err.Error()}))
		return
	}
	s := &session{g: g, id: id, principal: p, client: client, peer: hdr.Get(hdrPeer), token: claim.token, address: address, name: hello.GetClient(), hello: req.GetId()}
	if _, err := ctx.SpawnNamed(actor.PropsFromProducer(func() actor.Actor { return s }), name); err != nil {
		g.guard.removeSession(id, address)
		reply(errorResponse(&cmdError{code: api.ErrorCode_ERROR_CODE_INTERNAL, msg: "open session: " + err.Error()}))
		return
	}
}
