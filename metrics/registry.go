package metrics

import (
	"fmt"
	"io"
	"math"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
)

// Registry holds metric families and renders them.
type Registry struct {
	mu       sync.Mutex
	families []family
	names    map[string]bool
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry { return &Registry{names: make(map[string]bool)} }

type family interface {
	write(w io.Writer)
}

func (r *Registry) add(name string, f family) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.names[name] {
		panic("metrics: " + name + " registered twice") // a programming error
	}
	r.names[name] = true
	r.families = append(r.families, f)
}

// WriteText renders every family in the Prometheus text format (0.0.4).
func (r *Registry) WriteText(w io.Writer) {
	r.mu.Lock()
	fs := append([]family(nil), r.families...)
	r.mu.Unlock()
	for _, f := range fs {
		f.write(w)
	}
}

func header(w io.Writer, name, help, kind string) {
	fmt.Fprintf(w, "# HELP %s %s\n# TYPE %s %s\n", name, strings.ReplaceAll(help, "\n", " "), name, kind)
}

// labelString renders {a="x",b="y"}.
func labelString(names, values []string) string {
	if len(names) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteByte('{')
	for i, n := range names {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(n)
		b.WriteString(`="`)
		b.WriteString(escape(values[i]))
		b.WriteByte('"')
	}
	b.WriteByte('}')
	return b.String()
}

