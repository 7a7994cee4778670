package main

import (
	"sync/atomic"

	"github.com/rs/zerolog"

	"lemo/actors/gateway"
	"lemo/actors/live"
	"lemo/actors/taskstate"
	"lemo/api"
	"lemo/memory"
	"lemo/metrics"
	"lemo/persistence"
)

// ops is lemo serve's operational surface: the metrics registry, the
// collector the actor tree (Observer) and the store (OnCommit) report to,
// the gauges read at each scrape, the readiness flag and the optional HTTP
// listener (http.listen).
//
// The listener starts right after the data folder is locked, before the
// store opens and recovery runs, so /readyz answers 503 until the daemon
// serves and again once it starts stopping. The gauges read parts that come
// and go (store, gateway) through atomic pointers; none of them calls into
// Badger, so a scrape is cheap and safe at any time.
type ops struct {
	reg    *metrics.Registry
	daemon *metrics.Daemon
	ready  atomic.Bool
	store  atomic.Pointer[persistence.Store]
	gw     atomic.Pointer[gateway.Gateway]
	live   atomic.Pointer[live.Accountant]
	mem    atomic.Pointer[memory.Memory]
	// floor is the free-space floor in force, in bytes (a reload changes
	// it).
	floor atomic.Int64
	srv   *metrics.Server
}

func newOps() *ops {
	o := &ops{reg: metrics.NewRegistry()}
	o.daemon = metrics.NewDaemon(o.reg)
	o.reg.NewGaugeFunc("lemo_build_info", "The running binary: its version (value 1).", "version", func() map[string]float64 {
		return map[string]float64{buildVersion: 1}
	})
	o.reg.NewGaugeFunc("lemo_ready", "1 when the store is open, recovery is done and the remote API serves; 0 while starting or stopping.", "", func() map[string]float64 {
		return map[string]float64{"": b2f(o.ready.Load())}
	})
	o.reg.NewGaugeFunc("lemo_tasks", "Tasks by status.", "status", o.tasks)
	o.reg.NewGaugeFunc("lemo_store_size_bytes", "Disk space the store takes.", "", o.storeGauge(func(s *persistence.Store) float64 {
		return float64(s.Size())
	}))
	o.reg.NewGaugeFunc("lemo_store_disk_full", "1 while the data folder's disk is full: appends are refused and running Tasks are paused (reason disk_full) until space is freed.", "", o.storeGauge(func(s *persistence.Store) float64 {
		return b2f(s.DiskFull())
	}))
	o.reg.NewGaugeFunc("lemo_store_free_bytes", "Free space on the data folder's filesystem.", "", o.storeGauge(func(s *persistence.Store) float64 {
		free, err := s.FreeSpace()
		if err != nil {
			return -1
		}
		return float64(free)
	}))
	o.reg.NewGaugeFunc("lemo_store_min_free_bytes", "The free-space floor (storage.min_free_mib): below it new work is refused.", "", func() map[string]float64 {
		return map[string]float64{"": float64(o.floor.Load())}
	})
	o.reg.NewGaugeFunc("lemo_clients", "Client sessions attached to the remote API.", "", func() map[string]float64 {
		n := 0
		if g := o.gw.Load(); g != nil {
			n = g.Sessions()
		}
		return map[string]float64{"": float64(n)}
	})
	o.reg.NewGaugeFunc("lemo_remote_subscriptions", "Subscriptions of every client session.", "", func() map[string]float64 {
		n := 0
		if g := o.gw.Load(); g != nil {
			n = g.Subscriptions()
		}
		return map[string]float64{"": float64(n)}
	})
	o.reg.NewGaugeFunc("lemo_remote_connections", "Open connections to the remote API, by state: authenticated (presented a valid token) or not yet.", "state", o.connGauge(func(s gateway.ConnStats) map[string]float64 {
		return map[string]float64{"authenticated": float64(s.Open - s.Unauthenticated), "unauthenticated": float64(s.Unauthenticated)}
	}))
	o.reg.NewCounterFunc("lemo_remote_connections_accepted_total", "Connections the remote API took in since start (refused ones aside).", "", o.connGauge(func(s gateway.ConnStats) map[string]float64 {
		return map[string]float64{"": float64(s.Accepted)}
	}))
	o.reg.NewCounterFunc("lemo_remote_connections_closed_total", "Connections the remote API closed since start: refused (the limit reached, all authenticated), evicted (for a newer one while unauthenticated connections filled their quota), timed_out (no valid token within remote.auth_timeout).", "reason", o.connGauge(func(s gateway.ConnStats) map[string]float64 {
		return map[string]float64{"refused": float64(s.Refused), "evicted": float64(s.Evicted), "timed_out": float64(s.TimedOut)}
	}))
	o.reg.NewGaugeFunc("lemo_live_bytes", "Bytes the live results (tool calls' whole outputs) hold in memory and in spill files.", "where", o.liveGauge(func(u live.Usage) map[string]float64 {
		return map[string]float64{"memory": float64(u.HeapBytes), "spill": float64(u.SpillBytes)}
	}))
	o.reg.NewGaugeFunc("lemo_live_results", "Live results open or held by Tasks.", "", o.liveGauge(func(u live.Usage) map[string]float64 {
		return map[string]float64{"": float64(u.Results)}
	}))
	o.reg.NewGaugeFunc("lemo_live_evicted", "Live results evicted under memory pressure since the start.", "", o.liveGauge(func(u live.Usage) map[string]float64 {
		return map[string]float64{"": float64(u.Evicted)}
	}))
	o.reg.NewGaugeFunc("lemo_memory_embedding_vectors", "Records with an embedding (semantic recall, memory.embeddings.model); absent when it is off.", "", o.embedGauge(func(s memory.EmbeddingStatus) float64 {
		return float64(s.Vectors)
	}))
	o.reg.NewGaugeFunc("lemo_memory_embedding_tasks_behind", "Tasks with records the embedder has not embedded yet.", "", o.embedGauge(func(s memory.EmbeddingStatus) float64 {
		return float64(s.Behind)
	}))
	o.reg.NewCounterFunc("lemo_memory_embedding_failures_total", "Embedding calls that failed since start (records are retried; the log has each error).", "", o.embedGauge(func(s memory.EmbeddingStatus) float64 {
		return float64(s.Failures)
	}))
	o.reg.NewCounterFunc("lemo_memory_recall_lexical_only_total", "Recalls that used the lexical index alone because their query could not be embedded.", "", o.embedGauge(func(s memory.EmbeddingStatus) float64 {
		return float64(s.LexicalOnly)
	}))
	return o
}

