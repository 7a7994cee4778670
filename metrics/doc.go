// Package metrics is Lemo's metrics registry and its HTTP surface:
// /healthz, /readyz and /metrics. The exposition is client_golang's
// (github.com/prometheus/client_golang) from a registry of Lemo's own: the
// standard text format with HELP and TYPE, histograms with cumulative
// buckets, and the Go runtime and process collectors beside Lemo's
// families.
//
// protoactor's built-in metrics stay off: at the pinned version every
// spawned actor registers a mailbox-length callback that is never removed
// (memory grows with each Cycle and Tool actor), its instruments go through
// the global OpenTelemetry meter, and its Prometheus provider serves on the
// default mux. The registry here is not prometheus.DefaultRegisterer, so
// nothing registered globally leaks into /metrics.
//
// Lifecycle:
//  1. cmd/lemo builds a Registry and a Daemon collector on it (NewDaemon),
//     passing the collector as the actor tree's Observer and its OnCommit
//     to the store, and gauges read on demand (Tasks by status, store size,
//     attached clients).
//  2. When an HTTP listen address is configured, Serve exposes the
//     endpoints; /readyz answers 503 until the daemon says it is ready
//     (recovery done) and after it starts stopping.
//  3. A scrape gathers every family; counters and histograms are atomics,
//     so recording never blocks an actor.
//
// Example:
//
//	reg := metrics.NewRegistry()
//	m := metrics.NewDaemon(reg)
//	d, _ := actors.Start(ctx, actors.Deps{..., Observer: m}, opts)
//	srv, _ := metrics.Serve("127.0.0.1:9465", reg, ready)
package metrics
