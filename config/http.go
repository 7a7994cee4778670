package config

import (
	"net"
	"strconv"
)

// HTTP configures the optional health and metrics listener: /healthz,
// /readyz and /metrics (Prometheus text). It is off unless Listen is set,
// and it stays on loopback unless AllowRemote says otherwise, because the
// endpoints have no authentication.
type HTTP struct {
	Listen      string `yaml:"listen" env:"LEMO_HTTP_LISTEN" flag:"http-listen" help:"address of the health and metrics listener (/healthz, /readyz, /metrics), for example 127.0.0.1:7466; empty: off"`
	AllowRemote bool   `yaml:"allow_remote" env:"LEMO_HTTP_ALLOW_REMOTE" help:"allow http.listen on a non-loopback address (the endpoints have no authentication: put a firewall or proxy in front)"`
	// Pprof adds Go's profiling endpoints under /debug/pprof/ (for
	// measuring the daemon, as the step benchmark does).
	Pprof bool `yaml:"pprof" env:"LEMO_HTTP_PPROF" help:"also serve Go's profiling endpoints under /debug/pprof/ on http.listen (CPU and heap profiles of the daemon)"`
}

// Problems checks the HTTP keys and returns every problem, located by key
// ("http.listen").
func (h *HTTP) Problems() []error {
	if h.Listen == "" {
		if h.Pprof {
			return []error{Problem{Where: "http.pprof", What: "needs http.listen: the profiling endpoints are served on the health and metrics listener"}}
		}
		return nil
	}
	host, port, err := net.SplitHostPort(h.Listen)
	if err != nil {
		return []error{Problem{Where: "http.listen", What: "\"" + h.Listen + "\": want host:port, for example 127.0.0.1:7466 (empty: off)"}}
	}
	if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
		return []error{Problem{Where: "http.listen", What: "\"" + h.Listen + "\": bad port"}}
	}
	if !isLoopback(host) && !h.AllowRemote {
		return []error{Problem{Where: "http.listen", What: "\"" + h.Listen + "\" is not a loopback address: the health and metrics endpoints have no authentication; set http.allow_remote to listen on it anyway"}}
	}
	return nil
}