// embedGauge reads f of the memory's embedding status while semantic
// recall is on; nothing otherwise.
func (o *ops) embedGauge(f func(memory.EmbeddingStatus) float64) func() map[string]float64 {
	return func() map[string]float64 {
		m := o.mem.Load()
		if m == nil {
			return nil
		}
		s, ok := m.EmbeddingStatus()
		if !ok {
			return nil
		}
		return map[string]float64{"": f(s)}
	}
}

// connGauge reads f of the remote API's connection counts (zeros before
// it serves).
func (o *ops) connGauge(f func(gateway.ConnStats) map[string]float64) func() map[string]float64 {
	return func() map[string]float64 {
		var s gateway.ConnStats
		if g := o.gw.Load(); g != nil {
			s = g.Connections()
		}
		return f(s)
	}
}

// liveGauge reads f of the live results' usage once they exist.
func (o *ops) liveGauge(f func(live.Usage) map[string]float64) func() map[string]float64 {
	return func() map[string]float64 {
		a := o.live.Load()
		if a == nil {
			return nil
		}
		return f(a.Usage())
	}
}

// tasks counts Tasks by status; every status is present, zero or not.
func (o *ops) tasks() map[string]float64 {
	out := make(map[string]float64, len(api.TaskStatus_name))
	for n := range api.TaskStatus_name {
		if st := api.TaskStatus(n); st != api.TaskStatus_TASK_STATUS_UNSPECIFIED {
			out[taskstate.StatusName(st)] = 0
		}
	}
	if s := o.store.Load(); s != nil {
		for st, n := range s.StatusCounts() {
			out[taskstate.StatusName(st)] = float64(n)
		}
	}
	return out
}

// storeGauge reads f of the store once it is open; nothing before.
func (o *ops) storeGauge(f func(*persistence.Store) float64) func() map[string]float64 {
	return func() map[string]float64 {
		s := o.store.Load()
		if s == nil {
			return nil
		}
		return map[string]float64{"": f(s)}
	}
}

// serve starts the HTTP listener on addr, with the profiling endpoints
// when pprof.
func (o *ops) serve(addr string, pprof bool, log zerolog.Logger) error {
	h := metrics.Handler(o.reg, o.ready.Load)
	if pprof {
		h = metrics.WithPprof(h)
	}
	srv, err := metrics.ServeHandler(addr, h)
	if err != nil {
		return err
	}
	o.srv = srv
	log.Info().Str("address", srv.Addr()).Msg("health and metrics listening (/healthz, /readyz, /metrics)")
	return nil
}

// close stops the HTTP listener, if any; it is safe to call more than once.
func (o *ops) close(log zerolog.Logger) {
	if o.srv == nil {
		return
	}
	if err := o.srv.Close(); err != nil {
		log.Warn().Err(err).Msg("stop the health and metrics listener")
	}
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
