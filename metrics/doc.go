// Package metrics is Lemo's own metrics registry and its HTTP surface:
// /healthz, /readyz and /metrics in the Prometheus text format. It never
// uses protoactor's built-in metrics, which leak one callback per spawned
// actor.
//
// Lifecycle:
//  1. cmd/lemo builds a Registry and a Daemon collector on it (NewDaemon),
//     passing the collector as the actor tree's Observer and its OnCommit
//     to the store, and gauges read on demand (Tasks by status, store size,
//     attached clients).
//  2. When an HTTP listen address is configured, Serve exposes the
//     endpoints; /readyz answers 503 until the daemon says it is ready
//     (recovery done) and after it starts stopping.
//  3. A scrape renders every family; counters and histograms are atomics,
//     so recording never blocks an actor.
//
// Example:
//
//	reg := metrics.NewRegistry()
//	m := metrics.NewDaemon(reg)
//	d, _ := actors.Start(ctx, actors.Deps{..., Observer: m}, opts)
//	srv, _ := metrics.Serve("127.0.0.1:9465", reg, ready)
package metrics
