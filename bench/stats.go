package bench

import (
	"os"
	"slices"
	"time"

	"github.com/gobtl/gobtl/core"
)

// lap marks the start of iteration i of a timed loop, and with i ==
// warmup+iters its end: each timed iteration's duration goes to b.laps,
// at one clock read per iteration. It returns the timed part so far (all
// of it at the end).
func (b *runner) lap(i int) time.Duration {
	if i < b.warmup {
		return 0
	}
	now := b.clock.Now()
	if i == b.warmup {
		b.t0, b.laps = now, b.laps[:0]
	} else {
		b.laps = append(b.laps, now-b.last)
	}
	b.last = now
	return now - b.t0
}

// row is a row whose first field is main, followed by the minimum,
// median, 99th percentile and maximum of f over this rank's timed
// iterations (main's name with _min, _median, _p99 and _max) when f is
// given.
func (b *runner) row(main Field, f func(time.Duration) float64) Row {
	r := Row{Fields: []Field{main}}
	if f == nil || len(b.laps) == 0 {
		return r
	}
	vs := make([]float64, len(b.laps))
	for i, d := range b.laps {
		vs[i] = f(d)
	}
	return r.with(spread(main.Name, vs)...)
}

// with appends fields.
func (r Row) with(fs ...Field) Row {
	r.Fields = append(r.Fields, fs...)
	return r
}

// spread is the minimum, median, 99th percentile and maximum of vs as
// the fields name_min, name_median, name_p99, name_max. The p99 is the
// nearest rank's, ⌈0.99·n⌉-th smallest: a tail that one iteration in a
// hundred reaches — what a stall of the runtime or the scheduler shows as
// before it is the maximum.
func spread(name string, vs []float64) []Field {
	if len(vs) == 0 {
		return nil
	}
	s := slices.Clone(vs)
	slices.Sort(s)
	med := s[len(s)/2]
	if len(s)%2 == 0 {
		med = (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	p99 := s[(99*len(s)+99)/100-1]
	return []Field{{name + "_min", s[0]}, {name + "_median", med}, {name + "_p99", p99}, {name + "_max", s[len(s)-1]}}
}

// Version is the gobtl build that runs (core.BuildInfo): the module's
// version and the VCS revision it was built from.
func Version() string { return core.BuildInfo().String() }

// NewReport starts the report of a run of bench on c: what ran, where
// (the host, gobtl's version) and when, with config echoed.
func NewReport(bench string, c Comm, config map[string]any) *Report {
	host, err := os.Hostname()
	if err != nil {
		host = "unknown"
	}
	rep := &Report{Bench: bench, Ranks: c.Size(), Config: map[string]any{}, Rows: []Row{},
		Version: Version(), Host: host, Time: time.Now().UTC().Format(time.RFC3339)}
	for k, v := range config {
		rep.Config[k] = v
	}
	return rep
}

// tagCounters is the first of the two tags on which every rank's counters
// go to rank 0 after a point-to-point run (Gather).
const tagCounters = 4
