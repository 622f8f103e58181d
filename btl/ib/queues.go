package ib

import (
	"fmt"

	"github.com/rs/zerolog"

	"github.com/gobtl/gobtl/btl/ib/verbs"
	"github.com/gobtl/gobtl/core"
	"github.com/gobtl/gobtl/core/policy"
)

// The receive-buffer mechanism (seed 002 §3–4, Open MPI's openib): a
// policy proposes a layout of queues sorted by buffer size; each queue is
// either per-peer — its own RC QP per peer with its own receive queue of
// Count buffers, kept full by credits — or shared — one SRQ per queue in
// this module, fed from registered slabs, with its own RC QP per peer
// attached to it (a QP feeds exactly one receive queue, so the QP is how a
// sender addresses a bucket). A frame goes on the smallest queue whose
// buffers hold it, from a send free list of that size that grows on demand
// up to a bound.

// WRID kinds (top two bits).
const (
	wridSend = 0 << 62
	wridRecv = 1 << 62
	wridRDMA = 2 << 62
	wridCM   = 3 << 62
	wridKind = 3 << 62
	wridIdx  = 1<<62 - 1
)

// recvBuf is a registered buffer posted for receives.
type recvBuf struct {
	mem   []byte
	addr  uint64
	lkey  uint32
	queue uint8
	ep    *endpoint // per-peer queues: the peer; nil on shared queues
}

// rqueue is one receive queue of the layout.
type rqueue struct {
	idx    int
	spec   core.QueueSpec
	shared bool
	// shared queues
	srq       verbs.SRQ
	allocated int // receive buffers owned
	posted    int // receive buffers posted now
	max       int
	wantLimit int // srq_limit to arm once posted reaches it
	// per-peer queues: buffers per peer at wire-up and at most (the
	// flow-control scheme's), the explicit-credit threshold, and retired
	// buffers ready for a peer that grows (indexes into recvSide.bufs)
	count, maxPosted, threshold int
	pool                        []int32
	// counters
	util      *core.Histogram
	postedG   *core.Gauge
	limitEvts *core.Counter
}

// recvSide is a module's receive queues, the registered memory behind
// them, the receive-buffer policy that lays them out and grows them, the
// work request every receive post fills in place, so that posting a
// receive allocates nothing, and the handlers frames go to. The module's
// received routes a completion between it, the peer's endpoint and the
// credit engine.
type recvSide struct {
	id      string
	log     zerolog.Logger
	pd      verbs.PD
	clock   core.Clock
	metrics *core.Metrics

	queues   []*rqueue
	firstP   int // the first per-peer queue; -1: none
	maxFrame int // the largest buffer
	bufs     []*recvBuf
	mrs      []verbs.MR
	policy   policy.Driver[core.RecvEvent, core.RecvDecision]
	wr       verbs.RecvWR
	sg       [1]verbs.SGE
	// handlers take the frames received, each checked against limits
	// and its header decoded in place, into hdr.
	handlers core.Handlers
	limits   core.FrameLimits
	hdr      core.Header

	framesRecv, bytesRecv, badFrames *core.Counter
	// recvSize is the sizes of the frames received, headers included:
	// the InfiniBand-level message sizes of seed 002's percentile plots
	// (Fig. 2a), whatever the receive layout.
	recvSize  *core.Histogram
	recvBytes *core.Gauge
}

// utilBounds are the buckets of the utilization histograms.
var utilBounds = []float64{0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5, 0.55, 0.6, 0.65, 0.7, 0.75, 0.8, 0.85, 0.9, 0.95, 1}

