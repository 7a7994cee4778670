package client

import (
	"github.com/asynkron/protoactor-go/actor"

	"lemo/api"
)

// ResentHellos counts the hellos of c sent again after a link went down.
func (c *Conn) ResentHellos() int64 { return c.resentHellos.Load() }

// Poke sends the gateway at addr a message outside any session, over a
// link the node makes without a token: the daemon refuses that link, and
// the node keeps it, down, for protoactor's redial pause.
func (n *Node) Poke(addr string) {
	n.system.Root.Send(actor.NewPID(addr, "gateway"), &api.Request{})
}
