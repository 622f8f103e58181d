package bench

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"runtime"
	"runtime/metrics"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/gobtl/gobtl/coll"
	"github.com/gobtl/gobtl/core"
	"github.com/gobtl/gobtl/pml"
)

// Comm is what a rank program needs of a communicator: the benchmarks
// here, the NPB patterns (bench/patterns) and the paper experiments
// (experiment/...) all take it. *pml.Comm and *gobtl.Comm have it.
// Extras that only some communicators have are found by type assertion
// (RailWeights).
type Comm interface {
	Rank() int
	Size() int
	Isend(buf []byte, dest, tag int) (*pml.Request, error)
	Irecv(buf []byte, source, tag int) (*pml.Request, error)
	Send(buf []byte, dest, tag int) error
	Recv(buf []byte, source, tag int) (pml.Status, error)
	Wait(r *pml.Request) (pml.Status, error)
	Waitall(rs []*pml.Request, sts []pml.Status) error
	Barrier() error
	Metrics() *core.Metrics
}

// Computer is the extra of a communicator whose ranks run in virtual time
// (package sim): Compute stands for d of computation, advancing the rank's
// clock instead of spinning the processor.
type Computer interface {
	Compute(d time.Duration)
}

// Options configure a run. Zero fields take the benchmark's defaults.
type Options struct {
	// Sizes in bytes; nil means the benchmark's default list.
	Sizes []int
	// Iters and Warmup per size; 0 picks by size (osu's defaults).
	Iters, Warmup int
	// Window is the number of messages in flight for bw, bibw, msgrate.
	Window int
	// Compute is the overlap benchmark's W; 0 means twice the measured
	// transfer time of each size. For the NPB patterns it is the spin of
	// one compute phase: 0 means the patterns' default, negative none.
	Compute time.Duration
	// Scale multiplies the class A message sizes of an NPB pattern; 0
	// means the pattern's default. (Iters is the pattern's time steps.)
	Scale float64
	// JSON selects the JSON report.
	JSON bool
	// Out receives the report (rank 0 only).
	Out io.Writer
	// Progress, when set, receives a progress bar if the run takes more
	// than a few seconds (rank 0 only).
	Progress io.Writer
	// Config is echoed in the JSON report ("config"): the stack and
	// whatever else identifies the run.
	Config map[string]any
}

// Field is one named value of a row.
type Field struct {
	Name  string
	Value float64
}

// Row is the result for one size.
type Row struct {
	Size   int
	Fields []Field
}

// Get returns the value of the field called name.
func (r Row) Get(name string) (float64, bool) {
	for _, f := range r.Fields {
		if f.Name == name {
			return f.Value, true
		}
	}
	return 0, false
}

