package pml

import (
	"fmt"
	"math"
	"time"

	"github.com/gobtl/gobtl/core"
	"github.com/gobtl/gobtl/core/policy"
)

// The communication scheduler of seed 001 §4.1: it multiplexes small and
// control frames over a peer's subchannels and cuts RDMA data into stripes
// by weight. The policy (core.Scheduler) only chooses modes and adjusts
// weights; this mechanism runs on every message and checks every decision.

// Defaults when no scheduling policy is configured: round robin for small
// messages, even striping for RDMA data of at least 256 KiB, no stripe
// below 64 KiB.
const (
	defaultStripeThreshold = 256 << 10
	defaultMinStripe       = 64 << 10
)

type schedState struct {
	cfg   core.SchedSetup
	n     int
	rr    int // next subchannel (round robin, window)
	inWin int // messages sent in the current window
	rrBig int // next subchannel for unstriped RDMA data
	cur   [maxSubchannels]float64
	w     [maxSubchannels]float64
	// policy batches this peer's stripe times for the scheduling policy
	// and applies the weights it proposes.
	policy policy.Driver[core.SchedEvent, core.SchedDecision]
}

// setup readies the scheduler of p, a channel of c, asking the
// scheduling policy, when there is one, for its configuration.
func (s *schedState) setup(c *channels, p *peer) error {
	s.n = len(p.subs)
	o := c.cfg.opts
	if pol := o.Scheduler; pol != nil {
		info := core.SchedInfo{Peer: p.rank, LocalRank: o.LocalRank, LocalRanks: o.LocalRanks}
		for _, sb := range p.subs {
			info.Subchannels = append(info.Subchannels, core.SubchannelInfo{Name: sb.mod.attrs.Name, Bandwidth: sb.mod.attrs.Bandwidth, Latency: sb.mod.attrs.Latency})
		}
		cfg, err := pol.Setup(info)
		if err != nil {
			return fmt.Errorf("pml: scheduling policy for rank %d: %w", p.rank, err)
		}
		s.cfg = cfg
		s.policy.Init(policy.Config[core.SchedEvent, core.SchedDecision]{Policy: pol, Apply: c.applySched, Clock: o.Clock, Rejected: c.cfg.rejected})
	} else {
		s.cfg = core.SchedSetup{Small: core.SchedRoundRobin, Large: core.SchedEvenStriping}
	}
	sc := &s.cfg
	if sc.Small == 0 {
		sc.Small = core.SchedRoundRobin
	}
	if sc.Large == 0 {
		sc.Large = core.SchedEvenStriping
	}
	if sc.StripeThreshold <= 0 {
		sc.StripeThreshold = defaultStripeThreshold
	}
	if sc.MinStripe <= 0 {
		sc.MinStripe = defaultMinStripe
	}
	if sc.Window <= 0 {
		sc.Window = 1
	}
	if sc.TotalWeight <= 0 || math.IsNaN(sc.TotalWeight) || math.IsInf(sc.TotalWeight, 0) {
		sc.TotalWeight = float64(s.n)
	}
	if sc.Bind < 0 || sc.Bind >= s.n {
		sc.Bind = 0
	}
	w := sc.Weights
	if len(w) != s.n {
		w = nil
	}
	if !s.setWeights(w) {
		return fmt.Errorf("pml: scheduling policy for rank %d: weights %v are not non-negative with a positive sum", p.rank, sc.Weights)
	}
	return nil
}

// tick hands the policy the batched stripe times and applies its
// decisions; with none, it still calls the policy once per poll interval
// for late decisions.
func (s *schedState) tick(now time.Duration) { s.policy.Tick(now) }

// apply replaces the weights by the policy's decisions, all of them or
// none: it reports false, changing nothing, when one is not a weight of
// a subchannel or the weights are not non-negative with a positive sum.
func (s *schedState) apply(dec []core.SchedDecision) bool {
	var w [maxSubchannels]float64
	copy(w[:s.n], s.w[:s.n])
	for _, d := range dec {
		if d.Kind != core.SchedSetWeight || d.Sub < 0 || int(d.Sub) >= s.n {
			return false
		}
		w[d.Sub] = d.Weight
	}
	return s.setWeights(w[:s.n])
}

