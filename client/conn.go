package client

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"google.golang.org/protobuf/proto"

	"lemo/api"
)

// Options configure one connection to a daemon.
type Options struct {
	// Addr is the daemon's address (host:port); Token the client's token.
	Addr  string
	Token string
	// Name identifies the client in the daemon's logs ("lemo-cli").
	Name string
	// Timeout bounds a command whose context has no deadline (default
	// 30s), and the wait for the daemon's welcome.
	Timeout time.Duration
	// TLS is the node's TLS when Connect starts one (see NodeOptions.TLS);
	// Node.Connect ignores it.
	TLS *tls.Config
	// Listen and Advertise are the node's addresses when Connect starts
	// one (see NodeOptions); Node.Connect ignores them.
	Listen, Advertise string
}

// Conn is a session with a daemon. Its methods are safe for concurrent
// use. If the daemon stops or restarts, commands in flight fail with
// ErrDisconnected, subscriptions end, and the next command opens a new
// session (re-registering the Conn's Services).
type Conn struct {
	n       *Node
	ownNode bool
	o       Options
	gateway *actor.PID
	recv    *actor.PID
	nextID  atomic.Uint64

	reconnect sync.Mutex // serialises opening sessions
	// linkDown is told when the node's link to the daemon's address goes
	// down (see hello); resentHellos counts the hellos sent again.
	linkDown     chan struct{}
	resentHellos atomic.Int64

	mu       sync.Mutex
	session  *actor.PID
	welcome  *api.Welcome
	pending  map[uint64]chan *api.Response
	subs     map[uint64]*Subscription
	services map[string]*service
	closed   bool

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup // subscription and service goroutines
}

// Connect opens a Node of its own (closed with the Conn) and connects it.
// Use NewNode and Node.Connect for several Conns in one process.
func Connect(ctx context.Context, o Options) (*Conn, error) {
	n, err := NewNode(NodeOptions{TLS: o.TLS, Listen: o.Listen, Advertise: o.Advertise})
	if err != nil {
		return nil, err
	}
	c, err := n.Connect(ctx, o)
	if err != nil {
		_ = n.Close()
		return nil, err
	}
	c.ownNode = true
	return c, nil
}

// Connect opens a session with the daemon at o.Addr. It fails with
// ErrNotRunning when nothing answers there and ErrUnauthenticated when the
// daemon refuses the token.
func (n *Node) Connect(ctx context.Context, o Options) (*Conn, error) {
	if err := validAddr(o.Addr); err != nil {
		return nil, err
	}
	if o.Token == "" {
		return nil, fmt.Errorf("%w: no token given", ErrUnauthenticated)
	}
	if o.Timeout <= 0 {
		o.Timeout = 30 * time.Second
	}
	if o.Name == "" {
		o.Name = "lemo-client"
	}
	c := &Conn{n: n, o: o, gateway: actor.NewPID(o.Addr, "gateway"), linkDown: make(chan struct{}, 1),
		pending: make(map[uint64]chan *api.Response), subs: make(map[uint64]*Subscription), services: make(map[string]*service)}
	c.ctx, c.cancel = context.WithCancel(context.Background())
	// Tell "not running" and "wrong token" apart before anything else.
	pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	err := n.probe(pctx, o.Addr, o.Token)
	cancel()
	if err != nil {
		c.cancel()
		return nil, err
	}
	if err := n.addConn(c, o.Addr, o.Token); err != nil {
		c.cancel()
		return nil, err
	}
	pid, err := n.system.Root.SpawnNamed(actor.PropsFromProducer(func() actor.Actor { return &receiver{c: c, chunks: make(map[uint64]*assembly)} }), "c"+randomName())
	if err != nil {
		n.removeConn(c)
		return nil, fmt.Errorf("client: spawn receiver: %w", err)
	}
	c.recv = pid
	n.allowReceiver(pid.Id, true)
	if err := c.open(ctx); err != nil {
		c.shutdown()
		return nil, err
	}
	return c, nil
}

// Welcome returns what the daemon said when the current session opened:
// who the token is, the daemon's version and limits.
func (c *Conn) Welcome() *api.Welcome {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.welcome
}

// Addr returns the daemon's address.
func (c *Conn) Addr() string { return c.o.Addr }

// open opens a session: probe, hello, watch, re-register services.
func (c *Conn) open(ctx context.Context) error {
	c.reconnect.Lock()
	defer c.reconnect.Unlock()
	if c.current() != nil {
		return nil
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.o.Timeout)
		defer cancel()
	}
	pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	err := c.n.probe(pctx, c.o.Addr, c.o.Token)
	cancel()
	if err != nil {
		return err
	}
	resp, err := c.hello(ctx)
	if err != nil {
		return err
	}
	if e := resp.GetError(); e != nil {
		return fromAPI(e)
	}
	w := resp.GetWelcome()
	if w == nil {
		return unexpected(resp, "welcome")
	}
	session := actor.NewPID(c.o.Addr, w.GetSession())
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return ErrClosed
	}
	c.session, c.welcome = session, w
	c.n.addAlias(w.GetAddress(), c.o.Addr)
	var svcs []*service
	for _, s := range c.services {
		svcs = append(svcs, s)
	}
	c.mu.Unlock()
	c.n.system.Root.Send(c.recv, &watchSession{pid: session})
	for _, s := range svcs {
		if _, err := c.send(ctx, session, &api.Request{Command: &api.Request_RegisterService{RegisterService: &api.RegisterServiceRequest{Service: s.spec}}}); err != nil {
			return fmt.Errorf("re-register service %s: %w", s.spec.GetName(), err)
		}
	}
	return nil
}

