package conformance

import (
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/gobtl/gobtl/core"
	"github.com/gobtl/gobtl/plugins"
)

// flowInfos are the resources a flow-control policy is set up for: posted
// receive buffers, unbounded (an InfiniBand HCA's), and slot pools shared
// by their senders (EXTOLL mailboxes, seed 003 §5). A policy may refuse a
// resource it is not for; it must accept at least one.
var flowInfos = []core.FlowInfo{
	{Resource: core.ResourcePostedBuffers, Ranks: 9, Senders: 8, BufferSize: 2048},
	{Resource: core.ResourceSlotPool, Ranks: 8, Senders: 8, BufferSize: 64, Buffers: 1024},
	// Two ranks with btl "extoll"'s default 58 slots per peer: a pool
	// small enough for a growing policy to hit its bounds.
	{Resource: core.ResourceSlotPool, Ranks: 2, Senders: 2, BufferSize: 64, Buffers: 116},
}

type flowModel struct{}

func (flowModel) run(h *harness) []Result {
	return runPerInfo(h, kindSpec[core.FlowInfo, core.FlowSetup, core.FlowEvent, core.FlowDecision]{
		infos: flowInfos,
		label: flowLabel,
		policy: func(p *plugins.Policy) policyOf[core.FlowInfo, core.FlowSetup, core.FlowEvent, core.FlowDecision] {
			return p.FlowControl()
		},
		check: checkFlowSetup,
		describe: func(s core.FlowSetup) string {
			return fmt.Sprintf("scheme %d, %d..%d posted, threshold %d", s.Scheme, s.Quota, s.MaxQuota, s.CreditThreshold)
		},
		state: func(info core.FlowInfo, s core.FlowSetup) streamer[core.FlowEvent, core.FlowDecision] {
			return newFlowState(info, s)
		},
	})
}

// flowLabel names a case after the transport whose resource it models.
func flowLabel(i core.FlowInfo) string {
	if i.Resource == core.ResourcePostedBuffers {
		return "ib"
	}
	return "extoll"
}

// flowBounds are a setup's parameters as the credit engine resolves them
// (core.FlowSetup: a zero Quota is the resource's equal share, a zero
// MaxQuota no growth, a zero threshold the resource's rule).
type flowBounds struct {
	quota     int // buffers posted per peer at start
	threshold int
	lo, hi    int // the range a peer's posted buffers may take; hi 0: no cap
	pool      int // buffers for all peers' data; 0: unbounded
}

func resolveFlow(info core.FlowInfo, s core.FlowSetup) flowBounds {
	b := flowBounds{quota: s.Quota, threshold: s.CreditThreshold, lo: s.Quota, hi: s.MaxQuota}
	switch info.Resource {
	case core.ResourcePostedBuffers:
		if b.quota == 0 {
			// A zero Quota keeps the receive layout's count of per-peer
			// buffers; model the per-peer default.
			b.quota, b.lo = ibLayoutBuffers, ibLayoutBuffers
		}
	case core.ResourceSlotPool:
		// Each receiver keeps credit_slots per sender for credit packets
		// (seed 003 §5); the rest is the data region.
		b.pool = info.Buffers - s.CreditSlots*info.Senders
		if b.quota == 0 && info.Senders > 0 {
			b.quota = b.pool / info.Senders
		}
		if b.threshold == 0 {
			b.threshold = b.quota/(s.CreditSlots+1) + 1 // Equation 1
		}
		// A sender never goes below its static slots (Equation 2).
		b.lo = max(1, s.CreditSlots)
	}
	b.hi = max(b.hi, b.quota) // a zero MaxQuota: quotas never grow
	return b
}

// ibLayoutBuffers models the receive layout's per-peer buffer count that
// an InfiniBand policy keeps when it leaves Quota at zero.
const ibLayoutBuffers = 8

// thresholdCapped reports whether the credit engine sends owed credits
// once min(threshold, posted) are owed: for posted buffers it does
// (btl/ib), so a threshold above a peer's buffers cannot stop credits from
// coming back; a slot pool's Equation 2 needs the threshold within the
// quota.
func thresholdCapped(info core.FlowInfo) bool { return info.Resource == core.ResourcePostedBuffers }

func checkFlowSetup(info core.FlowInfo, s core.FlowSetup) error {
	switch s.Scheme {
	case core.FlowNone:
		if s.RNRRetry < 0 || s.RNRRetry > 7 {
			return fmt.Errorf("RNRRetry %d is not in [0, 7] (7 = infinite)", s.RNRRetry)
		}
		if s.MinRNRTimer < 0 {
			return fmt.Errorf("MinRNRTimer %v is negative", s.MinRNRTimer)
		}
	case core.FlowCredits:
		b := resolveFlow(info, s)
		if s.CreditSlots < 0 || info.Resource == core.ResourceSlotPool && s.CreditSlots < 1 {
			return fmt.Errorf("CreditSlots %d: a slot pool needs at least one per sender (seed 003 Equation 2)", s.CreditSlots)
		}
		if b.quota < 1 {
			return fmt.Errorf("credit scheme with %d buffers per peer at start: no peer could ever send", b.quota)
		}
		if s.MaxQuota != 0 && s.MaxQuota < b.quota {
			return fmt.Errorf("MaxQuota %d below the %d buffers posted at start", s.MaxQuota, b.quota)
		}
		if b.threshold < 1 || b.threshold > b.quota && !thresholdCapped(info) {
			return fmt.Errorf("credit threshold %d not in [1, %d buffers per peer]: a peer could use up its credits before any are returned (deadlock)", b.threshold, b.quota)
		}
		if b.pool > 0 && b.quota*info.Senders > b.pool {
			return fmt.Errorf("%d senders × %d credits at start exceed the %d buffers that exist for data (credit beyond what is posted)", info.Senders, b.quota, b.pool)
		}
		if b.pool < 0 {
			return fmt.Errorf("%d credit slots per sender for %d senders leave no buffer for data in %d", s.CreditSlots, info.Senders, info.Buffers)
		}
	default:
		return fmt.Errorf("unknown flow-control scheme %d", s.Scheme)
	}
	return nil
}

