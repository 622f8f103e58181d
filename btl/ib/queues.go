package ib

import (
	"fmt"

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
	// buffers ready for a peer that grows (indexes into m.rbufs)
	count, maxPosted, threshold int
	pool                        []int32
	// counters
	util      *core.Histogram
	postedG   *core.Gauge
	limitEvts *core.Counter
}

// buffers are a module's receive queues, the registered memory behind
// them, and the receive-buffer policy that lays them out and grows them.
type buffers struct {
	queues   []*rqueue
	firstP   int // the first per-peer queue; -1: none
	maxFrame int // the largest buffer
	rbufs    []*recvBuf
	mrs      []verbs.MR
	recv     policy.Driver[core.RecvEvent, core.RecvDecision]
}

// utilBounds are the buckets of the utilization histograms.
var utilBounds = []float64{0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5, 0.55, 0.6, 0.65, 0.7, 0.75, 0.8, 0.85, 0.9, 0.95, 1}

// setupQueues builds the queues of a checked layout.
func (m *module) setupQueues(s core.RecvSetup) error {
	m.firstP = -1
	for i, spec := range s.Queues {
		q := &rqueue{idx: i, spec: spec, shared: spec.Kind == core.QueueShared}
		name := fmt.Sprintf("q%d_%dB", i, spec.BufSize)
		q.util = m.metrics.Histogram(m.metric("recv_util", name), utilBounds)
		if !q.shared {
			if m.firstP < 0 {
				m.firstP = i
			}
			q.count = spec.Count
			q.maxPosted = max(spec.Count, m.fc.max)
			q.threshold = m.fc.threshold
			if q.threshold <= 0 {
				q.threshold = max(1, spec.Low)
			}
		}
		m.queues = append(m.queues, q)
		m.counted = append(m.counted, !q.shared && m.fc.credits)
		if q.shared {
			q.max = max(spec.Max, spec.Count)
			srq, err := m.h.pd.CreateSRQ(verbs.SRQInitAttr{MaxWR: q.max, MaxSGE: 1})
			if err != nil {
				return fmt.Errorf("ib %s: SRQ for %d-byte buffers: %w", m.id, spec.BufSize, err)
			}
			q.srq = srq
			q.postedG = m.metrics.Gauge(m.metric("srq_posted", name))
			q.limitEvts = m.metrics.Counter(m.metric("srq_limit_events", name))
			if err := m.growShared(q, spec.Count); err != nil {
				return err
			}
			if spec.Low > 0 {
				if err := srq.Arm(spec.Low); err != nil {
					return fmt.Errorf("ib %s: arm SRQ limit: %w", m.id, err)
				}
			}
		}
	}
	m.maxFrame = s.Queues[len(s.Queues)-1].BufSize
	return nil
}

// growShared registers n more buffers of a shared queue's size in one
// slab and posts them on its SRQ.
func (m *module) growShared(q *rqueue, n int) error {
	first, err := m.register(q, n)
	if err != nil {
		return err
	}
	for idx := first; idx < len(m.rbufs); idx++ {
		if err := m.postRecv(m.rbufs[idx], idx, nil); err != nil {
			return err
		}
	}
	q.allocated += n
	return nil
}

// postPerPeer posts a peer's buffers on every per-peer queue.
func (m *module) postPerPeer(e *endpoint) error {
	for i, q := range m.queues {
		if q.shared {
			continue
		}
		c := &e.cred[i]
		c.target = q.count
		// The first buffers are the peer's initial credits, not owed ones.
		if err := m.grow(e, i, q.count, false); err != nil {
			return err
		}
		if i == m.firstP {
			e.st.credits.Set(int64(c.avail))
		}
	}
	return nil
}

// allocRecvBufs registers n buffers of a per-peer queue's size into its
// pool.
func (m *module) allocRecvBufs(q *rqueue, n int) error {
	first, err := m.register(q, n)
	for idx := first; err == nil && idx < len(m.rbufs); idx++ {
		q.pool = append(q.pool, int32(idx))
	}
	return err
}

// register adds n buffers of q's size, in one registered slab, to m.rbufs,
// from index first on.
func (m *module) register(q *rqueue, n int) (first int, err error) {
	first = len(m.rbufs)
	size := q.spec.BufSize
	mem, mr, err := slab(m.h.pd, n, size)
	if err != nil {
		return first, fmt.Errorf("ib %s: %w", m.id, err)
	}
	m.mrs = append(m.mrs, mr)
	for i := 0; i < n; i++ {
		b := &recvBuf{mem: mem[i*size : (i+1)*size : (i+1)*size], lkey: mr.LKey(), queue: uint8(q.idx)}
		b.addr = verbs.AddrOf(b.mem)
		m.rbufs = append(m.rbufs, b)
	}
	m.recvMem(int64(n * size))
	return first, nil
}

// postRecv posts b: on the peer's QP for a per-peer queue, on the SRQ
// for a shared one.
func (m *module) postRecv(b *recvBuf, idx int, e *endpoint) error {
	wr := &m.rwr
	m.rsg[0] = verbs.SGE{Addr: b.addr, Length: uint32(len(b.mem)), LKey: b.lkey}
	wr.WRID = wridRecv | uint64(idx)
	wr.SG = m.rsg[:]
	q := m.queues[b.queue]
	if q.shared {
		if err := q.srq.PostRecv(wr); err != nil {
			return fmt.Errorf("ib %s: post to SRQ of %d-byte buffers: %w", m.id, q.spec.BufSize, err)
		}
		q.posted++
		q.postedG.Set(int64(q.posted))
		return nil
	}
	if err := e.qps[b.queue].PostRecv(wr); err != nil {
		return fmt.Errorf("ib %s: post receive for peer %d: %w", m.id, e.rank, err)
	}
	return nil
}

func (m *module) recvMem(n int64) {
	m.recvBytes.Add(n)
	recvBytesTotal(m.metrics).Add(n)
}

// recvBytesTotal is the registered receive memory of the whole process.
func recvBytesTotal(mx *core.Metrics) *core.Gauge { return mx.Gauge("ib.recv_registered_bytes") }

// onLimit handles an SRQ-limit event: the policy hears of it.
func (m *module) onLimit(s verbs.SRQ) {
	for _, q := range m.queues {
		if q.shared && q.srq == s {
			q.limitEvts.Inc()
			m.recv.Event(core.RecvEvent{Kind: core.RecvLimit, Queue: int32(q.idx), Posted: int32(q.posted), Value: int64(q.posted), At: m.clock.Now()})
			return
		}
	}
}

// applyRecv checks and applies one of the policy's decisions: growth only
// on shared queues and never past Max, limits only within what is posted.
func (m *module) applyRecv(d core.RecvDecision) policy.Verdict {
	if d.Queue < 0 || int(d.Queue) >= len(m.queues) {
		return policy.Rejected
	}
	q := m.queues[d.Queue]
	switch d.Kind {
	case core.RecvGrow:
		n := int(min(d.Value, int64(q.max-q.allocated)))
		if !q.shared || n <= 0 {
			return policy.Rejected
		}
		if err := m.growShared(q, n); err != nil {
			m.log.Warn().Err(err).Msg("growing a shared receive queue")
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
		m.rearm(q)
		return policy.Applied
	}
	return policy.Rejected
}

func (m *module) rearm(q *rqueue) {
	if q.wantLimit > 0 && q.posted >= q.wantLimit {
		if err := q.srq.Arm(q.wantLimit); err == nil {
			q.wantLimit = 0
		}
	}
}
