package gateway

import (
	"context"
	"fmt"

	"github.com/asynkron/protoactor-go/actor"

	"lemo/actors"
	"lemo/api"
)

// session is one attached client: it checks and runs the client's
// commands as the client's principal, streams its subscriptions and holds
// its Services. It never blocks: commands and subscriptions run on
// goroutines that answer the client directly.
type session struct {
	g         *Gateway
	id        string
	self      *actor.PID
	principal Principal
	client    *actor.PID
	peer      string
	token     string // the token's id, for the per-token limits
	address   string
	name      string
	hello     uint64

	ctx      context.Context
	cancel   context.CancelFunc
	inflight int
	subs     map[uint64]*pump
}

// Messages from a session's goroutines to the session.
type (
	// commandDone ends a command; the session sends its response (nil
	// when the command panicked and was answered already).
	commandDone struct {
		id       uint64
		response *api.Response
	}
	pumpEnded struct {
		id uint64
		p  *pump
	}
)

func (s *session) caller() actors.Caller { return s.principal.Caller() }

func (s *session) reply(id uint64, r *api.Response) {
	r.Id = id
	s.g.out.send(s.client, r)
}

func (s *session) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		s.self = ctx.Self()
		s.ctx, s.cancel = context.WithCancel(s.g.ctx)
		s.subs = make(map[uint64]*pump)
		ctx.Watch(s.client)
		lim := s.g.cfg.Limits
		s.reply(s.hello, &api.Response{Result: &api.Response_Welcome{Welcome: &api.Welcome{
			Session: s.id, Owner: s.principal.Owner, Operator: s.principal.Operator,
			ProtocolVersion: api.ProtocolVersion, DaemonVersion: s.g.cfg.Version,
			CreditWindow: uint32(lim.CreditWindow), MaxMessageBytes: uint32(lim.MaxMessageBytes), Address: s.g.addr,
		}}})
		s.g.log.Debug().Str("session", s.id).Str("client", s.name).Str("owner", s.principal.Owner).Str("address", s.address).Msg("session opened")
	case *api.Request:
		if hdr := ctx.MessageHeader(); hdr == nil || hdr.Get(hdrPeer) != s.peer {
			return // not from this session's client (the guard prevents it)
		}
		s.handle(ctx, m)
	case *commandDone:
		s.inflight--
		if m.response != nil {
			s.reply(m.id, m.response)
		}
	case *pumpEnded:
		if s.subs[m.id] == m.p {
			s.dropSub(m.id)
		}
	case *actor.Terminated:
		if m.Who.Equal(s.client) {
			s.g.log.Debug().Str("session", s.id).Str("why", m.Why.String()).Msg("client went away")
			ctx.Stop(ctx.Self())
		}
	case *actor.Stopping:
		s.close()
	}
}

// close releases everything the session holds.
func (s *session) close() {
	if s.cancel != nil {
		s.cancel()
	}
	for id, p := range s.subs {
		p.close()
		s.dropSub(id)
	}
	if s.g.cfg.Services != nil {
		s.g.cfg.Services.UnregisterProvider(s.id)
	}
	s.g.guard.removeSession(s.id, s.address)
	s.g.log.Debug().Str("session", s.id).Msg("session closed")
}

