package velo

import (
	"unsafe"

	"github.com/gobtl/gobtl/core"
)

// metrics are the engine's counters, named <prefix>.fc.<name>.
type metrics struct {
	sends, delayed, waitNS     *core.Counter
	backlog                    *core.Gauge
	creditPackets, creditsSent *core.Counter
	deferred                   *core.Counter
	piggyPackets, piggyCredits *core.Counter
	piggyReach                 *core.Counter
	monitors, steals, stolen   *core.Counter
	requests, requestsReceived *core.Counter
	responses, responsesSent   *core.Counter
	reclaimed, reclaimSkipped  *core.Counter
	rejected, clamped          *core.Counter
	headClamps, starved, bad   *core.Counter
	credits, quota             []*core.Gauge
}

func (m *metrics) init(reg *core.Metrics, prefix string, n int) {
	c := func(name string) *core.Counter { return reg.Counter(core.MetricName(prefix, "fc", name)) }
	m.sends = c("sends")
	m.delayed = c("delayed_sends")
	m.waitNS = c("wait_ns")
	m.backlog = reg.Gauge(core.MetricName(prefix, "fc", "backlog"))
	m.creditPackets = c("credit_packets")
	m.creditsSent = c("credits_in_packets")
	m.deferred = c("credit_packets_deferred")
	m.piggyPackets = c("piggyback_packets")
	m.piggyCredits = c("piggybacked_credits")
	m.piggyReach = c("threshold_by_piggyback")
	m.monitors = c("monitoring_points")
	m.steals = c("steals")
	m.stolen = c("stolen_credits")
	m.requests = c("compulsory_requests")
	m.requestsReceived = c("compulsory_requests_received")
	m.responses = c("compulsory_responses")
	m.responsesSent = c("compulsory_responses_sent")
	m.reclaimed = c("reclaimed_credits")
	m.reclaimSkipped = c("reclaims_not_needed")
	m.rejected = c("decisions_rejected")
	m.clamped = c("decisions_clamped")
	m.headClamps = c("threshold_clamps")
	m.starved = c("grants_starved")
	m.bad = c("bad_packets")
	m.credits = make([]*core.Gauge, n)
	m.quota = make([]*core.Gauge, n)
	for i := range n {
		m.credits[i] = reg.Gauge(core.MetricName(prefix, "fc", "credits", i))
		m.quota[i] = reg.Gauge(core.MetricName(prefix, "fc", "quota", i))
	}
}

// sample records the credits this process holds toward each destination
// and the intended quota of each sender: credits per sender over time.
func (m *metrics) sample(e *Engine) {
	for i := range e.tx {
		m.credits[i].Set(int64(e.tx[i].credits))
		in, _ := e.fc.quota(i)
		m.quota[i].Set(int64(in))
	}
}

// Sample updates the per-peer gauges now.
func (e *Engine) Sample() { e.m.sample(e) }

// stateBytes is the flow-control state per receiver for n senders with k
// credit slots.
func stateBytes(n, k int) int { return n * StateBytesPerPeer(k) }

// StateBytesPerPeer is the flow-control state kept per peer with k credit
// slots: both sides' records, the threshold FIFO and the credit-region
// guard (the backlog buffers, allocated only for peers that wait, apart).
func StateBytesPerPeer(k int) int {
	return int(unsafe.Sizeof(rxState{})) + int(unsafe.Sizeof(txState{})) + (k+1)*4 + k*8
}
