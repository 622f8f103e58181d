// Package simjob runs an NPB pattern (bench/patterns) on N simulated ranks:
// the real gobtl stack a stack file names, over the simulated verbs
// provider (btl/ib/simrc) or the simulated EXTOLL card (btl/extoll/simnic)
// in package sim's virtual time, and sums up what the mechanisms did —
// `gobtl sim`.
package simjob

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/gobtl/gobtl"
	"github.com/gobtl/gobtl/bench"
	"github.com/gobtl/gobtl/bench/patterns"
	"github.com/gobtl/gobtl/btl/extoll/simnic"
	"github.com/gobtl/gobtl/btl/ib/simrc"
	"github.com/gobtl/gobtl/conf"
	"github.com/gobtl/gobtl/sim"
)

// Config is one simulated run.
type Config struct {
	// Ranks is the job size.
	Ranks int
	// Stack is the loaded stack; its ib blocks must name provider "sim",
	// its extoll blocks transport "sim".
	Stack *conf.Config
	// Pattern is an NPB pattern name (patterns.Names).
	Pattern string
	// Pattern options: time steps, size scale and compute per phase.
	Iters   int
	Scale   float64
	Compute time.Duration
	// Link is every port's LogGP model; zero: simrc.DefaultLink and
	// simnic.DefaultLink.
	Link simrc.Link
	// Body, if set, runs on every rank instead of the pattern, which then
	// only names the run (messages are not counted). The communicator
	// advances virtual time in Compute (bench.Computer) and tells it
	// (core.Clock).
	Body func(c bench.Comm) error
	// Sched shapes the scheduler (how idle ranks wake).
	Sched sim.Options
	// Progress, if set, receives a progress bar over rank 0's time steps
	// (a benchmark's over its sizes).
	Progress io.Writer
	// Sizes are a benchmark's message sizes (nil: its defaults).
	Sizes []int
	// KeepRankMetrics keeps every rank's metrics in Result.RankMetrics
	// (they hold a name per peer: n² of them in all).
	KeepRankMetrics bool
	// Snapshot, if set, receives every rank's metrics as it finishes
	// (histograms included, which Result does not fold).
	Snapshot func(rank int, snap map[string]any)
	// Peak, if set, is called once, when the first rank has finished the
	// pattern and none has closed yet: about when the job's memory peaks
	// (a heap profile there shows what each structure costs).
	Peak func()
}

// Result is what a run did, summed over ranks. Everything in it is
// virtual and deterministic; the wall time is reported apart.
type Result struct {
	Pattern string `json:"pattern"`
	Ranks   int    `json:"ranks"`
	Iters   int    `json:"iters"`
	// VirtualTime is the job's end in virtual time.
	VirtualTime time.Duration `json:"virtual_time_ns"`
	// Msgs and Bytes are the pattern's messages.
	Msgs  int64 `json:"msgs"`
	Bytes int64 `json:"bytes"`
	// Device counters, summed over ranks: RC sends (frames on the wire),
	// RDMA writes and reads, datagrams (connection setup), RNR NAKs, RC
	// QPs (connections × queues).
	Frames    int64 `json:"frames"`
	Writes    int64 `json:"rdma_writes"`
	Reads     int64 `json:"rdma_reads"`
	Datagrams int64 `json:"datagrams"`
	RNRNaks   int64 `json:"rnr_naks"`
	QPs       int64 `json:"qps"`
	// EXTOLL card counters, summed over ranks: VELO packets sent, RMA
	// puts and gets completed; the most mailbox slots one rank had
	// occupied at once (landed or in flight).
	VELOPackets  int64 `json:"velo_packets,omitempty"`
	RMAPuts      int64 `json:"rma_puts,omitempty"`
	RMAGets      int64 `json:"rma_gets,omitempty"`
	MaxSlotsUsed int   `json:"max_mailbox_slots_used,omitempty"`
	// Memory per rank, from the device's view of the BTL's allocations:
	// peak registered bytes (buffers and pinned user memory) and peak bytes
	// of posted receive buffers (on EXTOLL: the mailbox), the largest and
	// the mean over ranks.
	MaxRegisteredPerRank  int64 `json:"max_registered_per_rank"`
	MeanRegisteredPerRank int64 `json:"mean_registered_per_rank"`
	MaxRecvBytesPerRank   int64 `json:"max_recv_bytes_per_rank"`
	MeanRecvBytesPerRank  int64 `json:"mean_recv_bytes_per_rank"`
	// Most receive buffers posted at once on one connection's QP
	// (per-peer queues) and on one SRQ.
	MaxPostedPerConn int `json:"max_posted_per_connection"`
	MaxPostedPerSRQ  int `json:"max_posted_per_srq"`
	// Counters are the stack's own counters (every component's
	// core.Metrics), summed over ranks; CountersMax their largest value
	// on any rank.
	Counters    map[string]float64 `json:"counters"`
	CountersMax map[string]float64 `json:"counters_max"`
	// PerConn folds the per-peer counters (ib.<module>.<name>.peer<r>)
	// over the connections of every rank that sent frames, under
	// ib.<module>.<name>.
	PerConn map[string]*ConnStat `json:"per_connection"`
	// Ranks holds every rank's own metrics (not printed).
	RankMetrics []map[string]any `json:"-"`
	// FinalizeFailed counts the ranks whose finalize (Comm.Close) failed
	// after they had finished the program and their counts were taken;
	// FinalizeError says why (the stall, if the job stalled).
	FinalizeFailed int    `json:"finalize_failed,omitempty"`
	FinalizeError  string `json:"finalize_error,omitempty"`
	// Bench is rank 0's report when the job ran a benchmark of package
	// bench (times in virtual time).
	Bench json.RawMessage `json:"bench,omitempty"`
	// Scheduler work: events run and rank switches.
	Events   int64 `json:"sim_events"`
	Switches int64 `json:"sim_switches"`
}

