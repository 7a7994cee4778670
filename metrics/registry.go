package metrics

import (
	"fmt"
	"io"
	"sort"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/common/expfmt"
)

// Registry holds Lemo's metric families: its own, the Go runtime's and the
// process's. It is not prometheus.DefaultRegisterer, so nothing a library
// registers globally shows up in it.
type Registry struct {
	reg *prometheus.Registry
}

// NewRegistry returns a registry with the Go runtime and process
// collectors.
func NewRegistry() *Registry {
	r := prometheus.NewRegistry()
	r.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return &Registry{reg: r}
}

// Gatherer is what an exposition reads.
func (r *Registry) Gatherer() prometheus.Gatherer { return r.reg }

// WriteText renders every family in the Prometheus text format (0.0.4).
func (r *Registry) WriteText(w io.Writer) error {
	fams, err := r.reg.Gather()
	if err != nil {
		return fmt.Errorf("metrics: gather: %w", err)
	}
	enc := expfmt.NewEncoder(w, expfmt.NewFormat(expfmt.TypeTextPlain))
	for _, f := range fams {
		if err := enc.Encode(f); err != nil {
			return fmt.Errorf("metrics: encode %s: %w", f.GetName(), err)
		}
	}
	return nil
}

// NewCounter registers a counter family. Registering a name twice is a
// programming error and panics.
func (r *Registry) NewCounter(name, help string, labels ...string) *prometheus.CounterVec {
	c := prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, labels)
	r.reg.MustRegister(c)
	return c
}

// NewHistogram registers a histogram family with upper bucket bounds.
func (r *Registry) NewHistogram(name, help string, bounds []float64, labels ...string) *prometheus.HistogramVec {
	h := prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: name, Help: help, Buckets: bounds}, labels)
	r.reg.MustRegister(h)
	return h
}

// NewGaugeFunc registers a gauge whose values f computes at each scrape; f
// maps the label value (one label at most) to the value ("" without a
// label).
func (r *Registry) NewGaugeFunc(name, help, label string, f func() map[string]float64) {
	var labels []string
	if label != "" {
		labels = []string{label}
	}
	r.reg.MustRegister(&gaugeFunc{desc: prometheus.NewDesc(name, help, labels, nil), labelled: label != "", f: f, kind: prometheus.GaugeValue})
}

// NewCounterFunc registers a counter family whose values f reads at each
// scrape from counts kept elsewhere (they must only grow); label as for
// NewGaugeFunc.
func (r *Registry) NewCounterFunc(name, help, label string, f func() map[string]float64) {
	var labels []string
	if label != "" {
		labels = []string{label}
	}
	r.reg.MustRegister(&gaugeFunc{desc: prometheus.NewDesc(name, help, labels, nil), labelled: label != "", f: f, kind: prometheus.CounterValue})
}

// gaugeFunc is a collector of gauges (or counters) computed at each scrape.
type gaugeFunc struct {
	desc     *prometheus.Desc
	labelled bool
	f        func() map[string]float64
	kind     prometheus.ValueType
}

func (g *gaugeFunc) Describe(ch chan<- *prometheus.Desc) { ch <- g.desc }

func (g *gaugeFunc) Collect(ch chan<- prometheus.Metric) {
	vals := g.f()
	keys := make([]string, 0, len(vals))
	for k := range vals {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		var labels []string
		if g.labelled {
			labels = []string{k}
		} else if k != "" {
			ch <- prometheus.NewInvalidMetric(g.desc, fmt.Errorf("a gauge without a label got the label value %q", k))
			continue
		}
		m, err := prometheus.NewConstMetric(g.desc, g.kind, vals[k], labels...)
		if err != nil {
			m = prometheus.NewInvalidMetric(g.desc, err)
		}
		ch <- m
	}
}
