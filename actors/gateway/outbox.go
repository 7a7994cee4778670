package gateway

import (
	"sync/atomic"

	"github.com/asynkron/protoactor-go/actor"
	"google.golang.org/protobuf/proto"

	"lemo/api"
)

// outbox sends daemon-to-client messages, splitting any larger than max
// bytes into Chunks so that no gRPC message exceeds the peer's limit.
type outbox struct {
	root   *actor.RootContext
	max    int
	chunks atomic.Uint64
}

// send delivers msg (a *api.Response, *api.UpdateBatch or
// *api.ServiceCall) to target. It never blocks on the network: remote
// queues it for the target's endpoint.
func (o *outbox) send(target *actor.PID, msg proto.Message) {
	// An update batch's updates were sized by the pump (cachedSize), and
	// what they hold is never changed once sized: only the new wrapper
	// is sized here, not every event in it again.
	if cachedSize.Size(msg) <= o.max {
		o.root.Send(target, msg)
		return
	}
	for _, c := range o.split(msg) {
		o.root.Send(target, c)
	}
}

// split encodes msg as a ToClient and cuts it into Chunks of at most max
// bytes of data.
func (o *outbox) split(msg proto.Message) []*api.Chunk {
	tc := &api.ToClient{}
	switch m := msg.(type) {
	case *api.Response:
		tc.Body = &api.ToClient_Response{Response: m}
	case *api.UpdateBatch:
		tc.Body = &api.ToClient_Updates{Updates: m}
	case *api.ServiceCall:
		tc.Body = &api.ToClient_ServiceCall{ServiceCall: m}
	default:
		panic("gateway: outbox cannot chunk a " + string(proto.MessageName(msg))) // programming error
	}
	data, err := proto.Marshal(tc)
	if err != nil {
		panic("gateway: marshal: " + err.Error()) // our own messages always marshal
	}
	size := o.max - 64 // room for the chunk's own fields
	count := (len(data) + size - 1) / size
	id := o.chunks.Add(1)
	out := make([]*api.Chunk, 0, count)
	for i := 0; i < count; i++ {
		end := min((i+1)*size, len(data))
		out = append(out, &api.Chunk{Id: id, Index: uint32(i), Count: uint32(count), Data: data[i*size : end]})
	}
	return out
}