func escape(s string) string {
	return strings.NewReplacer(`\`, `\\`, "\n", `\n`, `"`, `\"`).Replace(s)
}

func formatFloat(f float64) string {
	switch {
	case math.IsInf(f, 1):
		return "+Inf"
	case math.IsInf(f, -1):
		return "-Inf"
	case f == math.Trunc(f) && math.Abs(f) < 1<<53:
		// Whole numbers (bytes, counts) without an exponent.
		return strconv.FormatFloat(f, 'f', -1, 64)
	}
	return strconv.FormatFloat(f, 'g', -1, 64)
}

// vec keeps one series per label value combination.
type vec[S any] struct {
	mu     sync.RWMutex
	labels []string
	series map[string]*S
	keys   map[string][]string
	make   func() *S
}

func (v *vec[S]) with(values ...string) *S {
	if len(values) != len(v.labels) {
		panic(fmt.Sprintf("metrics: %d label values for labels %v", len(values), v.labels)) // a programming error
	}
	key := strings.Join(values, "\x00")
	v.mu.RLock()
	s := v.series[key]
	v.mu.RUnlock()
	if s != nil {
		return s
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	if s = v.series[key]; s == nil {
		s = v.make()
		v.series[key] = s
		v.keys[key] = append([]string(nil), values...)
	}
	return s
}

// each calls f for every series in a stable order.
func (v *vec[S]) each(f func(values []string, s *S)) {
	v.mu.RLock()
	keys := make([]string, 0, len(v.series))
	for k := range v.series {
		keys = append(keys, k)
	}
	v.mu.RUnlock()
	sort.Strings(keys)
	for _, k := range keys {
		v.mu.RLock()
		s, vals := v.series[k], v.keys[k]
		v.mu.RUnlock()
		f(vals, s)
	}
}

func newVec[S any](labels []string, mk func() *S) vec[S] {
	return vec[S]{labels: labels, series: make(map[string]*S), keys: make(map[string][]string), make: mk}
}

// Counter is a monotonically increasing count.
type Counter struct{ n atomic.Uint64 }

// Add adds n.
func (c *Counter) Add(n uint64) { c.n.Add(n) }

// Inc adds one.
func (c *Counter) Inc() { c.n.Add(1) }

// CounterVec is a counter family with labels.
type CounterVec struct {
	name, help string
	v          vec[Counter]
}

// NewCounter registers a counter family.
func (r *Registry) NewCounter(name, help string, labels ...string) *CounterVec {
	c := &CounterVec{name: name, help: help, v: newVec(labels, func() *Counter { return new(Counter) })}
	r.add(name, c)
	return c
}

// With returns the series with these label values.
func (c *CounterVec) With(values ...string) *Counter { return c.v.with(values...) }

func (c *CounterVec) write(w io.Writer) {
	header(w, c.name, c.help, "counter")
	c.v.each(func(vals []string, s *Counter) {
		fmt.Fprintf(w, "%s%s %d\n", c.name, labelString(c.v.labels, vals), s.n.Load())
	})
}

// GaugeFunc is a gauge family read on demand: f returns the value of each
// label combination.
type GaugeFunc struct {
	name, help string
	labels     []string
	f          func() map[string]float64
	// kind is "gauge", or "counter" for a CounterFunc.
	kind string
}

// NewGaugeFunc registers a gauge whose values f computes at each scrape; f
// maps the label value (one label at most) to the value ("" without a
// label).
func (r *Registry) NewGaugeFunc(name, help, label string, f func() map[string]float64) {
	r.add(name, newFunc(name, help, label, "gauge", f))
}

// NewCounterFunc registers a counter family whose values f reads at each
// scrape from counts kept elsewhere (they must only grow); label as for
// NewGaugeFunc.
func (r *Registry) NewCounterFunc(name, help, label string, f func() map[string]float64) {
	r.add(name, newFunc(name, help, label, "counter", f))
}

func newFunc(name, help, label, kind string, f func() map[string]float64) *GaugeFunc {
	g := &GaugeFunc{name: name, help: help, f: f, kind: kind}
	if label != "" {
		g.labels = []string{label}
	}
	return g
}

func (g *GaugeFunc) write(w io.Writer) {
	header(w, g.name, g.help, g.kind)
	vals := g.f()
	keys := make([]string, 0, len(vals))
	for k := range vals {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		var ls string
		if len(g.labels) > 0 {
			ls = labelString(g.labels, []string{k})
		}
		fmt.Fprintf(w, "%s%s %s\n", g.name, ls, formatFloat(vals[k]))
	}
}

// Histogram counts observations into cumulative buckets.
type Histogram struct {
	bounds []float64
	counts []atomic.Uint64 // per bucket (not cumulative), plus +Inf
	sum    atomic.Uint64   // float64 bits
	count  atomic.Uint64
}

// Observe records v.
func (h *Histogram) Observe(v float64) {
	i := sort.SearchFloat64s(h.bounds, v)
	h.counts[i].Add(1)
	h.count.Add(1)
	for {
		old := h.sum.Load()
		if h.sum.CompareAndSwap(old, math.Float64bits(math.Float64frombits(old)+v)) {
			return
		}
	}
}

// HistogramVec is a histogram family with labels.
type HistogramVec struct {
	name, help string
	v          vec[Histogram]
}

// NewHistogram registers a histogram family with upper bucket bounds.
func (r *Registry) NewHistogram(name, help string, bounds []float64, labels ...string) *HistogramVec {
	b := append([]float64(nil), bounds...)
	sort.Float64s(b)
	h := &HistogramVec{name: name, help: help, v: newVec(labels, func() *Histogram {
		return &Histogram{bounds: b, counts: make([]atomic.Uint64, len(b)+1)}
	})}
	r.add(name, h)
	return h
}

// With returns the series with these label values.
func (h *HistogramVec) With(values ...string) *Histogram { return h.v.with(values...) }

func (h *HistogramVec) write(w io.Writer) {
	header(w, h.name, h.help, "histogram")
	h.v.each(func(vals []string, s *Histogram) {
		names := append(append([]string(nil), h.v.labels...), "le")
		var cum uint64
		for i, b := range s.bounds {
			cum += s.counts[i].Load()
			fmt.Fprintf(w, "%s_bucket%s %d\n", h.name, labelString(names, append(append([]string(nil), vals...), formatFloat(b))), cum)
		}
		cum += s.counts[len(s.bounds)].Load()
		fmt.Fprintf(w, "%s_bucket%s %d\n", h.name, labelString(names, append(append([]string(nil), vals...), "+Inf")), cum)
		ls := labelString(h.v.labels, vals)
		fmt.Fprintf(w, "%s_sum%s %s\n%s_count%s %d\n", h.name, ls, formatFloat(math.Float64frombits(s.sum.Load())), h.name, ls, s.count.Load())
	})
}