// open sets the receive side up for module m: the queues of a checked
// layout, their per-peer numbers from the flow-control scheme fc.
func (r *recvSide) open(m *module, s core.RecvSetup, fc *flowCfg) error {
	r.id, r.log, r.pd, r.clock, r.metrics = m.id, m.log, m.h.pd, m.clock, m.metrics
	c := func(n string) *core.Counter { return r.metrics.Counter(m.metric(n)) }
	r.framesRecv, r.bytesRecv, r.badFrames = c("frames_received"), c("bytes_received"), c("bad_frames")
	r.recvBytes = r.metrics.Gauge(m.metric("recv_registered_bytes"))
	r.recvSize = r.metrics.Histogram(m.metric("recv_size"), SizeBounds)
	r.firstP = -1
	for i, spec := range s.Queues {
		q := &rqueue{idx: i, spec: spec, shared: spec.Kind == core.QueueShared}
		name := fmt.Sprintf("q%d_%dB", i, spec.BufSize)
		q.util = r.metrics.Histogram(metricName(r.id, "recv_util", name), utilBounds)
		if !q.shared {
			if r.firstP < 0 {
				r.firstP = i
			}
			q.count = spec.Count
			q.maxPosted = max(spec.Count, fc.max)
			q.threshold = fc.threshold
			if q.threshold <= 0 {
				q.threshold = max(1, spec.Low)
			}
		}
		r.queues = append(r.queues, q)
		if q.shared {
			q.max = max(spec.Max, spec.Count)
			srq, err := r.pd.CreateSRQ(verbs.SRQInitAttr{MaxWR: q.max, MaxSGE: 1})
			if err != nil {
				return fmt.Errorf("ib %s: SRQ for %d-byte buffers: %w", r.id, spec.BufSize, err)
			}
			q.srq = srq
			q.postedG = r.metrics.Gauge(metricName(r.id, "srq_posted", name))
			q.limitEvts = r.metrics.Counter(metricName(r.id, "srq_limit_events", name))
			if err := r.growShared(q, spec.Count); err != nil {
				return err
			}
			if spec.Low > 0 {
				if err := srq.Arm(spec.Low); err != nil {
					return fmt.Errorf("ib %s: arm SRQ limit: %w", r.id, err)
				}
			}
		}
	}
	r.maxFrame = s.Queues[len(s.Queues)-1].BufSize
	return nil
}

// growShared registers n more buffers of a shared queue's size in one
// slab and posts them on its SRQ.
func (r *recvSide) growShared(q *rqueue, n int) error {
	first, err := r.register(q, n)
	if err != nil {
		return err
	}
	for idx := first; idx < len(r.bufs); idx++ {
		if err := r.post(r.bufs[idx], idx, nil); err != nil {
			return err
		}
	}
	q.allocated += n
	return nil
}

// alloc registers n buffers of a per-peer queue's size into its
// pool.
func (r *recvSide) alloc(q *rqueue, n int) error {
	first, err := r.register(q, n)
	for idx := first; err == nil && idx < len(r.bufs); idx++ {
		q.pool = append(q.pool, int32(idx))
	}
	return err
}

// register adds n buffers of q's size, in one registered slab, to r.bufs,
// from index first on.
func (r *recvSide) register(q *rqueue, n int) (first int, err error) {
	first = len(r.bufs)
	size := q.spec.BufSize
	mem, mr, err := slab(r.pd, n, size)
	if err != nil {
		return first, fmt.Errorf("ib %s: %w", r.id, err)
	}
	r.mrs = append(r.mrs, mr)
	for i := 0; i < n; i++ {
		b := &recvBuf{mem: mem[i*size : (i+1)*size : (i+1)*size], lkey: mr.LKey(), queue: uint8(q.idx)}
		b.addr = verbs.AddrOf(b.mem)
		r.bufs = append(r.bufs, b)
	}
	r.recvMem(int64(n * size))
	return first, nil
}

// post posts b: on the peer's QP for a per-peer queue, on the SRQ
// for a shared one.
func (r *recvSide) post(b *recvBuf, idx int, e *endpoint) error {
	wr := &r.wr
	r.sg[0] = verbs.SGE{Addr: b.addr, Length: uint32(len(b.mem)), LKey: b.lkey}
	wr.WRID = wridRecv | uint64(idx)
	wr.SG = r.sg[:]
	q := r.queues[b.queue]
	if q.shared {
		if err := q.srq.PostRecv(wr); err != nil {
			return fmt.Errorf("ib %s: post to SRQ of %d-byte buffers: %w", r.id, q.spec.BufSize, err)
		}
		q.posted++
		q.postedG.Set(int64(q.posted))
		return nil
	}
	if err := e.qps[b.queue].PostRecv(wr); err != nil {
		return fmt.Errorf("ib %s: post receive for peer %d: %w", r.id, e.rank, err)
	}
	return nil
}