// weights returns a copy of the current weights.
func (s *schedState) weights() []float64 { return append([]float64(nil), s.w[:s.n]...) }

// setWeights validates w (nil: equal) and normalises it to TotalWeight.
func (s *schedState) setWeights(w []float64) bool {
	var sum float64
	var tmp [maxSubchannels]float64
	for i := 0; i < s.n; i++ {
		v := 1.0
		if w != nil {
			v = w[i]
		}
		if v < 0 || math.IsNaN(v) || math.IsInf(v, 0) {
			return false
		}
		tmp[i] = v
		sum += v
	}
	if sum <= 0 {
		return false
	}
	for i := 0; i < s.n; i++ {
		s.w[i] = tmp[i] / sum * s.cfg.TotalWeight
		s.cur[i] = 0
	}
	return true
}

// pickSmall chooses the subchannel of the next small or control frame.
func (p *peer) pickSmall() *sub {
	s := &p.sched
	if s.n == 1 {
		return p.subs[0]
	}
	switch s.cfg.Small {
	case core.SchedBinding:
		return p.subs[s.cfg.Bind]
	case core.SchedWeightedRoundRobin:
		// Smooth weighted round robin: every pick adds each weight to its
		// running credit and takes the largest, which then pays the total.
		best := 0
		for i := 0; i < s.n; i++ {
			s.cur[i] += s.w[i]
			if s.cur[i] > s.cur[best] {
				best = i
			}
		}
		s.cur[best] -= s.cfg.TotalWeight
		return p.subs[best]
	case core.SchedWindowRoundRobin:
		// W consecutive messages travel the same subchannel, so rails of
		// different latency reorder fewer of them (seed 001 §4.4).
		sb := p.subs[s.rr]
		if s.inWin++; s.inWin >= s.cfg.Window {
			s.inWin = 0
			s.rr = (s.rr + 1) % s.n
		}
		return sb
	default:
		sb := p.subs[s.rr]
		s.rr = (s.rr + 1) % s.n
		return sb
	}
}

// span is a stripe before it is cut into operations of at most MaxRDMA.
type span struct {
	sub *sub
	off int
	len int
}

// plan cuts n bytes starting at off into stripes over the subchannels that
// offer RDMA and, when keys is not nil, have a key from the peer. It returns how
// many spans it wrote.
func (p *peer) plan(keys *[maxSubchannels]core.MemKey, haveKey uint8, off, n int, out *[maxSubchannels]span) int {
	s := &p.sched
	var c stripeSet
	c.eligible(p.subs, keys != nil, haveKey)
	if c.k == 0 {
		return 0
	}
	if c.k == 1 || !s.cfg.Large.Striping() || int64(n) < s.cfg.StripeThreshold {
		out[0] = span{s.pickBig(&c), off, n}
		return 1
	}
	// Even striping uses equal weights, weighted and adaptive the current
	// weights; a subchannel of weight 0 gets nothing.
	first := c.sub[0]
	if !c.weigh(s) {
		out[0] = span{first, off, n}
		return 1
	}
	return c.cut(off, n, int(s.cfg.MinStripe), out)
}

// stripeSet is the subchannels one message may be striped over, with
// their weights.
type stripeSet struct {
	sub [maxSubchannels]*sub
	w   [maxSubchannels]float64
	k   int
}

// eligible collects the subchannels of subs that offer RDMA and, when
// keyed, have a key from the peer (their bit in haveKey).
func (c *stripeSet) eligible(subs []*sub, keyed bool, haveKey uint8) {
	for _, sb := range subs {
		if sb.rdma == nil {
			continue
		}
		if keyed && haveKey&(1<<sb.idx) == 0 {
			continue
		}
		c.sub[c.k] = sb
		c.k++
	}
}

// pickBig chooses the one subchannel of an unstriped message: the bound
// one when the policy binds and it is eligible, else the next in round
// robin.
func (s *schedState) pickBig(c *stripeSet) *sub {
	if s.cfg.Large == core.SchedBinding {
		var sb *sub
		for _, e := range c.sub[:c.k] {
			if e.idx == s.cfg.Bind {
				sb = e
			}
		}
		if sb != nil {
			return sb
		}
	}
	sb := c.sub[s.rrBig%c.k]
	s.rrBig++
	return sb
}