// ConnStat is one per-peer counter over the job's connections: how many
// (rank, peer) pairs have it, its sum and its largest value.
type ConnStat struct {
	Conns int     `json:"connections"`
	Sum   float64 `json:"sum"`
	Max   float64 `json:"max"`
}

// Mean is the sum per connection.
func (c *ConnStat) Mean() float64 {
	if c.Conns == 0 {
		return 0
	}
	return c.Sum / float64(c.Conns)
}

// comm is a simulated rank's communicator: compute phases advance its
// virtual clock (bench.Computer).
type comm struct {
	*gobtl.Comm
	s *sim.Sched
}

func (c comm) Compute(d time.Duration) { c.s.Compute(d) }

// Wrapped lets bench reach the layers under the communicator
// (layers.Wrapper).
func (c comm) Wrapped() any { return c.Comm }

var jobSeq int

// Run runs the configured job and returns what it did.
func Run(ctx context.Context, cfg Config) (*Result, error) {
	if cfg.Ranks < 1 {
		return nil, fmt.Errorf("sim: %d ranks", cfg.Ranks)
	}
	if !known(cfg.Pattern) && cfg.Body == nil {
		return nil, fmt.Errorf("sim: no pattern or benchmark %q (have %v)", cfg.Pattern, Programs())
	}
	if err := simulated(cfg.Stack); err != nil {
		return nil, err
	}
	s, err := newSched(cfg)
	if err != nil {
		return nil, err
	}
	defer s.Unregister()
	j := &job{ctx: ctx, cfg: cfg, s: s, comms: make([]*gobtl.Comm, cfg.Ranks), stats: make([]*patterns.Stats, cfg.Ranks),
		res: &Result{Pattern: cfg.Pattern, Ranks: cfg.Ranks, Counters: map[string]float64{}, CountersMax: map[string]float64{},
			PerConn: map[string]*ConnStat{}, RankMetrics: make([]map[string]any, cfg.Ranks)},
		bar: newStepBar(cfg.Progress, cfg)}
	s.OnStall(j.stalled)
	err = s.Run(j.rank)
	j.bar.done()
	if err != nil {
		return nil, err
	}
	j.finish()
	return j.res, nil
}

// newSched is the job's scheduler, registered (the simulated devices
// find it by its id), with every port on cfg.Link if it is set.
func newSched(cfg Config) (*sim.Sched, error) {
	jobSeq++
	s := sim.New(fmt.Sprintf("sim-%p-%d", &jobSeq, jobSeq), cfg.Ranks, cfg.Sched)
	if err := s.Register(); err != nil {
		return nil, err
	}
	if cfg.Link != (simrc.Link{}) {
		l := cfg.Link
		simrc.FabricOf(s).SetModel(func(int, string, uint8) simrc.Link { return l })
		x := sim.Link{Latency: l.Latency, Overhead: l.Overhead, Gap: l.Gap, Rate: l.Rate}
		simnic.FabricOf(s).SetModel(func(int, string) sim.Link { return x })
	}
	return s, nil
}

// job is one Run under way: its ranks' communicators and pattern
// statistics, and the result their counters fold into as each finishes.
type job struct {
	ctx    context.Context
	cfg    Config
	s      *sim.Sched
	comms  []*gobtl.Comm
	stats  []*patterns.Stats
	res    *Result
	bar    *stepBar
	report bytes.Buffer
	// stall is why the scheduler stopped the job, if it did.
	stall error
}

// stalled aborts every rank: no rank can make progress.
func (j *job) stalled(err error) {
	j.stall = err
	for _, c := range j.comms {
		if c != nil {
			c.Abort(err)
		}
	}
}

