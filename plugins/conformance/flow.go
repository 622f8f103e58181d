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
	var res []Result
	var accepted *core.FlowInfo
	for i := range flowInfos {
		info := flowInfos[i]
		r := h.flowOne(info)
		res = append(res, r...)
		if accepted == nil && len(r) > 0 && !r[0].Skip && r[0].Err == nil {
			accepted = &info
		}
	}
	if accepted == nil {
		return append(res, Result{Name: "setup", Err: fmt.Errorf("no transport set the policy up (tried %d)", len(flowInfos))})
	}
	setup := func(p *plugins.Policy) error {
		_, err := p.FlowControl().Setup(*accepted)
		return err
	}
	st := &flowState{info: *accepted, setup: core.FlowSetup{InitialPosted: 1}, posted: make([]int, accepted.Peers)}
	feed := func(p *plugins.Policy, n int) { p.FlowControl().Observe(st.events(h.rng, n), nil) }
	return append(res, crashAndRestart(h, setup, feed)...)
}

// flowOne sets a fresh plugin up for info and streams random events at it.
func (h *harness) flowOne(info core.FlowInfo) []Result {
	name := "setup/" + info.Transport
	p, err := h.open(true)
	if err != nil {
		return []Result{{Name: name, Err: err}}
	}
	defer p.Close()
	fc := p.FlowControl()
	s, err := fc.Setup(info)
	if err != nil {
		if f := failure(p); f != nil {
			return []Result{{Name: name, Err: f}}
		}
		return []Result{{Name: name, Skip: true, Detail: "refused: " + err.Error()}}
	}
	if err := checkFlowSetup(info, s); err != nil {
		return []Result{{Name: name, Err: err}}
	}
	out := []Result{{Name: name, Detail: fmt.Sprintf("scheme %d, %d..%d posted, threshold %d", s.Scheme, s.InitialPosted, s.MaxPosted, s.CreditThreshold)}}
	st := &flowState{info: info, setup: s, posted: make([]int, info.Peers), threshold: s.CreditThreshold}
	for i := range st.posted {
		st.posted[i] = s.InitialPosted
	}
	n, err := stream(h, p, fc, st, h.o.Events)
	return append(out, Result{Name: "stream/" + info.Transport, Err: err,
		Detail: fmt.Sprintf("%d events, %d decisions within the invariants; every batch answered within %v", h.o.Events, n, h.o.Deadline)})
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