// weigh gives every subchannel of c its striping weight and leaves out
// those of weight 0. It reports whether any is left.
func (c *stripeSet) weigh(s *schedState) bool {
	m := 0
	for i := 0; i < c.k; i++ {
		v := 1.0
		if s.cfg.Large != core.SchedEvenStriping {
			v = s.w[c.sub[i].idx]
		}
		if v > 0 {
			c.sub[m], c.w[m] = c.sub[i], v
			m++
		}
	}
	c.k = m
	return m > 0
}

// cut writes the weighted stripes of n bytes at off to out and returns
// how many. No stripe is shorter than minS: a share that would be shorter
// is raised to minS, taken from the others, so that a subchannel adaptive
// striping has nearly written off still carries a stripe and is timed —
// left out, it could never win its weight back when its path gets faster
// again (§6.3, Fig. 20). When the message is too short to give every
// subchannel minS, the subchannel of the smallest weight is left out,
// until it is not.
func (c *stripeSet) cut(off, n, minS int, out *[maxSubchannels]span) int {
	for c.k > 1 && n < c.k*minS {
		c.dropLightest()
	}
	var fixed [maxSubchannels]bool
	rest, sum := c.waterFill(n, minS, &fixed)
	k, done := c.k, 0
	for i, sb := range c.sub[:k] {
		l := minS
		if !fixed[i] {
			l = int(float64(rest) * c.w[i] / sum)
		}
		if i == k-1 {
			l = n - done
		}
		out[i] = span{sb, off + done, l}
		done += l
	}
	return k
}

// dropLightest leaves out the subchannel of the smallest weight (the
// first of them).
func (c *stripeSet) dropLightest() {
	drop := 0
	for i := 1; i < c.k; i++ {
		if c.w[i] < c.w[drop] {
			drop = i
		}
	}
	copy(c.sub[drop:c.k], c.sub[drop+1:c.k])
	copy(c.w[drop:c.k], c.w[drop+1:c.k])
	c.k--
}

// waterFill fixes at minS the shares of n that fall short of it (marked
// in fixed) and returns the bytes left to cut by weight among the others
// and the sum of their weights. One subchannel always stays unfixed
// (n ≥ k·minS leaves it at least minS).
func (c *stripeSet) waterFill(n, minS int, fixed *[maxSubchannels]bool) (rest int, sum float64) {
	w := c.w[:c.k]
	for {
		rest, sum = n, 0
		for i, v := range w {
			if fixed[i] {
				rest -= minS
			} else {
				sum += v
			}
		}
		more := false
		for i, v := range w {
			if !fixed[i] && float64(rest)*v/sum < float64(minS) {
				fixed[i], more = true, true
			}
		}
		if !more {
			return rest, sum
		}
	}
}

// stripesDone reports a finished RDMA message to the scheduling policy:
// per subchannel, the bytes it carried and its delivery time, from the
// first stripe's hand-off to the device to the last stripe's completion
// (seed 001 §4.5). The events of one message are consecutive; the last
// carries Last.
func (p *peer) stripesDone(x *rdmaState) {
	s := &p.sched
	n := 0
	for i := 0; i < s.n; i++ {
		if x.subs&(1<<i) != 0 {
			n++
		}
	}
	for i := 0; i < s.n; i++ {
		if x.subs&(1<<i) == 0 {
			continue
		}
		n--
		s.policy.Event(core.SchedEvent{
			Kind: core.SchedStripeDone, Peer: int32(p.rank), Sub: int32(i), Last: n == 0,
			Msg: x.msgID, Bytes: int64(x.perSub[i]), Time: x.subEnd[i] - x.subStart[i],
		})
	}
}

// Weights returns the current scheduling weights toward rank (for
// experiments and counters).
func (c *Comm) Weights(rank int) []float64 {
	c.e.mu.Lock()
	defer c.e.mu.Unlock()
	if rank < 0 || rank >= c.e.size {
		return nil
	}
	return c.e.chans.get(rank).sched.weights()
}