func (r *recvSide) recvMem(n int64) {
	r.recvBytes.Add(n)
	recvBytesTotal(r.metrics).Add(n)
}

// recvBytesTotal is the registered receive memory of the whole process.
func recvBytesTotal(mx *core.Metrics) *core.Gauge { return mx.Gauge("ib.recv_registered_bytes") }

// onLimit handles an SRQ-limit event: the policy hears of it.
func (r *recvSide) onLimit(s verbs.SRQ) {
	for _, q := range r.queues {
		if q.shared && q.srq == s {
			q.limitEvts.Inc()
			r.policy.Event(core.RecvEvent{Kind: core.RecvLimit, Queue: int32(q.idx), Posted: int32(q.posted), Value: int64(q.posted), At: r.clock.Now()})
			return
		}
	}
}

// apply checks and applies one of the policy's decisions: growth only
// on shared queues and never past Max, limits only within what is posted.
func (r *recvSide) apply(d core.RecvDecision) policy.Verdict {
	if d.Queue < 0 || int(d.Queue) >= len(r.queues) {
		return policy.Rejected
	}
	q := r.queues[d.Queue]
	switch d.Kind {
	case core.RecvGrow:
		n := int(min(d.Value, int64(q.max-q.allocated)))
		if !q.shared || n <= 0 {
			return policy.Rejected
		}
		if err := r.growShared(q, n); err != nil {
			r.log.Warn().Err(err).Msg("growing a shared receive queue")
		}
		return policy.Applied
	case core.RecvSetLimit:
		v := int(d.Value)
		if !q.shared || v < 0 || v > q.max {
			return policy.Rejected
		}
		// Arming above what is posted would fire at once; wait until
		// the queue has refilled.
		q.wantLimit = v
		r.rearm(q)
		return policy.Applied
	}
	return policy.Rejected
}

func (r *recvSide) rearm(q *rqueue) {
	if q.wantLimit > 0 && q.posted >= q.wantLimit {
		if err := q.srq.Arm(q.wantLimit); err == nil {
			q.wantLimit = 0
		}
	}
}

// repost posts b again after its frame: on e's QP for a per-peer queue
// (a failure fails e), on the SRQ for a shared one (nil e), which is
// re-armed once it has refilled.
func (r *recvSide) repost(b *recvBuf, idx int, e *endpoint) {
	if err := r.post(b, idx, e); err != nil {
		if e != nil {
			e.fail(err)
		} else {
			r.log.Warn().Err(err).Msg("repost")
		}
		return
	}
	if q := r.queues[b.queue]; q.shared && q.wantLimit > 0 {
		r.rearm(q)
	}
}

// flushed handles a failed or flushed receive: its QP is in ERR, which
// fails its peer e (if known). A per-peer buffer dies with its QP; a
// shared one goes back to its SRQ, unless the module is closed.
func (r *recvSide) flushed(wc *verbs.WC, b *recvBuf, idx int, e *endpoint, closed bool) {
	if e != nil {
		e.failure("receive", wc.Status)
	}
	if r.queues[b.queue].shared && !closed {
		r.repost(b, idx, nil)
	}
}

// drop counts a frame that is not handed on — from no known peer, from a
// peer lost, or bad (err, which fails its peer) — and reposts its buffer
// if it is a shared queue's.
func (r *recvSide) drop(b *recvBuf, idx int, e *endpoint, err error) {
	r.badFrames.Inc()
	q := r.queues[b.queue]
	if err != nil {
		e.fail(fmt.Errorf("frame on queue %d: %w", q.idx, err))
	}
	if q.shared {
		r.repost(b, idx, nil)
	}
}

// retire takes a per-peer buffer out of service; it stays registered, in
// its queue's pool, for the next peer that grows.
func (r *recvSide) retire(b *recvBuf, idx int) {
	q := r.queues[b.queue]
	b.ep = nil
	q.pool = append(q.pool, int32(idx))
}

// close destroys the SRQs and deregisters the receive buffers.
func (r *recvSide) close() {
	for _, q := range r.queues {
		if q.srq != nil {
			q.srq.Destroy()
		}
	}
	for _, mr := range r.mrs {
		mr.Dereg()
	}
	if r.recvBytes != nil {
		recvBytesTotal(r.metrics).Add(-r.recvBytes.Load())
	}
}