// hello sends the hello and waits for its answer. protoactor loses a
// message silently when the node's link to the daemon's address is down:
// after a daemon there died, the link is kept for a redial pause of about
// 2 s, and a daemon restarted on the same address within it would never
// see the hello. The node is told when a link goes down; a hello sent
// before that is sent again (the link is made anew), unless the probe finds
// nothing at the address any more.
func (c *Conn) hello(ctx context.Context) (*api.Response, error) {
	for {
		select { // a link that went down before this hello
		case <-c.linkDown:
		default:
		}
		id := c.nextID.Add(1)
		ch := c.await(id)
		req := &api.Request{Id: id, Command: &api.Request_Hello{Hello: &api.Hello{ProtocolVersion: api.ProtocolVersion, Client: c.o.Name, CallbackSecret: c.n.secret}}}
		c.n.system.Root.RequestWithCustomSender(c.gateway, req, c.recv)
		select {
		case resp := <-ch:
			return resp, nil
		case <-c.linkDown:
			c.forget(id)
			c.resentHellos.Add(1)
			pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			err := c.n.probe(pctx, c.o.Addr, c.o.Token)
			cancel()
			if err != nil {
				return nil, err
			}
			continue
		case <-ctx.Done():
			c.forget(id)
		}
		return nil, fmt.Errorf("%w: no welcome from the daemon at %s: it could not reach this client at %s (it dials its replies back; a client behind NAT or a firewall is reached only through a tunnel)", ErrTimeout, c.o.Addr, c.n.Addr())
	}
}

func (c *Conn) current() *actor.PID {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.session
}

func (c *Conn) await(id uint64) chan *api.Response {
	ch := make(chan *api.Response, 1)
	c.mu.Lock()
	c.pending[id] = ch
	c.mu.Unlock()
	return ch
}

func (c *Conn) forget(id uint64) {
	c.mu.Lock()
	delete(c.pending, id)
	c.mu.Unlock()
}

// call sends a command to the session (opening one when needed) and waits
// for its answer. An error answer is returned as *Error.
func (c *Conn) call(ctx context.Context, req *api.Request) (*api.Response, error) {
	c.mu.Lock()
	closed, session := c.closed, c.session
	c.mu.Unlock()
	if closed {
		return nil, ErrClosed
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.o.Timeout)
		defer cancel()
	}
	if session == nil {
		if err := c.open(ctx); err != nil {
			return nil, err
		}
		if session = c.current(); session == nil {
			return nil, ErrDisconnected
		}
	}
	return c.send(ctx, session, req)
}

// send sends req to session and waits for its answer.
func (c *Conn) send(ctx context.Context, session *actor.PID, req *api.Request) (*api.Response, error) {
	req.Id = c.nextID.Add(1)
	if err := encodable(req); err != nil {
		return nil, err
	}
	ch := c.await(req.Id)
	c.n.system.Root.Send(session, req)
	select {
	case resp := <-ch:
		if resp.GetResult() == nil {
			return nil, ErrDisconnected
		}
		if e := resp.GetError(); e != nil {
			return nil, fromAPI(e)
		}
		return resp, nil
	case <-ctx.Done():
		c.forget(req.Id)
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return nil, fmt.Errorf("%w: no answer from the daemon at %s", ErrTimeout, c.o.Addr)
		}
		return nil, ctx.Err()
	}
}

// tell sends a message that is not answered (acks) or whose answer nobody
// awaits (unsubscribe on close, service results). It returns why req
// cannot be sent, if it cannot.
func (c *Conn) tell(req *api.Request) error {
	session := c.current()
	if session == nil {
		return ErrDisconnected
	}
	req.Id = c.nextID.Add(1)
	if err := encodable(req); err != nil {
		return err
	}
	c.n.system.Root.Send(session, req)
	return nil
}

// Close ends the session (subscriptions end, Services are withdrawn) and
// releases the Conn; a Conn from Connect also stops its Node.
func (c *Conn) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	session := c.session
	c.mu.Unlock()
	if session != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		_, _ = c.send(ctx, session, &api.Request{Command: &api.Request_Goodbye{Goodbye: &api.Goodbye{}}})
		cancel()
	}
	c.shutdown()
	if c.ownNode {
		return c.n.Close()
	}
	return nil
}