// flowState models the credit engine: buffers posted per peer and the
// explicit-credit threshold, as the decisions set them.
type flowState struct {
	info      core.FlowInfo
	setup     core.FlowSetup
	b         flowBounds
	posted    []int
	threshold int
	now       time.Duration
	// answers are the FlowQuota events a slot pool's engine raises while
	// applying FlowSetQuota decisions, one each (core.FlowQuota); they
	// lead the next batch.
	answers []core.FlowEvent
}

func newFlowState(info core.FlowInfo, s core.FlowSetup) *flowState {
	st := &flowState{info: info, setup: s, b: resolveFlow(info, s), posted: make([]int, info.Ranks)}
	for i := range st.posted {
		st.posted[i] = st.b.quota
	}
	st.threshold = st.b.threshold
	return st
}

func (st *flowState) events(rng *rand.Rand, n int) []core.FlowEvent {
	es := make([]core.FlowEvent, len(st.answers)+n)
	copy(es, st.answers)
	st.answers = st.answers[:0]
	for i := len(es) - n; i < len(es); i++ {
		st.now += time.Duration(rng.IntN(100_000))
		p := rng.IntN(st.info.Ranks)
		e := core.FlowEvent{Peer: int32(p), Quota: int32(st.posted[p]), At: st.now}
		// A slot pool's engine reports monitoring points (seed 003 §6.4)
		// most of the time, and quotas only as answers (see apply);
		// policies for posted buffers get a few of both too, and must
		// ignore what is not for them.
		pool := st.info.Resource == core.ResourceSlotPool
		switch r := rng.IntN(20); {
		case r < 10 && pool || r == 0:
			e.Kind, e.Value = core.FlowMonitor, int64(rng.IntN(st.posted[p]+1))
		case r == 1 && !pool:
			e.Kind = core.FlowQuota
		default:
			e.Kind = core.FlowEventKind(1 + rng.IntN(4))
		}
		switch e.Kind {
		case core.FlowBacklogged:
			e.Value = int64(1 + rng.IntN(32))
		case core.FlowIdle:
			e.Value = int64(time.Millisecond) + rng.Int64N(int64(time.Second))
		case core.FlowActivity:
			e.Value = int64(rng.IntN(200))
		case core.FlowStall:
			e.Value = int64(1 + rng.IntN(64))
		}
		es[i] = e
	}
	return es
}

func (st *flowState) apply(ds []core.FlowDecision, v *violations) {
	b := st.b
	for _, d := range ds {
		switch d.Kind {
		case core.FlowSetQuota:
			if d.Peer < 0 || int(d.Peer) >= st.info.Ranks {
				v.add("SetQuota for peer %d of %d", d.Peer, st.info.Ranks)
				continue
			}
			if st.setup.Scheme == core.FlowCredits && (d.Value < int64(b.lo) || b.hi > 0 && d.Value > int64(b.hi)) {
				v.add("SetQuota %d for peer %d outside [%d, %d], the range its setup allows", d.Value, d.Peer, b.lo, b.hi)
				d.Value = max(int64(b.lo), d.Value)
				if b.hi > 0 {
					d.Value = min(d.Value, int64(b.hi))
				}
			}
			if d.Value < 0 {
				v.add("SetQuota %d for peer %d is negative", d.Value, d.Peer)
				continue
			}
			st.posted[d.Peer] = int(d.Value)
			if st.info.Resource == core.ResourceSlotPool {
				st.answers = append(st.answers, core.FlowEvent{Kind: core.FlowQuota, Peer: d.Peer, Quota: int32(d.Value), At: st.now})
			}
		case core.FlowSetThreshold:
			low := minPosted(st.posted)
			if d.Value < 1 || (st.setup.Scheme == core.FlowCredits && d.Value > int64(low) && !thresholdCapped(st.info)) {
				v.add("threshold %d not in [1, %d] (the fewest buffers any peer has): credits could stop coming back", d.Value, low)
				continue
			}
			st.threshold = int(d.Value)
		case core.FlowReclaim:
			if d.Peer < 0 || int(d.Peer) >= st.info.Ranks {
				v.add("reclaim from peer %d of %d", d.Peer, st.info.Ranks)
			}
		case core.FlowQuiet:
			// A statement the host acts on (plugins keeps the points it
			// names from the plugin); a host passing it on asks nothing.
			if d.Peer < 0 || int(d.Peer) >= st.info.Ranks {
				v.add("quiet statement for peer %d of %d", d.Peer, st.info.Ranks)
			}
		default:
			v.add("unknown flow decision kind %d", d.Kind)
		}
	}
	if b.pool > 0 {
		total := 0
		for _, n := range st.posted {
			total += n
		}
		if total > b.pool {
			v.add("%d buffers promised over all peers, only %d exist for data (credit beyond what is posted)", total, b.pool)
		}
	}
}

func minPosted(ps []int) int {
	m := ps[0]
	for _, n := range ps[1:] {
		m = min(m, n)
	}
	return m
}
