// Package remoting holds what Lemo's two ends of protoactor remote (the
// daemon's gateway and the client library) need to work around in it.
//
// Shutdown stops a remote without the panic its graceful stop can raise:
// protoactor's endpointManager.stop sends on each endpoint reader's
// disconnect channel, and a reader whose stream ended just before has
// closed that channel already ("send on closed channel", seen ending
// lemo run with a stack trace after its Task finished).
//
//	r := remote.NewRemote(system, cfg)
//	r.Start()
//	defer remoting.Shutdown(r)
package remoting