func (c *Conn) shutdown() {
	c.mu.Lock()
	c.closed = true
	c.session = nil
	subs := c.subs
	c.subs = make(map[uint64]*Subscription)
	for id, ch := range c.pending {
		ch <- &api.Response{Id: id}
		delete(c.pending, id)
	}
	c.mu.Unlock()
	for _, s := range subs {
		s.end(endedUpdate("the connection was closed"))
	}
	c.cancel()
	c.wg.Wait()
	if c.recv != nil {
		_ = c.n.system.Root.StopFuture(c.recv).Wait()
		c.n.allowReceiver(c.recv.Id, false)
	}
	c.n.removeConn(c)
}

// disconnected handles the end of session: commands in flight fail,
// subscriptions end; the next command opens a new session.
func (c *Conn) disconnected(session *actor.PID, why string) {
	c.mu.Lock()
	if c.session == nil || !c.session.Equal(session) {
		c.mu.Unlock()
		return
	}
	c.session = nil
	subs := c.subs
	c.subs = make(map[uint64]*Subscription)
	for id, ch := range c.pending {
		ch <- &api.Response{Id: id}
		delete(c.pending, id)
	}
	c.mu.Unlock()
	for _, s := range subs {
		s.end(endedUpdate("disconnected from the daemon: " + why))
	}
}

func endedUpdate(reason string) *api.Update {
	return &api.Update{Body: &api.Update_Ended{Ended: &api.Ended{Reason: reason}}}
}

func (c *Conn) deliverResponse(r *api.Response) {
	c.mu.Lock()
	ch := c.pending[r.GetId()]
	delete(c.pending, r.GetId())
	c.mu.Unlock()
	if ch != nil && r.GetResult() != nil {
		ch <- r
	}
}

func (c *Conn) deliverUpdates(b *api.UpdateBatch) {
	c.mu.Lock()
	s := c.subs[b.GetSubscription()]
	c.mu.Unlock()
	if s == nil {
		return // closed meanwhile
	}
	us := b.GetUpdates()
	var last *api.Update
	if n := len(us); n > 0 && final(us[n-1]) {
		us, last = us[:n-1], us[n-1]
	}
	if len(us) > 0 && !s.push(us) {
		// The daemon sent beyond the credit it was given: end the
		// subscription as fallen behind; the reader resumes.
		last = &api.Update{Body: &api.Update_FellBehind{FellBehind: &api.FellBehind{}}}
		c.tell(&api.Request{Command: &api.Request_Unsubscribe{Unsubscribe: &api.UnsubscribeRequest{Subscription: s.id}}})
	}
	if last != nil {
		c.mu.Lock()
		if c.subs[s.id] == s {
			delete(c.subs, s.id)
		}
		c.mu.Unlock()
		s.end(last)
	}
}

// final reports whether u ends its subscription.
func final(u *api.Update) bool { return u.GetFellBehind() != nil || u.GetEnded() != nil }

// receiver is the Conn's actor: the target of everything the daemon sends.
type receiver struct {
	c       *Conn
	session *actor.PID
	chunks  map[uint64]*assembly
}

type watchSession struct{ pid *actor.PID }

// Bounds of chunked messages being joined.
const (
	maxAssemblies    = 64
	maxAssemblyBytes = 256 << 20
	maxChunks        = 4096
)

type assembly struct {
	next  uint32
	count uint32
	data  []byte
}

func (r *receiver) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *api.Response:
		r.c.deliverResponse(m)
	case *api.UpdateBatch:
		r.c.deliverUpdates(m)
	case *api.ServiceCall:
		r.c.serve(m)
	case *api.Chunk:
		r.chunk(m)
	case *watchSession:
		if r.session != nil {
			ctx.Unwatch(r.session)
		}
		r.session = m.pid
		ctx.Watch(m.pid)
	case *actor.Terminated:
		// By id: the daemon names its session at its own address, which
		// differs from the one dialed through a tunnel's local end.
		if s := r.session; s != nil && m.Who.GetId() == s.GetId() {
			r.session = nil
			r.c.disconnected(s, m.Why.String())
		}
	}
}

// chunk joins the parts of a large message and dispatches it whole.
func (r *receiver) chunk(m *api.Chunk) {
	a := r.chunks[m.GetId()]
	if a == nil {
		if m.GetIndex() != 0 || m.GetCount() == 0 || m.GetCount() > maxChunks || len(r.chunks) >= maxAssemblies {
			return
		}
		a = &assembly{count: m.GetCount()}
		r.chunks[m.GetId()] = a
	}
	if m.GetIndex() != a.next || m.GetCount() != a.count || len(a.data)+len(m.GetData()) > maxAssemblyBytes {
		delete(r.chunks, m.GetId())
		return
	}
	a.data = append(a.data, m.GetData()...)
	a.next++
	if a.next < a.count {
		return
	}
	delete(r.chunks, m.GetId())
	var tc api.ToClient
	if err := proto.Unmarshal(a.data, &tc); err != nil {
		return
	}
	switch b := tc.GetBody().(type) {
	case *api.ToClient_Response:
		r.c.deliverResponse(b.Response)
	case *api.ToClient_Updates:
		r.c.deliverUpdates(b.Updates)
	case *api.ToClient_ServiceCall:
		r.c.serve(b.ServiceCall)
	}
}