// MarshalJSON writes {"size": B, "<field>": value, ...} in field order.
func (r Row) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	fmt.Fprintf(&b, `{"size":%d`, r.Size)
	for _, f := range r.Fields {
		v := f.Value
		if math.IsNaN(v) || math.IsInf(v, 0) {
			fmt.Fprintf(&b, `,%q:null`, f.Name)
			continue
		}
		fmt.Fprintf(&b, `,%q:%s`, f.Name, strconv.FormatFloat(v, 'g', 6, 64))
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// Report is the JSON document of a run.
type Report struct {
	Bench string `json:"bench"`
	Ranks int    `json:"ranks"`
	// Version is gobtl's (Version), Host the host rank 0 ran on and Time
	// when the run started (RFC 3339, UTC).
	Version string         `json:"version"`
	Host    string         `json:"host"`
	Time    string         `json:"time"`
	Config  map[string]any `json:"config"`
	Rows    []Row          `json:"rows"`
	// Counters is rank 0's Metrics snapshot, RankCounters[r] rank r's
	// (on rank 0; numbers as json.Number), each taken when the rank's
	// part of the run was done: a counter of the receiving side (the
	// stripes of rdma_read) is in the receiver's.
	Counters     map[string]any   `json:"counters"`
	RankCounters []map[string]any `json:"rank_counters,omitempty"`
	// The NPB patterns also report RankMsgs[s][d] / RankBytes[s][d], the
	// application messages and bytes rank s sent rank d; pairs reports
	// RankHosts[r], the host rank r ran on.
	RankMsgs  [][]int64 `json:"rank_msgs,omitempty"`
	RankBytes [][]int64 `json:"rank_bytes,omitempty"`
	RankHosts []string  `json:"rank_hosts,omitempty"`
	// RankBindings[r] says where rank r runs, as whoever started it
	// bound it (init: "bound to core 1 of socket 0 (cpus 1)").
	RankBindings []string `json:"rank_bindings,omitempty"`
}

// column describes how a field prints in the table.
type column struct {
	field, title, format string
}

// benchmark is one entry of the suite.
type benchmark struct {
	doc       string
	minRanks  int
	evenRanks bool
	// perRank: the buffers hold size bytes per rank (allgather, alltoall).
	perRank bool
	sizes   []int
	columns []column
	// iters gives the default iterations for a size: windows of
	// messages when windowed (bw and bibw, as osu_bw's), messages when
	// perMessage (msgrate, run in whole windows).
	iters      func(size int) int
	windowed   bool
	perMessage bool
	run        func(b *runner, size int) (Row, error)
}

// powers lists powers of two from lo to hi.
func powers(lo, hi int) []int {
	var s []int
	for n := lo; n <= hi; n *= 2 {
		s = append(s, n)
	}
	return s
}

func bySize(small, large, cut int) func(int) int {
	return func(n int) int {
		if n <= cut {
			return small
		}
		return large
	}
}

var suite = map[string]*benchmark{
	"latency": {
		doc: "ping-pong between ranks 0 and 1: one-way latency", minRanks: 2,
		sizes: append([]int{0}, powers(1, 4<<20)...), iters: bySize(10000, 1000, 8192),
		columns: []column{{"lat_us", "Latency (us)", "%.2f"}},
		run:     (*runner).latency,
	},
	"bw": {
		doc: "rank 0 streams windows of messages to rank 1: bandwidth", minRanks: 2,
		sizes: powers(1, 4<<20), iters: bySize(100, 20, 8192), windowed: true,
		columns: []column{{"mbps", "Bandwidth (MB/s)", "%.2f"}},
		run:     func(b *runner, n int) (Row, error) { return b.bandwidth(n, false) },
	},
	"bibw": {
		doc: "ranks 0 and 1 stream windows to each other: bidirectional bandwidth", minRanks: 2,
		sizes: powers(1, 4<<20), iters: bySize(100, 20, 8192), windowed: true,
		columns: []column{{"mbps", "Bandwidth (MB/s)", "%.2f"}},
		run:     func(b *runner, n int) (Row, error) { return b.bandwidth(n, true) },
	},
	"msgrate": {
		doc: "pairs (i, i+N/2) stream windows of messages: messages per second", minRanks: 2, evenRanks: true,
		sizes: []int{8}, iters: bySize(640000, 6400, 8192), windowed: true, perMessage: true,
		columns: []column{{"msgs_per_s", "Messages/s", "%.0f"}, {"mbps", "MB/s", "%.2f"}},
		run:     (*runner).msgrate,
	},
	"overlap": {
		doc: "seed 004 §5.1: computation/communication overlap W/T on the sender and the receiver", minRanks: 2,
		sizes: []int{64 << 10, 256 << 10, 1 << 20}, iters: bySize(200, 50, 64<<10),
		columns: []column{{"compute_us", "W (us)", "%.1f"}, {"time_send_us", "T send (us)", "%.1f"},
			{"overlap_send", "Overlap send", "%.3f"}, {"time_recv_us", "T recv (us)", "%.1f"}, {"overlap_recv", "Overlap recv", "%.3f"}},
		run: (*runner).overlap,
	},
	"multi-pingpong": {
		doc: "seed 003 §5.3: N/2 pairs ping-pong at once: mean and worst one-way latency", minRanks: 2, evenRanks: true,
		sizes: []int{8, 256, 2048, 16384, 65536}, iters: bySize(10000, 1000, 8192),
		columns: []column{{"lat_us", "Latency (us)", "%.2f"}, {"lat_max_us", "Worst pair (us)", "%.2f"}},
		run:     (*runner).multiPingPong,
	},
}

// extra is a benchmark another package adds to the suite (Register).
type extra struct {
	name, doc string
	run       func(c Comm, o Options) (*Report, error)
}

// extras are the added benchmarks, in the order they were registered.
var extras []extra

// Register adds a benchmark that runs itself and writes its own report:
// the NPB patterns of bench/patterns register one each from init, so a
// program that imports that package runs them by name. It panics on a
// name the suite has already.
func Register(name, doc string, run func(c Comm, o Options) (*Report, error)) {
	if _, dup := suite[name]; dup || slices.ContainsFunc(extras, func(e extra) bool { return e.name == name }) {
		panic("bench: " + name + " registered twice")
	}
	extras = append(extras, extra{name, doc, run})
}

func lookupExtra(name string) (extra, bool) {
	i := slices.IndexFunc(extras, func(e extra) bool { return e.name == name })
	if i < 0 {
		return extra{}, false
	}
	return extras[i], true
}

// Names lists the benchmarks: the osu-style ones, then the registered
// ones (the NPB patterns) in the order they registered.
func Names() []string {
	names := make([]string, 0, len(suite)+len(extras))
	for n := range suite {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, e := range extras {
		names = append(names, e.name)
	}
	return names
}

// Doc describes a benchmark.
func Doc(name string) string {
	if b, ok := suite[name]; ok {
		return b.doc
	}
	if e, ok := lookupExtra(name); ok {
		return e.doc
	}
	return ""
}

// ErrUnknown reports a benchmark name the suite does not have.
var ErrUnknown = errors.New("unknown benchmark")

// runner holds a run's state.
type runner struct {
	c      Comm
	o      *Options
	bench  *benchmark
	sbuf   []byte
	rbuf   []byte
	ack    []byte
	reqs   []*pml.Request
	iters  int // timed iterations (windows when windowed)
	warmup int
	// laps are the timed iterations' durations of the size running (lap).
	laps     []time.Duration
	t0, last time.Duration
	// clock times the runs: the communicator's own when it has one (a
	// simulated rank's virtual time), else the wall clock.
	clock core.Clock
	coll  *coll.Comm // the collective benchmarks' layer, once built
}

// Run runs the named benchmark on every rank and writes the report on rank
// 0. Every rank of c must call it with the same options.
func Run(c Comm, name string, o Options) (*Report, error) {
	if e, ok := lookupExtra(name); ok {
		return e.run(c, o)
	}
	b, ok := suite[name]
	if !ok {
		return nil, fmt.Errorf("bench: %q: %w (have %s)", name, ErrUnknown, strings.Join(Names(), ", "))
	}
	if err := b.fits(name, c.Size()); err != nil {
		return nil, err
	}
	sizes := o.Sizes
	if len(sizes) == 0 {
		sizes = b.sizes
	}
	if o.Window <= 0 {
		o.Window = 64
	}
	r := newRunner(c, b, &o, slices.Max(sizes))
	rep := NewReport(name, c, o.Config)
	rep.Config["window"] = o.Window
	bar := newBar(c.Rank() == 0, o.Progress, name, len(sizes))
	defer bar.done()
	for _, n := range sizes {
		row, err := r.size(name, n)
		if err != nil {
			return nil, err
		}
		rep.Rows = append(rep.Rows, row)
		bar.step()
	}
	if err := gatherCounters(c, name, rep); err != nil {
		return nil, err
	}
	if c.Rank() != 0 || o.Out == nil {
		return rep, nil
	}
	bar.done()
	if o.JSON {
		enc := json.NewEncoder(o.Out)
		return rep, enc.Encode(rep)
	}
	return rep, writeTable(o.Out, rep, b)
}

// fits says why a job of size ranks cannot run the benchmark, or nil.
func (b *benchmark) fits(name string, size int) error {
	if size < b.minRanks {
		return fmt.Errorf("bench: %s needs at least %d ranks, the job has %d", name, b.minRanks, size)
	}
	if b.evenRanks && size%2 != 0 {
		return fmt.Errorf("bench: %s pairs ranks and needs an even number, the job has %d", name, size)
	}
	return nil
}

// newRunner builds the state of a run whose largest message is maxSize
// bytes: buffers of that size (per rank for the perRank benchmarks), the
// send buffer filled with a pattern, and the communicator's clock when it
// has one.
func newRunner(c Comm, b *benchmark, o *Options, maxSize int) *runner {
	r := &runner{c: c, o: o, bench: b, ack: make([]byte, 4), reqs: make([]*pml.Request, 0, 2*o.Window), clock: core.SystemClock}
	if k, ok := c.(core.Clock); ok {
		r.clock = k
	}
	bufLen := maxSize
	if b.perRank {
		bufLen = maxSize * c.Size()
	}
	r.sbuf, r.rbuf = make([]byte, bufLen), make([]byte, bufLen)
	for i := range r.sbuf {
		r.sbuf[i] = byte(i)
	}
	return r
}

// size runs the benchmark for messages of n bytes, from a barrier, and
// returns its row with the iterations counted in messages (perMessage
// benchmarks run whole windows of them).
func (r *runner) size(name string, n int) (Row, error) {
	b, o := r.bench, r.o
	if n < 0 {
		return Row{}, fmt.Errorf("bench: negative size %d", n)
	}
	r.iters, r.warmup = o.Iters, o.Warmup
	if r.iters <= 0 {
		r.iters = b.iters(n)
	}
	if r.warmup <= 0 {
		r.warmup = max(r.iters/10, 2)
	}
	per := 1 // iterations (windows) per --iters
	if b.perMessage {
		per = o.Window
		r.iters, r.warmup = (r.iters+per-1)/per, (r.warmup+per-1)/per
	}
	if cap(r.laps) < r.iters {
		r.laps = make([]time.Duration, 0, r.iters)
	}
	// The run's own garbage — the setup's, the buffers just allocated,
	// the last size's — is collected here, before the barrier, not by a
	// collection that starts inside the timed loop: the first one of a
	// rank's life came due about 0.4 s in, in its first size, and its
	// mark worker took the rank's core for 0.7 ms when the waiting rank
	// let the runtime's goroutines run (bw 1 MiB over ofi/tcp: a "core
	// taken" in 3 of 6 runs, none of 6 with the collection here). The
	// timed loops allocate nothing, so "gc" counts the collections that
	// still ran in them (read after the barrier: ranks that are
	// goroutines of one process share its collections).
	runtime.GC()
	if err := r.c.Barrier(); err != nil {
		return Row{}, fmt.Errorf("bench: barrier: %w", err)
	}
	cycles := gcCycles()
	row, err := b.run(r, n)
	if err != nil {
		return Row{}, fmt.Errorf("bench: %s, %d bytes: %w", name, n, err)
	}
	row.Size = n
	row = row.with(Field{"iters", float64(r.iters * per)}, Field{"warmup", float64(r.warmup * per)}, Field{"gc", float64(gcCycles() - cycles)})
	if b.windowed {
		row = row.with(Field{"msgs", float64(r.iters * o.Window)})
	}
	return row, nil
}

// gatherCounters waits for every rank to finish, then puts this rank's
// counters and (on rank 0) every rank's into rep.
func gatherCounters(c Comm, name string, rep *Report) error {
	if err := c.Barrier(); err != nil {
		return fmt.Errorf("bench: barrier: %w", err)
	}
	rep.Counters = c.Metrics().Snapshot()
	all, err := Gather(c, rep.Counters, tagCounters)
	if err != nil {
		return fmt.Errorf("bench: %s: gather the counters: %w", name, err)
	}
	rep.RankCounters = all
	return nil
}

// WriteHeader prints a table's first two lines: what ran, and where.
func WriteHeader(w io.Writer, rep *Report, doc string) {
	fmt.Fprintf(w, "# gobtl %s: %s\n", rep.Bench, doc)
	fmt.Fprintf(w, "# %d ranks", rep.Ranks)
	keys := make([]string, 0, len(rep.Config))
	for k := range rep.Config {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Fprintf(w, ", %s %v", k, rep.Config[k])
	}
	fmt.Fprintln(w)
}

func writeTable(w io.Writer, rep *Report, b *benchmark) error {
	WriteHeader(w, rep, b.doc)
	fmt.Fprintf(w, "%-10s", "# Size")
	for _, c := range b.columns {
		fmt.Fprintf(w, " %16s", c.title)
	}
	fmt.Fprintln(w)
	for _, row := range rep.Rows {
		fmt.Fprintf(w, "%-10d", row.Size)
		for _, c := range b.columns {
			v, _ := row.Get(c.field)
			fmt.Fprintf(w, " %16s", fmt.Sprintf(c.format, v))
		}
		fmt.Fprintln(w)
	}
	return nil
}

// ParseSizes reads a size list: "8,1KiB,64k", or a range of powers of two
// "1:4MiB" (osu's -m).
func ParseSizes(s string) ([]int, error) {
	var out []int
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		if lo, hi, ok := strings.Cut(part, ":"); ok {
			a, err := core.ParseSize(lo)
			if err != nil {
				return nil, err
			}
			b, err := core.ParseSize(hi)
			if err != nil {
				return nil, err
			}
			if a > b {
				return nil, fmt.Errorf("size range %q runs backwards", part)
			}
			if a == 0 {
				out = append(out, 0)
				a = 1
			}
			for n := a; n <= b; n *= 2 {
				out = append(out, int(n))
			}
			continue
		}
		n, err := core.ParseSize(part)
		if err != nil {
			return nil, err
		}
		out = append(out, int(n))
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no sizes in %q", s)
	}
	return out, nil
}

// gcCycles is the number of garbage collections the process has finished.
func gcCycles() uint64 {
	s := []metrics.Sample{{Name: "/gc/cycles/total:gc-cycles"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}
