package core

import (
	"fmt"
	"math"
	"sort"
	"sync"
	"sync/atomic"
)

// Counter is a monotonically increasing count. Updating it is one atomic
// add: cheap enough for the data path.
type Counter struct{ v atomic.Int64 }

// Add adds n.
func (c *Counter) Add(n int64) { c.v.Add(n) }

// Inc adds one.
func (c *Counter) Inc() { c.v.Add(1) }

// Load returns the count.
func (c *Counter) Load() int64 { return c.v.Load() }

// Gauge is a value that goes up and down and remembers its maximum.
type Gauge struct{ v, max atomic.Int64 }

// Set stores v.
func (g *Gauge) Set(v int64) {
	g.v.Store(v)
	for {
		m := g.max.Load()
		if v <= m || g.max.CompareAndSwap(m, v) {
			return
		}
	}
}

// Add adds d and returns the new value.
func (g *Gauge) Add(d int64) int64 {
	v := g.v.Add(d)
	for {
		m := g.max.Load()
		if v <= m || g.max.CompareAndSwap(m, v) {
			return v
		}
	}
}

// Load returns the current value.
func (g *Gauge) Load() int64 { return g.v.Load() }

// Max returns the largest value ever set.
func (g *Gauge) Max() int64 { return g.max.Load() }

// Histogram counts observations into fixed buckets. Bounds are the upper
// bounds of all buckets but the last, which takes everything above.
type Histogram struct {
	bounds []float64
	counts []atomic.Int64
	sum    atomic.Uint64 // float64 bits
	n      atomic.Int64
}

// NewHistogram returns a histogram with the given ascending upper bounds.
func NewHistogram(bounds []float64) *Histogram {
	b := append([]float64(nil), bounds...)
	sort.Float64s(b)
	return &Histogram{bounds: b, counts: make([]atomic.Int64, len(b)+1)}
}

// Observe records v.
func (h *Histogram) Observe(v float64) {
	i := sort.SearchFloat64s(h.bounds, v)
	h.counts[i].Add(1)
	h.n.Add(1)
	for {
		old := h.sum.Load()
		if h.sum.CompareAndSwap(old, math.Float64bits(math.Float64frombits(old)+v)) {
			return
		}
	}
}

// HistogramSnapshot is a point-in-time copy of a Histogram.
type HistogramSnapshot struct {
	Bounds []float64 `json:"bounds"`
	Counts []int64   `json:"counts"`
	Count  int64     `json:"count"`
	Mean   float64   `json:"mean"`
}

// Snapshot copies the histogram.
func (h *Histogram) Snapshot() HistogramSnapshot {
	s := HistogramSnapshot{Bounds: h.bounds, Counts: make([]int64, len(h.counts)), Count: h.n.Load()}
	for i := range h.counts {
		s.Counts[i] = h.counts[i].Load()
	}
	if s.Count > 0 {
		s.Mean = math.Float64frombits(h.sum.Load()) / float64(s.Count)
	}
	return s
}

// Metrics is a registry of named counters, gauges and histograms. Names
// carry the owning component ("sm.fastbox_sends", "ib.rnr_naks.peer3").
type Metrics struct {
	mu       sync.Mutex
	counters map[string]*Counter
	gauges   map[string]*Gauge
	hists    map[string]*Histogram
	// sets are the metrics components keep outside the registry and
	// name only when a snapshot is taken (Collect).
	sets []func(add func(name string, metric any))
}

// NewMetrics returns an empty registry.
func NewMetrics() *Metrics {
	return &Metrics{counters: map[string]*Counter{}, gauges: map[string]*Gauge{}, hists: map[string]*Histogram{}}
}

// Counter returns the counter called name, creating it on first use. Look
// it up once and keep the pointer; the lookup takes a lock.
func (m *Metrics) Counter(name string) *Counter {
	return lookup(m, m.counters, name, func() *Counter { return new(Counter) })
}

// Gauge returns the gauge called name, creating it on first use.
func (m *Metrics) Gauge(name string) *Gauge {
	return lookup(m, m.gauges, name, func() *Gauge { return new(Gauge) })
}

// Histogram returns the histogram called name, creating it with bounds on
// first use.
func (m *Metrics) Histogram(name string, bounds []float64) *Histogram {
	return lookup(m, m.hists, name, func() *Histogram { return NewHistogram(bounds) })
}

// lookup returns byName[name], made by mk on first use, under m's lock.
func lookup[T any](m *Metrics, byName map[string]*T, name string, mk func() *T) *T {
	m.mu.Lock()
	defer m.mu.Unlock()
	v := byName[name]
	if v == nil {
		v = mk()
		byName[name] = v
	}
	return v
}

// Collect registers a set of metrics that its owner keeps in its own
// structures instead of one registry entry each: f is called by every
// Snapshot, outside the registry's lock, and hands each metric it has now
// to add with its name, as a *Counter, *Gauge or *Histogram. Per-peer
// metrics need it: named up front, thousands of peers would cost
// thousands of names and map entries per rank before a single one was
// used (btl/ib's per-peer flow-control counters, ib.<module>.<name>.peer<r>).
// The names f gives appear in Snapshot and Names like any other; Counter
// and Gauge do not find them.
func (m *Metrics) Collect(f func(add func(name string, metric any))) {
	m.mu.Lock()
	m.sets = append(m.sets, f)
	m.mu.Unlock()
}

// Snapshot returns every metric by name: counters as int64, gauges as
// {"value","max"} and histograms as HistogramSnapshot.
func (m *Metrics) Snapshot() map[string]any {
	m.mu.Lock()
	out := make(map[string]any, len(m.counters)+len(m.gauges)+len(m.hists))
	for n, c := range m.counters {
		out[n] = c.Load()
	}
	for n, g := range m.gauges {
		out[n] = gaugeValue(g)
	}
	for n, h := range m.hists {
		out[n] = h.Snapshot()
	}
	sets := m.sets
	m.mu.Unlock()
	add := func(n string, v any) {
		switch x := v.(type) {
		case *Counter:
			out[n] = x.Load()
		case *Gauge:
			out[n] = gaugeValue(x)
		case *Histogram:
			out[n] = x.Snapshot()
		}
	}
	for _, f := range sets {
		f(add)
	}
	return out
}

func gaugeValue(g *Gauge) map[string]int64 {
	return map[string]int64{"value": g.Load(), "max": g.Max()}
}

// Names lists every metric name, sorted.
func (m *Metrics) Names() []string {
	s := m.Snapshot()
	names := make([]string, 0, len(s))
	for n := range s {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// MetricName joins a component and metric name with dots, skipping empties.
func MetricName(parts ...any) string {
	s := ""
	for _, p := range parts {
		t := fmt.Sprint(p)
		if t == "" {
			continue
		}
		if s != "" {
			s += "."
		}
		s += t
	}
	return s
}