func (s *session) handle(ctx actor.Context, req *api.Request) {
	id := req.GetId()
	if err := validate(req); err != nil {
		if req.GetAck() == nil {
			s.reply(id, errorResponse(err))
		}
		return
	}
	switch c := req.GetCommand().(type) {
	case *api.Request_Hello:
		s.reply(id, errorResponse(invalid("this client already has a session")))
	case *api.Request_Ack:
		// Acks are not answered.
		if p := s.subs[c.Ack.GetSubscription()]; p != nil {
			p.ack(c.Ack.GetCount())
		}
	case *api.Request_Goodbye:
		s.reply(id, done())
		ctx.Stop(ctx.Self())
	case *api.Request_Subscribe:
		s.subscribe(id, c.Subscribe)
	case *api.Request_Unsubscribe:
		p := s.subs[c.Unsubscribe.GetSubscription()]
		if p == nil {
			s.reply(id, errorResponse(&cmdError{code: api.ErrorCode_ERROR_CODE_NOT_FOUND, msg: "no such subscription"}))
			return
		}
		p.close()
		s.dropSub(c.Unsubscribe.GetSubscription())
		s.reply(id, done())
	case *api.Request_RegisterService:
		s.reply(id, s.registerService(c.RegisterService.GetService()))
	case *api.Request_UnregisterService:
		if s.g.cfg.Services == nil {
			s.reply(id, errorResponse(noServices))
			return
		}
		s.reply(id, result(done(), s.g.cfg.Services.Unregister(s.id, c.UnregisterService.GetName())))
	case *api.Request_ServiceResult:
		if s.g.cfg.Services == nil {
			s.reply(id, errorResponse(noServices))
			return
		}
		s.reply(id, result(done(), s.g.cfg.Services.Complete(s.id, c.ServiceResult)))
	default:
		if s.inflight >= s.g.cfg.Limits.MaxInflight {
			s.reply(id, errorResponse(&cmdError{code: api.ErrorCode_ERROR_CODE_BUSY, msg: "too many commands in flight; wait for some answers"}))
			return
		}
		s.inflight++
		self, root, caller, sctx := s.self, ctx.ActorSystem().Root, s.caller(), s.ctx
		s.g.goroutine(func() {
			// The session answers once it counted the command done, so a
			// client that sends its next command on an answer is never
			// told it has too many in flight.
			done := &commandDone{id: id}
			defer root.Send(self, done)
			cctx, cancel := context.WithTimeout(sctx, s.g.cfg.Limits.CommandTimeout)
			defer cancel()
			done.response = s.g.execute(cctx, caller, req)
		}, func(v any) {
			s.reply(id, errorResponse(&cmdError{code: api.ErrorCode_ERROR_CODE_INTERNAL, msg: fmt.Sprintf("the daemon failed on this command: %v", v)}))
		})
	}
}

// dropSub forgets subscription id and counts it no more.
func (s *session) dropSub(id uint64) {
	if _, ok := s.subs[id]; ok {
		delete(s.subs, id)
		s.g.guard.removeSubscription(s.token)
	}
}

var noServices = &cmdError{code: api.ErrorCode_ERROR_CODE_UNAVAILABLE, msg: "this daemon does not accept Services"}

func (s *session) subscribe(id uint64, req *api.SubscribeRequest) {
	if s.subs[req.GetSubscription()] != nil {
		s.reply(id, errorResponse(&cmdError{code: api.ErrorCode_ERROR_CODE_CONFLICT, msg: "subscription id already in use"}))
		return
	}
	if len(s.subs) >= s.g.cfg.Limits.MaxSubscriptions {
		s.reply(id, errorResponse(&cmdError{code: api.ErrorCode_ERROR_CODE_BUSY, msg: fmt.Sprintf("too many subscriptions in this session: the limit is %d; unsubscribe from Tasks you no longer follow", s.g.cfg.Limits.MaxSubscriptions)}))
		return
	}
	if err := s.g.guard.addSubscription(s.token, &s.g.cfg.Limits); err != nil {
		s.reply(id, errorResponse(&cmdError{code: api.ErrorCode_ERROR_CODE_BUSY, msg: err.Error()}))
		return
	}
	p := newPump(s.g, s, id, req)
	s.subs[req.GetSubscription()] = p
	self, root := s.self, s.g.system.Root
	sctx := s.ctx
	s.g.goroutine(func() {
		defer root.Send(self, &pumpEnded{id: req.GetSubscription(), p: p})
		p.run(sctx)
	}, func(v any) {
		s.g.out.send(s.client, &api.UpdateBatch{Subscription: req.GetSubscription(), Updates: []*api.Update{
			{Body: &api.Update_Ended{Ended: &api.Ended{Reason: fmt.Sprintf("the daemon failed on this subscription: %v", v)}}}}})
	})
}

func (s *session) registerService(spec *api.ServiceSpec) *api.Response {
	if s.g.cfg.Services == nil {
		return errorResponse(noServices)
	}
	err := s.g.cfg.Services.Register(s.principal.Owner, s.principal.Operator, s.id, spec, serviceProvider{s: s})
	return result(done(), err)
}

// serviceProvider delivers service calls to the session's client.
type serviceProvider struct{ s *session }

func (p serviceProvider) Deliver(call *api.ServiceCall) { p.s.g.out.send(p.s.client, call) }

func done() *api.Response { return &api.Response{Result: &api.Response_Done{Done: &api.Done{}}} }