// rank is rank r's life: it joins the job, runs the program, and folds
// its counters into the result before it closes.
func (j *job) rank(r int) error {
	c, err := gobtl.Init(j.ctx, gobtl.Options{Config: j.cfg.Stack, Boot: j.s.Boot(r), Clock: j.s})
	if err != nil {
		return err
	}
	j.comms[r] = c
	virtualStart(c.Metrics())
	st, err := program(comm{c, j.s}, j.cfg, j.bar, &j.report)
	if err != nil {
		c.Abort(err)
		c.Close()
		return err
	}
	j.stats[r] = st
	snap := c.Metrics().Snapshot()
	fold(j.res, snap)
	if j.cfg.Snapshot != nil {
		j.cfg.Snapshot(r, snap)
	}
	if j.cfg.KeepRankMetrics {
		j.res.RankMetrics[r] = snap
	}
	if j.cfg.Peak != nil {
		// Once: every rank finishes the pattern before the first
		// closes (Close has a barrier).
		j.cfg.Peak()
		j.cfg.Peak = nil
	}
	if err := c.Close(); err != nil {
		// The rank's counts are in (taken above): a finalize that
		// fails is reported with them rather than losing the run.
		j.res.FinalizeFailed++
		if j.res.FinalizeError == "" {
			j.res.FinalizeError = err.Error()
		}
	}
	return nil
}

// finish completes the result once every rank is done: the scheduler's
// account, the benchmark's report, the patterns' totals and what the
// simulated devices saw.
func (j *job) finish() {
	res := j.res
	if j.stall != nil && res.FinalizeFailed > 0 {
		res.FinalizeError = j.stall.Error()
	}
	res.VirtualTime, res.Events, res.Switches = j.s.Now(), j.s.Events, j.s.Switches
	if !j.cfg.KeepRankMetrics {
		res.RankMetrics = nil
	}
	if j.report.Len() > 0 {
		res.Bench = json.RawMessage(bytes.TrimSpace(j.report.Bytes()))
	}
	for _, st := range j.stats {
		if st == nil {
			continue
		}
		res.Iters = st.Iters
		res.Msgs += st.TotalMsgs()
		res.Bytes += st.TotalBytes()
	}
	res.addDevices(j.s)
}

// addDevices adds what the simulated HCAs and EXTOLL cards counted:
// frames and RDMA operations, and per rank the peak registered memory
// and receive buffers (mailboxes) it posted.
func (res *Result) addDevices(s *sim.Sched) {
	reg := map[int]int64{}
	recv := map[int]int64{}
	for _, d := range simrc.FabricOf(s).Devices() {
		st := d.Stats()
		res.Frames += st.Sends
		res.Writes += st.Writes
		res.Reads += st.Reads
		res.Datagrams += st.Datagrams
		res.RNRNaks += st.RNRNaks
		res.QPs += int64(st.QPs)
		reg[d.Rank()] += st.PeakRegistered
		recv[d.Rank()] += st.PeakPostedRecvBytes
		res.MaxPostedPerConn = max(res.MaxPostedPerConn, st.MaxPostedPerQP)
		res.MaxPostedPerSRQ = max(res.MaxPostedPerSRQ, st.MaxPostedPerSRQ)
	}
	for _, d := range simnic.FabricOf(s).Devices() {
		st := d.Stats()
		res.VELOPackets += st.Packets
		res.RMAPuts += st.Puts
		res.RMAGets += st.Gets
		res.MaxSlotsUsed = max(res.MaxSlotsUsed, st.PeakSlots)
		reg[d.Rank()] += st.PeakRegistered
		recv[d.Rank()] += st.Mailbox
	}
	res.MaxRegisteredPerRank, res.MeanRegisteredPerRank = maxMean(reg, res.Ranks)
	res.MaxRecvBytesPerRank, res.MeanRecvBytesPerRank = maxMean(recv, res.Ranks)
}

// simulated checks that every transport of the stack runs on the
// simulated fabric: a real device would wait on the wall clock while it
// holds the only baton.
func simulated(c *conf.Config) error {
	if c == nil {
		return fmt.Errorf("sim: no stack (its ib blocks must say provider = \"sim\", its extoll blocks transport = \"sim\")")
	}
	for _, b := range c.BTLs {
		switch {
		case b.Kind == "self":
		case b.Kind == "ib" && b.Params.String("provider") == "sim":
		case b.Kind == "extoll" && b.Params.String("transport") == "sim":
		default:
			return fmt.Errorf("sim: btl %q %q at %v is not simulated: only self, ib with provider = \"sim\" and extoll with transport = \"sim\" run under gobtl sim", b.Kind, b.Name, b.DeclRange)
		}
	}
	return nil
}

