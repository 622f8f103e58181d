package ib

import (
	"slices"
	"strconv"

	"github.com/gobtl/gobtl/btl/ib/verbs"
	"github.com/gobtl/gobtl/core"
)

// devMetrics mirror a softrc device's counters.
type devMetrics struct {
	rnrSent, rnrRecv, retries, bytesSent, bytesRecv, reads, nic *core.Gauge
	rejected, foreign                                           *core.Gauge
	// the system calls of the wire and the bytes copied on the way in,
	// which say what a message costs whatever the load
	writes, wireReads, emptyReads, epolls, staged, nicWakeups, blocked *core.Gauge
	acks, acksPiggybacked                                              *core.Gauge
	idleChecks                                                         *core.Gauge
}

func (m *module) metric(parts ...any) string { return metricName(m.id, parts...) }

// initMetrics makes the module's own metrics, named ib.<module>.<name>
// (the receive side, the send side and the credit engine make theirs),
// and the device's.
func (m *module) initMetrics() {
	mx := m.metrics
	c := func(n string) *core.Counter { return mx.Counter(m.metric(n)) }
	m.peersLost, m.rejected = c("peers_lost"), c("policy_rejected")
	mx.Collect(m.collectPeers)
	if m.h.soft != nil {
		d := func(n string) *core.Gauge { return mx.Gauge(core.MetricName("ib", m.h.dev.Name(), n)) }
		m.dev = &devMetrics{rnrSent: d("rnr_naks_sent"), rnrRecv: d("rnr_naks_received"), retries: d("retries"),
			bytesSent: d("wire_bytes_sent"), bytesRecv: d("wire_bytes_received"), reads: d("reads_outstanding"), nic: d("nic_engagements"),
			rejected: d("links_rejected"), foreign: d("foreign_packets"),
			writes: d("wire_writes"), wireReads: d("wire_reads"), emptyReads: d("wire_empty_reads"), epolls: d("epolls"),
			staged: d("staged_bytes"), nicWakeups: d("nic_wakeups"), blocked: d("writes_blocked"),
			acks: d("acks_sent"), acksPiggybacked: d("acks_piggybacked"), idleChecks: d("nic_idle_checks")}
	}
}

// peerStats are an endpoint's flow-control counters, named
// ib.<module>.<counter>.peer<rank>. They live in the endpoint, which
// exists once the peer is first used, and are named only when a snapshot
// is taken (collectPeers): a name, a map entry and a counter object each
// for every rank of the job cost ~1 KB per peer before a frame was sent.
type peerStats struct {
	credits    core.Gauge   // credits held toward the peer (first per-peer queue)
	stalls     core.Counter // frames refused for lack of a credit: stalls begun
	waited     core.Counter // frames sent with the backlog bit: every one that waited for a credit
	waitNs     core.Counter // the time the stalls lasted (head to release), in all
	waitMax    core.Gauge   // the longest one waited
	frames     core.Counter // frames sent to the peer: data, control and credit (seed 000 Table 1's "total")
	creditMsgs core.Counter // explicit credit frames sent to the peer
	rndv       core.Counter // small messages sent by rendezvous for lack of credit
	rnr        core.Gauge   // RNR NAKs received on the QPs to the peer (softrc)
	posted     core.Gauge   // buffers posted for the peer now (all per-peer queues)
	postedMax  core.Gauge   // the most ever posted for the peer on one per-peer queue
}

// each hands every counter of s to f with its name.
func (s *peerStats) each(f func(name string, metric any)) {
	f("credits", &s.credits)
	f("stalls", &s.stalls)
	f("backlogged", &s.waited)
	f("backlog_wait_ns", &s.waitNs)
	f("backlog_wait_max_ns", &s.waitMax)
	f("frames", &s.frames)
	f("credit_messages", &s.creditMsgs)
	f("rndv_no_credit", &s.rndv)
	f("rnr_naks", &s.rnr)
	f("posted", &s.posted)
	f("posted_max", &s.postedMax)
}

// collectPeers names the per-peer counters of the endpoints made so far
// for a snapshot (core.Metrics.Collect); it may run on any goroutine.
func (m *module) collectPeers(add func(name string, metric any)) {
	m.peers.statMu.Lock()
	eps := slices.Clone(m.peers.made) // an insertion moves the later ones
	m.peers.statMu.Unlock()
	prefix := m.metric() + "."
	var b []byte
	for _, e := range eps {
		e.st.each(func(n string, v any) {
			b = append(b[:0], prefix...)
			b = append(b, n...)
			b = append(b, ".peer"...)
			b = strconv.AppendInt(b, int64(e.rank), 10)
			add(string(b), v)
		})
	}
}

// rnrCounter is implemented by QPs that count the RNR NAKs they received
// as requester (softrc; verbs has no per-QP counter, real HCAs count per
// port).
type rnrCounter interface{ RNRNaksReceived() int64 }

// rnrNaks sums the RNR NAKs a peer's QPs received.
func rnrNaks(qps []verbs.QP) int64 {
	var n int64
	for _, qp := range qps {
		if c, ok := qp.(rnrCounter); ok {
			n += c.RNRNaksReceived()
		}
	}
	return n
}

// SizeBounds are the buckets of the received-size histogram
// (ib.<module>.recv_size): powers of two from 16 B to 64 KiB, the sizes
// of B-SRQ's buckets and beyond.
var SizeBounds = func() []float64 {
	var b []float64
	for s := 16.0; s <= 64<<10; s *= 2 {
		b = append(b, s)
	}
	return b
}()
