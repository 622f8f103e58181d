package conformance

import (
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/gobtl/gobtl/core"
	"github.com/gobtl/gobtl/plugins"
)

// flowInfos are the transports a flow-control policy is set up for: an
// InfiniBand HCA with unbounded receive buffers, and an EXTOLL mailbox of
// 1024 slots shared by 8 senders (seed 003 §5). A policy may refuse a
// transport it is not for; it must accept at least one.
var flowInfos = []core.FlowInfo{
	{Transport: "ib", Peers: 8, BufferSize: 2048},
	{Transport: "extoll", Peers: 8, BufferSize: 64, Buffers: 1024},
}

type flowModel struct{}

func (flowModel) run(h *harness) []Result {
	return runPerInfo(h, kindSpec[core.FlowInfo, core.FlowSetup, core.FlowEvent, core.FlowDecision]{
		infos: flowInfos,
		label: func(i core.FlowInfo) string { return i.Transport },
		policy: func(p *plugins.Policy) policyOf[core.FlowInfo, core.FlowSetup, core.FlowEvent, core.FlowDecision] {
			return p.FlowControl()
		},
		check: checkFlowSetup,
		describe: func(s core.FlowSetup) string {
			return fmt.Sprintf("scheme %d, %d..%d posted, threshold %d", s.Scheme, s.InitialPosted, s.MaxPosted, s.CreditThreshold)
		},
		state: func(info core.FlowInfo, s core.FlowSetup) streamer[core.FlowEvent, core.FlowDecision] {
			st := &flowState{info: info, setup: s, posted: make([]int, info.Peers), threshold: s.CreditThreshold}
			for i := range st.posted {
				st.posted[i] = s.InitialPosted
			}
			return st
		},
	})
}

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
		if s.InitialPosted < 1 {
			return fmt.Errorf("credit scheme with %d buffers posted initially: no peer could ever send", s.InitialPosted)
		}
		if s.MaxPosted < s.InitialPosted {
			return fmt.Errorf("MaxPosted %d below InitialPosted %d", s.MaxPosted, s.InitialPosted)
		}
		if s.CreditThreshold < 1 || s.CreditThreshold > s.InitialPosted {
			return fmt.Errorf("credit threshold %d not in [1, InitialPosted = %d]: a peer could use up its credits before any are returned (deadlock)", s.CreditThreshold, s.InitialPosted)
		}
		if info.Buffers > 0 && s.InitialPosted*info.Peers > info.Buffers {
			return fmt.Errorf("%d peers × %d initial credits exceed the %d buffers that exist (credit beyond what is posted)", info.Peers, s.InitialPosted, info.Buffers)
		}
		if s.CreditSlots < 0 {
			return fmt.Errorf("CreditSlots %d is negative", s.CreditSlots)
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
	posted    []int
	threshold int
	now       time.Duration
}

func (st *flowState) events(rng *rand.Rand, n int) []core.FlowEvent {
	es := make([]core.FlowEvent, n)
	for i := range es {
		st.now += time.Duration(rng.IntN(100_000))
		p := rng.IntN(st.info.Peers)
		e := core.FlowEvent{Kind: core.FlowEventKind(1 + rng.IntN(4)), Peer: int32(p), Posted: int32(st.posted[p]), At: st.now}
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
	s := st.setup
	for _, d := range ds {
		switch d.Kind {
		case core.FlowSetPosted:
			if d.Peer < 0 || int(d.Peer) >= st.info.Peers {
				v.add("SetPosted for peer %d of %d", d.Peer, st.info.Peers)
				continue
			}
			if s.MaxPosted > 0 && (d.Value < int64(s.InitialPosted) || d.Value > int64(s.MaxPosted)) {
				v.add("SetPosted %d for peer %d outside the range [%d, %d] the policy declared", d.Value, d.Peer, s.InitialPosted, s.MaxPosted)
				d.Value = max(int64(s.InitialPosted), min(d.Value, int64(s.MaxPosted)))
			}
			if d.Value < 0 {
				v.add("SetPosted %d for peer %d is negative", d.Value, d.Peer)
				continue
			}
			st.posted[d.Peer] = int(d.Value)
		case core.FlowSetThreshold:
			low := minPosted(st.posted)
			if d.Value < 1 || (s.Scheme == core.FlowCredits && d.Value > int64(low)) {
				v.add("threshold %d not in [1, %d] (the fewest buffers any peer has): credits could stop coming back", d.Value, low)
				continue
			}
			st.threshold = int(d.Value)
		default:
			v.add("unknown flow decision kind %d", d.Kind)
		}
	}
	if st.info.Buffers > 0 {
		total := 0
		for _, n := range st.posted {
			total += n
		}
		if total > st.info.Buffers {
			v.add("%d buffers posted over all peers, only %d exist (credit beyond what is posted)", total, st.info.Buffers)
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