func maxMean(m map[int]int64, n int) (int64, int64) {
	var mx, sum int64
	for _, v := range m {
		mx = max(mx, v)
		sum += v
	}
	return mx, sum / int64(n)
}

// fold adds one rank's metrics to r. A per-peer counter counts for the
// connections that carried frames: the BTL keeps an endpoint, and its
// counters, for every rank from the start.
func fold(r *Result, snap map[string]any) {
	for k, v := range snap {
		x, ok := number(v)
		if !ok || strings.HasPrefix(k, "init.") {
			continue // init.* are wall-clock start-up times
		}
		base, ok := perPeer(k)
		if !ok {
			r.Counters[k] += x
			r.CountersMax[k] = max(r.CountersMax[k], x)
			continue
		}
		mod := base[:strings.LastIndexByte(base, '.')]
		if f, _ := number(snap[mod+".frames"+k[len(base):]]); f == 0 {
			continue
		}
		cs := r.PerConn[base]
		if cs == nil {
			cs = &ConnStat{}
			r.PerConn[base] = cs
		}
		cs.Conns++
		cs.Sum += x
		cs.Max = max(cs.Max, x)
	}
}

// perPeer splits a per-peer metric name "<base>.peer<r>".
func perPeer(k string) (string, bool) {
	i := strings.LastIndex(k, ".peer")
	if i < 0 || i+5 == len(k) {
		return "", false
	}
	for _, c := range k[i+5:] {
		if c < '0' || c > '9' {
			return "", false
		}
	}
	return k[:i], true
}

// number is a metric's value: a counter's, a gauge's maximum.
func number(v any) (float64, bool) {
	switch x := v.(type) {
	case map[string]int64:
		m, ok := x["max"]
		return float64(m), ok
	case int64:
		return float64(x), true
	case int:
		return float64(x), true
	case uint64:
		return float64(x), true
	case float64:
		return x, true
	}
	return 0, false
}

// WriteText prints r for people.
func (r *Result) WriteText(w io.Writer) {
	fmt.Fprintf(w, "pattern %s, %d ranks, %d time steps\n", r.Pattern, r.Ranks, r.Iters)
	fmt.Fprintf(w, "virtual time          %v\n", r.VirtualTime)
	r.writeBench(w)
	fmt.Fprintf(w, "messages              %d (%d bytes)\n", r.Msgs, r.Bytes)
	fmt.Fprintf(w, "frames (RC sends)     %d\n", r.Frames)
	fmt.Fprintf(w, "RDMA writes / reads   %d / %d\n", r.Writes, r.Reads)
	fmt.Fprintf(w, "RNR NAKs              %d\n", r.RNRNaks)
	fmt.Fprintf(w, "RC QPs                %d\n", r.QPs)
	if r.VELOPackets > 0 {
		fmt.Fprintf(w, "VELO packets          %d\n", r.VELOPackets)
		fmt.Fprintf(w, "RMA puts / gets       %d / %d\n", r.RMAPuts, r.RMAGets)
		fmt.Fprintf(w, "most mailbox slots    %d in use on one rank\n", r.MaxSlotsUsed)
	}
	fmt.Fprintf(w, "registered per rank   max %d B, mean %d B\n", r.MaxRegisteredPerRank, r.MeanRegisteredPerRank)
	fmt.Fprintf(w, "recv buffers per rank max %d B, mean %d B (peak posted)\n", r.MaxRecvBytesPerRank, r.MeanRecvBytesPerRank)
	fmt.Fprintf(w, "most posted per conn  %d (per SRQ %d)\n", r.MaxPostedPerConn, r.MaxPostedPerSRQ)
	fmt.Fprintf(w, "counters (sum over ranks, largest on one rank):\n")
	for _, k := range sortedKeys(r.Counters) {
		if r.Counters[k] != 0 {
			fmt.Fprintf(w, "  %-40s %-14g %g\n", k, r.Counters[k], r.CountersMax[k])
		}
	}
	fmt.Fprintf(w, "per connection (connections, mean, largest):\n")
	for _, k := range sortedKeys(r.PerConn) {
		if c := r.PerConn[k]; c.Sum != 0 {
			fmt.Fprintf(w, "  %-40s %-6d %-12.4g %g\n", k, c.Conns, c.Mean(), c.Max)
		}
	}
	fmt.Fprintf(w, "simulator: %d events, %d rank switches\n", r.Events, r.Switches)
	if r.FinalizeFailed > 0 {
		fmt.Fprintf(w, "FINALIZE FAILED on %d ranks after the program ended (counts above are complete): %s\n", r.FinalizeFailed, r.FinalizeError)
	}
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// WriteJSON prints r as JSON.
func (r *Result) WriteJSON(w io.Writer) error {
	e := json.NewEncoder(w)
	e.SetIndent("", "  ")
	return e.Encode(r)
}
